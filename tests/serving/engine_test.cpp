// tests/serving/engine_test.cpp — continuous batching (kiln/serving/engine.hpp) and the
// Llama decoder's batched step over a paged KV cache (llama::model::forward(cache, batch))
// on each backend, on the tiny Llama fixture (tests/models/data/tiny_llama: 2 layers, GQA
// 2, vocabulary 97, context 64). The reference is the single-sequence decoder
// (model::forward(ids) and greedy generate on its contiguous cache):
//  - batched logits (prompts, prompt chunks and decoding rows of unrelated sequences in one
//    step) against the single-sequence logits of the same tokens;
//  - 16 concurrent greedy requests each get the ids of the same request alone, in a pool
//    of the blocks a contiguous cache needs for 4 of the longest; sampled requests (seeds,
//    top-k/top-p, penalties) get the ids they get alone;
//  - joins and leaves mid-run, cancellation, chunked prefill equal to unchunked, memory
//    back to the pool, a full queue refused, bad input named, submit/cancel from another
//    thread while a worker steps;
//  - the BitNet b1.58 decoder through the same batched step (tests/models/data/tiny_bitnet).
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>
#if defined(KILN_TEST_VULKAN)
#include <kiln/vulkan.hpp>  // before the sampling kernels (serving.hpp includes sampling.hpp)
#endif
#include <kiln/models/bitnet.hpp>
#include <kiln/models/llama.hpp>
#include <kiln/serving.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backends.hpp"
#include "checks.hpp"

using kiln::index_t;
namespace serving = kiln::serving;

namespace {

const std::string fixture_dir = std::string(KILN_MODELS_TEST_DATA) + "/tiny_llama";

template <class B>
using llama_model = kiln::llama::model<float, B>;

/// The fixture's decoder, loaded once per backend.
template <class B>
llama_model<B>& model() {
  static llama_model<B> m = llama_model<B>::load(kiln_test::ctx<B>(), fixture_dir);
  return m;
}

/// n ids drawn from a vocabulary (the Llama fixture's 97 ids) with seed.
std::vector<std::int32_t> ids(index_t n, unsigned seed, std::int32_t vocab = 97) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<std::int32_t> d(0, vocab - 1);
  std::vector<std::int32_t> r(static_cast<std::size_t>(n));
  for (auto& x : r) x = d(g);
  return r;
}

/// Greedy ids of prompt alone, on the single-sequence decoder's contiguous cache.
template <class B>
std::vector<std::int32_t> alone(const std::vector<std::int32_t>& prompt, index_t n) {
  auto& m = model<B>();
  m.reset();
  return m.generate(prompt, n);
}

/// Largest |a - b| / (1 + |b|).
double worst(const std::vector<float>& a, const std::vector<float>& b) {
  double w = a.size() == b.size() ? 0.0 : INFINITY;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double e = std::fabs(double(a[i]) - double(b[i])) / (1.0 + std::fabs(double(b[i])));
    w = std::isnan(e) ? INFINITY : std::max(w, e);
  }
  return w;
}

/// Mixed requests: prompts of 1 .. 20 tokens, 1 .. 10 tokens to generate.
std::vector<serving::request> mixed_requests(int count) {
  std::vector<serving::request> r;
  for (int i = 0; i < count; ++i) {
    serving::request q;
    q.prompt = ids(1 + (i * 7) % 20, 100u + unsigned(i));
    q.max_tokens = 1 + (i * 5) % 10;
    r.push_back(q);
  }
  return r;
}

template <class B>
class serving_engine : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(serving_engine, kiln_test::backend_types);

}  // namespace

// Float tolerance of the batched step against the single-sequence one: the same kernels,
// but a product over 16 rows may sum in another order than over 1 (other GEMM tiles), and
// paged attention tiles the keys by block: float32 rounding over two layers of width <= 83,
// errors near 1e-6; 1e-4 * (1 + |logit|) is 300x below the fixture's smallest greedy gap.
constexpr double batched_tol = 1e-4;

