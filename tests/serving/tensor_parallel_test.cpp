// tests/serving/tensor_parallel_test.cpp — kiln/serving/tensor_parallel.hpp in one process,
// on the tiny Llama fixture (CPU): the messages rank 0 sends its followers round-trip and
// malformed ones are refused by name; an engine over a tp_leader whose messages are
// recorded, then a tp_follow that replays them on the same decoder with a cache of its own:
// it runs every step rank 0 ran (sequences that end, wait for a place, reuse ended
// handles, are cancelled, are prefilled in chunks; idle messages between) with the same
// logits, and returns the status of rank 0's stop; a follower whose pool or sequences differ
// from rank 0's says so. (examples/serve --tp under mpirun: tests/serve/serve_tp_test.py.)
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>
#include <kiln/models/llama.hpp>
#include <kiln/serving.hpp>
#include <kiln/serving/tensor_parallel.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backends.hpp"

using kiln::index_t;
namespace serving = kiln::serving;

namespace {

using B = kiln::cpu<>;
using llama = kiln::llama::model<float, B>;

llama& fixture() {
  static llama m = llama::load(kiln_test::ctx<B>(), std::string(KILN_MODELS_TEST_DATA) + "/tiny_llama");
  return m;
}

/// The fixture's decoder, keeping each batched step's logits.
struct recording {
  using backend = B;
  llama* m = nullptr;
  std::vector<std::vector<float>> logits;

  const auto& cfg() const { return m->cfg(); }
  index_t capacity() const { return m->capacity(); }
  kiln::paged_kv_cache<float, B> make_paged_cache(index_t block_size, index_t blocks, std::size_t bytes = 0) const {
    return m->make_paged_cache(block_size, blocks, bytes);
  }
  kiln::tensor<float, B> forward(kiln::paged_kv_cache<float, B>& cache, std::span<const kiln::models::batch_entry> batch) {
    auto l = m->forward(cache, batch);
    logits.push_back(l.to_host());
    return l;
  }
};

std::vector<std::int32_t> prompt(index_t n, std::int32_t seed) {
  std::vector<std::int32_t> p;
  for (index_t i = 0; i < n; ++i) p.push_back(static_cast<std::int32_t>((seed * 31 + i * 7 + 1) % 97));
  return p;
}

/// A follower's end of a recorded wire.
serving::share_ints replay(std::deque<std::vector<std::int32_t>>& wire) {
  return [&wire](std::vector<std::int32_t>& v) {
    if (wire.empty()) throw kiln::error("the recorded wire is empty: tp_follow read past rank 0's stop");
    v = wire.front();
    wire.pop_front();
  };
}

template <class F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

}  // namespace

TEST(serving_tp, messages_round_trip) {
  serving::tp_step s;
  s.what = serving::tp_step::kind::step;
  s.released = {3, 0};
  s.entries = {{2, 5, true, {7}}, {4, 0, false, {1, 2, 3}}, {1, 8, true, {}}};
  const auto d = serving::tp_step::decode(s.encode());
  EXPECT_EQ(d.what, s.what);
  EXPECT_EQ(d.released, s.released);
  ASSERT_EQ(d.entries.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d.entries[i].sequence, s.entries[i].sequence);
    EXPECT_EQ(d.entries[i].start, s.entries[i].start);
    EXPECT_EQ(d.entries[i].logits, s.entries[i].logits);
    EXPECT_EQ(d.entries[i].ids, s.entries[i].ids);
  }
  serving::tp_step stop;
  stop.what = serving::tp_step::kind::stop;
  stop.value = 3;
  EXPECT_EQ(serving::tp_step::decode(stop.encode()).value, 3);

  using v = std::vector<std::int32_t>;
  EXPECT_NE(thrown([] { serving::tp_step::decode(v{}); }).find("ends before its kind"), std::string::npos);
  EXPECT_NE(thrown([] { serving::tp_step::decode(v{9, 0, 0, 0}); }).find("unknown kind 9"), std::string::npos);
  EXPECT_NE(thrown([] { serving::tp_step::decode(v{2, 0, 5, 1}); }).find("released count 5"), std::string::npos);
  EXPECT_NE(thrown([] { serving::tp_step::decode(v{2, 0, 0, 1, 0, 0, 1, 4, 7}); }).find("ids count 4"), std::string::npos);
  EXPECT_NE(thrown([] { serving::tp_step::decode(v{3, 0, 0, 0, 8}); }).find("1 ints left"), std::string::npos);
}

