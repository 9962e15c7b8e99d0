// tests/ops/quant/quant_test.cpp — quantized weights on every backend against a
// straightforward reference written here from the formulas of ops/quant/scheme.hpp and
// ops/quant/qmatmul.hpp: codes and scales bit-exact (ternary's gamma, a float mean, to a
// few ulp, and its codes exact given the gamma held), ties at .5, all-zero rows and
// groups, padding, NaN/Inf weights, bad groups; dequantize (fused, one kernel);
// quantized products (exact int32 sums on integer data, a tolerance derived from the
// scales otherwise), the epilogue and prologue fused, f16 activations, NaN rows, errors;
// and on the CPU every micro-kernel path this build has against plain integer loops, and
// the prefill products (column panels where the build has AVX-512 VNNI) and the decode
// products (matvec.hpp's kernel, ditto) on odd shapes.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backends.hpp"
#include "checks.hpp"
#include "random.hpp"

using namespace kiln_test;
namespace q = kiln::quant;

template <class B>
class quant_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(quant_test, backend_types);

namespace {

/// Round half to even, written out.
double rne(double v) {
  const double f = std::floor(v);
  const double d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return std::fmod(f, 2.0) == 0.0 ? f : f + 1;
}

template <class S>
struct ref_q {
  std::vector<int> codes;     // signed, [N, K]
  std::vector<float> scales;  // [N, G] or [1]
  std::int64_t group = 0, groups = 1;
  bool per_tensor = false;
};

/// The reference quantizer. For ternary the gamma is taken from `gamma` (the one the
/// qtensor holds: a float mean whose last bits depend on the summation order; it is
/// checked separately against the double mean).
template <class S>
ref_q<S> ref_quantize(const std::vector<float>& w, std::int64_t N, std::int64_t K, kiln::quant_options o,
                      const std::vector<float>& gamma = {}) {
  ref_q<S> r;
  r.codes.assign(w.size(), 0);
  if constexpr (std::is_same_v<S, q::ternary>) {
    r.per_tensor = !o.per_row;
    r.group = K;
    r.scales = gamma;
    for (std::int64_t n = 0; n < N; ++n) {
      const float gm = gamma[r.per_tensor ? 0 : n];
      const float inv = gm + o.eps > 0 ? 1.0f / (gm + o.eps) : 0.0f;
      for (std::int64_t k = 0; k < K; ++k) {
        const double v = rne(double(w[n * K + k] * inv));
        r.codes[n * K + k] = int(std::max(-1.0, std::min(1.0, v)));
      }
    }
  } else {
    const int g = o.group < 0 ? S::default_group : o.group;
    r.group = g == 0 ? K : g;
    r.groups = g == 0 ? 1 : K / g;
    r.scales.assign(static_cast<std::size_t>(N * r.groups), 0.0f);
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t gi = 0; gi < r.groups; ++gi) {
        float amax = 0;
        for (std::int64_t k = gi * r.group; k < (gi + 1) * r.group; ++k) amax = std::max(amax, std::abs(w[n * K + k]));
        r.scales[n * r.groups + gi] = float(typename S::scale_type(amax / float(S::qmax)));  // int4: stored as f16
        const float inv = amax > 0 ? float(S::qmax) / amax : 0.0f;
        for (std::int64_t k = gi * r.group; k < (gi + 1) * r.group; ++k) {
          const double v = rne(double(w[n * K + k] * inv));
          r.codes[n * K + k] = int(std::max(-double(S::qmax), std::min(double(S::qmax), v)));
        }
      }
    }
  }
  return r;
}

/// The signed code of weight k of row n read from the packed words (the format, written
/// out), and whether the padding past K holds the offset.
template <class S>
int packed_code(const std::vector<std::int32_t>& words, std::int64_t W, std::int64_t n, std::int64_t k) {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(words.data() + n * W);
  const std::int64_t c = k / S::chunk, in = k % S::chunk, j = in % 32, plane = in / 32;
  const int u = (bytes[c * 32 + j] >> (S::bits * plane)) & ((1 << S::bits) - 1);
  return u - S::offset;
}

template <class S, class B>
void expect_codes(const kiln::qtensor<S, B>& qt, const ref_q<S>& r, const std::string& what) {
  const auto words = qt.codes().to_host();
  const std::int64_t N = qt.rows(), K = qt.cols(), W = qt.layout().words;
  ASSERT_EQ(W, (K + S::chunk - 1) / S::chunk * 8) << what;
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t k = 0; k < W * 4 / 32 * S::chunk; ++k) {
      const int want = k < K ? r.codes[n * K + k] : 0;
      const int got = packed_code<S>(words, W, n, k);
      if (got != want) {
        ADD_FAILURE() << what << ": code [" << n << ", " << k << "] is " << got << ", want " << want
                      << (k >= K ? " (padding)" : "") << "; " << seed_note();
        return;
      }
    }
  }
  const auto sc = qt.scales().to_host();
  ASSERT_EQ(sc.size(), r.scales.size()) << what;
  for (std::size_t i = 0; i < sc.size(); ++i) {
    if (float(sc[i]) != r.scales[i]) {
      ADD_FAILURE() << what << ": scale " << i << " is " << float(sc[i]) << ", want " << r.scales[i];
      return;
    }
  }
}

template <class S, class B>
void check_quantize(std::int64_t N, std::int64_t K, kiln::quant_options o = {}, std::vector<float> hw = {}) {
  auto& c = ctx<B>();
  auto g = rng();
  if (hw.empty()) hw = uniform(g, static_cast<std::size_t>(N * K), -2.0f, 2.0f);
  auto w = kiln::from_host(c, {N, K}, std::span<const float>(hw));
  const auto qt = kiln::quantize<S>(w, o);
  const std::string what = std::string(S::name) + " [" + std::to_string(N) + ", " + std::to_string(K) + "] group " +
                           std::to_string(o.group) + (o.per_row ? " per row" : "");
  EXPECT_EQ(qt.shape(), (kiln::shape{N, K})) << what;
  std::vector<float> gamma;
  if constexpr (std::is_same_v<S, q::ternary>) {
    gamma = qt.scales().to_host();
    const std::int64_t rows = o.per_row ? N : 1, per = o.per_row ? K : N * K;
    for (std::int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (std::int64_t k = 0; k < per; ++k) s += std::abs(double(hw[r * per + k]));
      const double want = per ? s / double(per) : 0.0;
      EXPECT_NEAR(gamma[r], want, 4e-6 * want) << what << ": gamma of " << r;
    }
  }
  expect_codes(qt, ref_quantize<S>(hw, N, K, o, gamma), what);
}

}  // namespace

TYPED_TEST(quant_test, int8_codes_and_scales) {
  for (std::int64_t K : {1, 31, 32, 33, 96, 300}) check_quantize<q::int8, TypeParam>(7, K);
  check_quantize<q::int8, TypeParam>(1, 4096);
  for (int g : {32, 64, 128}) check_quantize<q::int8, TypeParam>(5, 256, {.group = g});
  check_quantize<q::int8, TypeParam>(3, 96, {.group = 32});
}

