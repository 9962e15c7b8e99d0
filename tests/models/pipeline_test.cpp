// tests/models/pipeline_test.cpp — a decoder's layers over two contexts of one process
// (kiln/models/pipeline.hpp) on each backend: two CPU contexts, and two Vulkan contexts on
// the same device (lavapipe in CI: one device, two contexts with their own pools and
// queues, which is all a second device changes for the decoder). The Llama and BitNet
// fixtures split layer 0 | layer 1: the same greedy ids as one context, logits within the
// fixture's bound all at once (prefill) and token by token on the KV caches (decode), and
// equal to one context's (the same kernels on the same device: float rounding at most);
// the weights, caches and logits on their stages' contexts; kiln::copy_to between contexts
// and backends (on Vulkan through memory the two contexts share, as the stages' copies,
// and forced through the host); every bad placement refused with a message naming it.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>
#include <kiln/models/bitnet.hpp>
#include <kiln/models/llama.hpp>
#include <kiln/models/pipeline.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>  // std::is_same_v
#include <vector>

#include "backends.hpp"
#include "checks.hpp"
#include "fixture_bounds.hpp"

namespace pipeline_test {

using kiln::index_t;
using kiln_test::has;

const std::string data = KILN_MODELS_TEST_DATA;

/// A second context on the shared context's device (Vulkan: validation on, as the first).
template <class B>
kiln::context<B>& second() {
  static kiln::context<B> c = kiln_test::new_context<B>();
  return c;
}

/// Copies into c from other contexts that went device to device through shared memory
/// (Vulkan: kiln::vulkan::peers), else 0.
template <class B>
std::uint64_t external_copies(const kiln::context<B>& c) {
#if defined(KILN_TEST_VULKAN)
  if constexpr (std::is_same_v<B, kiln::vulkan>) return kiln::vulkan::peers(c).external_copies;
#endif
  (void)c;
  return 0;
}

/// Whether copies from a to b go through shared memory (two lavapipe contexts do).
template <class B>
bool share_memory(const kiln::context<B>& a, const kiln::context<B>& b) {
#if defined(KILN_TEST_VULKAN)
  if constexpr (std::is_same_v<B, kiln::vulkan>) return kiln::vulkan::peer_refusal(a, b).empty();
#endif
  (void)a, (void)b;
  return false;
}

template <class B>
kiln::models::pipeline<B> two_stages() {
  return {{kiln_test::ctx<B>(), second<B>()}, {}};
}

/// Largest |a - b| / (1 + |b|).
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0.0 : INFINITY;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])) / (1.0 + std::fabs(double(b[i]))));
  }
  return worst;
}

/// The fixture through model m (split) and one (one context): all positions at once, then
/// token by token after reset, then greedy generation; each within the fixture's bound, the
/// split within 1e-5 of one context, the same greedy ids.
template <class M>
void check_split(M& m, M& one, const kiln_test::fixtures::expected& e) {
  const auto tokens = e.tokens();
  const auto all = m.forward(tokens, true);
  EXPECT_TRUE(all.context() == m.placement().last()) << "the logits live on the last stage";
  const auto got = all.to_host();
  EXPECT_TRUE(e.within(got, 0, e.rows));
  EXPECT_LE(rel_diff(got, one.forward(tokens, true).to_host()), 1e-5);
  m.reset();
  one.reset();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto l = m.forward(std::span(tokens).subspan(i, 1)).to_host();
    ASSERT_TRUE(e.within(l, static_cast<index_t>(i), 1)) << "token " << i;
    EXPECT_LE(rel_diff(l, one.forward(std::span(tokens).subspan(i, 1)).to_host()), 1e-5) << "token " << i;
  }
  m.reset();
  const index_t P = static_cast<index_t>(e.prompt.size());
  const auto ids = m.generate(e.prompt, static_cast<index_t>(e.generated.size()),
                              [&](index_t i, const auto& l) { EXPECT_TRUE(e.within(l.to_host(), P - 1 + i, 1)) << i; });
  EXPECT_EQ(ids, e.generated);
}

template <class B>
class pipeline : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(pipeline, kiln_test::backend_types);

