// benchmarks/vulkan_profile_bench.cpp — what the profiler costs on Vulkan (lavapipe in
// CI), and whether its GPU times agree with wall time.
//   BM_statement/vulkan/on_vs_off  y = gelu(a*b + c) over 1024 floats, batches of 64
//                                  statements and one synchronize, profiling on and off in
//                                  alternating order on one context; counters off_us, on_us
//                                  (per statement, medians, GPU work included) and
//                                  overhead_us = on - off. The context's default GPU sampling
//                                  (on lavapipe one call in 16 of each kernel timed)
//   BM_statement/vulkan/on_vs_off_every_call  the same with every call timed
//                                  (options::profile_gpu_every = 1): the price of a timestamp
//                                  pair per dispatch
//   BM_gelu_chain/vulkan/profiled  the same chain over 16M floats, each iteration one
//                                  statement and a synchronize, profiling on (every call
//                                  timed): counters
//                                  wall_ms (median), gpu_ms (the profiler's median GPU time),
//                                  gpu_vs_wall, and GB/s by GPU time (16 bytes an element)
// The profiler's budget: at most 5 us per statement on (issue 18), nothing measurable off.
#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

#include <chrono>
#include <memory>
#include <vector>

#include "bench_support.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

kiln::context<kiln::vulkan>* gpu() {
  static std::unique_ptr<kiln::context<kiln::vulkan>> c;
  if (!c && kiln::vulkan::available()) c = std::make_unique<kiln::context<kiln::vulkan>>();
  return c.get();
}

/// A context that times every call when profiling.
kiln::context<kiln::vulkan>* gpu_every_call() {
  static std::unique_ptr<kiln::context<kiln::vulkan>> c;
  if (!c && kiln::vulkan::available()) {
    kiln::vulkan::options o;
    o.profile_gpu_every = 1;
    c = std::make_unique<kiln::context<kiln::vulkan>>(o);
  }
  return c.get();
}

void BM_on_vs_off(benchmark::State& state, kiln::context<kiln::vulkan>* (*make)()) {
  auto* g = make();
  if (!g) return state.SkipWithError("no Vulkan device");
  auto a = kiln::random<float>(*g, {1024}, -3, 3, 1), b = kiln::random<float>(*g, {1024}, -3, 3, 2);
  auto c = kiln::random<float>(*g, {1024}, -3, 3, 3), y = kiln::empty<float>(*g, {1024});
  y = kiln::gelu(a * b + c);
  g->synchronize();
  constexpr int batch = 64;
  auto run_batch = [&](bool profile) {
    g->set_profiling(profile);
    const auto t0 = clock_type::now();
    for (int i = 0; i < batch; ++i) y = kiln::gelu(a * b + c);
    g->synchronize();
    const double us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / batch;
    g->set_profiling(false);
    g->clear_profile();
    return us;
  };
  std::vector<double> on, off;
  bool on_first = true;
  for (auto _ : state) {
    double x = 0, z = 0;
    if (on_first) {
      x = run_batch(true);
      z = run_batch(false);
    } else {
      z = run_batch(false);
      x = run_batch(true);
    }
    on_first = !on_first;
    on.push_back(x);
    off.push_back(z);
    state.SetIterationTime((x + z) * batch * 1e-6);
  }
  const double m_on = kiln_bench::median(on), m_off = kiln_bench::median(off);
  state.counters["on_us"] = m_on;
  state.counters["off_us"] = m_off;
  state.counters["overhead_us"] = m_on - m_off;
}
BENCHMARK_CAPTURE(BM_on_vs_off, sampled, gpu)
    ->Name("BM_statement/vulkan/on_vs_off")->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK_CAPTURE(BM_on_vs_off, every_call, gpu_every_call)
    ->Name("BM_statement/vulkan/on_vs_off_every_call")->Unit(benchmark::kMicrosecond)->UseManualTime();

void BM_gelu_profiled(benchmark::State& state) {
  auto* g = gpu_every_call();
  if (!g) return state.SkipWithError("no Vulkan device");
  constexpr kiln::index_t n = kiln::index_t(1) << 24;
  auto a = kiln::random<float>(*g, {n}, -3, 3, 1), b = kiln::random<float>(*g, {n}, -3, 3, 2);
  auto c = kiln::random<float>(*g, {n}, -3, 3, 3), y = kiln::empty<float>(*g, {n});
  y = kiln::gelu(a * b + c);
  g->synchronize();
  g->set_profiling(true);
  g->clear_profile();
  std::vector<double> wall;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    y = kiln::gelu(a * b + c);
    g->synchronize();
    wall.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
  }
  std::vector<double> gpu_ms;
  for (const auto& r : g->profile()) {
    if (r.gpu_us >= 0) gpu_ms.push_back(r.gpu_us / 1e3);
  }
  g->set_profiling(false);
  g->clear_profile();
  const double w = kiln_bench::median(wall), t = kiln_bench::median(gpu_ms);
  state.counters["wall_ms"] = w;
  state.counters["gpu_ms"] = t;
  state.counters["gpu_vs_wall"] = w > 0 ? t / w : 0;
  state.counters["GB/s"] = t > 0 ? 16.0 * double(n) / (t * 1e6) : 0;
}
BENCHMARK(BM_gelu_profiled)->Name("BM_gelu_chain/vulkan/profiled")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, [] {}); }
