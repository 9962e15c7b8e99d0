// benchmarks/vulkan_attention_bench.cpp — kiln::attention on Vulkan (lavapipe in CI) against
// kiln's own materialised composition on the same device, each label naming the kernel
// that ran (kiln::kernel_variant):
//   BM_attention_flash/vulkan/<S>/<H>/<D>  B=1, H heads of D, Sq = Skv = S, causal, f32:
//                                          one flash kernel (Sq x Skv scores never stored),
//                                          the variant chosen by shape, or the one that
//                                          KILN_VULKAN_ATTENTION names when it is set (e.g.
//                                          flash_slices:4x32 to try a tile)
//   BM_attention_flash_slices/vulkan/<S>/<H>/<D> the same on flash_slices (forced: each row spread
//                                          over a subgroup's invocations, for GPUs)
//   BM_attention_materialised/vulkan/<S>/<H>/<D> the same as s = (q k^T) * scale + causal mask,
//                                          p = softmax(s), y = p v: two matmuls around an
//                                          S x S softmax (three statements)
//   BM_attention_decode/vulkan/<Skv>/<H>   B=1, D=128, Sq = 1 (decoding), H heads: the
//                                          variant chosen by shape (split-KV, 2 dispatches,
//                                          when the rows are too few to fill the device)
//   BM_attention_decode_single/vulkan/<Skv>/<H> the same on the one-workgroup-per-row
//                                          decode kernel (KILN_VULKAN_ATTENTION=decode)
// GFLOP/s: 4 * H * Sq * Skv * D per iteration (halved for causal: the visible half);
// decode also GB/s of K and V read. Each iteration waits for the device.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

#include "bench_support.hpp"

