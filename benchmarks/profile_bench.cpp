// benchmarks/profile_bench.cpp — what the profiler costs on the CPU backend.
//   BM_statement/cpu/profile_off   y = a * b + 1 over 64 floats on one thread: the time
//                                  of a statement that is nearly all overhead
//   BM_statement/cpu/profile_on    the same with profiling on (records kept, cleared every
//                                  16K statements outside the timing)
//   BM_statement/cpu/on_vs_off     the two as pairs of 256-statement batches, back to back
//                                  in alternating order on one context; counters off_us,
//                                  on_us (per statement, medians) and overhead_us = on - off
//   BM_gelu_chain/cpu/profiled     y = gelu(a*b + c) over 16M floats with profiling on:
//                                  counters GB/s (the benchmark's wall time), profile_GB/s
//                                  and profile_mean_ms (the profiler's table for the kernel)
// The profiler's budget: at most 2 us per statement on (issue 18), nothing measurable off.
#include <kiln/kiln.hpp>

#include <chrono>
#include <vector>

#include "bench_support.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct small_statement {
  kiln::context<kiln::cpu<>> ctx{kiln::threads{1}};
  kiln::tensor<float, kiln::cpu<>> a = kiln::random<float>(ctx, {64}, -1, 1, 1);
  kiln::tensor<float, kiln::cpu<>> b = kiln::random<float>(ctx, {64}, -1, 1, 2);
  kiln::tensor<float, kiln::cpu<>> y = kiln::empty<float>(ctx, {64});
  void run() { y = a * b + 1.0f; }
};

void BM_statement(benchmark::State& state, bool profile) {
  small_statement s;
  s.ctx.set_profiling(profile);
  std::int64_t since_clear = 0;
  for (auto _ : state) {
    s.run();
    benchmark::DoNotOptimize(s.y.data());
    if (++since_clear == (1 << 14)) {  // bounded memory; the clear is not the statement's cost
      state.PauseTiming();
      s.ctx.clear_profile();
      since_clear = 0;
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_CAPTURE(BM_statement, off, false)->Name("BM_statement/cpu/profile_off")->Unit(benchmark::kNanosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_statement, on, true)->Name("BM_statement/cpu/profile_on")->Unit(benchmark::kNanosecond)->UseRealTime();

void BM_on_vs_off(benchmark::State& state) {
  small_statement s;
  constexpr int batch = 256;
  auto run_batch = [&](bool profile) {
    s.ctx.set_profiling(profile);
    const auto t0 = clock_type::now();
    for (int i = 0; i < batch; ++i) s.run();
    const double us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / batch;
    s.ctx.set_profiling(false);
    s.ctx.clear_profile();
    return us;
  };
  std::vector<double> on, off;
  bool on_first = true;
  for (auto _ : state) {
    double a = 0, b = 0;
    if (on_first) {
      a = run_batch(true);
      b = run_batch(false);
    } else {
      b = run_batch(false);
      a = run_batch(true);
    }
    on_first = !on_first;
    on.push_back(a);
    off.push_back(b);
    state.SetIterationTime((a + b) * batch * 1e-6);
  }
  const double m_on = kiln_bench::median(on), m_off = kiln_bench::median(off);
  state.counters["on_us"] = m_on;
  state.counters["off_us"] = m_off;
  state.counters["overhead_us"] = m_on - m_off;
}
BENCHMARK(BM_on_vs_off)->Name("BM_statement/cpu/on_vs_off")->Unit(benchmark::kMicrosecond)->UseManualTime();

void BM_gelu_profiled(benchmark::State& state) {
  constexpr kiln::index_t n = kiln::index_t(1) << 24;
  kiln::context<kiln::cpu<>> ctx;
  auto a = kiln::random<float>(ctx, {n}, -3, 3, 1), b = kiln::random<float>(ctx, {n}, -3, 3, 2);
  auto c = kiln::random<float>(ctx, {n}, -3, 3, 3), y = kiln::empty<float>(ctx, {n});
  y = kiln::gelu(a * b + c);  // first touch of y
  ctx.set_profiling(true);
  ctx.clear_profile();
  for (auto _ : state) y = kiln::gelu(a * b + c);
  const auto t = kiln::profile_table(ctx);
  const double bytes = 16.0 * double(n);
  state.counters["GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  if (!t.rows.empty()) {
    state.counters["profile_GB/s"] = t.rows[0].gb_per_s();
    state.counters["profile_mean_ms"] = t.rows[0].mean_us() / 1e3;
  }
}
BENCHMARK(BM_gelu_profiled)->Name("BM_gelu_chain/cpu/profiled")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, [] {}); }
