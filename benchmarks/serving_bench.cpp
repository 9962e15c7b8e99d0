// benchmarks/serving_bench.cpp — continuous batching (kiln/serving/engine.hpp) on the CPU at
// 2 threads, the 1B Llama shape of llama_bench.hpp (hidden 2048, 16 layers, 32/8 heads of 64,
// FFN 5632, vocabulary 32000) with f16 weights:
//   BM_gemm/f16/M<M>/2T             the decoder's product at M rows: x f32 [M, 2048] times the
//                                   gate/up weights f16 [11264, 2048]^T (kiln::linear, as
//                                   models::project runs it): GFLOP/s
//   BM_serving_decode/f16/B<B>/2T   B requests (128-token prompts, prefilled before the clock)
//                                   decoding together, one engine step per iteration (the
//                                   batched forward, greedy sampling, B tokens read back):
//                                   aggregate tok/s. "roof tok/s" = min(B x the B = 1 rate,
//                                   the GEMM's GFLOP/s at M = 128 over the flops of one token
//                                   (2 x the product weights: every projection and the LM
//                                   head; attention's few MFLOP left out)), both measured
//                                   earlier in the same run; "of roof" = tok/s / roof.
//                                   "of B-row roof" = tok/s over B tokens' flops at the
//                                   GEMM's GFLOP/s at M = B: what the step's products at
//                                   their own rate allow, so that the rest of the step
//                                   (attention, norms, rope, sampling, the engine) shows
//                                   apart from the product's rate at few rows.
//   BM_serving_prefill/f16/P<P>/2T  one request of a P-token prompt and one token through the
//                                   engine (prefill in one chunk: paged_write and
//                                   paged_attention's rows path): prompt tok/s, beside
//   BM_llama_prefill/f16/P<P>/2T    the same prompt through forward(ids) on the contiguous
//                                   cache (the flash kernel), as llama_bench measures it.
// The GEMM runs first, then B = 1, 4, 8, 16 in that order (the roof needs the first two).
// KILN_PROFILE=1 also prints the kernel table (kiln::profile_table) of four engine steps
// after each decode benchmark.
#include "llama_bench.hpp"

#include <kiln/serving.hpp>

#include <algorithm>
#include <chrono>
#include <map>

