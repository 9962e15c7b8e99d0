// tests/dist/tensor_parallel_test.cpp — the tensor-parallel decoders (kiln/models/
// tensor_parallel.hpp over kiln::dist: kiln/dist/tensor_parallel.hpp) on the tiny Llama and
// BitNet fixtures, run under mpirun on 2 and 4 ranks (CPU; Vulkan on 2): every rank's logits
// within the fixture's bound (tests/models/fixture_bounds.hpp) at every position, all at
// once and token by token on the split KV cache, greedy ids equal to one process's; each
// rank holding its share of the weights; and (on 3 ranks) heads that do not split, which
// every rank reports naming the heads and the ranks.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <kiln/dist/dist.hpp>
#include <kiln/kiln.hpp>
#include <kiln/models/bitnet.hpp>
#include <kiln/models/llama.hpp>

#include "backends.hpp"
#include "dist_support.hpp"
#include "fixture_bounds.hpp"

namespace {

namespace fx = kiln_test::fixtures;
using kiln::index_t;

using kiln_test::dist::backend_names;
kiln::dist::communicator& tp_comm() { return kiln_test::dist::world(); }

/// Every position at once, token by token on the cache, and greedy generation (each step's
/// logits within the bound, the ids those of one process: the fixture's, and m1's).
template <class M, class M1>
void check_model(M& m, M1& one, const fx::expected& e) {
  const auto t = e.tokens();
  const auto all = m.forward(t, true);
  EXPECT_EQ(all.shape(), kiln::shape({e.rows, e.vocab}));
  EXPECT_TRUE(e.within(all.to_host(), 0, e.rows)) << "all positions at once";
  m.reset();
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_TRUE(e.within(m.forward(std::span(t).subspan(i, 1)).to_host(), static_cast<index_t>(i), 1))
        << "token " << i << " on the cache";
  }
  m.reset();
  const index_t P = static_cast<index_t>(e.prompt.size());
  const auto ids = m.generate(e.prompt, static_cast<index_t>(e.generated.size()), [&](index_t i, const auto& l) {
    EXPECT_TRUE(e.within(l.to_host(), P - 1 + i, 1)) << "greedy step " << i;
  });
  EXPECT_EQ(ids, e.generated);
  EXPECT_EQ(ids, one.generate(e.prompt, static_cast<index_t>(e.generated.size())));
}

/// Each rank holds about 1/N of the layers' weights (the norms are replicated); printed
/// per rank for the record.
template <class M, class M1>
void check_share(const M& m, const M1& one, const char* what) {
  const int n = tp_comm().size();
  std::printf("[rank %d of %d] %s: %.0f weight bytes held (one process: %.0f)\n", tp_comm().rank(), n, what,
              m.weight_bytes(), one.weight_bytes());
  EXPECT_LT(m.weight_bytes(), one.weight_bytes() / n * 1.5 + 4096.0) << what;
}

template <class B>
class tensor_parallel : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(tensor_parallel, kiln_test::backend_types, backend_names);

TYPED_TEST(tensor_parallel, llama_fixture) {
  using B = TypeParam;
  auto& ctx = kiln_test::ctx<B>();
  const std::string dir = fx::data_dir + "/tiny_llama";
  auto m = kiln::llama::model<float, B>::load(ctx, dir, {}, kiln::dist::tensor_parallel(ctx, tp_comm()));
  auto one = kiln::llama::model<float, B>::load(ctx, dir);
  const auto& s = m.shard();
  EXPECT_EQ(s.ranks, tp_comm().size());
  EXPECT_EQ(s.q_heads, 4 / s.ranks);
  EXPECT_EQ(m.layers()[0].wqkv.rows(), (s.q_heads + 2 * s.kv_heads) * 16);
  check_share(m, one, "llama f32");
  check_model(m, one, fx::llama());
}

TYPED_TEST(tensor_parallel, llama_fixture_in_small_row_blocks) {
  // 512-byte blocks: the split stacked parts straddle the blocks, several blocks each
  using B = TypeParam;
  auto& ctx = kiln_test::ctx<B>();
  const std::string dir = fx::data_dir + "/tiny_llama";
  kiln::llama::load_options o;
  o.max_block_bytes = 512;
  auto m = kiln::llama::model<float, B>::load(ctx, dir, o, kiln::dist::tensor_parallel(ctx, tp_comm()));
  auto one = kiln::llama::model<float, B>::load(ctx, dir, o);
  EXPECT_GT(m.layers()[0].wqkv.blocks.size(), 1u);
  check_model(m, one, fx::llama());
}

