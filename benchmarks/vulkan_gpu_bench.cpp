// benchmarks/vulkan_gpu_bench.cpp — the GPU check's figures (scripts/gpu_check.sh runs it
// and turns its JSON into docs/bench/gpu-<device>.{json,md}), one row per figure of the
// GPU issue, each with the work it did so that the report can set it against the
// device's peak:
//   gpu/copy/f32                    b = a over 256 MiB: counter "bytes" (read + written)
//   gpu/gemm/<dtype>/<n>            n x n x n, dtype f32 / f16 / bf16 (both operands), "flops"
//   gpu/gemm/f16_tiled/4096         the f16 product forced onto the scalar tiled kernel
//   gpu/linear/<dtype>/512x<N>x4096 x [512, 4096] @ w^T, w [N, 4096] (N = 4096, 11008)
//   gpu/attention/<dtype>/prefill/<S>  B1 H32 S x S D128, causal: "flops" counts the
//                                   visible half (4 H S S D / 2)
//   gpu/attention/<dtype>/decode/<S>   B1 H32, one query over S keys: "bytes" of K and V
//   gpu/matvec/<format>/4096        [1, 4096] x w^T, w [4096, 4096] quantized int8 / int4 /
//                                   ternary, or f16: "bytes" of codes and scales
//   gpu/llama/<weights>/decode      the 1B-shape decoder (llama_bench.hpp), one token per
//                                   iteration: "bytes" of weights read per token
//   gpu/llama/<weights>/prefill512  a 512-token prompt in one forward step
// Rates come out as counters "TFLOP/s" and "GB/s". Each iteration records `inner`
// statements and then waits for the device, so that a short kernel is not timed as one
// submission's latency; products and decode attention cycle through enough distinct
// operands that they are read from memory, not from the last iteration's L2.
// KILN_GPU_BENCH_QUICK=1 shrinks every shape (a smoke run on lavapipe).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

#include "llama_bench.hpp"