TEST(serving_tp, a_follower_runs_rank_0s_steps) {
  std::deque<std::vector<std::int32_t>> wire;
  // small blocks, a short prefill budget and fewer places than requests: sequences wait,
  // end at different steps, and later ones get the handles of ended ones
  const serving::engine_options o{.max_batch = 3, .prefill_chunk = 8, .block_size = 4, .kv_blocks = 48};
  std::vector<std::vector<float>> lead_logits;
  std::vector<std::vector<std::int32_t>> tokens;
  {
    serving::tp_leader<recording> lead(
        recording{&fixture(), {}}, [&](std::vector<std::int32_t>& v) { wire.push_back(v); }, std::chrono::milliseconds(0));
    serving::engine<serving::tp_leader<recording>> eng(lead, o);
    lead.begin(eng.cache().num_blocks());
    std::vector<std::shared_ptr<serving::token_stream>> s;
    for (int i = 0; i < 8; ++i) s.push_back(eng.submit({.prompt = prompt(1 + (i * 5) % 19, i), .max_tokens = 2 + (i * 3) % 7}));
    eng.step();
    lead.heartbeat();  // an idle message between steps (a heartbeat interval of 0)
    eng.step();
    EXPECT_TRUE(eng.cancel(s[1]->id()));  // running: ends at the next step, its blocks back
    eng.run();
    for (const auto& t : s) tokens.push_back(t->tokens());
    lead_logits = lead.model().logits;
    EXPECT_GT(lead_logits.size(), 8u);
    lead.stop(0);
  }
  EXPECT_GT(tokens[0].size(), 0u);
  recording f{&fixture(), {}};
  EXPECT_EQ(serving::tp_follow(f, o, replay(wire)), 0);
  EXPECT_TRUE(wire.empty()) << "tp_follow returned before rank 0's stop";
  ASSERT_EQ(f.logits.size(), lead_logits.size());
  for (std::size_t i = 0; i < f.logits.size(); ++i) EXPECT_EQ(f.logits[i], lead_logits[i]) << "step " << i;
}

TEST(serving_tp, rank_0_failing_stops_the_followers_with_status_1) {
  std::deque<std::vector<std::int32_t>> wire;
  const serving::engine_options o{.max_batch = 2, .block_size = 4, .kv_blocks = 16};
  {
    serving::tp_leader<recording> lead(recording{&fixture(), {}}, [&](std::vector<std::int32_t>& v) { wire.push_back(v); });
    serving::engine<serving::tp_leader<recording>> eng(lead, o);
    lead.begin(eng.cache().num_blocks());
    auto s = eng.submit({.prompt = prompt(5, 1), .max_tokens = 3});
    eng.run();
    EXPECT_EQ(s->tokens().size(), 3u);
  }  // destroyed without stop(): rank 0 failed
  recording f{&fixture(), {}};
  EXPECT_EQ(serving::tp_follow(f, o, replay(wire)), 1);
}

TEST(serving_tp, a_follower_out_of_step_says_so) {
  const serving::engine_options o{.max_batch = 2, .block_size = 4, .kv_blocks = 16};
  recording f{&fixture(), {}};
  {  // rank 0's pool differs
    serving::tp_step b;
    b.what = serving::tp_step::kind::begin;
    b.value = 17;
    std::deque<std::vector<std::int32_t>> wire{b.encode()};
    EXPECT_NE(thrown([&] { serving::tp_follow(f, o, replay(wire)); }).find("rank 0's KV pool holds 17 blocks, this rank's 16"),
              std::string::npos);
  }
  {  // a sequence this rank has never seen, starting past position 0
    serving::tp_step s;
    s.what = serving::tp_step::kind::step;
    s.entries = {{0, 5, true, {1}}};
    std::deque<std::vector<std::int32_t>> wire{s.encode()};
    EXPECT_NE(thrown([&] { serving::tp_follow(f, o, replay(wire)); }).find("out of step with rank 0"), std::string::npos);
  }
}
