// examples/tour.cpp — a tour of kiln on the CPU backend: fused expressions, broadcasting,
// views, a custom fused op, and mixed precision; each result is checked against Eigen,
// and a small table compares kiln's one-pass loops with Eigen and with an unfused run.
#include <kiln/kiln.hpp>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>  // erf, for the GELU oracle

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace {

// A custom primitive: one struct with a SIMD/scalar body and a GLSL body.
struct softplus_op {
  static constexpr std::string_view name = "softplus";
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& v) {
    using std::exp, std::log1p;  // batches resolve to xsimd by ADL
    return log1p(exp(v));
  }
  static constexpr std::string_view glsl = "log(1.0 + exp({0}))";
};

template <kiln::expression E>
auto my_softplus(E&& e) {
  return kiln::map<softplus_op>(std::forward<E>(e));
}

using Arr = Eigen::Array<float, Eigen::Dynamic, 1>;
using ArrD = Eigen::Array<double, Eigen::Dynamic, 1>;

// |got - want| / (1 + |want|): relative for large values, absolute near zero (where
// float rounding of the inputs, e.g. a*b + c cancelling, dominates any relative measure).
double max_rel_err(const std::vector<float>& got, const ArrD& want) {
  double worst = 0;
  for (Eigen::Index i = 0; i < want.size(); ++i) {
    const double d = std::abs(double(got[std::size_t(i)]) - want[i]) / (1.0 + std::abs(want[i]));
    worst = std::max(worst, d);
  }
  return worst;
}

template <class F>
double best_ms(F&& f, int reps = 7) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

int failures = 0;
void check(const char* what, double err, double tol) {
  const bool ok = err <= tol;
  failures += !ok;
  std::printf("  %-44s max err %.2e  %s\n", what, err, ok ? "ok" : "MISMATCH");
}

}  // namespace