TYPED_TEST(serving_engine, batched_logits_equal_the_single_sequence_logits) {
  auto& m = model<TypeParam>();
  auto cache = m.make_paged_cache(4, 64);
  const auto a = ids(7, 1), b = ids(12, 2), c = ids(1, 3);
  const auto sa = cache.add(), sb = cache.add(), sc = cache.add();
  // step 1: a's whole prompt, b's first 5 tokens (no logits), c's one-token prompt
  std::vector<kiln::models::batch_entry> s1{{sa, a, true}, {sb, std::span(b).first(5), false}, {sc, c, true}};
  const auto l1 = m.forward(cache, s1);
  ASSERT_EQ(l1.shape(), kiln::shape({2, 97}));
  const std::int32_t xa = 5, xc = 90;
  // step 2: a and c decode one token each, b's other 7 prompt tokens
  std::vector<kiln::models::batch_entry> s2{{sc, std::span(&xc, 1), true}, {sb, std::span(b).subspan(5), true},
                                            {sa, std::span(&xa, 1), true}};
  const auto l2 = m.forward(cache, s2);
  ASSERT_EQ(l2.shape(), kiln::shape({3, 97}));
  EXPECT_EQ(cache.length(sa), 8);
  EXPECT_EQ(cache.length(sb), 12);
  EXPECT_EQ(cache.length(sc), 2);
  const auto h1 = l1.to_host(), h2 = l2.to_host();
  const auto row = [](const std::vector<float>& h, index_t r) {
    return std::vector<float>(h.begin() + r * 97, h.begin() + (r + 1) * 97);
  };
  const auto single = [&](const std::vector<std::int32_t>& prompt, const std::int32_t* next) {
    m.reset();
    auto first = m.forward(prompt).to_host();
    if (!next) return first;
    return m.forward(std::span(next, 1)).to_host();
  };
  EXPECT_LE(worst(row(h1, 0), single(a, nullptr)), batched_tol);
  EXPECT_LE(worst(row(h1, 1), single(c, nullptr)), batched_tol);
  EXPECT_LE(worst(row(h2, 0), single(c, &xc)), batched_tol);
  EXPECT_LE(worst(row(h2, 1), single(b, nullptr)), batched_tol);
  EXPECT_LE(worst(row(h2, 2), single(a, &xa)), batched_tol);
  // chunked prefill equals unchunked: b in chunks of 3 on a fresh sequence
  const auto sd = cache.add();
  std::vector<float> last;
  for (std::size_t at = 0; at < b.size(); at += 3) {
    const auto chunk = std::span(b).subspan(at, std::min<std::size_t>(3, b.size() - at));
    std::vector<kiln::models::batch_entry> e{{sd, chunk, at + chunk.size() == b.size()}};
    last = m.forward(cache, e).to_host();
  }
  EXPECT_LE(worst(last, row(h2, 1)), batched_tol);
  for (auto s : {sa, sb, sc, sd}) cache.release(s);
  EXPECT_EQ(cache.used_blocks(), 0);
}