TYPED_TEST(quant_test, int4_codes_and_scales) {
  check_quantize<q::int4, TypeParam>(7, 32);  // half a chunk: the high nibbles are padding
  check_quantize<q::int4, TypeParam>(5, 96);
  for (int g : {32, 64, 128}) check_quantize<q::int4, TypeParam>(6, 384, {.group = g});
  // the f16 scales at both ends of their range: groups of tiny weights (max|w| / 7 an f16
  // subnormal, or 0 where it rounds there), and max|w| up to 7 x 65504 (the largest scale)
  auto g = rng();
  std::vector<float> w = uniform(g, 4 * 64, -1.0f, 1.0f);
  for (int k = 0; k < 32; ++k) {
    w[k] *= 1e-5f;            // scale ~1.4e-6: subnormal
    w[32 + k] *= 1e-7f;       // ~1.4e-8: rounds to 0 (codes stay, worth 0)
    w[64 + k] *= 458000.0f;   // ~65400: the top of the range
    w[96 + k] *= 3e-3f;       // ~4e-4: normal
  }
  w[64] = 458000.0f;  // each group's top set by hand: the random draws could fall short of it
  w[0] = 1e-5f;
  check_quantize<q::int4, TypeParam>(4, 64, {}, w);
  const auto sc = kiln::quantize<q::int4>(kiln::from_host(ctx<TypeParam>(), {4, 64}, std::span<const float>(w))).scales().to_host();
  EXPECT_GT(float(sc[0]), 0.0f);
  EXPECT_LT(float(sc[0]), 0x1p-14f);  // subnormal
  EXPECT_EQ(float(sc[1]), 0.0f);
  EXPECT_GT(float(sc[2]), 60000.0f);
  EXPECT_LE(float(sc[2]), 65504.0f);
}

TYPED_TEST(quant_test, ternary_codes_and_scales) {
  for (std::int64_t K : {1, 5, 128, 130, 257}) {
    check_quantize<q::ternary, TypeParam>(9, K);
    check_quantize<q::ternary, TypeParam>(9, K, {.per_row = true});
  }
}

// Ties at .5 round to even: with max|w| = 127 the reciprocal is exactly 1 (int8), with
// max|w| = 7 exactly 1 (int4); ternary with eps = 0 and mean|w| = 1.
TYPED_TEST(quant_test, ties_round_half_to_even) {
  std::vector<float> w8 = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f, -2.5f, 126.5f};
  check_quantize<q::int8, TypeParam>(1, 8, {}, w8);
  std::vector<float> w4(32, 0.0f);
  const float t4[] = {7.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f, 6.5f, -6.5f};
  for (int i = 0; i < 8; ++i) w4[i] = t4[i];
  check_quantize<q::int4, TypeParam>(1, 32, {.group = 32}, w4);
  std::vector<float> wt = {0.5f, 1.5f, -0.5f, -1.5f};  // mean |w| = 1: codes 0, 1 (2 clamped), 0, -1
  check_quantize<q::ternary, TypeParam>(1, 4, {.eps = 0.0f}, wt);
  auto& c = ctx<TypeParam>();
  const auto qt = kiln::quantize<q::ternary>(kiln::from_host(c, {1, 4}, std::span<const float>(wt)), {.eps = 0.0f});
  const auto words = qt.codes().to_host();
  EXPECT_EQ(packed_code<q::ternary>(words, 8, 0, 0), 0);
  EXPECT_EQ(packed_code<q::ternary>(words, 8, 0, 1), 1);
  EXPECT_EQ(packed_code<q::ternary>(words, 8, 0, 3), -1);
}

TYPED_TEST(quant_test, zero_rows_and_groups) {
  std::vector<float> w(4 * 64, 0.0f);
  for (int k = 0; k < 64; ++k) w[64 + k] = float(k % 7) - 3.0f;  // row 1 nonzero, the rest zero
  for (int k = 32; k < 64; ++k) w[2 * 64 + k] = 1.0f;             // row 2: first group zero
  check_quantize<q::int8, TypeParam>(4, 64, {}, w);
  check_quantize<q::int8, TypeParam>(4, 64, {.group = 32}, w);
  check_quantize<q::int4, TypeParam>(4, 64, {.group = 32}, w);
  check_quantize<q::ternary, TypeParam>(4, 64, {.per_row = true}, w);
  std::vector<float> z(3 * 10, 0.0f);
  check_quantize<q::ternary, TypeParam>(3, 10, {}, z);
}

TYPED_TEST(quant_test, f16_and_bf16_weights) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const auto hw = uniform(g, 5 * 64, -1.0f, 1.0f);
  std::vector<kiln::half> hh(hw.begin(), hw.end());
  std::vector<kiln::bfloat16> hb(hw.begin(), hw.end());
  std::vector<float> wh(hh.begin(), hh.end()), wb(hb.begin(), hb.end());
  const auto qh = kiln::quantize<q::int4>(kiln::from_host(c, {5, 64}, std::span<const kiln::half>(hh)));
  expect_codes(qh, ref_quantize<q::int4>(wh, 5, 64, {}), "int4 of f16");
  const auto qb = kiln::quantize<q::int8>(kiln::from_host(c, {5, 64}, std::span<const kiln::bfloat16>(hb)), {.group = 64});
  expect_codes(qb, ref_quantize<q::int8>(wb, 5, 64, {.group = 64}), "int8 of bf16");
}

TYPED_TEST(quant_test, strided_weight_view) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const auto hw = uniform(g, 64 * 6, -1.0f, 1.0f);
  auto base = kiln::from_host(c, {64, 6}, std::span<const float>(hw));
  const auto qt = kiln::quantize<q::int8>(kiln::transpose(base));  // [6, 64], column-major in memory
  std::vector<float> wt(6 * 64);
  for (int n = 0; n < 6; ++n)
    for (int k = 0; k < 64; ++k) wt[n * 64 + k] = hw[k * 6 + n];
  expect_codes(qt, ref_quantize<q::int8>(wt, 6, 64, {}), "int8 of a transposed view");
}