namespace {

using B = kiln::cpu<>;
using kiln::index_t;
namespace serving = kiln::serving;

constexpr int threads = 2;

const kiln::context<B>& ctx() {
  static kiln::context<B> c{kiln::threads{threads}};
  return c;
}

// the last measurement of the GEMM at M = 128 (GFLOP/s) and of one sequence's decode (tok/s)
double gemm_gflops = 0.0, single_tok_s = 0.0;
// the GEMM's last GFLOP/s at each M measured
std::map<index_t, double> gemm_at;

/// Flops of one token's products: 2 x every weight but the embedding's (attention left out).
double flops_per_token(const kiln::llama::model<kiln::half, B>& m) {
  const auto& c = m.cfg();
  return 2.0 * double(c.parameters() - c.vocab_size * c.hidden_size);
}

template <class F>
double seconds_of(benchmark::State& state, F&& body) {
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void gemm(benchmark::State& state, index_t M) {
  const auto c = llama_bench::shape();
  const index_t K = c.hidden_size, N = 2 * c.intermediate_size;
  auto w = kiln::random<kiln::half>(ctx(), {N, K}, -0.02f, 0.02f, 3);
  auto x = kiln::random<float>(ctx(), {M, K}, -1.0f, 1.0f, 4);
  auto y = kiln::empty<float>(ctx(), {M, N});
  y = kiln::linear(x, w);
  ctx().synchronize();
  const double secs = seconds_of(state, [&] {
    y = kiln::linear(x, w);
    ctx().synchronize();
  });
  const double flops = 2.0 * double(M) * double(N) * double(K);
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  if (secs > 0.0) gemm_at[M] = flops * double(state.iterations()) / secs / 1e9;
  if (M == 128 && secs > 0.0) gemm_gflops = gemm_at[M];
}

void decode(benchmark::State& state, index_t batch) {
  auto& m = llama_bench::cached<kiln::half, B>(ctx());
  const index_t prompt = llama_bench::prompt_len, context = llama_bench::max_len;
  serving::engine eng(m, {.max_batch = batch, .prefill_chunk = 512, .block_size = 16, .kv_blocks = batch * context / 16});
  for (index_t b = 0; b < batch; ++b) {
    auto ids = llama_bench::prompt(prompt);
    for (auto& id : ids) id = static_cast<std::int32_t>((id + 101 * b) % 32000);  // unrelated prompts
    eng.submit({.prompt = std::move(ids), .max_tokens = context - prompt});
  }
  while (eng.step().decode_rows < batch) {  // the prefill, before the clock
  }
  bool short_run = false;
  const double secs = seconds_of(state, [&] {
    if (eng.step().tokens != batch) short_run = true;
  });
  if (short_run) state.SkipWithError("a request ended during the run (more iterations than its max_tokens)");
  if (ctx().profiling()) {  // KILN_PROFILE=1: where four steps' time goes, on stderr
    ctx().clear_profile();
    for (int i = 0; i < 4; ++i) eng.step();
    std::cerr << "decode, B = " << batch << ", four engine steps:\n" << kiln::profile_table(ctx()) << "\n";
  }
  state.counters["tok/s"] = benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  const double tok_s = secs > 0.0 ? double(batch) * double(state.iterations()) / secs : 0.0;
  if (batch == 1) single_tok_s = tok_s;
  if (single_tok_s > 0.0 && gemm_gflops > 0.0) {
    const double roof = std::min(double(batch) * single_tok_s, gemm_gflops * 1e9 / flops_per_token(m));
    state.counters["roof tok/s"] = roof;
    state.counters["of roof"] = tok_s / roof;
  }
  if (const auto it = gemm_at.find(batch); it != gemm_at.end() && it->second > 0.0) {
    state.counters["of B-row roof"] = tok_s / (it->second * 1e9 / flops_per_token(m));
  }
  state.counters["GEMM GFLOP/s"] = gemm_gflops;
  state.SetLabel(std::to_string(m.cfg().num_hidden_layers) + " layers, " +
                 std::to_string(flops_per_token(m) / 1e9).substr(0, 4) + " GFLOP a token");
}

void prefill(benchmark::State& state, index_t P) {
  auto& m = llama_bench::cached<kiln::half, B>(ctx());
  serving::engine eng(m, {.max_batch = 1, .prefill_chunk = P, .block_size = 16, .kv_blocks = (P + 15) / 16});
  const auto ids = llama_bench::prompt(P);
  for (auto _ : state) {
    auto s = eng.submit({.prompt = ids, .max_tokens = 1});
    eng.run();
    benchmark::DoNotOptimize(s->tokens());
  }
  state.counters["tok/s"] = benchmark::Counter(double(P), benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  for (index_t M : {1, 4, 8, 16, 128}) {
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_gemm/f16/M" + std::to_string(M) + "/2T").c_str(),
                                                       [M](benchmark::State& s) { gemm(s, M); }))
        ->Unit(benchmark::kMillisecond);
  }
  for (index_t b : {1, 4, 8, 16}) {
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_serving_decode/f16/B" + std::to_string(b) + "/2T").c_str(),
                                                       [b](benchmark::State& s) { decode(s, b); }))
        ->Unit(benchmark::kMillisecond);
  }
  for (index_t P : {128, 512}) {
    const std::string tail = "/f16/P" + std::to_string(P) + "/2T";
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_serving_prefill" + tail).c_str(),
                                                       [P](benchmark::State& s) { prefill(s, P); }))
        ->Unit(benchmark::kMillisecond);
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_llama_prefill" + tail).c_str(), [P](benchmark::State& s) {
      llama_bench::prefill<kiln::half, B>(s, ctx(), P);
    }))->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!kiln_bench::initialize(argc, argv,
                              {"--benchmark_min_time=0.5", "--benchmark_repetitions=3",
                               "--benchmark_report_aggregates_only=true", "--benchmark_enable_random_interleaving=false"})) {
    return 1;
  }
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