TYPED_TEST(serving_engine, batched_step_errors_name_the_entry_and_change_nothing) {
  auto& m = model<TypeParam>();
  auto cache = m.make_paged_cache(4, 6);  // 24 positions
  const auto s = cache.add();
  const auto t = cache.add();
  const auto p = ids(5, 4);
  using E = std::vector<kiln::models::batch_entry>;
  const auto run = [&](E e) { (void)m.forward(cache, e); };
  std::string msg = kiln_test::message_of<kiln::index_error>([&] { run(E{{s, p, true}, {t, ids(1, 9), true}, {s, p, true}}); });
  EXPECT_NE(msg.find("entry 2 (sequence 0): the sequence appears twice"), std::string::npos) << msg;
  const std::vector<std::int32_t> bad{3, 97};
  msg = kiln_test::message_of<kiln::index_error>([&] { run(E{{s, p, true}, {t, bad, true}}); });
  EXPECT_NE(msg.find("kiln::llama::model::forward (batched): entry 1 (sequence 1): token id 97 at ids[1] is outside the vocabulary [0, 97)"),
            std::string::npos)
      << msg;
  msg = kiln_test::message_of<kiln::index_error>([&] { run(E{{7, p, true}}); });
  EXPECT_NE(msg.find("not live"), std::string::npos) << msg;
  msg = kiln_test::shape_error_of([&] { run(E{{s, {}, true}}); });
  EXPECT_NE(msg.find("entry 0 (sequence 0): no tokens"), std::string::npos) << msg;
  msg = kiln_test::shape_error_of([&] { run(E{}); });
  EXPECT_NE(msg.find("an empty batch"), std::string::npos) << msg;
  msg = kiln_test::shape_error_of([&] { run(E{{s, ids(65, 5), true}}); });
  EXPECT_NE(msg.find("65 tokens after 0 overflow the context of 64 positions"), std::string::npos) << msg;
  // 20 + 5 positions need 7 blocks of 4; the pool has 6
  msg = kiln_test::message_of<kiln::out_of_memory>([&] { run(E{{s, ids(20, 6), true}, {t, p, true}}); });
  EXPECT_NE(msg.find("needs 7 blocks of the paged cache, 6 of 6 are free"), std::string::npos) << msg;
  kiln::paged_kv_cache<float, TypeParam> other(kiln_test::ctx<TypeParam>(), {.layers = 2, .kv_heads = 2, .head_dim = 8, .blocks = 4});
  const auto o = other.add();
  msg = kiln_test::shape_error_of([&] { (void)m.forward(other, E{{o, p, true}}); });
  EXPECT_NE(msg.find("the decoder needs 2 layers of [blocks, 2, block size, 16]"), std::string::npos) << msg;
  EXPECT_EQ(cache.length(s), 0);  // nothing grew
  EXPECT_EQ(cache.length(t), 0);
  EXPECT_EQ(cache.used_blocks(), 0);
}

TYPED_TEST(serving_engine, sixteen_concurrent_greedy_requests_get_their_ids_alone) {
  auto& m = model<TypeParam>();
  auto reqs = mixed_requests(16);
  std::vector<std::vector<std::int32_t>> want;
  for (const auto& r : reqs) want.push_back(alone<TypeParam>(r.prompt, r.max_tokens));
  // a pool of the blocks a contiguous cache takes for 4 sequences of the whole context
  // (4 x 64 positions, blocks of 4) holds all 16 at once
  const index_t pool = 4 * m.capacity() / 4;
  index_t need = 0;
  for (const auto& r : reqs) need += (static_cast<index_t>(r.prompt.size()) + r.max_tokens - 1 + 3) / 4;
  ASSERT_LE(need, pool);
  serving::engine eng(m, {.max_batch = 16, .prefill_chunk = 24, .block_size = 4, .kv_blocks = pool});
  std::vector<std::shared_ptr<serving::token_stream>> out;
  for (auto& r : reqs) out.push_back(eng.submit(r));
  index_t most = 0, steps = 0;
  while (!eng.idle()) {
    const auto st = eng.step();
    most = std::max(most, st.active + st.finished);
    EXPECT_LE(st.prefill_rows, 24);
    ++steps;
  }
  EXPECT_EQ(most, 16);  // all 16 admitted together
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(out[i]->tokens(), want[i]) << "request " << i << ", prompt of " << reqs[i].prompt.size();
    EXPECT_EQ(out[i]->reason(), serving::finish_reason::length);
  }
  EXPECT_EQ(eng.cache().used_blocks(), 0);  // every block back in the pool
  const auto s = eng.stats();
  EXPECT_EQ(s.completed, 16u);
  index_t gen = 0, prompt = 0;
  for (const auto& r : reqs) gen += r.max_tokens, prompt += static_cast<index_t>(r.prompt.size());
  EXPECT_EQ(s.generated_tokens, std::uint64_t(gen));
  EXPECT_EQ(s.prompt_tokens, std::uint64_t(prompt));
  EXPECT_EQ(s.steps, std::uint64_t(steps));
}

