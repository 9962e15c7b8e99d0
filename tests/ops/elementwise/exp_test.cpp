// tests/ops/elementwise/exp_test.cpp — e^x against Eigen (double): the whole normal float
// range, overflow to inf, subnormal results, underflow to 0, specials, half/bfloat16 operands.
#include "check.hpp"

#include <bit>

using namespace kiln_test;

template <class B>
class exp_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(exp_test, backend_types);

namespace {
const auto kiln_exp = [](const auto& x) { return kiln::exp(x); };
// rounded to float, so that results beyond float's range meet the inf (or 0) kiln stores
const auto eigen_exp = [](const ArrayXd& x) -> ArrayXd { return x.exp().cast<float>().cast<double>(); };
}  // namespace

TYPED_TEST(exp_test, f32) { check_unary<TypeParam>(kiln_exp, eigen_exp, transcendental_tol); }

// Up to ln(FLT_MAX) = 88.7228, where kiln's exp (exp.hpp; kiln_exp in GLSL) keeps results
// of 2.4e38 .. 3.4e38 finite.
TYPED_TEST(exp_test, f32_whole_normal_range) {
  check_unary<TypeParam>(kiln_exp, eigen_exp, transcendental_tol, {-87.0f, 88.722f});
}

TYPED_TEST(exp_test, f32_overflow_and_underflow) {
  check_unary<TypeParam>(kiln_exp, eigen_exp, transcendental_tol, {88.73f, 200.0f});
  check_unary<TypeParam>(kiln_exp, eigen_exp, transcendental_tol, {-200.0f, -104.0f});
}

TYPED_TEST(exp_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_exp, eigen_exp, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_exp, eigen_exp, bf16_tol);
}

// e^x for x in [-103.97, -87.34] is a subnormal float: kiln's exp applies 2^n in one
// rounding, so results keep to an ulp of the subnormal spacing (2^-149) on the CPU. (GPU
// drivers may flush subnormals; the Vulkan backend is not held to this.)
TEST(exp_cpu, subnormal_results) {
  constexpr double subnormal_ulp = 1.401298464324817e-45;  // 2^-149
  check_unary<kiln_test::cpu>(kiln_exp, eigen_exp, tolerance{tol::transcendental, 2 * subnormal_ulp},
                              {-103.9f, -87.4f});
}

namespace {

/// kiln's exp on batches of architecture Arch (and on plain floats when Arch is void),
/// against std::exp in double, over ~1.1M floats spread over [-104, 89] plus specials.
template <class Arch>
void check_exp_lanes(const char* label) {
  std::vector<float> xs;  // every 1999th float of either sign, by bit pattern
  for (std::uint32_t b = 0; b <= std::bit_cast<std::uint32_t>(89.0f); b += 1999) xs.push_back(std::bit_cast<float>(b));
  for (std::uint32_t b = 0; b <= std::bit_cast<std::uint32_t>(104.0f); b += 1999) xs.push_back(-std::bit_cast<float>(b));
  const float specials[] = {0.0f, -0.0f, 88.7228f, 88.72283f, 88.7229f, -87.3365f, -103.97f, -103.98f};
  xs.insert(xs.end(), std::begin(specials), std::end(specials));
  std::vector<float> got(xs.size());
  if constexpr (std::is_void_v<Arch>) {
    for (std::size_t i = 0; i < xs.size(); ++i) got[i] = kiln::detail::exp_approx(xs[i]);
  } else {
    using batch = xsimd::batch<float, Arch>;
    xs.resize((xs.size() + batch::size - 1) / batch::size * batch::size, 0.0f);
    got.resize(xs.size());
    for (std::size_t i = 0; i < xs.size(); i += batch::size) {
      kiln::detail::exp_approx(batch::load_unaligned(&xs[i])).store_unaligned(&got[i]);
    }
  }
  double worst = 0.0;
  float worst_x = 0.0f;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double want = std::exp(double(xs[i]));
    if (std::isinf(static_cast<float>(want))) {
      EXPECT_TRUE(std::isinf(got[i]) && got[i] > 0) << label << ": exp(" << xs[i] << ") = " << got[i];
      continue;
    }
    int e = 0;
    std::frexp(want, &e);
    const double ulp = std::ldexp(1.0, std::max(e - 24, -149));  // subnormals: 2^-149 apart
    const double err = std::abs(double(got[i]) - want) / ulp;
    if (!(err <= worst)) {
      worst = err;
      worst_x = xs[i];
    }
  }
  EXPECT_LE(worst, 1.0) << label << ": worst at x = " << worst_x;
  // specials, lane by lane
  const float in[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), 1000.0f, -1000.0f};
  for (float x : in) {
    float y = 0.0f;
    if constexpr (std::is_void_v<Arch>) {
      y = kiln::detail::exp_approx(x);
    } else {
      y = kiln::detail::exp_approx(xsimd::batch<float, Arch>(x)).get(0);
    }
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(y)) << label;
    } else {
      EXPECT_EQ(y, std::exp(x)) << label << ": exp(" << x << ")";
    }
  }
}

}  // namespace

// Every vector width this machine runs, so that the path without AVX-512's scalef (two
// exact powers of two) is checked too, and the scalar tails' formula.
TEST(exp_cpu, within_an_ulp_on_every_simd_width) {
  check_exp_lanes<void>("scalar");
#if XSIMD_WITH_SSE2
  check_exp_lanes<xsimd::sse2>("sse2");
#endif
#if XSIMD_WITH_AVX2
  check_exp_lanes<xsimd::avx2>("avx2");
#endif
#if XSIMD_WITH_FMA3_AVX2
  check_exp_lanes<xsimd::fma3<xsimd::avx2>>("fma3<avx2>");
#endif
#if XSIMD_WITH_AVX512F
  check_exp_lanes<xsimd::avx512f>("avx512f");
#endif
}
