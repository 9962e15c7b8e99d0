// benchmarks/vulkan_fusion_bench.cpp — generated kernels on Vulkan (lavapipe in CI):
//   BM_gelu_chain/vulkan/fused      y = gelu(a*b + c), 16M floats, ONE generated kernel
//   BM_gelu_chain/vulkan/unfused    the same chain as three dispatches (t = a*b; t = t + c; y = gelu(t))
//   BM_gelu_chain/vulkan/{fused,unfused}_storage_reads  the same on a context whose kernels
//                                   read inputs as storage buffers (texel reads off): the A/B of
//                                   the texel-read path on a device that defaults to it (lavapipe)
//   BM_gelu_chain/vulkan/fused_vs_unfused  the two timed as pairs, back to back in alternating
//                                   order; counter `ratio` = fused / unfused time (median of pairs)
//   BM_copy/vulkan/{fixed,fused}    y = a through copy.comp, and y = a * 1 (a generated kernel: vec4,
//                                   or eight floats per step where the device has int64):
//                                   the in-run bandwidth reference
//   BM_first_use/vulkan/{cold,warm} first use of a new expression in a fresh PROCESS, with an
//                                   empty disk cache (shaderc runs) vs one filled by an earlier process
//                                   (whose warm list lets the context rebuild the pipeline in the
//                                   background while the program sets up); warm_no_preload: the
//                                   same with KILN_CACHE_PRELOAD=off (the pipeline is built on use)
// GB/s count each input read once and the output written once.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

#include "bench_support.hpp"