TYPED_TEST(serving_engine, sampled_requests_draw_the_same_ids_with_company_as_alone) {
  auto& m = model<TypeParam>();
  auto reqs = mixed_requests(6);
  const kiln::sampling_options opts[] = {{.temperature = 0.8f, .seed = 7},
                                         {.temperature = 1.0f, .top_k = 20, .top_p = 0.9f, .seed = 8},
                                         {.temperature = 0.7f, .min_p = 0.05f, .repeat_penalty = 1.3f, .seed = 9}};
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].sampling = opts[i % 3];
    reqs[i].max_tokens = 8;
  }
  const auto run = [&](const std::vector<serving::request>& rs, index_t max_batch) {
    serving::engine eng(m, {.max_batch = max_batch, .prefill_chunk = 5, .block_size = 4, .kv_blocks = 64});
    std::vector<std::shared_ptr<serving::token_stream>> out;
    for (const auto& r : rs) out.push_back(eng.submit(r));
    eng.run();
    std::vector<std::vector<std::int32_t>> got;
    for (auto& o : out) got.push_back(o->tokens());
    return got;
  };
  const auto together = run(reqs, 6);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(together[i], run({reqs[i]}, 1)[0]) << "request " << i;
    EXPECT_EQ(together[i].size(), 8u);
  }
}

TYPED_TEST(serving_engine, requests_join_and_leave_mid_run) {
  auto& m = model<TypeParam>();
  auto reqs = mixed_requests(9);
  std::vector<std::vector<std::int32_t>> want;
  for (auto& r : reqs) {
    r.max_tokens = 10;
    want.push_back(alone<TypeParam>(r.prompt, r.max_tokens));
  }
  // request 4 stops at its fourth greedy id (a stop id), request 1 is cancelled mid-run
  reqs[4].stop_ids = {want[4][3]};
  const auto stop_at = std::find(want[4].begin(), want[4].end(), want[4][3]) - want[4].begin();
  serving::engine eng(m, {.max_batch = 4, .prefill_chunk = 6, .block_size = 4, .kv_blocks = 40});
  std::vector<std::shared_ptr<serving::token_stream>> out;
  for (int i = 0; i < 3; ++i) out.push_back(eng.submit(reqs[static_cast<std::size_t>(i)]));
  for (int i = 0; i < 4; ++i) {
    const auto st = eng.step();
    EXPECT_LE(st.sequences, 4);
  }
  for (std::size_t i = 3; i < reqs.size(); ++i) out.push_back(eng.submit(reqs[i]));  // join while 3 run
  EXPECT_EQ(eng.queued(), 6);
  const auto s1 = eng.step();
  EXPECT_EQ(s1.active, 4);  // one place was free
  EXPECT_EQ(s1.queued, 5);
  EXPECT_GT(s1.kv_blocks_used, 0);
  const auto before = out[1]->tokens().size();
  EXPECT_TRUE(eng.cancel(out[1]->id()));
  EXPECT_TRUE(eng.cancel(out[8]->id()));  // still waiting: leaves the queue at once
  EXPECT_EQ(out[8]->reason(), serving::finish_reason::cancelled);
  EXPECT_FALSE(eng.cancel(out[8]->id()));
  EXPECT_FALSE(eng.cancel(12345));
  while (!eng.idle()) EXPECT_LE(eng.step().sequences, 4);
  EXPECT_EQ(out[1]->reason(), serving::finish_reason::cancelled);
  const auto got1 = out[1]->tokens();
  EXPECT_EQ(got1.size(), before);  // nothing drawn after the cancel
  EXPECT_TRUE(std::equal(got1.begin(), got1.end(), want[1].begin()));
  EXPECT_TRUE(out[8]->tokens().empty());
  EXPECT_EQ(out[4]->reason(), serving::finish_reason::stop);
  EXPECT_EQ(out[4]->tokens(), std::vector<std::int32_t>(want[4].begin(), want[4].begin() + stop_at + 1));
  for (std::size_t i : {0u, 2u, 3u, 5u, 6u, 7u}) {
    EXPECT_EQ(out[i]->tokens(), want[i]) << "request " << i;
    EXPECT_EQ(out[i]->reason(), serving::finish_reason::length);
  }
  EXPECT_EQ(eng.cache().used_blocks(), 0);
  const auto s = eng.stats();
  EXPECT_EQ(s.cancelled, 2u);
  EXPECT_EQ(s.completed, 7u);
}