TYPED_TEST(quant_test, bad_weights_and_options) {
  auto& c = ctx<TypeParam>();
  std::vector<float> w(4 * 64, 0.5f);
  w[2 * 64 + 40] = std::numeric_limits<float>::quiet_NaN();
  auto t = kiln::from_host(c, {4, 64}, std::span<const float>(w));
  std::string m = message_of<kiln::value_error>([&] { (void)kiln::quantize<q::int8>(t, {.group = 32}); });
  EXPECT_TRUE(has(m, "quantize<int8>")) << m;
  EXPECT_TRUE(has(m, "w[2, 32:64]")) << m;
  m = message_of<kiln::value_error>([&] { (void)kiln::quantize<q::int4>(t); });
  EXPECT_TRUE(has(m, "NaN or infinite")) << m;
  w[2 * 64 + 40] = std::numeric_limits<float>::infinity();
  auto ti = kiln::from_host(c, {4, 64}, std::span<const float>(w));
  m = message_of<kiln::value_error>([&] { (void)kiln::quantize<q::ternary>(ti); });
  EXPECT_TRUE(has(m, "quantize<ternary>")) << m;
  m = message_of<kiln::value_error>([&] { (void)kiln::quantize<q::ternary>(ti, {.per_row = true}); });
  EXPECT_TRUE(has(m, "w[2, 0:64]")) << m;
  // int4's f16 scales: a group whose max|w| / 7 passes 65504 is refused, not stored as inf
  // (int8's float scales take it)
  w[2 * 64 + 40] = 1e6f;
  auto tb = kiln::from_host(c, {4, 64}, std::span<const float>(w));
  m = message_of<kiln::value_error>([&] { (void)kiln::quantize<q::int4>(tb); });
  EXPECT_TRUE(has(m, "quantize<int4>") && has(m, "w[2, 32:64]") && has(m, "f16 scale")) << m;
  EXPECT_EQ(float(kiln::quantize<q::int8>(tb, {.group = 32}).scales().to_host()[5]), 1e6f / 127.0f);

  auto w96 = kiln::full(c, {2, 96}, 1.0f);
  m = message_of<kiln::shape_error>([&] { (void)kiln::quantize<q::int4>(w96, {.group = 64}); });
  EXPECT_TRUE(has(m, "not a multiple of the group size 64")) << m;
  m = message_of<kiln::shape_error>([&] { (void)kiln::quantize<q::int8>(w96, {.group = 48}); });
  EXPECT_TRUE(has(m, "group 48")) << m;
  m = message_of<kiln::shape_error>([&] { (void)kiln::quantize<q::int4>(w96, {.group = 0}); });
  EXPECT_TRUE(has(m, "group 0")) << m;
  m = message_of<kiln::shape_error>([&] { (void)kiln::quantize<q::int8>(kiln::full(c, {2, 3, 4}, 1.0f)); });
  EXPECT_TRUE(has(m, "must be [N, K]")) << m;
  kiln::tensor<float, TypeParam> empty;
  m = message_of<kiln::shape_error>([&] { (void)kiln::quantize<q::int8>(empty); });
  EXPECT_TRUE(has(m, "empty tensor")) << m;
  kiln::qtensor<q::int8, TypeParam> none;
  m = message_of<kiln::shape_error>([&] {
    kiln::tensor<float, TypeParam> y;
    y = kiln::dequantize(none);
  });
  EXPECT_TRUE(has(m, "dequantize")) << m;
}

TYPED_TEST(quant_test, empty_weights) {
  auto& c = ctx<TypeParam>();
  const auto q0 = kiln::quantize<q::int8>(kiln::empty<float>(c, {0, 64}));
  EXPECT_EQ(q0.shape(), (kiln::shape{0, 64}));
  kiln::tensor<float, TypeParam> d;
  d = kiln::dequantize(q0);
  EXPECT_EQ(d.shape(), (kiln::shape{0, 64}));
  const auto qk = kiln::quantize<q::ternary>(kiln::empty<float>(c, {3, 0}));
  EXPECT_EQ(qk.shape(), (kiln::shape{3, 0}));
  kiln::tensor<float, TypeParam> y;
  y = kiln::matmul(kiln::full(c, {2, 0}, 1.0f), qk) + 1.0f;  // empty sums: 0, then the epilogue
  EXPECT_EQ(y.shape(), (kiln::shape{2, 3}));
  for (float v : y.to_host()) EXPECT_EQ(v, 1.0f);
  kiln::tensor<float, TypeParam> y0;
  y0 = kiln::matmul(kiln::empty<float>(c, {0, 64}), kiln::quantize<q::int4>(kiln::full(c, {5, 64}, 1.0f)));
  EXPECT_EQ(y0.shape(), (kiln::shape{0, 5}));
}

namespace {

/// dequantize(q) as the reference computes it from the codes and scales q holds.
template <class S, class B>
std::vector<double> ref_dequantize(const kiln::qtensor<S, B>& qt) {
  const auto words = qt.codes().to_host();
  const auto sc = qt.scales().to_host();
  const std::int64_t N = qt.rows(), K = qt.cols(), W = qt.layout().words, G = qt.per_tensor() ? 0 : qt.layout().groups;
  std::vector<double> out(static_cast<std::size_t>(N * K));
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < K; ++k)
      out[n * K + k] = double(packed_code<S>(words, W, n, k)) * double(float(sc[n * G + k / qt.group_size()]));
  return out;
}

}  // namespace

TYPED_TEST(quant_test, dequantize_fuses_its_epilogue) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const auto hw = uniform(g, 6 * 160, -3.0f, 3.0f);
  auto w = kiln::from_host(c, {6, 160}, std::span<const float>(hw));
  const auto check = [&](const auto& qt, const std::string& what) {
    const auto want = ref_dequantize(qt);
    kiln::tensor<float, TypeParam> d;
    d = kiln::dequantize(qt);
    const auto got = d.to_host();
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(double(got[i]), double(float(want[i]))) << what << " at " << i;
    kiln::tensor<float, TypeParam> y = kiln::empty<float>(c, {6, 160});
    const auto before = c.kernels_launched();
    y = kiln::dequantize(qt) * 2.0f + 1.0f;
    EXPECT_EQ(c.kernels_launched() - before, 1u) << what << ": dequantize with an epilogue is one kernel";
    const auto gy = y.to_host();
    for (std::size_t i = 0; i < gy.size(); ++i) ASSERT_EQ(gy[i], float(want[i]) * 2.0f + 1.0f) << what << " at " << i;
    const auto err = kiln::quantization_error(w, qt);
    double mx = 0, ss = 0;
    for (std::size_t i = 0; i < hw.size(); ++i) {
      const double e = double(float(want[i]) - hw[i]);
      mx = std::max(mx, std::abs(e));
      ss += e * e;
    }
    // a GPU may contract code * scale - w into one fma (no rounding of the product): up
    // to half an ulp of |w| <= 3 apart from the rounded product of the reference
    EXPECT_NEAR(err.max_abs, mx, 1e-6 * mx + 3.0 * 0x1p-24) << what;
    EXPECT_NEAR(err.rms, std::sqrt(ss / double(hw.size())), 1e-4 * std::sqrt(ss / double(hw.size())) + 1e-12) << what;
  };
  check(kiln::quantize<q::int8>(w), "int8");
  check(kiln::quantize<q::int8>(w, {.group = 32}), "int8 group 32");
  check(kiln::quantize<q::int4>(w, {.group = 32}), "int4");
  check(kiln::quantize<q::ternary>(w), "ternary");
  check(kiln::quantize<q::ternary>(w, {.per_row = true}), "ternary per row");
}