namespace {

using gpu = kiln::vulkan;
using kiln::index_t;

kiln::context<gpu>* device() {
  static std::unique_ptr<kiln::context<gpu>> c;
  if (!c && kiln::vulkan::available()) c = std::make_unique<kiln::context<gpu>>();
  return c.get();
}

bool quick() {
  const char* q = std::getenv("KILN_GPU_BENCH_QUICK");
  return q && *q && std::string(q) != "0";
}

/// Shapes: the issue's, or an eighth of each dimension in a quick run.
index_t dim(index_t n) { return quick() ? std::max<index_t>(n / 8, 8) : n; }

/// Operand copies that together pass 256 MiB (4 in a quick run), at most 16.
int ring_for(double bytes_each) {
  if (quick()) return 2;
  return static_cast<int>(std::clamp(std::ceil(256.0 * 1024 * 1024 / std::max(bytes_each, 1.0)), 1.0, 16.0));
}

/// Statements per timed iteration: enough work that one submission's latency is noise.
int inner_for(double flops, double bytes) {
  const double est_us = flops / 100e6 + bytes / 2e6;  // ~100 TFLOP/s, ~2 TB/s, per microsecond
  return static_cast<int>(std::clamp(std::ceil(2000.0 / std::max(est_us, 1e-3)), 1.0, 50.0));
}

void counters(benchmark::State& s, double flops, double bytes, int inner) {
  using C = benchmark::Counter;
  if (flops > 0) {
    s.counters["flops"] = C(flops);
    s.counters["TFLOP/s"] = C(flops * inner / 1e12, C::kIsIterationInvariantRate);
  }
  if (bytes > 0) {
    s.counters["bytes"] = C(bytes);
    s.counters["GB/s"] = C(bytes * inner / 1e9, C::kIsIterationInvariantRate);
  }
  s.counters["inner"] = C(inner);
}

/// Runs f(i) once (compiling its kernel), then `inner` times per iteration, waiting once.
template <class F>
void timed(benchmark::State& s, kiln::context<gpu>& g, int inner, F&& f) {
  f(0);
  g.synchronize();
  for (auto _ : s) {
    for (int i = 0; i < inner; ++i) f(i);
    g.synchronize();
  }
}

template <class T>
std::string name_of() {
  return std::string(kiln::dtype_name_v<T>);
}

void BM_copy(benchmark::State& s) {
  auto* g = device();
  if (!g) return s.SkipWithError("no Vulkan device");
  const index_t n = quick() ? index_t(1) << 20 : index_t(64) << 20;  // 256 MiB of f32
  auto a = kiln::full(*g, {n}, 1.0f);
  auto b = kiln::empty<float>(*g, {n});
  const double bytes = 2.0 * 4.0 * double(n);
  const int inner = quick() ? 2 : 10;
  timed(s, *g, inner, [&](int) { b = a; });
  counters(s, 0, bytes, inner);
}

/// KILN_VULKAN_GEMM=variant for one benchmark (none: kiln's choice).
struct forced_gemm {
  explicit forced_gemm(const char* v) : set(v != nullptr) {
    if (set) ::setenv("KILN_VULKAN_GEMM", v, 1);
  }
  ~forced_gemm() {
    if (set) ::unsetenv("KILN_VULKAN_GEMM");
  }
  forced_gemm(const forced_gemm&) = delete;
  forced_gemm& operator=(const forced_gemm&) = delete;
  bool set;
};

/// y = a @ b^T: a [M, K], b [N, K] (nn.Linear's layout; square products too). Compute-bound
/// shapes: the operands staying in L2 between iterations is what a real step sees too.
template <class T>
void BM_product(benchmark::State& s, index_t M, index_t N, index_t K, const char* variant = nullptr) {
  auto* g = device();
  if (!g) return s.SkipWithError("no Vulkan device");
  const forced_gemm force(variant);
  const double flops = 2.0 * double(M) * double(N) * double(K);
  auto a = kiln::random<T>(*g, {M, K}, -1, 1, 1);
  auto w = kiln::random<T>(*g, {N, K}, -1, 1, 2);
  auto y = kiln::empty<T>(*g, {M, N});
  s.SetLabel(kiln::kernel_variant(kiln::matmul(a, kiln::transpose(w))));
  const int inner = inner_for(flops, 0);
  timed(s, *g, inner, [&](int) { y = kiln::matmul(a, kiln::transpose(w)); });
  counters(s, flops, 0, inner);
}

template <class T>
void BM_attention(benchmark::State& s, index_t S, bool decode) {
  auto* g = device();
  if (!g) return s.SkipWithError("no Vulkan device");
  const index_t H = quick() ? 4 : 32, D = 128, Sq = decode ? 1 : S;
  const double kv_bytes = 2.0 * double(sizeof(T)) * double(H) * double(S) * double(D);
  const int ring = decode ? ring_for(kv_bytes) : 1;
  auto q = kiln::random<T>(*g, {1, H, Sq, D}, -1, 1, 1);
  std::vector<kiln::tensor<T, gpu>> k, v;
  for (int r = 0; r < ring; ++r) {
    k.push_back(kiln::random<T>(*g, {1, H, S, D}, -1, 1, std::uint64_t(10 + 2 * r)));
    v.push_back(kiln::random<T>(*g, {1, H, S, D}, -1, 1, std::uint64_t(11 + 2 * r)));
  }
  auto y = kiln::empty<T>(*g, {1, H, Sq, D});
  kiln::attention_options o;
  o.causal = !decode;
  s.SetLabel(kiln::kernel_variant(kiln::attention(q, k[0], v[0], o)));
  const double flops = 4.0 * double(H) * double(Sq) * double(S) * double(D) * (decode ? 1.0 : 0.5);
  const int inner = decode ? inner_for(0, kv_bytes) : inner_for(flops, 0);
  timed(s, *g, inner, [&](int i) {
    const auto r = std::size_t(i % ring);
    y = kiln::attention(q, k[r], v[r], o);
  });
  counters(s, flops, decode ? kv_bytes : 0, inner);
}

template <class Format>
void BM_matvec(benchmark::State& s) {
  auto* g = device();
  if (!g) return s.SkipWithError("no Vulkan device");
  const index_t D = dim(4096);
  auto x = kiln::random<float>(*g, {1, D}, -1, 1, 1);
  std::vector<kiln::qtensor<Format, gpu>> w;
  {
    auto first = kiln::quantize<Format>(kiln::random<float>(*g, {D, D}, -0.05, 0.05, 2));
    const int ring = ring_for(double(first.bytes()));
    w.push_back(std::move(first));
    for (int r = 1; r < ring; ++r) w.push_back(kiln::quantize<Format>(kiln::random<float>(*g, {D, D}, -0.05, 0.05, std::uint64_t(2 + r))));
  }
  auto y = kiln::empty<float>(*g, {1, D});
  s.SetLabel(kiln::kernel_variant(kiln::linear(x, w[0])));
  const double bytes = double(w[0].bytes());
  const int inner = inner_for(0, bytes);
  timed(s, *g, inner, [&](int i) { y = kiln::linear(x, w[std::size_t(i) % w.size()]); });
  counters(s, 2.0 * double(D) * double(D), bytes, inner);
}

template <class W, kiln::llama::weight_quant Q>
void BM_llama(benchmark::State& s, bool decode) {
  auto* g = device();
  if (!g) return s.SkipWithError("no Vulkan device");
  const auto& m = llama_bench::cached<W, gpu, Q>(*g);
  if (decode) {
    llama_bench::decode<W, gpu, Q>(s, *g);
    counters(s, 0, double(m.weight_bytes_per_token()), 1);
  } else {
    const index_t tokens = quick() ? 64 : 512;
    llama_bench::prefill<W, gpu, Q>(s, *g, tokens);
    s.counters["tokens"] = benchmark::Counter(double(tokens));
  }
}

/// Every registered name, for the report to tell a figure cut off by a timeout.
std::string& registered() {
  static std::string names;
  return names;
}

void reg(const std::string& name, auto&& fn) {
  benchmark::RegisterBenchmark(name.c_str(), fn)->UseRealTime()->Unit(benchmark::kMillisecond);
  registered() += (registered().empty() ? "" : " ") + name;
}

template <class T>
void register_dtype() {
  const std::string t = name_of<T>();
  for (index_t n : {1024, 2048, 4096, 8192}) {
    reg("gpu/gemm/" + t + "/" + std::to_string(n), [n](benchmark::State& s) { BM_product<T>(s, dim(n), dim(n), dim(n)); });
  }
  for (index_t n : {4096, 11008}) {
    reg("gpu/linear/" + t + "/512x" + std::to_string(n) + "x4096",
        [n](benchmark::State& s) { BM_product<T>(s, dim(512), dim(n), dim(4096)); });
  }
}

void register_all() {
  if (auto* g = device()) {
    const auto& info = kiln::vulkan::device(*g);
    benchmark::AddCustomContext("kiln_device", info.name);
    benchmark::AddCustomContext("kiln_driver", info.driver_name + " " + info.driver_info);
    benchmark::AddCustomContext("kiln_api", info.api_version_string());
    benchmark::AddCustomContext("kiln_subgroup_size", std::to_string(info.subgroup_size));
    benchmark::AddCustomContext("kiln_cooperative_matrix", info.cooperative_matrix      ? "used"
                                                           : info.cooperative_matrix_claimed ? "claimed, not allowed"
                                                                                             : "no");
    std::string shapes;
    for (const auto& c : info.cooperative_matrix_shapes) shapes += (shapes.empty() ? "" : ", ") + c.label();
    benchmark::AddCustomContext("kiln_cooperative_matrix_shapes", shapes.empty() ? "none" : shapes);
    benchmark::AddCustomContext("kiln_quick", quick() ? "1" : "0");
  }
  // most telling first: a run cut off by its timeout loses the square products' tail
  reg("gpu/copy/f32", BM_copy);
  using kiln::llama::weight_quant;
  reg("gpu/llama/f16/decode", [](benchmark::State& s) { BM_llama<kiln::half, weight_quant::none>(s, true); });
  reg("gpu/llama/f16/prefill512", [](benchmark::State& s) { BM_llama<kiln::half, weight_quant::none>(s, false); });
  reg("gpu/llama/int8/decode", [](benchmark::State& s) { BM_llama<float, weight_quant::int8>(s, true); });
  reg("gpu/llama/int8/prefill512", [](benchmark::State& s) { BM_llama<float, weight_quant::int8>(s, false); });
  reg("gpu/llama/f32/prefill512", [](benchmark::State& s) { BM_llama<float, weight_quant::none>(s, false); });
  reg("gpu/matvec/int8/4096", BM_matvec<kiln::quant::int8>);
  reg("gpu/matvec/int4/4096", BM_matvec<kiln::quant::int4>);
  reg("gpu/matvec/ternary/4096", BM_matvec<kiln::quant::ternary>);
  for (index_t S : {2048, 4096, 8192}) {
    reg("gpu/attention/f16/prefill/" + std::to_string(S), [S](benchmark::State& s) { BM_attention<kiln::half>(s, dim(S), false); });
    reg("gpu/attention/f32/prefill/" + std::to_string(S), [S](benchmark::State& s) { BM_attention<float>(s, dim(S), false); });
    reg("gpu/attention/f16/decode/" + std::to_string(S), [S](benchmark::State& s) { BM_attention<kiln::half>(s, dim(S), true); });
    reg("gpu/attention/f32/decode/" + std::to_string(S), [S](benchmark::State& s) { BM_attention<float>(s, dim(S), true); });
  }
  register_dtype<kiln::half>();
  // the f16 product on the scalar tiled kernel, for the cooperative-matrix kernel's gain
  reg("gpu/gemm/f16_tiled/4096", [](benchmark::State& s) { BM_product<kiln::half>(s, dim(4096), dim(4096), dim(4096), "tiled"); });
  register_dtype<float>();
  register_dtype<kiln::bfloat16>();
  benchmark::AddCustomContext("kiln_benchmarks", registered());
}

}  // namespace

/// kiln_bench::run_main with this check's defaults after its own (later flags win, the
/// command line's last): 3 repetitions of at least 0.1 s after 0.1 s of warm-up, in order (a switch of model
/// rebuilds one of several GB).
int main(int argc, char** argv) {
  if (quick() && !std::getenv("KILN_LLAMA_BENCH_LAYERS")) ::setenv("KILN_LLAMA_BENCH_LAYERS", "1", 1);
  static char min_time[] = "--benchmark_min_time=0.1";
  static char repetitions[] = "--benchmark_repetitions=3";
  static char interleave[] = "--benchmark_enable_random_interleaving=false";
  static char warmup[] = "--benchmark_min_warmup_time=0.1";  // the GPU's clocks up before the first repetition
  std::vector<char*> args{argv[0], min_time, repetitions, interleave, warmup};
  args.insert(args.end(), argv + 1, argv + argc);
  return kiln_bench::run_main(static_cast<int>(args.size()), args.data(), register_all);
}