TYPED_TEST(serving_engine, a_step_that_only_cancels_reports_the_blocks_back) {
  // the last running request cancelled: the step that ends it runs no batch; the engine's
  // kv_blocks_used (a server's /metrics) must show the blocks back, `last` keeps its batch's
  auto& m = model<TypeParam>();
  serving::engine eng(m, {.max_batch = 2, .block_size = 4, .kv_blocks = 40});
  serving::request r;
  r.prompt = ids(9, 7u);
  r.max_tokens = 20;
  const auto s = eng.submit(r);
  eng.step();
  eng.step();
  EXPECT_GT(eng.stats().kv_blocks_used, 0);
  EXPECT_TRUE(eng.cancel(s->id()));
  EXPECT_EQ(eng.step().sequences, 0);
  EXPECT_EQ(s->reason(), serving::finish_reason::cancelled);
  EXPECT_EQ(eng.cache().used_blocks(), 0);
  EXPECT_EQ(eng.stats().kv_blocks_used, 0);
  EXPECT_GT(eng.stats().last.kv_blocks_used, 0);
  EXPECT_EQ(eng.stats().cancelled, 1u);
}

TYPED_TEST(serving_engine, chunked_prefill_gives_the_unchunked_ids) {
  auto& m = model<TypeParam>();
  auto reqs = mixed_requests(5);
  for (auto& r : reqs) {
    r.prompt = ids(30, static_cast<unsigned>(r.prompt.size()));
    r.max_tokens = 6;
  }
  std::vector<std::vector<std::int32_t>> first;
  for (const index_t chunk : {index_t(1000), index_t(7), index_t(1)}) {
    serving::engine eng(m, {.max_batch = 5, .prefill_chunk = chunk, .block_size = 8, .kv_blocks = 40});
    std::vector<std::shared_ptr<serving::token_stream>> out;
    for (const auto& r : reqs) out.push_back(eng.submit(r));
    while (!eng.idle()) EXPECT_LE(eng.step().prefill_rows, chunk);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      if (first.size() < reqs.size()) first.push_back(out[i]->tokens());
      EXPECT_EQ(out[i]->tokens(), first[i]) << "chunk " << chunk << ", request " << i;
      EXPECT_EQ(out[i]->tokens().size(), 6u);
    }
  }
  EXPECT_EQ(first[2], alone<TypeParam>(reqs[2].prompt, 6));
}

