// benchmarks/vulkan_fusion_bench.cpp — generated kernels on Vulkan (lavapipe in CI):
//   BM_gelu_chain/vulkan/fused      y = gelu(a*b + c), 16M floats, ONE generated kernel
//   BM_gelu_chain/vulkan/unfused    the same chain as three dispatches (t = a*b; t = t + c; y = gelu(t))
//   BM_copy/vulkan/{fixed,fused}    y = a through copy.comp, and y = a * 1 (a generated vec4 kernel):
//                                   the in-run bandwidth reference
//   BM_first_use/vulkan/{cold,warm} first use of a new expression in a fresh context, with an
//                                   empty disk cache (shaderc runs) vs one filled earlier
// GB/s count each input read once and the output written once.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

namespace {

constexpr kiln::index_t n = kiln::index_t(1) << 24;

kiln::context<kiln::vulkan>* gpu() {
  static std::unique_ptr<kiln::context<kiln::vulkan>> c;
  if (!c && kiln::vulkan::available()) c = std::make_unique<kiln::context<kiln::vulkan>>();
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

void BM_gelu_fused(benchmark::State& state) {
  auto* g = gpu();
  if (!g) return state.SkipWithError("no Vulkan device");
  operands o(*g);
  o.y = kiln::gelu(o.a * o.b + o.c);  // compile outside the timing
  g->synchronize();
  for (auto _ : state) {
    o.y = kiln::gelu(o.a * o.b + o.c);
    g->synchronize();
  }
  gb_per_s(state, 4);
}
BENCHMARK(BM_gelu_fused)->Name("BM_gelu_chain/vulkan/fused")->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_gelu_unfused(benchmark::State& state) {
  auto* g = gpu();
  if (!g) return state.SkipWithError("no Vulkan device");
  operands o(*g);
  auto run = [&] {
    o.t = o.a * o.b;
    o.t = o.t + o.c;
    o.y = kiln::gelu(o.t);
  };
  run();
  g->synchronize();
  for (auto _ : state) {
    run();
    g->synchronize();
  }
  gb_per_s(state, 4);
}
BENCHMARK(BM_gelu_unfused)->Name("BM_gelu_chain/vulkan/unfused")->Unit(benchmark::kMillisecond)->UseRealTime();

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
BENCHMARK(BM_copy_fused)->Name("BM_copy/vulkan/fused_vec4")->Unit(benchmark::kMillisecond)->UseRealTime();

/// First use of an expression in a fresh context (its in-memory cache is empty); the
/// context's creation is not timed. warm: the disk cache was filled by an earlier context.
void first_use(benchmark::State& state, bool warm) {
  if (!gpu()) return state.SkipWithError("no Vulkan device");
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln_bench_cache_" + std::to_string(::getpid()));
  ::setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  std::vector<float> h(4096, 0.5f);
  auto statement = [&](kiln::context<kiln::vulkan>& ctx) {
    auto x = kiln::from_host(ctx, {4096}, h);
    auto y = kiln::empty<float>(ctx, {4096});
    y = kiln::softplus(kiln::gelu_tanh(x * 3.0f) - kiln::sigmoid(x)) * 0.25f;
    ctx.synchronize();
  };
  fs::remove_all(dir);
  if (warm) {
    kiln::context<kiln::vulkan> fill;
    statement(fill);
  }
  for (auto _ : state) {
    state.PauseTiming();
    if (!warm) fs::remove_all(dir);
    auto ctx = std::make_unique<kiln::context<kiln::vulkan>>();
    state.ResumeTiming();
    statement(*ctx);
    state.PauseTiming();
    ctx.reset();
    state.ResumeTiming();
  }
  fs::remove_all(dir);
  ::unsetenv("KILN_CACHE_DIR");
}
BENCHMARK_CAPTURE(first_use, cold, false)->Name("BM_first_use/vulkan/cold")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(10);
BENCHMARK_CAPTURE(first_use, warm, true)->Name("BM_first_use/vulkan/warm")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(10);

}  // namespace

BENCHMARK_MAIN();
