// benchmarks/vulkan_matmul_bench.cpp — kiln::matmul on Vulkan (lavapipe in CI), each
// kernel variant forced through KILN_VULKAN_GEMM (the label names the one that ran):
//   BM_matmul_naive/vulkan/<n>     square f32 n x n: the naive tiled kernel (the floor)
//   BM_matmul_tiled/vulkan/<n>     the same product on the tiled, register-blocked kernel
//   BM_matmul_splitk/vulkan/64x64x16384   a small product over a long K, split-K (2 dispatches)
//   BM_matmul_tiled/vulkan/64x64x16384    the same product on the tiled kernel
//   BM_matvec/vulkan/4096          [1, 4096] @ transpose(w), w [4096, 4096] (decode, k-reduce)
//   BM_matvec_rowmajor/vulkan/4096 [1, 4096] @ w, w [4096, 4096] row-major (n-columns)
//   BM_matvec_tiled/vulkan/4096    [1, 4096] @ transpose(w) on the tiled kernel, for comparison
//   BM_gelu_bias/vulkan/1024       y = gelu(x @ w + bias): one dispatch, tiled
// GFLOP/s: 2 * M * N * K per iteration; matvec also GB/s of the weight read. Each
// iteration waits for the device.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>

#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

#include "bench_support.hpp"

namespace {

using gpu_tensor = kiln::tensor<float, kiln::vulkan>;

kiln::context<kiln::vulkan>* gpu() {
  static std::unique_ptr<kiln::context<kiln::vulkan>> c;
  if (!c && kiln::vulkan::available()) c = std::make_unique<kiln::context<kiln::vulkan>>();
  return c.get();
}

/// KILN_VULKAN_GEMM=variant for the benchmark's duration.
struct forced_variant {
  explicit forced_variant(const char* v) {
    if (v) setenv("KILN_VULKAN_GEMM", v, 1);
  }
  ~forced_variant() { unsetenv("KILN_VULKAN_GEMM"); }
};

/// Times y = stmt(a, b) for a [M, K] and b (b_transposed: transpose of [N, K], else [K, N]).
template <class Stmt>
void run_bench(benchmark::State& state, const char* variant, kiln::index_t M, kiln::index_t N, kiln::index_t K,
               bool b_transposed, Stmt stmt) {
  auto* g = gpu();
  if (!g) return state.SkipWithError("no Vulkan device");
  forced_variant force(variant);
  gpu_tensor a = kiln::random<float>(*g, {M, K}, -1, 1, 1);
  gpu_tensor w = b_transposed ? kiln::random<float>(*g, {N, K}, -1, 1, 2) : kiln::random<float>(*g, {K, N}, -1, 1, 2);
  gpu_tensor bias = kiln::random<float>(*g, {N}, -1, 1, 3);
  gpu_tensor y = kiln::empty<float>(*g, {M, N});
  auto b = b_transposed ? kiln::transpose(w) : w;
  state.SetLabel(kiln::kernel_variant(kiln::matmul(a, b)));
  stmt(y, a, b, bias);  // compile before timing
  g->synchronize();
  for (auto _ : state) {
    stmt(y, a, b, bias);
    g->synchronize();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(M) * double(N) * double(K),
                                                 benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  if (M == 1) {
    state.counters["GB/s"] = benchmark::Counter(4.0 * double(N) * double(K), benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
  }
}

const auto product = [](gpu_tensor& y, const gpu_tensor& a, const gpu_tensor& b, const gpu_tensor&) {
  y = kiln::matmul(a, b);
};

void BM_matmul_naive(benchmark::State& s) { run_bench(s, "naive", s.range(0), s.range(0), s.range(0), false, product); }
void BM_matmul_tiled(benchmark::State& s) { run_bench(s, "tiled", s.range(0), s.range(0), s.range(0), false, product); }
void BM_matmul_splitk_long(benchmark::State& s) { run_bench(s, "splitk", 64, 64, 16384, false, product); }
void BM_matmul_tiled_long(benchmark::State& s) { run_bench(s, "tiled", 64, 64, 16384, false, product); }
void BM_matvec(benchmark::State& s) { run_bench(s, nullptr, 1, s.range(0), s.range(0), true, product); }
void BM_matvec_rowmajor(benchmark::State& s) { run_bench(s, nullptr, 1, s.range(0), s.range(0), false, product); }
void BM_matvec_tiled(benchmark::State& s) { run_bench(s, "tiled", 1, s.range(0), s.range(0), true, product); }
void BM_gelu_bias(benchmark::State& s) {
  run_bench(s, nullptr, s.range(0), s.range(0), s.range(0), false,
            [](gpu_tensor& y, const gpu_tensor& a, const gpu_tensor& b, const gpu_tensor& bias) {
              y = kiln::gelu(kiln::matmul(a, b) + bias);
            });
}

}  // namespace

BENCHMARK(BM_matmul_naive)->Name("BM_matmul_naive/vulkan")->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_tiled)->Name("BM_matmul_tiled/vulkan")->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_splitk_long)->Name("BM_matmul_splitk/vulkan/64x64x16384")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_tiled_long)->Name("BM_matmul_tiled/vulkan/64x64x16384")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matvec)->Name("BM_matvec/vulkan")->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matvec_rowmajor)->Name("BM_matvec_rowmajor/vulkan")->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matvec_tiled)->Name("BM_matvec_tiled/vulkan")->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_gelu_bias)->Name("BM_gelu_bias/vulkan")->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, [] {}); }
