// examples/profile.cpp — where the time of a small MLP forward pass goes: runs a few
// passes of a two-layer MLP block (linear + gelu, linear + residual, layer norm, softmax)
// on a profiling context and prints the kernel table (kiln::profile_table) and the memory
// and kernel-cache report (kiln::memory_report).
//
//   profile [--backend cpu|vulkan] [--batch 64] [--width 512] [--iters 10] [--trace path.json]
//
// KILN_TRACE=path.json (or --trace) writes a Chrome trace of the run: open it in
// https://ui.perfetto.dev or chrome://tracing.
#include <kiln/kiln.hpp>
#if defined(KILN_EXAMPLE_VULKAN)
#include <kiln/vulkan.hpp>
#endif

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

namespace {

struct args {
  std::string backend = "cpu";
  long batch = 64, width = 512, iters = 10;
  std::string trace;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "profile: " << why << "\n"
            << "usage: profile [--backend cpu|vulkan] [--batch 64] [--width 512] [--iters 10] [--trace path.json]\n";
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
      if (*end || x < 1 || x > (1L << 16)) usage(f + " needs a count between 1 and 65536, got '" + v + "'");
      return x;
    };
    if (f == "--backend") a.backend = v;
    else if (f == "--batch") a.batch = number();
    else if (f == "--width") a.width = number();
    else if (f == "--iters") a.iters = number();
    else if (f == "--trace") a.trace = v;
    else usage("unknown option " + f);
  }
  return a;
}

/// The MLP block, written once for every backend: x [batch, width] -> probabilities.
template <kiln::backend B>
void run(kiln::context<B> ctx, const args& a) {
  const kiln::index_t n = a.batch, d = a.width, h = 4 * a.width;
  auto x = kiln::random<float>(ctx, {n, d}, -1, 1, 1);
  auto w1 = kiln::random<float>(ctx, {d, h}, -0.05, 0.05, 2);
  auto b1 = kiln::random<float>(ctx, {h}, -0.1, 0.1, 3);
  auto w2 = kiln::random<float>(ctx, {h, d}, -0.05, 0.05, 4);
  auto b2 = kiln::random<float>(ctx, {d}, -0.1, 0.1, 5);
  auto gamma = kiln::full(ctx, {d}, 1.0f);
  auto beta = kiln::zeros<float>(ctx, {d});
  auto hidden = kiln::empty<float>(ctx, {n, h});
  auto y = kiln::empty<float>(ctx, {n, d});
  auto p = kiln::empty<float>(ctx, {n, d});

  auto pass = [&] {
    hidden = kiln::gelu(kiln::matmul(x, w1) + b1);   // matmul + bias + gelu: one kernel
    y = kiln::matmul(hidden, w2) + b2;                // matmul + bias: one kernel
    y = kiln::layer_norm(y + x, gamma, beta);         // residual fused in as a prologue
    p = kiln::softmax(y * 2.0f);                      // scale fused in as a prologue
  };
  pass();  // first use: kernels compiled (Vulkan) and memory touched, not profiled
  ctx.synchronize();
  ctx.set_profiling(true);
  ctx.clear_profile();
  for (long i = 0; i < a.iters; ++i) pass();
  const auto out = p.to_host();  // waits for the last pass

  double row = 0;
  for (kiln::index_t j = 0; j < d; ++j) row += out[static_cast<std::size_t>(j)];
  std::printf("MLP block [%ld, %ld] -> [%ld, %ld] -> [%ld, %ld] on %s, %ld passes; softmax row 0 sums to %.6f\n\n",
              a.batch, a.width, a.batch, 4 * a.width, a.batch, a.width, ctx.device_name().c_str(), a.iters, row);
  std::cout << kiln::profile_table(ctx) << "\n" << kiln::memory_report(ctx);
  if (!a.trace.empty()) {
    kiln::write_trace(ctx, a.trace);
    std::printf("trace written to %s\n", a.trace.c_str());
  } else if (const char* t = std::getenv("KILN_TRACE"); t && *t) {
    std::printf("trace: %s (written when the context closes)\n", t);
  }
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
    std::cerr << "profile: " << e.what() << "\n";
    return 1;
  }
}