namespace {

/// The reference product y = x q^T by the formula of ops/quant/qmatmul.hpp, in double
/// from the int8 activations (quantized here as the kernels do) and the codes q holds;
/// also a tolerance per output: float rounding of the sums, plus one activation code
/// flipping on a GPU whose reciprocal 127 / max|x| may differ in its last bit.
template <class S, class B>
void ref_qmatmul(const std::vector<float>& x, std::int64_t M, const kiln::qtensor<S, B>& qt, std::vector<double>& y,
                 std::vector<double>& tol) {
  const auto words = qt.codes().to_host();
  const auto sc = qt.scales().to_host();
  const std::int64_t N = qt.rows(), K = qt.cols(), W = qt.layout().words, G = qt.per_tensor() ? 0 : qt.layout().groups;
  const std::int64_t gs = qt.group_size();
  y.assign(static_cast<std::size_t>(M * N), 0.0);
  tol.assign(y.size(), 0.0);
  std::vector<int> xq(static_cast<std::size_t>(K));
  for (std::int64_t m = 0; m < M; ++m) {
    float amax = 0;
    bool nan = false;
    for (std::int64_t k = 0; k < K; ++k) {
      amax = std::max(amax, std::abs(x[m * K + k]));
      nan = nan || !std::isfinite(x[m * K + k]);
    }
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (std::int64_t k = 0; k < K; ++k) xq[k] = int(std::max(-127.0, std::min(127.0, rne(double(x[m * K + k] * inv)))));
    const double sx = double(amax / 127.0f);
    for (std::int64_t n = 0; n < N; ++n) {
      double acc = 0, mag = 0, wmax = 0;
      for (std::int64_t g0 = 0; g0 < K; g0 += gs) {
        long long isum = 0;
        for (std::int64_t k = g0; k < g0 + gs && k < K; ++k) {
          const int cw = packed_code<S>(words, W, n, k);
          isum += (long long)cw * xq[k];
          mag += std::abs(double(cw) * xq[k]) * std::abs(double(sc[n * G + g0 / gs]));
          wmax = std::max(wmax, std::abs(double(cw) * double(sc[n * G + g0 / gs])));
        }
        acc += double(sc[n * G + g0 / gs]) * double(isum);
      }
      y[m * N + n] = nan ? std::numeric_limits<double>::quiet_NaN() : sx * acc;
      tol[m * N + n] = 1e-5 * sx * mag + 1.01 * sx * wmax;
    }
  }
}

template <class B, class Q>
void expect_product(const kiln::tensor<float, B>& y, const std::vector<double>& want, const std::vector<double>& tol,
                    const std::string& what, double extra_rel = 0.0) {
  const auto got = y.to_host();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << what << " [" << i << "]: " << got[i] << ", want NaN";
      continue;
    }
    const double t = tol[i] + extra_rel * std::abs(want[i]);
    ASSERT_NEAR(double(got[i]), want[i], t) << what << " [" << i << "]; " << seed_note();
  }
}

template <class S, class B>
void check_product(std::int64_t M, std::int64_t N, std::int64_t K, kiln::quant_options o = {}) {
  auto& c = ctx<B>();
  auto g = rng();
  const auto hw = uniform(g, static_cast<std::size_t>(N * K), -1.0f, 1.0f);
  const auto hx = uniform(g, static_cast<std::size_t>(M * K), -3.0f, 3.0f);
  const auto qt = kiln::quantize<S>(kiln::from_host(c, {N, K}, std::span<const float>(hw)), o);
  auto x = kiln::from_host(c, {M, K}, std::span<const float>(hx));
  std::vector<double> want, tol;
  ref_qmatmul(hx, M, qt, want, tol);
  kiln::tensor<float, B> y;
  const auto before = c.kernels_launched();
  y = kiln::matmul(x, qt);
  EXPECT_EQ(c.kernels_launched() - before, 1u);
  expect_product<B, S>(y, want, tol,
                       std::string(S::name) + " x[" + std::to_string(M) + ", " + std::to_string(K) + "] q[" +
                           std::to_string(N) + ", " + std::to_string(K) + "] group " + std::to_string(o.group));
}

}  // namespace

TYPED_TEST(quant_test, products_against_the_reference) {
  for (std::int64_t M : {1, 3, 70}) {
    check_product<q::int8, TypeParam>(M, 37, 96);
    check_product<q::int8, TypeParam>(M, 70, 256, {.group = 32});
    check_product<q::int4, TypeParam>(M, 37, 96, {.group = 32});
    check_product<q::int4, TypeParam>(M, 5, 256, {.group = 128});
    check_product<q::ternary, TypeParam>(M, 37, 130);
    check_product<q::ternary, TypeParam>(M, 9, 257, {.per_row = true});
  }
  check_product<q::int8, TypeParam>(2, 3, 1);
  check_product<q::ternary, TypeParam>(1, 300, 4096);
  check_product<q::int4, TypeParam>(1, 64, 4096, {.group = 64});
}

// The prefill products (many rows of x: column panels of 32 weight rows where the build
// has AVX-512 VNNI, cpu/quant/panel.hpp) against the reference: 16 rows (the first that
// take them; ternary from 24, so 20 rows keep the 4 x 4 tiles), row tiles of 6 cut by the
// end, 600 rows (two tasks of rows), weight rows that fill no panel, padding past K, every
// scheme and grouping, and one scale per row over K = 65600 (int32 sums flushed in two
// segments).
TEST(quant_cpu_paths, prefill_products_against_the_reference) {
  using cpu = kiln::cpu<>;
  check_product<q::int8, cpu>(16, 37, 96);
  check_product<q::int8, cpu>(600, 70, 256, {.group = 32});
  check_product<q::int8, cpu>(47, 65, 200, {.group = 0});
  check_product<q::int8, cpu>(17, 3, 65600);
  check_product<q::int4, cpu>(133, 37, 96, {.group = 32});
  check_product<q::int4, cpu>(20, 129, 256, {.group = 128});
  check_product<q::int4, cpu>(31, 64, 448, {.group = 64});
  check_product<q::ternary, cpu>(133, 130, 130);
  check_product<q::ternary, cpu>(20, 9, 257, {.per_row = true});
  check_product<q::ternary, cpu>(24, 9, 257, {.per_row = true});
}