namespace {

using gpu_tensor = kiln::tensor<float, kiln::vulkan>;
using kiln::index_t;

kiln::context<kiln::vulkan>* gpu() {
  static std::unique_ptr<kiln::context<kiln::vulkan>> c;
  if (!c && kiln::vulkan::available()) c = std::make_unique<kiln::context<kiln::vulkan>>();
  return c.get();
}

/// KILN_VULKAN_ATTENTION=variant for the benchmark's duration (none: the caller's setting).
struct forced_variant {
  explicit forced_variant(const char* v) : set(v != nullptr) {
    if (set) setenv("KILN_VULKAN_ATTENTION", v, 1);
  }
  ~forced_variant() {
    if (set) unsetenv("KILN_VULKAN_ATTENTION");
  }
  bool set;
};

constexpr index_t decode_d = 128;  // decoding head dim

void flops(benchmark::State& state, double h, double sq, double skv, bool causal, index_t d = decode_d) {
  const double f = 4.0 * h * sq * skv * double(d) * (causal ? 0.5 : 1.0);
  state.counters["GFLOP/s"] = benchmark::Counter(f, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void flash(benchmark::State& state, const char* variant) {
  auto* g = gpu();
  if (!g) return state.SkipWithError("no Vulkan device");
  forced_variant force(variant);
  const index_t S = state.range(0), H = state.range(1), D = state.range(2);
  gpu_tensor q = kiln::random<float>(*g, {1, H, S, D}, -1, 1, 1);
  gpu_tensor k = kiln::random<float>(*g, {1, H, S, D}, -1, 1, 2);
  gpu_tensor v = kiln::random<float>(*g, {1, H, S, D}, -1, 1, 3);
  gpu_tensor y = kiln::empty<float>(*g, {1, H, S, D});
  kiln::attention_options o;
  o.causal = true;
  state.SetLabel(kiln::kernel_variant(kiln::attention(q, k, v, o)));
  y = kiln::attention(q, k, v, o);  // compile before timing
  g->synchronize();
  for (auto _ : state) {
    y = kiln::attention(q, k, v, o);
    g->synchronize();
  }
  flops(state, double(H), double(S), double(S), true, D);
}

void BM_attention_flash(benchmark::State& s) { flash(s, nullptr); }
void BM_attention_flash_slices(benchmark::State& s) { flash(s, "flash_slices"); }

void BM_attention_materialised(benchmark::State& state) {
  auto* g = gpu();
  if (!g) return state.SkipWithError("no Vulkan device");
  const index_t S = state.range(0), H = state.range(1), D = state.range(2);
  gpu_tensor q = kiln::random<float>(*g, {1, H, S, D}, -1, 1, 1);
  gpu_tensor k = kiln::random<float>(*g, {1, H, S, D}, -1, 1, 2);
  gpu_tensor v = kiln::random<float>(*g, {1, H, S, D}, -1, 1, 3);
  std::vector<float> mh(static_cast<std::size_t>(S * S), 0.0f);
  for (index_t i = 0; i < S; ++i)
    for (index_t j = i + 1; j < S; ++j) mh[static_cast<std::size_t>(i * S + j)] = -std::numeric_limits<float>::infinity();
  gpu_tensor mask = kiln::from_host(*g, {S, S}, std::span<const float>(mh));
  gpu_tensor s = kiln::empty<float>(*g, {1, H, S, S});
  gpu_tensor p = kiln::empty<float>(*g, {1, H, S, S});
  gpu_tensor y = kiln::empty<float>(*g, {1, H, S, D});
  const float scale = 1.0f / std::sqrt(float(D));
  auto run = [&] {
    s = kiln::matmul(q, kiln::transpose(k, 2, 3)) * scale + mask;
    p = kiln::softmax(s);
    y = kiln::matmul(p, v);
  };
  state.SetLabel(kiln::kernel_variant(kiln::matmul(q, kiln::transpose(k, 2, 3))) + ", " +
                 kiln::kernel_variant(kiln::softmax(s)) + ", " + kiln::kernel_variant(kiln::matmul(p, v)));
  run();
  g->synchronize();
  for (auto _ : state) {
    run();
    g->synchronize();
  }
  flops(state, double(H), double(S), double(S), true, D);
}

void decode(benchmark::State& state, const char* variant) {
  auto* g = gpu();
  if (!g) return state.SkipWithError("no Vulkan device");
  forced_variant force(variant);
  const index_t Skv = state.range(0), Hd = state.range(1);
  gpu_tensor q = kiln::random<float>(*g, {1, Hd, 1, decode_d}, -1, 1, 1);
  gpu_tensor k = kiln::random<float>(*g, {1, Hd, Skv, decode_d}, -1, 1, 2);
  gpu_tensor v = kiln::random<float>(*g, {1, Hd, Skv, decode_d}, -1, 1, 3);
  gpu_tensor y = kiln::empty<float>(*g, {1, Hd, 1, decode_d});
  state.SetLabel(kiln::kernel_variant(kiln::attention(q, k, v)));
  y = kiln::attention(q, k, v);
  g->synchronize();
  for (auto _ : state) {
    y = kiln::attention(q, k, v);
    g->synchronize();
  }
  flops(state, double(Hd), 1.0, double(Skv), false);
  state.counters["GB/s"] = benchmark::Counter(2.0 * 4.0 * double(Hd) * double(Skv) * double(decode_d),
                                              benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void BM_attention_decode(benchmark::State& s) { decode(s, nullptr); }
void BM_attention_decode_single(benchmark::State& s) { decode(s, "decode"); }

}  // namespace

BENCHMARK(BM_attention_flash)->Name("BM_attention_flash/vulkan")->Args({512, 4, 128})->Args({2048, 4, 128})->Args({2048, 32, 128})->Args({2048, 32, 64})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_flash_slices)->Name("BM_attention_flash_slices/vulkan")->Args({512, 4, 128})->Args({2048, 4, 128})->Args({2048, 32, 128})->Args({2048, 32, 64})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_materialised)->Name("BM_attention_materialised/vulkan")->Args({512, 4, 128})->Args({2048, 4, 128})->Args({2048, 32, 128})->Args({2048, 32, 64})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_decode)->Name("BM_attention_decode/vulkan")->Args({4096, 8})->Args({16384, 8})->Args({16384, 1})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_decode_single)->Name("BM_attention_decode_single/vulkan")->Args({4096, 8})->Args({16384, 8})->Args({16384, 1})->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, [] {}); }