TYPED_TEST(pipeline, llama_over_two_contexts) {
  auto& a = kiln_test::ctx<TypeParam>();
  auto& b = second<TypeParam>();
  ASSERT_FALSE(a == b);
  using model = kiln::llama::model<float, TypeParam>;
  auto m = model::load(two_stages<TypeParam>(), data + "/tiny_llama");
  auto one = model::load(a, data + "/tiny_llama");
  const auto& st = m.placement().stages();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].first, 0);
  EXPECT_EQ(st[0].end, 1);
  EXPECT_EQ(st[1].first, 1);
  EXPECT_EQ(st[1].end, 2);
  EXPECT_TRUE(m.layers()[0].wqkv.blocks[0].context() == a);
  EXPECT_TRUE(m.layers()[1].wqkv.blocks[0].context() == b);
  EXPECT_FALSE(one.placement().split());
  const auto before = external_copies(b);
  check_split(m, one, kiln_test::fixtures::llama());
  if (share_memory(a, b)) {
    EXPECT_GT(external_copies(b), before) << "the stages' copies went device to device";
  }
}

TYPED_TEST(pipeline, bitnet_over_two_contexts_with_its_tied_head_on_the_last) {
  auto& a = kiln_test::ctx<TypeParam>();
  auto& b = second<TypeParam>();
  using model = kiln::bitnet::model<TypeParam>;
  // tied: the embedding on the first stage, the LM head's copy of the table on the last
  auto m = model::load(two_stages<TypeParam>(), data + "/tiny_bitnet");
  auto one = model::load(a, data + "/tiny_bitnet");
  EXPECT_TRUE(m.lm_head().t16b.blocks[0].context() == b);
  EXPECT_TRUE(m.layers()[1].attn_norm.context() == b);
  check_split(m, one, kiln_test::fixtures::bitnet("packed"));
}

TYPED_TEST(pipeline, explicit_starts_and_one_context_twice) {
  auto& a = kiln_test::ctx<TypeParam>();
  // the same context for both stages: two stages, nothing copied between them
  auto m = kiln::llama::model<float, TypeParam>::load(kiln::models::pipeline<TypeParam>{{a, a}, {0, 1}},
                                                      data + "/tiny_llama");
  EXPECT_EQ(m.placement().stages().size(), 2u);
  const auto& e = kiln_test::fixtures::llama();
  EXPECT_TRUE(e.within(m.forward(e.tokens(), true).to_host(), 0, e.rows));
  EXPECT_TRUE(has(m.placement().describe(), "layer 0 on ")) << m.placement().describe();
}

TYPED_TEST(pipeline, even_split_and_describe) {
  auto& a = kiln_test::ctx<TypeParam>();
  auto& b = second<TypeParam>();
  using place = kiln::models::placement<TypeParam>;
  // 7 layers over 3 stages: the earlier stages take the extra layer
  const auto p = place::of("test", a, {{a, b, a}, {}}, 7);
  ASSERT_EQ(p.stages().size(), 3u);
  EXPECT_EQ(p.stages()[0].first, 0);
  EXPECT_EQ(p.stages()[1].first, 3);
  EXPECT_EQ(p.stages()[2].first, 5);
  EXPECT_EQ(p.stages()[2].end, 7);
  EXPECT_TRUE(p.context_of(4) == b);
  EXPECT_TRUE(p.context_of(6) == a);
  EXPECT_TRUE(p.last() == a);
  const std::string d = a.device_name();
  EXPECT_EQ(p.describe(), "layers 0-2 on " + d + ", layers 3-4 on " + b.device_name() + ", layers 5-6 on " + d);
  // the default: one stage on the model's context
  const auto one = place::of("test", b, {}, 7);
  EXPECT_FALSE(one.split());
  EXPECT_TRUE(one.first() == b);
  EXPECT_EQ(one.stages()[0].end, 7);
}