TYPED_TEST(serving_engine, a_full_queue_and_bad_requests_are_refused_by_name) {
  auto& m = model<TypeParam>();
  serving::engine eng(m, {.max_batch = 2, .block_size = 4, .kv_blocks = 10, .max_queue = 1});
  serving::request r{.prompt = ids(3, 1), .max_tokens = 2};
  std::vector<std::shared_ptr<serving::token_stream>> out;
  for (int i = 0; i < 3; ++i) out.push_back(eng.submit(r));  // two free places and one waiting
  std::string msg = kiln_test::message_of<serving::queue_full>([&] { eng.submit(r); });
  EXPECT_NE(msg.find("kiln::serving::engine::submit: the wait queue is full: 3 requests wait"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max_queue 1"), std::string::npos) << msg;
  EXPECT_EQ(eng.stats().refused, 1u);
  const auto bad = [&](serving::request q) { eng.submit(std::move(q)); };
  msg = kiln_test::message_of<kiln::index_error>([&] { bad({.prompt = {1, 97, 2}}); });
  EXPECT_NE(msg.find("kiln::serving::engine::submit: prompt id 97 at prompt[1] is outside the vocabulary [0, 97)"),
            std::string::npos)
      << msg;
  msg = kiln_test::message_of<kiln::index_error>([&] { bad({.prompt = {1}, .stop_ids = {-1}}); });
  EXPECT_NE(msg.find("stop id -1 at stop_ids[0]"), std::string::npos) << msg;
  msg = kiln_test::shape_error_of([&] { bad({.prompt = ids(65, 2)}); });
  EXPECT_NE(msg.find("the prompt of 65 tokens is longer than the context of 64 positions"), std::string::npos) << msg;
  msg = kiln_test::shape_error_of([&] { bad({.prompt = ids(60, 2), .max_tokens = 6}); });
  EXPECT_NE(msg.find("a prompt of 60 tokens and max_tokens 6 need 65 positions; the context holds 64"), std::string::npos)
      << msg;
  msg = kiln_test::shape_error_of([&] { bad({.prompt = ids(40, 2), .max_tokens = 2}); });
  EXPECT_NE(msg.find("need 11 KV blocks of 4 positions; the whole pool holds 10"), std::string::npos) << msg;
  msg = kiln_test::shape_error_of([&] { bad({}); });
  EXPECT_NE(msg.find("the prompt is empty"), std::string::npos) << msg;
  msg = kiln_test::shape_error_of([&] { bad({.prompt = {1}, .max_tokens = 0}); });
  EXPECT_NE(msg.find("max_tokens is 0; it must be at least 1"), std::string::npos) << msg;
  msg = kiln_test::shape_error_of([&] { bad({.prompt = {1}, .sampling = {.top_p = 2.0f}}); });
  EXPECT_NE(msg.find("top_p must be in (0, 1]"), std::string::npos) << msg;
  EXPECT_EQ(eng.queued(), 3);  // nothing refused was queued
  msg = kiln_test::shape_error_of([&] { serving::engine e(m, {.block_size = 4}); });
  EXPECT_NE(msg.find("kiln::serving::engine: give the KV pool's size as kv_blocks or as kv_bytes"), std::string::npos) << msg;
  msg = kiln_test::shape_error_of([&] { serving::engine e(m, {.max_batch = 0, .kv_blocks = 4}); });
  EXPECT_NE(msg.find("max_batch must be at least 1"), std::string::npos) << msg;
  eng.run();
  for (auto& o : out) EXPECT_EQ(o->tokens(), alone<TypeParam>(r.prompt, 2));
  // a context below the model's (engine_options::max_context)
  serving::engine small(m, {.kv_blocks = 8, .max_context = 10});
  EXPECT_EQ(small.context(), 10);
  msg = kiln_test::shape_error_of([&] { small.submit({.prompt = ids(8, 2), .max_tokens = 4}); });
  EXPECT_NE(msg.find("need 11 positions; the context holds 10"), std::string::npos) << msg;
}

TYPED_TEST(serving_engine, a_worker_thread_steps_while_another_submits_and_cancels) {
  auto& m = model<TypeParam>();
  serving::engine eng(m, {.max_batch = 3, .prefill_chunk = 8, .block_size = 4, .kv_blocks = 40});
  std::atomic<bool> stop{false};
  std::atomic<int> updates{0};
  std::thread worker([&] {
    while (!stop) {
      if (eng.wait_for_work(std::chrono::milliseconds(5))) eng.step();
    }
  });
  auto reqs = mixed_requests(6);
  std::vector<std::shared_ptr<serving::token_stream>> out;
  for (auto& r : reqs) {
    r.max_tokens = 12;
    r.on_update = [&](serving::token_stream&) { ++updates; };
    out.push_back(eng.submit(r));
  }
  eng.cancel(out[5]->id());
  std::vector<std::vector<std::int32_t>> got;
  for (auto& o : out) got.push_back(o->wait());  // blocks until each has finished
  stop = true;
  worker.join();
  EXPECT_EQ(out[5]->reason(), serving::finish_reason::cancelled);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(out[i]->reason(), serving::finish_reason::length) << i;
    EXPECT_EQ(got[i], alone<TypeParam>(reqs[i].prompt, 12)) << "request " << i;
    EXPECT_NE(out[i]->first_token(), serving::token_stream::clock::time_point{});
  }
  EXPECT_GE(updates.load(), 5 * 12);  // a call for each step that drew a token
  EXPECT_TRUE(eng.idle());
}

TYPED_TEST(serving_engine, a_throwing_callback_ends_only_its_own_request) {
  auto& m = model<TypeParam>();
  serving::engine eng(m, {.max_batch = 2, .block_size = 4, .kv_blocks = 16});
  serving::request bad{.prompt = ids(5, 11), .max_tokens = 6};
  int calls = 0;
  bad.on_update = [&](serving::token_stream&) {
    ++calls;
    throw std::runtime_error("the client went away");
  };
  serving::request good{.prompt = ids(4, 12), .max_tokens = 6};
  auto b = eng.submit(bad);
  auto g = eng.submit(good);
  eng.run();
  EXPECT_EQ(b->reason(), serving::finish_reason::error);
  EXPECT_NE(b->error().find("on_update threw"), std::string::npos) << b->error();
  EXPECT_EQ(b->tokens().size(), 1u);  // ended at its first token
  EXPECT_EQ(calls, 2);                // that token's call, then the end's (its throw ignored)
  EXPECT_EQ(g->reason(), serving::finish_reason::length);
  EXPECT_EQ(g->tokens(), alone<TypeParam>(good.prompt, 6));
  EXPECT_EQ(eng.cache().used_blocks(), 0);
  EXPECT_EQ(eng.stats().failed, 1u);
}

TYPED_TEST(serving_engine, bitnet_shares_the_batched_step) {
  auto m = kiln::bitnet::model<TypeParam>::load(kiln_test::ctx<TypeParam>(),
                                                std::string(KILN_MODELS_TEST_DATA) + "/tiny_bitnet");
  // batched logits against the single-sequence ones
  auto cache = m.make_paged_cache(4, 32);
  const auto a = ids(9, 21, 67), b = ids(3, 22, 67);
  const auto sa = cache.add(), sb = cache.add();
  std::vector<kiln::models::batch_entry> step{{sa, a, true}, {sb, b, true}};
  const auto got = m.forward(cache, step).to_host();
  ASSERT_EQ(got.size(), 2u * 67u);
  for (int i = 0; i < 2; ++i) {
    m.reset();
    const auto want = m.forward(i == 0 ? a : b).to_host();
    EXPECT_LE(worst(std::vector<float>(got.begin() + i * 67, got.begin() + (i + 1) * 67), want), batched_tol) << i;
  }
  // and greedy ids through the engine, with company, equal to each request alone
  serving::engine eng(m, {.max_batch = 6, .prefill_chunk = 9, .block_size = 4, .kv_blocks = 64});
  std::vector<serving::request> reqs;
  std::vector<std::shared_ptr<serving::token_stream>> out;
  for (int i = 0; i < 6; ++i) {
    reqs.push_back({.prompt = ids(1 + i * 4, 30u + unsigned(i), 67), .max_tokens = 7});
    out.push_back(eng.submit(reqs.back()));
  }
  eng.run();
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    m.reset();
    EXPECT_EQ(out[i]->tokens(), m.generate(reqs[i].prompt, 7)) << "request " << i;
  }
  EXPECT_EQ(eng.cache().used_blocks(), 0);
}