int main() {
  const kiln::index_t n = 1 << 22;  // 4M floats per operand
  kiln::context<kiln::cpu<>> ctx;
  std::printf("kiln tour — CPU backend, %d threads, %zu-lane SIMD\n\n", ctx.state()->num_threads,
              kiln::detail::simd::lanes<kiln::cpu<>::arch>);

  auto a = kiln::random<float>(ctx, {n}, -3.0, 3.0, 1);
  auto b = kiln::random<float>(ctx, {n}, -3.0, 3.0, 2);
  auto c = kiln::random<float>(ctx, {n}, -3.0, 3.0, 3);
  auto y = kiln::empty<float>(ctx, {n});
  const auto ha = a.to_host(), hb = b.to_host(), hc = c.to_host();
  const Eigen::Map<const Arr> ea(ha.data(), n), eb(hb.data(), n), ec(hc.data(), n);

  std::printf("1. Fused expressions, checked against Eigen (float64 oracle)\n");
  const auto k0 = ctx.kernels_launched();
  y = kiln::gelu(a * b + c);  // ONE pass over a, b, c and y
  const std::uint64_t kernels = ctx.kernels_launched() - k0;
  {
    const ArrD x = ea.cast<double>() * eb.cast<double>() + ec.cast<double>();
    check("y = gelu(a * b + c)", max_rel_err(y.to_host(), 0.5 * x * (1.0 + (x / std::sqrt(2.0)).erf())), 1e-5);
  }
  std::printf("  (that statement ran %llu kernel)\n", static_cast<unsigned long long>(kernels));
  y = kiln::silu(a) * b;
  check("y = silu(a) * b", max_rel_err(y.to_host(), ea.cast<double>() / (1.0 + (-ea.cast<double>()).exp()) * eb.cast<double>()), 1e-5);
  y = kiln::where(a > 0.0f, a, 0.1f * a) + kiln::clamp(b, -1.0f, 1.0f);
  {
    const ArrD ad = ea.cast<double>();
    const ArrD want = (ad > 0).select(ad, 0.1 * ad) + eb.cast<double>().max(-1.0).min(1.0);
    check("y = where(a > 0, a, 0.1a) + clamp(b, -1, 1)", max_rel_err(y.to_host(), want), 1e-6);
  }
  y = my_softplus(a * 2.0f) - 1.0f;  // a user-defined op fuses the same way
  check("y = softplus(2a) - 1 (custom op)", max_rel_err(y.to_host(), (1.0 + (2.0 * ea.cast<double>()).exp()).log() - 1.0), 1e-5);

  std::printf("\n2. Broadcasting and views (no copies)\n");
  const kiln::index_t rows = 1024, cols = 4096;
  auto m = kiln::reshape(a, {rows, cols});
  auto bias = kiln::random<float>(ctx, {cols}, -1.0, 1.0, 4);
  auto out = kiln::empty<float>(ctx, {rows, cols});
  out = kiln::relu(m + bias);  // bias {cols} broadcasts over rows
  {
    const auto hbias = bias.to_host();
    ArrD want(rows * cols);
    for (kiln::index_t r = 0; r < rows; ++r)
      for (kiln::index_t q = 0; q < cols; ++q)
        want[r * cols + q] = std::max(0.0, double(ha[std::size_t(r * cols + q)]) + hbias[std::size_t(q)]);
    check("out = relu(m + bias)   [1024x4096] + [4096]", max_rel_err(out.to_host(), want), 1e-6);
  }
  auto sq = kiln::slice(kiln::slice(m, 0, 0, 64), 1, 0, 64);  // 64x64 corner view
  auto t = kiln::empty<float>(ctx, {64, 64});
  t = kiln::transpose(sq) * 2.0f;
  {
    ArrD want(64 * 64);
    for (int r = 0; r < 64; ++r)
      for (int q = 0; q < 64; ++q) want[r * 64 + q] = 2.0 * ha[std::size_t(q * cols + r)];
    check("t = transpose(m[:64, :64]) * 2", max_rel_err(t.to_host(), want), 1e-7);
  }

  {
    // a row op with a fused prologue: softmax of each scaled, biased row (one kernel)
    out = kiln::softmax(m * 0.5f + bias);
    const auto hbias = bias.to_host();
    ArrD want(rows * cols);
    for (kiln::index_t r = 0; r < rows; ++r) {
      double mx = -INFINITY, sum = 0;
      for (kiln::index_t q = 0; q < cols; ++q) mx = std::max(mx, 0.5 * ha[std::size_t(r * cols + q)] + hbias[std::size_t(q)]);
      for (kiln::index_t q = 0; q < cols; ++q) sum += std::exp(0.5 * ha[std::size_t(r * cols + q)] + hbias[std::size_t(q)] - mx);
      for (kiln::index_t q = 0; q < cols; ++q)
        want[r * cols + q] = std::exp(0.5 * ha[std::size_t(r * cols + q)] + hbias[std::size_t(q)] - mx) / sum;
    }
    check("out = softmax(m * 0.5 + bias)  (one kernel)", max_rel_err(out.to_host(), want), 1e-4);
    auto norms = kiln::empty<float>(ctx, {rows});
    norms = kiln::sqrt(kiln::sum(kiln::square(m), -1));  // row norms: one kernel
    ArrD wn(rows);
    for (kiln::index_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (kiln::index_t q = 0; q < cols; ++q) acc += double(ha[std::size_t(r * cols + q)]) * ha[std::size_t(r * cols + q)];
      wn[r] = std::sqrt(acc);
    }
    check("norms = sqrt(sum(square(m), -1))", max_rel_err(norms.to_host(), wn), 1e-5);

    // a linear layer with its activation: x @ w^T + bias, then gelu, as one kernel (the
    // weight [256, 4096] is read in place, as PyTorch stores it)
    auto x = kiln::slice(m, 0, 0, 64);
    auto w = kiln::random<float>(ctx, {256, cols}, -0.05, 0.05, 5);
    auto b2 = kiln::random<float>(ctx, {256}, -1.0, 1.0, 6);
    auto act = kiln::empty<float>(ctx, {64, 256});
    act = kiln::gelu(kiln::linear(x, w, b2));
    const auto hw = w.to_host(), hb2 = b2.to_host();
    ArrD wa(64 * 256);
    for (kiln::index_t r = 0; r < 64; ++r) {
      for (kiln::index_t q = 0; q < 256; ++q) {
        double acc = hb2[std::size_t(q)];
        for (kiln::index_t k = 0; k < cols; ++k) acc += double(ha[std::size_t(r * cols + k)]) * hw[std::size_t(q * cols + k)];
        wa[r * 256 + q] = 0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0)));
      }
    }
    check("act = gelu(linear(x, w, b))  (one kernel)", max_rel_err(act.to_host(), wa), 1e-4);
  }

  std::printf("\n3. Mixed precision: f16 storage, f32 arithmetic\n");
  auto h = kiln::empty<kiln::half>(ctx, {n});
  h = kiln::cast<kiln::half>(a);
  y = kiln::cast<float>(h) * 0.5f;  // half in, float out, one pass
  {
    ArrD want(n);
    for (kiln::index_t i = 0; i < n; ++i) want[i] = 0.5 * float(kiln::half(ha[std::size_t(i)]));
    check("y = float(half(a)) * 0.5", max_rel_err(y.to_host(), want), 1e-7);
  }

  std::printf("\n4. Timing, %lld floats per operand (best of 7)\n", static_cast<long long>(n));
  std::printf("  %-28s %10s %10s %14s\n", "expression", "kiln ms", "Eigen ms", "unfused ms");
  {
    Arr ey(n);
    auto t1 = kiln::empty<float>(ctx, {n}), t2 = kiln::empty<float>(ctx, {n});
    const double k = best_ms([&] { y = kiln::gelu(a * b + c); });
    const double e = best_ms([&] { ey = 0.5f * (ea * eb + ec) * (1.0f + ((ea * eb + ec) * 0.70710678f).erf()); });
    const double u = best_ms([&] {  // one primitive op per pass, materialising each intermediate
      t1 = a * b;
      t1 = t1 + c;
      t2 = t1 * 0.70710678f;
      t2 = kiln::erf(t2);
      t2 = t2 + 1.0f;
      t2 = t2 * t1;
      y = t2 * 0.5f;
    });
    std::printf("  %-28s %10.2f %10.2f %14.2f\n", "gelu(a * b + c)", k, e, u);
    const double k2 = best_ms([&] { y = kiln::silu(a) * b; });
    const double e2 = best_ms([&] { ey = ea / (1.0f + (-ea).exp()) * eb; });
    const double u2 = best_ms([&] {
      t1 = -a;
      t1 = kiln::exp(t1);
      t1 = t1 + 1.0f;
      t1 = a / t1;
      y = t1 * b;
    });
    std::printf("  %-28s %10.2f %10.2f %14.2f\n", "silu(a) * b", k2, e2, u2);
  }
  std::printf("\n%s\n", failures ? "SOME CHECKS FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
