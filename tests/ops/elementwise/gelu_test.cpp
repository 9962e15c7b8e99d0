// tests/ops/elementwise/gelu_test.cpp — GELU, erf form, against a double oracle written as
// x/2 * erfc(-x / sqrt(2)), which is x/2 * (1 + erf(x / sqrt(2))) without its cancellation
// for x < 0 (in double too, 1 + erf loses all digits near x = -8). Held in relative error
// on both sides, dense over the negative tail down to where results underflow.
// At -inf the formula is -inf * 0: NaN, in double too; the specials hold kiln to that.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class gelu_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(gelu_test, backend_types);

namespace {
const auto kiln_gelu = [](const auto& x) { return kiln::gelu(x); };
const auto eigen_gelu = [](const ArrayXd& x) -> ArrayXd {
  return x.unaryExpr([](double v) { return 0.5 * v * std::erfc(-v / std::sqrt(2.0)); });
};
const auto ref_gelu = [](long double x) { return x / 2 * std::erfc(-x / std::sqrt(2.0L)); };
constexpr tolerance gelu_tol{tol::gelu, tol::transcendental_abs};
}  // namespace

TYPED_TEST(gelu_test, f32) { check_unary<TypeParam>(kiln_gelu, eigen_gelu, gelu_tol); }

TYPED_TEST(gelu_test, f32_tails) { check_unary<TypeParam>(kiln_gelu, eigen_gelu, gelu_tol, {-20.0f, 20.0f}); }

// Where 1 + erf cancelled: relative error was up to 10 near x = -5.5 (absolute ~1e-6).
// Results fall below FLT_MIN near x = -13.2 and round to 0 near x = -14.4.
TYPED_TEST(gelu_test, f32_negative_tail_in_relative_error) {
  check_unary_dense<TypeParam>(kiln_gelu, ref_gelu, -15.0f, 0.0f, tol::gelu);
  check_unary_dense<TypeParam>(kiln_gelu, ref_gelu, -3.0f, 0.0f, tol::gelu);
  check_unary_dense<TypeParam>(kiln_gelu, ref_gelu, 0.0f, 12.0f, tol::gelu);
}

TYPED_TEST(gelu_test, in_a_chain) {
  // a product feeding gelu in the same kernel (no sum: a * b + c may be contracted to an
  // FMA, and then cancels differently from any oracle rounding)
  check_binary<TypeParam>([](const auto& a, const auto& b) { return kiln::gelu(a * b); },
                          [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return eigen_gelu(round_f32(a * b)); },
                          gelu_tol, {-2.0f, 2.0f}, {-2.0f, 2.0f});
}

TYPED_TEST(gelu_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_gelu, eigen_gelu, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_gelu, eigen_gelu, bf16_tol);
}

namespace {

/// gelu_op's body on one SIMD width (void: the scalar body), dense over [-15, 12] in
/// relative error against long double, and the specials lane by lane.
template <class Arch>
void check_gelu_lanes(const char* label) {
  std::vector<float> xs;
  for (int i = 0; i <= 270000; ++i) xs.push_back(-15.0f + 27.0f * static_cast<float>(i) / 270000.0f);
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 1e30f, -1e30f, -13.5f, -14.5f};
  const std::size_t dense = xs.size();
  // results below FLT_MIN: the relative tolerance at FLT_MIN plus one subnormal spacing
  const long double subnormal_tol = tol::gelu * static_cast<long double>(std::numeric_limits<float>::min()) + 1.5e-45L;
  xs.insert(xs.end(), std::begin(specials), std::end(specials));
  std::vector<float> got(xs.size());
  if constexpr (std::is_void_v<Arch>) {
    for (std::size_t i = 0; i < xs.size(); ++i) got[i] = kiln::gelu_op::apply(xs[i]);
  } else {
    using batch = xsimd::batch<float, Arch>;
    for (std::size_t i = 0; i < xs.size(); ++i) got[i] = kiln::gelu_op::apply(batch(xs[i])).get(i % batch::size);
  }
  double worst = 0.0;
  float worst_x = 0.0f;
  for (std::size_t i = 0; i < dense; ++i) {
    const long double want = ref_gelu(static_cast<long double>(xs[i]));
    if (std::abs(want) < std::numeric_limits<float>::min()) {  // below FLT_MIN: tol at FLT_MIN, one spacing
      EXPECT_LE(std::abs(static_cast<long double>(got[i]) - want), subnormal_tol) << label << ": gelu(" << xs[i] << ")";
      continue;
    }
    const double err = static_cast<double>(std::abs((static_cast<long double>(got[i]) - want) / want));
    if (!(err <= worst)) {
      worst = err;
      worst_x = xs[i];
    }
  }
  EXPECT_LE(worst, tol::gelu) << label << ": worst at x = " << worst_x;
  const float* s = got.data() + dense;
  EXPECT_TRUE(s[0] == 0.0f && !std::signbit(s[0])) << label << ": gelu(+0) = " << s[0];
  EXPECT_TRUE(s[1] == 0.0f && std::signbit(s[1])) << label << ": gelu(-0) = " << s[1];
  EXPECT_TRUE(std::isnan(s[2])) << label << ": gelu(NaN) = " << s[2];
  EXPECT_EQ(s[3], std::numeric_limits<float>::infinity()) << label;
  EXPECT_TRUE(std::isnan(s[4])) << label << ": gelu(-inf) is -inf * 0, NaN; got " << s[4];
  EXPECT_EQ(s[5], 1e30f) << label;
  EXPECT_TRUE(s[6] == 0.0f && std::signbit(s[6])) << label << ": gelu(-1e30) = " << s[6];
  EXPECT_LE(std::abs(static_cast<long double>(s[7]) - ref_gelu(-13.5L)), subnormal_tol) << label;
  EXPECT_TRUE(s[8] == 0.0f && std::signbit(s[8])) << label << ": gelu(-14.5) = " << s[8];
}

}  // namespace

// Every vector width this machine runs (the AVX-512 body divides by a refined reciprocal
// estimate and scales by scalef; the others divide and build 2^n from exponent bits), and
// the scalar body.
TEST(gelu_cpu, within_tolerance_on_every_simd_width) {
  check_gelu_lanes<void>("scalar");
#if XSIMD_WITH_SSE2
  check_gelu_lanes<xsimd::sse2>("sse2");
#endif
#if XSIMD_WITH_AVX2
  check_gelu_lanes<xsimd::avx2>("avx2");
#endif
#if XSIMD_WITH_FMA3_AVX2
  check_gelu_lanes<xsimd::fma3<xsimd::avx2>>("fma3<avx2>");
#endif
#if XSIMD_WITH_AVX512F
  check_gelu_lanes<xsimd::avx512f>("avx512f");
#endif
}
