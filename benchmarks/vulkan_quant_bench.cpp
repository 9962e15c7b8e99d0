// benchmarks/vulkan_quant_bench.cpp — products with quantized weights on Vulkan (lavapipe
// in CI) beside kiln's f32 product on the same device, sizes that finish in seconds:
//   BM_matvec/<format>/vulkan    y = kiln::linear(x, w), x [1, 4096], w [4096, 4096]
//                                (counter GB: weight bytes, codes and scales, per second)
//   BM_gemm/<format>/vulkan      x [64, 4096] (counter GFLOPs, 2 M N K)
//   BM_bitlinear/<arith>/vulkan  kiln::bitlinear(x, q_ternary) + bias, x [1, 4096]
// Formats: f32 (the weight read as the transpose of an nn.Linear weight), int8 (per row),
// int4 (group 32), ternary; the quantized ones twice, <format>/plain (integer
// multiply-adds) and <format>/dot (packed 4x8-bit integer dot products, on a device with
// shaderIntegerDotProduct), forced by KILN_VULKAN_QUANT (appended to any kernel it
// names); kiln itself takes the dot products where the device reports them accelerated.
// The label names the kernel that ran; each iteration waits for the device. Each variant
// is checked once against the f32 product with its own weight dequantized (relative RMS
// error below 2%).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

#include "bench_support.hpp"

namespace {

using gpu = kiln::vulkan;
using gtensor = kiln::tensor<float, gpu>;
namespace q = kiln::quant;
constexpr kiln::index_t D = 4096;

kiln::context<gpu>* device() {
  static std::unique_ptr<kiln::context<gpu>> c;
  if (!c && kiln::vulkan::available()) c = std::make_unique<kiln::context<gpu>>();
  return c.get();
}

enum class fmt { f32, int8, int4, ternary };
enum class arith { shape, plain, dot };  // shape: as kiln chooses (f32)

/// KILN_VULKAN_QUANT with "plain" / "dot" appended for one benchmark, restored after.
class force_arith {
 public:
  explicit force_arith(arith a) {
    if (a == arith::shape) return;
    const char* old = std::getenv("KILN_VULKAN_QUANT");
    if (old) old_ = old;
    const std::string v = (old && *old ? std::string(old) + " " : std::string()) + (a == arith::dot ? "dot" : "plain");
    ::setenv("KILN_VULKAN_QUANT", v.c_str(), 1);
    set_ = true;
  }
  ~force_arith() {
    if (!set_) return;
    if (old_) ::setenv("KILN_VULKAN_QUANT", old_->c_str(), 1);
    else ::unsetenv("KILN_VULKAN_QUANT");
  }
  force_arith(const force_arith&) = delete;
  force_arith& operator=(const force_arith&) = delete;

 private:
  std::optional<std::string> old_;
  bool set_ = false;
};

double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

template <class Q>
void time_product(benchmark::State& state, kiln::context<gpu>& g, const gtensor& x, const gtensor& w, const Q& qw,
                  bool bitlinear = false) {
  gtensor y = kiln::empty<float>(g, {x.shape()[0], D});
  const gtensor bias = kiln::random<float>(g, {D}, -1, 1, 9);
  auto run = [&] {
    if constexpr (std::is_same_v<Q, gtensor>) {
      y = kiln::linear(x, qw);
    } else if constexpr (std::is_same_v<Q, kiln::qtensor<q::ternary, gpu>>) {
      if (bitlinear) y = kiln::bitlinear(x, qw, bias);
      else y = kiln::linear(x, qw);
    } else {
      y = kiln::linear(x, qw);
    }
  };
  run();  // compiles the kernel before timing
  if constexpr (!std::is_same_v<Q, gtensor>) {
    state.SetLabel(kiln::kernel_variant(kiln::linear(x, qw)));
    if (!bitlinear) {
      gtensor wd, ref;
      wd = kiln::dequantize(qw);
      ref = kiln::linear(x, wd);
      const double e = rel_rms(y.to_host(), ref.to_host());
      if (!(e < 0.02)) return state.SkipWithError(("relative RMS error " + std::to_string(e)).c_str());
    }
  } else {
    state.SetLabel(kiln::kernel_variant(kiln::linear(x, qw)));
  }
  double bytes = double(D * D) * 4.0;
  if constexpr (!std::is_same_v<Q, gtensor>) bytes = double(qw.bytes());
  g.synchronize();
  for (auto _ : state) {
    run();
    g.synchronize();
  }
  (void)w;
  kiln_bench::set_bytes(state, bytes);
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * double(x.shape()[0]) * D * D * double(state.iterations()) / 1e9,
                                                benchmark::Counter::kIsRate);
}

void BM_product(benchmark::State& state, fmt f, arith a, kiln::index_t m, bool bitlinear) {
  auto* g = device();
  if (!g) return state.SkipWithError("no Vulkan device");
  if (a == arith::dot && !kiln::vulkan::device(*g).integer_dot_product) {
    return state.SkipWithError("the device has no shaderIntegerDotProduct");
  }
  const force_arith force(a);
  const gtensor x = kiln::random<float>(*g, {m, D}, -1, 1, 1);
  const gtensor w = kiln::random<float>(*g, {D, D}, -0.05, 0.05, 2);
  switch (f) {
    case fmt::f32: time_product(state, *g, x, w, w); break;
    case fmt::int8: time_product(state, *g, x, w, kiln::quantize<q::int8>(w)); break;
    case fmt::int4: time_product(state, *g, x, w, kiln::quantize<q::int4>(w)); break;
    case fmt::ternary: time_product(state, *g, x, w, kiln::quantize<q::ternary>(w), bitlinear); break;
  }
}

void register_all() {
  const std::pair<fmt, const char*> fs[] = {{fmt::f32, "f32"}, {fmt::int8, "int8"}, {fmt::int4, "int4"}, {fmt::ternary, "ternary"}};
  const std::pair<arith, const char*> as[] = {{arith::plain, "/plain"}, {arith::dot, "/dot"}};
  for (const auto& [f, n] : fs) {
    for (const auto& [a, an] : as) {
      const arith use = f == fmt::f32 ? arith::shape : a;
      const std::string name = std::string(n) + (f == fmt::f32 ? "" : an);
      kiln_bench::configure(benchmark::RegisterBenchmark(("BM_matvec/" + name + "/vulkan").c_str(), BM_product, f, use,
                                                         kiln::index_t(1), false))
          ->Unit(benchmark::kMillisecond);
      kiln_bench::configure(benchmark::RegisterBenchmark(("BM_gemm/" + name + "/vulkan").c_str(), BM_product, f, use,
                                                         kiln::index_t(64), false))
          ->Unit(benchmark::kMillisecond);
      if (f == fmt::f32) break;
    }
  }
  for (const auto& [a, an] : as) {
    kiln_bench::configure(benchmark::RegisterBenchmark((std::string("BM_bitlinear") + an + "/vulkan").c_str(), BM_product,
                                                       fmt::ternary, a, kiln::index_t(1), true))
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, register_all); }
