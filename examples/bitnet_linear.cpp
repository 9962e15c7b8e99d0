// examples/bitnet_linear.cpp — a linear layer with quantized weights: quantizes a random
// [N, K] layer to int8, int4 and BitNet b1.58 ternary, runs the float and the quantized
// forward passes on a batch of activations, and prints each format's size, its weight
// error (kiln::quantization_error), the output's error against the float layer and
// against the layer its own codes stand for, and the time per call.
//
//   bitnet_linear [--backend cpu|vulkan] [--n 4096] [--k 4096] [--m 1] [--iters 20]
//
// The same template runs on both backends; the weights stay on the device throughout.
#include <kiln/kiln.hpp>
#if defined(KILN_EXAMPLE_VULKAN)
#include <kiln/vulkan.hpp>
#endif

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct args {
  std::string backend = "cpu";
  long n = 4096, k = 4096, m = 1, iters = 20;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "bitnet_linear: " << why << "\n"
            << "usage: bitnet_linear [--backend cpu|vulkan] [--n 4096] [--k 4096] [--m 1] [--iters 20]\n";
  std::exit(2);
}

args parse(int argc, char** argv) {
  args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (i + 1 >= argc) usage("missing value after " + f);
    const std::string v = argv[++i];
    const auto number = [&] {
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (*end || x < 1 || x > (1L << 20)) usage(f + " needs a count between 1 and 2^20, got '" + v + "'");
      return x;
    };
    if (f == "--backend") a.backend = v;
    else if (f == "--n") a.n = number();
    else if (f == "--k") a.k = number();
    else if (f == "--m") a.m = number();
    else if (f == "--iters") a.iters = number();
    else usage("unknown option " + f);
  }
  if (a.k % 128) usage("--k must be a multiple of 128 (the int4 and int8 groups used here)");
  return a;
}

/// Relative RMS difference of a from b.
double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

/// Milliseconds per call of f (after one warm-up call), waiting for the device.
template <class B, class F>
double time_ms(const kiln::context<B>& ctx, long iters, F&& f) {
  f();
  ctx.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < iters; ++i) f();
  ctx.synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / double(iters);
}

template <kiln::backend B>
void run(const kiln::context<B>& ctx, const args& a) {
  // A layer with BitNet-like statistics: small weights, activations of unit size.
  const auto w = kiln::random<float>(ctx, {a.n, a.k}, -0.05, 0.05, 1);
  const auto x = kiln::random<float>(ctx, {a.m, a.k}, -1.0, 1.0, 2);
  kiln::tensor<float, B> y_ref, y, wd, y_own;
  const double f32_ms = time_ms(ctx, a.iters, [&] { y_ref = kiln::linear(x, w); });
  const auto ref = y_ref.to_host();
  std::printf("bitnet_linear on %s: x [%ld, %ld] times w [%ld, %ld]^T\n", ctx.device_name().c_str(), a.m, a.k, a.n, a.k);
  std::printf("%-22s %9s %12s %12s %12s %10s %8s\n", "format", "MiB", "w max err", "w rms err", "y vs f32", "y vs own", "ms");
  std::printf("%-22s %9.2f %12s %12s %12s %10s %8.3f\n", "f32", double(a.n * a.k * 4) / (1 << 20), "-", "-", "-", "-", f32_ms);
  const auto report = [&](const char* name, const auto& q, auto&& forward) {
    const kiln::quant_error_stats e = kiln::quantization_error(w, q);
    const double ms = time_ms(ctx, a.iters, forward);
    wd = kiln::dequantize(q);
    y_own = kiln::linear(x, wd);  // the float layer the codes stand for
    const auto got = y.to_host();
    std::printf("%-22s %9.2f %12.3g %12.3g %12.4f %10.4f %8.3f\n", name, double(q.bytes()) / (1 << 20), e.max_abs, e.rms,
                rel_rms(got, ref), rel_rms(got, y_own.to_host()), ms);
  };
  const auto q8 = kiln::quantize<kiln::quant::int8>(w);
  report("int8 (per row)", q8, [&] { y = kiln::linear(x, q8); });
  const auto q8g = kiln::quantize<kiln::quant::int8>(w, {.group = 128});
  report("int8 (group 128)", q8g, [&] { y = kiln::linear(x, q8g); });
  const auto q4 = kiln::quantize<kiln::quant::int4>(w, {.group = 32});
  report("int4 (group 32)", q4, [&] { y = kiln::linear(x, q4); });
  const auto qt = kiln::quantize<kiln::quant::ternary>(w);
  report("ternary (bitlinear)", qt, [&] { y = kiln::bitlinear(x, qt); });
  std::printf("(y vs f32: the quantized layer against the float one; y vs own: against the float layer its codes\n"
              " stand for, i.e. the error of the int8 activations alone. Ternary codes on random weights are a\n"
              " different layer: BitNet trains for them.)\n");
}

}  // namespace

int main(int argc, char** argv) {
  const args a = parse(argc, argv);
  try {
    if (a.backend == "cpu") {
      run(kiln::context<kiln::cpu<>>{}, a);
      return 0;
    }
    if (a.backend == "vulkan") {
#if defined(KILN_EXAMPLE_VULKAN)
      run(kiln::context<kiln::vulkan>{}, a);
      return 0;
#else
      usage("this build has no Vulkan backend (configure with -DKILN_VULKAN=ON)");
#endif
    }
    usage("--backend must be cpu or vulkan, got " + a.backend);
  } catch (const kiln::error& e) {
    std::cerr << "bitnet_linear: " << e.what() << "\n";
    return 1;
  }
}