// The decode products (one row of x: cpu/quant/matvec.hpp where the build has AVX-512
// VNNI, with one scale per weight row or per group) against the reference: weight rows
// from 1 to 1000 (tiles of 4 cut by the end, several tasks of rows), K with an odd last
// chunk or none, padding past K (int4: one group a row; K = 96 in groups of 32: half a
// chunk), K = 65600 (two segments of int32 sums), and grouped rows over several blocks
// of 16 scales with a partial last one (int4 g32: 512 weights a block, K = 1088 is 2 and
// 2/16 blocks with an odd last chunk; int8 g32: 512 too, K = 1056; g64 and g128: 1024 and
// 2048 a block for int4, as for int8 g64, 4096 for int8 g128).
TEST(quant_cpu_paths, decode_products_against_the_reference) {
  using cpu = kiln::cpu<>;
  for (std::int64_t N : {1, 2, 3, 5, 261, 1000}) {
    check_product<q::int8, cpu>(1, N, 96);
    check_product<q::int4, cpu>(1, N, 64, {.group = 64});  // one group a row: one scale per row
    check_product<q::int4, cpu>(1, N, 128, {.group = 128});
    check_product<q::int4, cpu>(1, N, 1088, {.group = 32});
    check_product<q::int8, cpu>(1, N, 1056, {.group = 32});
    check_product<q::ternary, cpu>(1, N, 256, {.per_row = true});
    check_product<q::ternary, cpu>(1, N, 130);
  }
  for (std::int64_t K : {96, 448, 2240, 4160}) {
    check_product<q::int4, cpu>(1, 9, K, {.group = 32});
    check_product<q::int4, cpu>(1, 9, K / 64 * 64, {.group = 64});
    check_product<q::int8, cpu>(1, 9, K, {.group = 32});
    check_product<q::int8, cpu>(1, 9, K / 64 * 64, {.group = 64});
    check_product<q::int8, cpu>(1, 9, K / 128 * 128 + 128, {.group = 128});
    check_product<q::int4, cpu>(1, 9, K / 128 * 128 + 128, {.group = 128});
  }
  check_product<q::int8, cpu>(1, 7, 65600);
  check_product<q::int4, cpu>(1, 7, 65600, {.group = 32});
  check_product<q::ternary, cpu>(1, 7, 65600, {.per_row = true});
#if defined(KILN_QUANT_HAS_MATVEC512)
  auto& c = ctx<cpu>();
  const auto w = kiln::full(c, {8, 256}, 0.5f);
  const auto x1 = kiln::full(c, {1, 256}, 1.0f), x2 = kiln::full(c, {2, 256}, 1.0f);
  EXPECT_EQ(kiln::kernel_variant(kiln::matmul(x1, kiln::quantize<q::ternary>(w))), "cpu.quant.matvec vnni512");
  EXPECT_EQ(kiln::kernel_variant(kiln::matmul(x1, kiln::quantize<q::int8>(w))), "cpu.quant.matvec vnni512");
  EXPECT_EQ(kiln::kernel_variant(kiln::matmul(x1, kiln::quantize<q::int4>(w, {.group = 32}))), "cpu.quant.matvec vnni512");
  EXPECT_EQ(kiln::kernel_variant(kiln::matmul(x1, kiln::quantize<q::int8>(w, {.group = 128}))), "cpu.quant.matvec vnni512");
  EXPECT_NE(kiln::kernel_variant(kiln::matmul(x2, kiln::quantize<q::ternary>(w))), "cpu.quant.matvec vnni512");
#endif
}

// int4 in groups of 32 with K = 96 packs codes in chunks of 64: the last chunk's second
// plane is padding, a segment past the row's 3 scales. It sums to 0 and its scale must
// never be read: with the scales followed in memory by NaN (a slice of a larger buffer),
// the products stay finite and equal those of the plain qtensor, for every row tile.
TYPED_TEST(quant_test, padding_past_the_last_group_reads_no_scale) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const std::int64_t N = 37, K = 96;
  const auto hw = uniform(g, static_cast<std::size_t>(N * K), -1.0f, 1.0f);
  const auto qt = kiln::quantize<q::int4>(kiln::from_host(c, {N, K}, std::span<const float>(hw)), {.group = 32});
  ASSERT_EQ(qt.scales().shape(), (kiln::shape{N, 3}));
  auto big = kiln::full(c, {N + 1, 3}, kiln::half(std::numeric_limits<float>::quiet_NaN()));  // int4's scales are f16
  auto view = kiln::slice(big, 0, 0, N);
  view = qt.scales();
  const kiln::qtensor<q::int4, TypeParam> q2(qt.codes(), view, qt.layout());
  for (std::int64_t M : {1, 5, 70}) {
    const auto hx = uniform(g, static_cast<std::size_t>(M * K), -3.0f, 3.0f);
    auto x = kiln::from_host(c, {M, K}, std::span<const float>(hx));
    kiln::tensor<float, TypeParam> y1, y2;
    y1 = kiln::matmul(x, qt);
    y2 = kiln::matmul(x, q2);
    const auto a = y1.to_host(), b = y2.to_host();
    for (std::size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(std::isfinite(b[i])) << "M " << M << " [" << i << "]";
      ASSERT_EQ(a[i], b[i]) << "M " << M << " [" << i << "]";
    }
  }
}

// Integer data: max|x| = 127 in every row (activation codes = x) and integer weights
// with max |w| = qmax per group (codes = w, scales 1; ternary: all +-1 with eps = 0, so
// gamma = 1): every output is the exact integer sum, which the int32 accumulation must
// reproduce exactly (the sums stay below 2^24, so the float result is exact too).
TYPED_TEST(quant_test, integer_sums_are_exact) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const std::int64_t M = 5, N = 11, K = 192;
  auto hx = uniform_int<float>(g, static_cast<std::size_t>(M * K), -127, 127);
  for (std::int64_t m = 0; m < M; ++m) hx[m * K + (m * 7) % K] = (m % 2) ? -127.0f : 127.0f;
  auto x = kiln::from_host(c, {M, K}, std::span<const float>(hx));
  const auto run = [&](auto scheme, std::vector<float> hw, kiln::quant_options o, const std::string& what) {
    using S = decltype(scheme);
    const auto qt = kiln::quantize<S>(kiln::from_host(c, {N, K}, std::span<const float>(hw)), o);
    kiln::tensor<float, TypeParam> y;
    y = kiln::matmul(x, qt);
    const auto got = y.to_host();
    for (std::int64_t m = 0; m < M; ++m) {
      for (std::int64_t n = 0; n < N; ++n) {
        long long s = 0;
        for (std::int64_t k = 0; k < K; ++k) s += (long long)hx[m * K + k] * (long long)hw[n * K + k];
        ASSERT_EQ(got[m * N + n], float(s)) << what << " [" << m << ", " << n << "]";
      }
    }
  };
  auto w8 = uniform_int<float>(g, static_cast<std::size_t>(N * K), -127, 127);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t gi = 0; gi < K / 32; ++gi) w8[n * K + gi * 32 + (n + gi) % 32] = 127.0f;
  run(q::int8{}, w8, {}, "int8 per row");
  run(q::int8{}, w8, {.group = 32}, "int8 group 32");
  auto w4 = uniform_int<float>(g, static_cast<std::size_t>(N * K), -7, 7);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t gi = 0; gi < K / 32; ++gi) w4[n * K + gi * 32 + (n + 3 * gi) % 32] = -7.0f;
  run(q::int4{}, w4, {.group = 32}, "int4 group 32");
  run(q::int4{}, w4, {.group = 64}, "int4 group 64");
  auto wt = uniform_int<float>(g, static_cast<std::size_t>(N * K), 0, 1);
  for (auto& v : wt) v = v * 2.0f - 1.0f;
  run(q::ternary{}, wt, {.eps = 0.0f}, "ternary");
}