TYPED_TEST(tensor_parallel, bitnet_packed_fixture) {
  using B = TypeParam;
  auto& ctx = kiln_test::ctx<B>();
  const std::string dir = fx::data_dir + "/tiny_bitnet";
  auto m = kiln::bitnet::model<B>::load(ctx, dir, {}, kiln::dist::tensor_parallel(ctx, tp_comm()));
  auto one = kiln::bitnet::model<B>::load(ctx, dir);
  check_share(m, one, "bitnet packed");
  check_model(m, one, fx::bitnet("packed"));
}

TYPED_TEST(tensor_parallel, bitnet_master_fixture_and_int8_table) {
  using B = TypeParam;
  auto& ctx = kiln_test::ctx<B>();
  {
    const std::string dir = fx::data_dir + "/tiny_bitnet_bf16";
    auto m = kiln::bitnet::model<B>::load(ctx, dir, {}, kiln::dist::tensor_parallel(ctx, tp_comm()));
    auto one = kiln::bitnet::model<B>::load(ctx, dir);
    check_model(m, one, fx::bitnet("master"));
  }
  const std::string dir = fx::data_dir + "/tiny_bitnet";
  const kiln::bitnet::load_options o{.lm_head = kiln::bitnet::table_dtype::int8};
  auto m = kiln::bitnet::model<B>::load(ctx, dir, o, kiln::dist::tensor_parallel(ctx, tp_comm()));
  auto one = kiln::bitnet::model<B>::load(ctx, dir, o);
  check_model(m, one, fx::bitnet("packed_int8"));
}

TYPED_TEST(tensor_parallel, paged_batch_matches_one_process) {
  // the batched step over a paged cache (the serving path): two sequences, a prompt and a
  // decode token, the same logits as one process's batched step
  using B = TypeParam;
  auto& ctx = kiln_test::ctx<B>();
  const std::string dir = fx::data_dir + "/tiny_llama";
  auto m = kiln::llama::model<float, B>::load(ctx, dir, {}, kiln::dist::tensor_parallel(ctx, tp_comm()));
  auto one = kiln::llama::model<float, B>::load(ctx, dir);
  const auto& e = fx::llama();
  auto run = [&](auto& model) {
    auto cache = model.make_paged_cache(4, 16);
    const auto a = cache.add(), b = cache.add();
    const std::vector<std::int32_t> pa(e.prompt.begin(), e.prompt.end()), pb{e.prompt[0]};
    std::vector<kiln::models::batch_entry> batch{{a, pa}, {b, pb}};
    auto first = model.forward(cache, batch).to_host();
    const std::int32_t next = 5;
    batch = {{a, std::span(&next, 1)}, {b, std::span(&next, 1)}};
    auto second = model.forward(cache, batch).to_host();
    first.insert(first.end(), second.begin(), second.end());
    return first;
  };
  const auto got = run(m), want = run(one);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-4 * (1.0 + std::fabs(want[i]))) << i;
}

// Run on 3 ranks (dist.tp.heads_do_not_divide): 4 query heads and 2 kv heads do not split
// over 3; every rank throws before loading anything, naming the heads and the ranks.
TEST(tensor_parallel_errors, heads_that_do_not_divide) {
  kiln::context<kiln::cpu<>> ctx;
  const auto tp = kiln::dist::tensor_parallel(ctx, tp_comm());
  if (tp.size != 3) GTEST_SKIP() << "run on 3 ranks";
  for (const std::string d : {"tiny_llama", "tiny_bitnet"}) {
    try {
      if (d == "tiny_llama") kiln::llama::model<float, kiln::cpu<>>::load(ctx, fx::data_dir + "/" + d, {}, tp);
      else kiln::bitnet::model<kiln::cpu<>>::load(ctx, fx::data_dir + "/" + d, {}, tp);
      ADD_FAILURE() << d << ": no error";
    } catch (const kiln::shape_error& x) {
      const std::string what = x.what();
      EXPECT_NE(what.find("tensor parallelism over 3 ranks: num_attention_heads 4 and num_key_value_heads 2 do not split"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find(d == "tiny_llama" ? "kiln::llama::model" : "kiln::bitnet::model"), std::string::npos) << what;
    }
  }
}

}  // namespace