TYPED_TEST(pipeline, bad_placements_are_refused) {
  auto& a = kiln_test::ctx<TypeParam>();
  auto& b = second<TypeParam>();
  using model = kiln::llama::model<float, TypeParam>;
  using pp = kiln::models::pipeline<TypeParam>;
  const std::string dir = data + "/tiny_llama";
  const auto fails = [&](auto&& f, const std::string& want) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one naming '" << want << "'";
    } catch (const kiln::error& x) {
      EXPECT_TRUE(has(x.what(), want)) << x.what();
      EXPECT_TRUE(has(x.what(), "kiln::llama::model")) << x.what();
    }
  };
  fails([&] { model::load(pp{{a, b, a}, {}}, dir); }, "a pipeline of 3 stages over 2 layers");
  fails([&] { model::load(pp{{a, b}, {0, 2}}, dir); }, "stage starts [0, 2]");
  fails([&] { model::load(pp{{a, b}, {1, 1}}, dir); }, "stage starts [1, 1]");
  fails([&] { model::load(pp{{a, b}, {0}}, dir); }, "1 stage starts for 2 contexts");
  fails([&] { model::load(a, dir, {}, {}, pp{{}, {0, 1}}); }, "no contexts");
  fails([&] { model::load(a, dir, {}, {}, pp{{b, a}, {}}); }, "another context than the one the model is loaded on");
  fails([&] { model::load(pp{}, dir); }, "a pipeline without contexts");
  EXPECT_THROW(model::load(pp{{a, b, a}, {}}, dir), kiln::shape_error);
  // what runs on one context only: the batched step over a paged cache
  auto m = model::load(two_stages<TypeParam>(), dir);
  fails([&] { (void)m.make_paged_cache(4, 8); }, "split over 2 contexts");
  auto one = model::load(a, dir);
  auto cache = one.make_paged_cache(4, 8);
  const auto s = cache.add();
  const std::vector<std::int32_t> ids{1, 2};
  const std::vector<kiln::models::batch_entry> batch{{s, ids}};
  fails([&] { (void)m.forward(cache, batch); }, "forward (batched)");
  // weights given to the constructor on another context than their stage's: one's
  // layers are all on a, the pipeline wants layer 1 on b
  const auto c = kiln::llama::config::load(dir + "/config.json");
  const auto table = [&](const kiln::context<TypeParam>& on) {
    return kiln::llama::matrix<float, TypeParam>{{kiln::zeros<float>(on, {c.vocab_size, c.hidden_size})}, {}, {}};
  };
  fails([&] {
    model(a, c, table(a), one.layers(), kiln::zeros<float>(b, {c.hidden_size}), table(b), {}, {}, two_stages<TypeParam>());
  }, "layer 1's input_layernorm");
}

TYPED_TEST(pipeline, copy_to_another_context_and_backend) {
  auto& a = kiln_test::ctx<TypeParam>();
  auto& b = second<TypeParam>();
  const auto before = external_copies(b);
  std::vector<float> v(24);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * float(i) - 3.0f;
  const auto t = kiln::from_host(a, kiln::shape{4, 6}, std::span<const float>(v));
  const auto u = kiln::copy_to(b, t);
  EXPECT_TRUE(u.context() == b);
  EXPECT_EQ(u.shape(), t.shape());
  EXPECT_EQ(u.to_host(), v);
  // a strided view: contiguous on arrival
  const auto tt = kiln::copy_to(b, kiln::transpose(t, 0, 1));
  EXPECT_EQ(tt.shape(), kiln::shape({6, 4}));
  EXPECT_TRUE(tt.is_contiguous());
  EXPECT_EQ(tt.to_host()[1], v[6]);
  // to and from the CPU backend
  kiln::context<kiln::cpu<>> host(kiln::threads{1});
  const auto h = kiln::copy_to(host, t);
  EXPECT_EQ(h.to_host(), v);
  EXPECT_EQ(kiln::copy_to(a, h).to_host(), v);
  // int32 and an empty shape
  const std::vector<std::int32_t> ids{3, 1, 4};
  EXPECT_EQ(kiln::copy_to(b, kiln::from_host(a, ids)).to_host(), ids);
  EXPECT_EQ(kiln::copy_to(b, kiln::empty<float>(a, {0, 3})).shape(), kiln::shape({0, 3}));
  // the three non-empty copies from a to b went device to device where the two share memory
  if (share_memory(a, b)) {
    EXPECT_EQ(external_copies(b) - before, 3u);
  }
#if defined(KILN_TEST_VULKAN)
  if constexpr (std::is_same_v<TypeParam, kiln::vulkan>) {
    // the same copies forced through the host: a context that refuses shared memory
    kiln::vulkan::options o;
    o.validation = true;
    o.external_memory = false;
    kiln::context<kiln::vulkan> c{o};
    EXPECT_FALSE(kiln::vulkan::peer_refusal(a, c).empty());
    EXPECT_EQ(kiln::copy_to(c, t).to_host(), v);
    EXPECT_EQ(kiln::copy_to(c, kiln::transpose(t, 0, 1)).to_host()[1], v[6]);
    EXPECT_EQ(kiln::copy_to(a, kiln::copy_to(c, t)).to_host(), v);
    EXPECT_EQ(kiln::vulkan::peers(c).staged_copies, 3u);
    EXPECT_EQ(kiln::vulkan::peers(c).external_copies, 0u);
  }
#endif
  try {
    (void)kiln::copy_to(b, kiln::tensor<float, TypeParam>());
    ADD_FAILURE() << "no error for an empty tensor";
  } catch (const kiln::shape_error& x) {
    EXPECT_TRUE(has(x.what(), "kiln::copy_to")) << x.what();
  }
}

}  // namespace pipeline_test