TYPED_TEST(quant_test, fused_prologue_and_epilogue_one_kernel) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const std::int64_t M = 4, N = 21, K = 128;
  const auto hw = uniform(g, static_cast<std::size_t>(N * K), -1.0f, 1.0f);
  const auto hg = uniform(g, static_cast<std::size_t>(M * K), -2.0f, 2.0f);
  const auto hu = uniform(g, static_cast<std::size_t>(M * K), -2.0f, 2.0f);
  const auto hb = uniform(g, static_cast<std::size_t>(N), -1.0f, 1.0f);
  const auto qt = kiln::quantize<q::int4>(kiln::from_host(c, {N, K}, std::span<const float>(hw)), {.group = 64});
  auto gt = kiln::from_host(c, {M, K}, std::span<const float>(hg));
  auto ut = kiln::from_host(c, {M, K}, std::span<const float>(hu));
  auto bias = kiln::from_host(c, {N}, std::span<const float>(hb));
  std::vector<float> hx(hg.size());
  for (std::size_t i = 0; i < hx.size(); ++i) hx[i] = hg[i] / (1.0f + std::exp(-hg[i])) * hu[i];
  std::vector<double> want, tol;
  ref_qmatmul(hx, M, qt, want, tol);
  kiln::tensor<float, TypeParam> y = kiln::empty<float>(c, {M, N});
  auto before = c.kernels_launched();
  y = kiln::linear(kiln::silu(gt) * ut, qt, bias) * 0.5f;
  EXPECT_EQ(c.kernels_launched() - before, 1u) << "prologue, product and epilogue are one kernel";
  std::vector<double> w2(want.size()), t2(tol.size());
  for (std::int64_t i = 0; i < M * N; ++i) {
    w2[i] = (want[i] + hb[i % N]) * 0.5;
    t2[i] = tol[i] * 0.5 + 1e-6 * std::abs(w2[i]) + 1e-6;  // (silu's own rounding moves activation codes rarely)
  }
  expect_product<TypeParam, q::int4>(y, w2, t2, "0.5 * linear(silu(g) * u, q, bias)", 1e-5);
  before = c.kernels_launched();
  y = kiln::gelu(kiln::bitlinear(gt, kiln::quantize<q::ternary>(kiln::from_host(c, {N, K}, std::span<const float>(hw)))));
  EXPECT_GE(c.kernels_launched() - before, 2u);  // the quantize (reduction, packing) and the product
}

TYPED_TEST(quant_test, bitlinear_is_the_ternary_product) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const std::int64_t M = 3, N = 40, K = 200;
  const auto hw = uniform(g, static_cast<std::size_t>(N * K), -0.05f, 0.05f);
  const auto hx = uniform(g, static_cast<std::size_t>(2 * M * K), -6.0f, 6.0f);
  const auto hb = uniform(g, static_cast<std::size_t>(N), -1.0f, 1.0f);
  const auto qt = kiln::quantize<q::ternary>(kiln::from_host(c, {N, K}, std::span<const float>(hw)));
  auto x = kiln::from_host(c, {2, M, K}, std::span<const float>(hx));  // batch axes pass through
  auto bias = kiln::from_host(c, {N}, std::span<const float>(hb));
  std::vector<double> want, tol;
  ref_qmatmul(hx, 2 * M, qt, want, tol);
  kiln::tensor<float, TypeParam> y;
  const auto before = c.kernels_launched();
  y = kiln::bitlinear(x, qt, bias);
  EXPECT_EQ(c.kernels_launched() - before, 1u);
  EXPECT_EQ(y.shape(), (kiln::shape{2, M, N}));
  for (std::size_t i = 0; i < want.size(); ++i) want[i] += hb[i % N];
  expect_product<TypeParam, q::ternary>(y, want, tol, "bitlinear(x, q, bias)", 1e-6);
  kiln::tensor<float, TypeParam> v;
  v = kiln::bitlinear(kiln::slice(x, 0, 1, 2), qt);  // a 1-D-batch view, then a vector
  EXPECT_EQ(v.shape(), (kiln::shape{1, M, N}));
  kiln::tensor<float, TypeParam> r;
  r = kiln::bitlinear(kiln::reshape(kiln::slice(kiln::reshape(x, {2 * M * K}), 0, 0, K), {K}), qt);
  EXPECT_EQ(r.shape(), (kiln::shape{N}));
  const auto gr = r.to_host();
  for (std::int64_t n = 0; n < N; ++n) EXPECT_NEAR(gr[n], want[n] - hb[n], tol[n]) << n;
}

TYPED_TEST(quant_test, nan_rows_and_f16_activations) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const std::int64_t M = 4, N = 13, K = 64;
  const auto hw = uniform(g, static_cast<std::size_t>(N * K), -1.0f, 1.0f);
  auto hx = uniform(g, static_cast<std::size_t>(M * K), -2.0f, 2.0f);
  hx[1 * K + 5] = std::numeric_limits<float>::quiet_NaN();
  hx[3 * K + 9] = -std::numeric_limits<float>::infinity();
  const auto qt = kiln::quantize<q::int8>(kiln::from_host(c, {N, K}, std::span<const float>(hw)), {.group = 32});
  std::vector<double> want, tol;
  ref_qmatmul(hx, M, qt, want, tol);
  kiln::tensor<float, TypeParam> y;
  y = kiln::matmul(kiln::from_host(c, {M, K}, std::span<const float>(hx)), qt);
  expect_product<TypeParam, q::int8>(y, want, tol, "rows with NaN and -Inf");

  std::vector<kiln::half> xh(hx.begin(), hx.end());
  xh[1 * K + 5] = kiln::half(0.25f);
  xh[3 * K + 9] = kiln::half(1.0f);
  std::vector<float> xf(xh.begin(), xh.end());
  ref_qmatmul(xf, M, qt, want, tol);
  kiln::tensor<kiln::half, TypeParam> yh;
  yh = kiln::matmul(kiln::from_host(c, {M, K}, std::span<const kiln::half>(xh)), qt);
  const auto gh = yh.to_host();
  for (std::size_t i = 0; i < gh.size(); ++i) {
    EXPECT_NEAR(float(gh[i]), want[i], tol[i] + 1e-3 * std::abs(want[i]) + 1e-3) << "f16 activations [" << i << "]";
  }
}

TYPED_TEST(quant_test, product_errors_name_the_operands) {
  auto& c = ctx<TypeParam>();
  const auto qt = kiln::quantize<q::int8>(kiln::full(c, {8, 64}, 1.0f));
  std::string m = shape_error_of([&] { (void)kiln::matmul(kiln::full(c, {3, 32}, 1.0f), qt); });
  EXPECT_TRUE(has(m, "must be 64")) << m;
  EXPECT_TRUE(has(m, "int8[8, 64]")) << m;
  m = shape_error_of([&] { (void)kiln::linear(kiln::full(c, {3, 64}, 1.0f), qt, kiln::full(c, {7}, 1.0f)); });
  EXPECT_TRUE(has(m, "bias")) << m;
  kiln::qtensor<q::ternary, TypeParam> none;
  m = shape_error_of([&] { (void)kiln::bitlinear(kiln::full(c, {3, 64}, 1.0f), none); });
  EXPECT_TRUE(has(m, "bitlinear")) << m;
  kiln::tensor<float, TypeParam> e;
  m = shape_error_of([&] { (void)kiln::matmul(e, qt); });
  EXPECT_TRUE(has(m, "empty")) << m;
}