namespace {

constexpr kiln::index_t n = kiln::index_t(1) << 24;

kiln::context<kiln::vulkan>* gpu() {
  static std::unique_ptr<kiln::context<kiln::vulkan>> c;
  if (!c && kiln::vulkan::available()) c = std::make_unique<kiln::context<kiln::vulkan>>();
  return c.get();
}

/// A context whose generated kernels read their inputs as storage buffers.
kiln::context<kiln::vulkan>* gpu_storage_reads() {
  static std::unique_ptr<kiln::context<kiln::vulkan>> c;
  if (!c && kiln::vulkan::available()) {
    kiln::vulkan::options o;
    o.texel_reads = false;
    c = std::make_unique<kiln::context<kiln::vulkan>>(o);
  }
  return c.get();
}

void gb_per_s(benchmark::State& state, int arrays) {
  state.counters["GB/s"] = benchmark::Counter(double(arrays) * 4.0 * double(n), benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}

struct operands {
  kiln::tensor<float, kiln::vulkan> a, b, c, y, t;
  explicit operands(kiln::context<kiln::vulkan>& ctx)
      : a(kiln::random<float>(ctx, {n}, -3, 3, 1)),
        b(kiln::random<float>(ctx, {n}, -3, 3, 2)),
        c(kiln::random<float>(ctx, {n}, -3, 3, 3)),
        y(kiln::empty<float>(ctx, {n})),
        t(kiln::empty<float>(ctx, {n})) {}
};

/// The chain as one generated kernel, and as three dispatches; each waits for the device.
void gelu_fused(kiln::context<kiln::vulkan>& g, operands& o) {
  o.y = kiln::gelu(o.a * o.b + o.c);
  g.synchronize();
}
void gelu_unfused(kiln::context<kiln::vulkan>& g, operands& o) {
  o.t = o.a * o.b;
  o.t = o.t + o.c;
  o.y = kiln::gelu(o.t);
  g.synchronize();
}

/// Times run(g, o) per iteration (its kernels compiled before the timing).
void gelu_chain(benchmark::State& state, void (*run)(kiln::context<kiln::vulkan>&, operands&),
                kiln::context<kiln::vulkan>* (*context)() = gpu) {
  auto* g = context();
  if (!g) return state.SkipWithError("no Vulkan device");
  operands o(*g);
  run(*g, o);
  for (auto _ : state) run(*g, o);
  gb_per_s(state, 4);
}
BENCHMARK_CAPTURE(gelu_chain, fused, gelu_fused)->Name("BM_gelu_chain/vulkan/fused")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(gelu_chain, unfused, gelu_unfused)->Name("BM_gelu_chain/vulkan/unfused")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(gelu_chain, fused_storage, gelu_fused, gpu_storage_reads)
    ->Name("BM_gelu_chain/vulkan/fused_storage_reads")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(gelu_chain, unfused_storage, gelu_unfused, gpu_storage_reads)
    ->Name("BM_gelu_chain/vulkan/unfused_storage_reads")->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_gelu_paired(benchmark::State& state) {
  auto* g = gpu();
  if (!g) return state.SkipWithError("no Vulkan device");
  operands o(*g);
  gelu_fused(*g, o);
  gelu_unfused(*g, o);
  kiln_bench::paired(state, [&] { gelu_fused(*g, o); }, [&] { gelu_unfused(*g, o); });
}
BENCHMARK(BM_gelu_paired)->Name("BM_gelu_chain/vulkan/fused_vs_unfused")->Unit(benchmark::kMillisecond)->UseManualTime();

void BM_copy_fixed(benchmark::State& state) {
  auto* g = gpu();
  if (!g) return state.SkipWithError("no Vulkan device");
  operands o(*g);
  o.y = o.a;
  g->synchronize();
  for (auto _ : state) {
    o.y = o.a;
    g->synchronize();
  }
  gb_per_s(state, 2);
}
BENCHMARK(BM_copy_fixed)->Name("BM_copy/vulkan/fixed")->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_copy_fused(benchmark::State& state) {
  auto* g = gpu();
  if (!g) return state.SkipWithError("no Vulkan device");
  operands o(*g);
  o.y = o.a * 1.0f;
  g->synchronize();
  for (auto _ : state) {
    o.y = o.a * 1.0f;
    g->synchronize();
  }
  gb_per_s(state, 2);
}
BENCHMARK(BM_copy_fused)->Name("BM_copy/vulkan/fused")->Unit(benchmark::kMillisecond)->UseRealTime();

/// The host-side cost of a statement the kernel cache has seen: y = gelu(a*b + c) over
/// 1024 floats, recorded 64 times per synchronize (the dispatches run on lavapipe too).
void BM_statement_small(benchmark::State& state) {
  auto* g = gpu();
  if (!g) return state.SkipWithError("no Vulkan device");
  auto a = kiln::random<float>(*g, {1024}, -3, 3, 1), b = kiln::random<float>(*g, {1024}, -3, 3, 2);
  auto c = kiln::random<float>(*g, {1024}, -3, 3, 3), y = kiln::empty<float>(*g, {1024});
  y = kiln::gelu(a * b + c);
  g->synchronize();
  for (auto _ : state) {
    for (int i = 0; i < 64; ++i) y = kiln::gelu(a * b + c);
    g->synchronize();
  }
  state.SetItemsProcessed(state.iterations() * 64);
}
BENCHMARK(BM_statement_small)->Name("BM_statement_1k/vulkan/gelu_chain")->Unit(benchmark::kMicrosecond)->UseRealTime();

constexpr const char* child_flag = "KILN_BENCH_FIRST_USE_CHILD";

/// In a fresh process (this binary re-run with child_flag set): creates a context, pays
/// the device's first submit untimed, then times the first use of a new expression —
/// generate, compile or load from the disk cache, create the pipeline, dispatch, wait —
/// and prints the milliseconds.
int first_use_child() {
  kiln::context<kiln::vulkan> ctx;
  auto w = kiln::full(ctx, {16}, 1.0f);
  ctx.synchronize();
  std::vector<float> h(4096, 0.5f);
  auto x = kiln::from_host(ctx, {4096}, h);
  auto y = kiln::empty<float>(ctx, {4096});
  const auto t0 = std::chrono::steady_clock::now();
  y = kiln::softplus(kiln::gelu_tanh(x * 3.0f) - kiln::sigmoid(x)) * 0.25f;
  ctx.synchronize();
  const auto t1 = std::chrono::steady_clock::now();
  std::printf("%.6f\n", std::chrono::duration<double, std::milli>(t1 - t0).count());
  return 0;
}

/// Runs first_use_child in a new process; its time in seconds.
double first_use_in_fresh_process(const std::string& cache_dir, bool preload = true) {
  const std::string cmd = std::string(child_flag) + "=1 KILN_CACHE_DIR='" + cache_dir + "'" +
                          (preload ? "" : " KILN_CACHE_PRELOAD=off") + " /proc/" + std::to_string(::getpid()) + "/exe";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  double ms = -1;
  if (std::fscanf(p, "%lf", &ms) != 1) ms = -1;
  ::pclose(p);
  return ms / 1e3;
}

/// cold: an empty disk cache (shaderc runs, in a process that never compiled anything);
/// warm: the disk cache filled by an earlier process; preload: whether the context may
/// rebuild the last run's kernels in the background (KILN_CACHE_PRELOAD).
void first_use(benchmark::State& state, bool warm, bool preload) {
  if (!gpu()) return state.SkipWithError("no Vulkan device");
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln_bench_cache_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  if (warm && first_use_in_fresh_process(dir.string()) < 0) return state.SkipWithError("child process failed");
  for (auto _ : state) {
    if (!warm) fs::remove_all(dir);
    const double s = first_use_in_fresh_process(dir.string(), preload);
    if (s < 0) return state.SkipWithError("child process failed");
    state.SetIterationTime(s);
  }
  fs::remove_all(dir);
}
BENCHMARK_CAPTURE(first_use, cold, false, true)->Name("BM_first_use/vulkan/cold")->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(7);
BENCHMARK_CAPTURE(first_use, warm, true, true)->Name("BM_first_use/vulkan/warm")->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(7);
BENCHMARK_CAPTURE(first_use, warm_no_preload, true, false)
    ->Name("BM_first_use/vulkan/warm_no_preload")
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(7);

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv(child_flag)) return first_use_child();
  return kiln_bench::run_main(argc, argv, [] {});
}