// Every micro-kernel path of this build against plain integer loops, on random codes
// over the whole code range (int8 codes up to 255 stored: the AVX2 path's sign trick).
TEST(quant_cpu_paths, micro_kernels_agree_with_integer_loops) {
  namespace cq = kiln::detail::cpu_quant;
  auto g = rng();
  const auto check = [&](auto scheme, auto isa, const char* name, auto rows) {
    using S = decltype(scheme);
    constexpr int R = decltype(rows)::value, C = 4;
    const std::int64_t chunks = 5, K = chunks * S::chunk;
    for (std::int64_t gsub : {std::int64_t(0), std::int64_t(1), std::int64_t(2), std::int64_t(4)}) {
      if (gsub && K % (gsub * 32)) continue;
      std::vector<std::uint8_t> w(static_cast<std::size_t>(C * chunks * 32));
      for (auto& b : w) b = static_cast<std::uint8_t>(uniform_int<int>(g, 1, 0, 255)[0]);
      if (S::bits == 8)
        for (auto& b : w) b = b == 0 ? 1 : b;  // stored int8 codes are 1..255 (code -127..127)
      std::vector<std::int8_t> x(static_cast<std::size_t>(R * K));
      for (auto& v : x) v = static_cast<std::int8_t>(uniform_int<int>(g, 1, -127, 127)[0]);
      const std::int64_t G = gsub ? K / (gsub * 32) : 1;
      std::vector<typename S::scale_type> sc(static_cast<std::size_t>(C * G));  // (int4: f16)
      for (auto& s : sc) s = float(uniform_int<int>(g, 1, 1, 4)[0]);
      const std::uint8_t* wp[C];
      const typename S::scale_type* sp[C];
      const std::int8_t* xp[R];
      for (int cc = 0; cc < C; ++cc) {
        wp[cc] = w.data() + cc * chunks * 32;
        sp[cc] = sc.data() + cc * G;
      }
      for (int r = 0; r < R; ++r) xp[r] = x.data() + r * K;
      float out[R][C];
      std::vector<std::int32_t> xo(static_cast<std::size_t>(R * cq::segments(K, gsub)));
      const std::int32_t* op[R];
      for (int r = 0; r < R; ++r) {
        op[r] = xo.data() + r * cq::segments(K, gsub);
        cq::segment_offsets<S>(xp[r], K, gsub, xo.data() + r * cq::segments(K, gsub));
      }
      cq::qdot<S, R, C>(isa, wp, xp, chunks, gsub, sp, G, out, op);
      for (int r = 0; r < R; ++r) {
        for (int cc = 0; cc < C; ++cc) {
          double want = 0;
          for (std::int64_t gi = 0; gi < G; ++gi) {
            long long s = 0;
            const std::int64_t gk = gsub ? gsub * 32 : K;
            for (std::int64_t k = gi * gk; k < (gi + 1) * gk; ++k) s += (long long)(cq::code_at<S>(wp[cc], k) - S::offset) * xp[r][k];
            want += double(s) * (gsub ? double(float(sp[cc][gi])) : 1.0);
          }
          ASSERT_EQ(double(out[r][cc]), want) << name << " " << S::name << " R " << R << " gsub " << gsub << " [" << r << ", " << cc << "]";
        }
      }
    }
  };
  const auto all = [&](auto isa, const char* name) {
    const std::integral_constant<int, 4> tile_rows;
    const std::integral_constant<int, 1> one_row;  // the decode step's tile (ternary: masked planes with VNNI)
    check(q::int8{}, isa, name, tile_rows);
    check(q::int4{}, isa, name, tile_rows);
    check(q::ternary{}, isa, name, tile_rows);
    check(q::int8{}, isa, name, one_row);
    check(q::int4{}, isa, name, one_row);
    check(q::ternary{}, isa, name, one_row);
  };
  // the column panels: random codes over the whole range packed for a whole panel and for
  // 5 weight rows (the rest padding), MR activation rows, every grouping
  [[maybe_unused]] const auto panels = [&](auto kernel, auto scheme, std::int64_t nc) {
    using S = decltype(scheme);
    using pn = decltype(kernel);
    const std::int64_t chunks = 5, K = chunks * S::chunk;
    for (std::int64_t gsub : {std::int64_t(0), std::int64_t(1), std::int64_t(2), std::int64_t(4)}) {
      if (gsub && K % (gsub * 32)) continue;
      std::vector<std::uint8_t> w(static_cast<std::size_t>(nc * chunks * 32));
      for (auto& b : w) b = static_cast<std::uint8_t>(uniform_int<int>(g, 1, 0, 255)[0]);
      if (S::bits == 8)
        for (auto& b : w) b = b == 0 ? 1 : b;
      std::vector<std::int8_t> x(static_cast<std::size_t>(pn::MR * K));
      for (auto& v : x) v = static_cast<std::int8_t>(uniform_int<int>(g, 1, -127, 127)[0]);
      const std::int64_t G = gsub ? K / (gsub * 32) : 1;
      std::vector<typename S::scale_type> sc(static_cast<std::size_t>(nc * G));
      for (auto& s : sc) s = float(uniform_int<int>(g, 1, 1, 4)[0]);
      std::vector<std::uint8_t> pan(static_cast<std::size_t>(K * pn::NP + 64));
      auto* pa = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(pan.data()) + 63) / 64 * 64);
      std::vector<float> psc(static_cast<std::size_t>(G * pn::NP));
      pn::template pack<S>(w.data(), chunks * 32, chunks, std::int64_t(0), nc, sc.data(), G, G, gsub > 0, pa, psc.data());
      const std::int64_t nseg = cq::segments(K, gsub);
      std::vector<std::int32_t> xo(static_cast<std::size_t>(pn::MR * nseg));
      const std::int8_t* xp[pn::MR];
      const std::int32_t* op[pn::MR];
      for (int r = 0; r < pn::MR; ++r) {
        xp[r] = x.data() + r * K;
        op[r] = xo.data() + r * nseg;
        cq::segment_offsets<S>(xp[r], K, gsub, xo.data() + r * nseg);
      }
      float out[pn::MR * pn::NP];
      if (gsub) pn::template tile<S, true>(pa, psc.data(), xp, op, K, gsub * 32, G, out);
      else pn::template tile<S, false>(pa, psc.data(), xp, op, K, std::int64_t(cq::flush_planes * 32), G, out);
      for (int r = 0; r < pn::MR; ++r) {
        for (std::int64_t cc = 0; cc < nc; ++cc) {
          double want = 0;
          const std::uint8_t* wr = w.data() + cc * chunks * 32;
          for (std::int64_t gi = 0; gi < G; ++gi) {
            long long s = 0;
            const std::int64_t gk = gsub ? gsub * 32 : K;
            for (std::int64_t k = gi * gk; k < (gi + 1) * gk; ++k) s += (long long)(cq::code_at<S>(wr, k) - S::offset) * xp[r][k];
            want += double(s) * (gsub ? double(float(sc[cc * G + gi])) : 1.0);
          }
          ASSERT_EQ(double(out[r * pn::NP + cc]), want) << "panels " << S::name << " nc " << nc << " gsub " << gsub << " [" << r << ", " << cc << "]";
        }
        for (std::int64_t cc = nc; cc < pn::NP; ++cc) ASSERT_EQ(out[r * pn::NP + cc], 0.0f) << "panels padding " << S::name << " [" << r << ", " << cc << "]";
      }
    }
  };
#if defined(KILN_QUANT_HAS_PANELS)
  for (std::int64_t nc : {std::int64_t(cq::panels512::NP), std::int64_t(5)}) {
    panels(cq::panels512{}, q::int8{}, nc);
    panels(cq::panels512{}, q::int4{}, nc);
    panels(cq::panels512{}, q::ternary{}, nc);
  }
#endif
#if defined(KILN_QUANT_HAS_PANELS256)
  // (K = 5 chunks: int4 320 weights, ternary 640, over int16 runs of 32 and 128)
  for (std::int64_t nc : {std::int64_t(cq::panels256::NP), std::int64_t(5), std::int64_t(9)}) {
    panels(cq::panels256{}, q::int4{}, nc);
    panels(cq::panels256{}, q::ternary{}, nc);
  }
#endif
#if defined(KILN_QUANT_HAS_MATVEC512)
  // the decode kernel (one activation row, one scale per weight row): random codes over
  // the whole range, 1 to 9 weight rows (tiles of 4 cut by the end, fewer rows than a
  // tile), an odd last chunk or none, and rows of three segments of flush_planes planes
  // (the last holding an odd chunk alone); the float result is the segments' exact int32
  // sums added in order
  const auto matvec = [&](auto scheme, std::int64_t chunks, std::int64_t rows) {
    using S = decltype(scheme);
    const std::int64_t K = chunks * S::chunk;
    std::vector<std::uint8_t> w(static_cast<std::size_t>(rows * chunks * 32));
    for (auto& b : w) b = static_cast<std::uint8_t>(uniform_int<int>(g, 1, 0, 255)[0]);
    if (S::bits == 8)
      for (auto& b : w) b = b == 0 ? 1 : b;
    std::vector<std::int8_t> x(static_cast<std::size_t>(K));
    for (auto& v : x) v = static_cast<std::int8_t>(uniform_int<int>(g, 1, -127, 127)[0]);
    const std::int64_t nseg = cq::segments(K, 0);
    std::vector<std::int32_t> xo(static_cast<std::size_t>(nseg));
    cq::segment_offsets<S>(x.data(), K, 0, xo.data());
    std::vector<std::int8_t> xs(static_cast<std::size_t>(cq::matvec::arranged_bytes<S>(chunks)));
    cq::matvec::arrange<S>(x.data(), chunks, xs.data());
    std::vector<float> out(static_cast<std::size_t>(rows) + 1, -1.0f);
    cq::matvec::rows<S>(w.data(), chunks * 32, rows, xs.data(), chunks, xo.data(), out.data());
    const std::int64_t seg = cq::flush_planes * 32;
    for (std::int64_t n = 0; n < rows; ++n) {
      const std::uint8_t* wr = w.data() + n * chunks * 32;
      float want = 0.0f;
      for (std::int64_t s0 = 0; s0 < K; s0 += seg) {
        long long sum = 0;
        for (std::int64_t k = s0; k < std::min(K, s0 + seg); ++k) sum += (long long)(cq::code_at<S>(wr, k) - S::offset) * x[k];
        want += float(sum);
      }
      ASSERT_EQ(out[n], want) << "matvec " << S::name << " chunks " << chunks << " rows " << rows << " [" << n << "]";
    }
    ASSERT_EQ(out[rows], -1.0f) << "matvec " << S::name << " wrote past its rows";
  };
  for (std::int64_t rows : {1, 3, 4, 7, 9}) {
    for (std::int64_t chunks : {1, 5, 6}) {
      matvec(q::int8{}, chunks, rows);
      matvec(q::int4{}, chunks, rows);
      matvec(q::ternary{}, chunks, rows);
    }
  }
  matvec(q::int8{}, 2 * cq::flush_planes + 1, 5);
  matvec(q::int4{}, cq::flush_planes + 1, 5);
  matvec(q::ternary{}, cq::flush_planes / 2 + 1, 5);
#endif
  all(cq::isa_portable{}, "portable");
#if defined(__AVX2__)
  all(cq::isa_avx2{}, "avx2");
  {
    // the AVX2 one-row int4 g32 tile (dot.hpp's int4_g32_row) where a block of eight
    // planes holds a padding plane: K = 480 packs 8 chunks (16 planes) for 15 groups, so
    // the second block goes the tail's way; each row's 15 scales are followed by NaN,
    // which must never be read (x is 0 past K, as quantize_activations pads it)
    using S = q::int4;
    constexpr int C = 4;
    const std::int64_t chunks = 8, K = 480, Kp = chunks * S::chunk, G = 15;
    std::vector<std::uint8_t> w(static_cast<std::size_t>(C * chunks * 32));
    for (auto& b : w) b = static_cast<std::uint8_t>(uniform_int<int>(g, 1, 0, 255)[0]);
    std::vector<std::int8_t> x(static_cast<std::size_t>(Kp), 0);
    for (std::int64_t k = 0; k < K; ++k) x[k] = static_cast<std::int8_t>(uniform_int<int>(g, 1, -127, 127)[0]);
    std::vector<kiln::half> sc(static_cast<std::size_t>(C * (G + 1)), kiln::half(std::numeric_limits<float>::quiet_NaN()));
    const std::uint8_t* wp[C];
    const kiln::half* sp[C];
    for (int c = 0; c < C; ++c) {
      wp[c] = w.data() + c * chunks * 32;
      sp[c] = sc.data() + c * (G + 1);
      for (std::int64_t gi = 0; gi < G; ++gi) sc[c * (G + 1) + gi] = float(uniform_int<int>(g, 1, 1, 4)[0]);
    }
    std::vector<std::int32_t> xo(static_cast<std::size_t>(cq::segments(Kp, 1)));
    cq::segment_offsets<S>(x.data(), Kp, 1, xo.data());
    const std::int8_t* xp[1] = {x.data()};
    const std::int32_t* op[1] = {xo.data()};
    float out[1][C];
    cq::qdot<S, 1, C>(cq::isa_avx2{}, wp, xp, chunks, 1, sp, G, out, op);
    for (int c = 0; c < C; ++c) {
      double want = 0;
      for (std::int64_t gi = 0; gi < G; ++gi) {
        long long sum = 0;
        for (std::int64_t k = gi * 32; k < (gi + 1) * 32; ++k) sum += (long long)(cq::code_at<S>(wp[c], k) - S::offset) * x[k];
        want += double(sum) * double(float(sp[c][gi]));
      }
      ASSERT_EQ(double(out[0][c]), want) << "avx2 int4 g32 row with a padding plane [" << c << "]";
    }
  }
#endif
#if defined(KILN_QUANT_HAS_VNNI)
  all(cq::isa_vnni{}, "vnni");
#endif
}
