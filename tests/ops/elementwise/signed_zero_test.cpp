// tests/ops/elementwise/signed_zero_test.cpp — the sign of a zero result must not depend on
// whether an element lands in a SIMD lane or in the scalar tail (or on the vector width).
// Operands cycle through the combinations of +0 and -0 with a period of 4, and lengths of
// 23 and 1031 leave a tail of 7 elements on every width (4, 8, 16 lanes), so each
// combination meets both paths; every position holding the same combination must give
// the same bits. Where IEEE 754 fixes the result (negation, |x|, subtraction), it is
// checked too: -(+0) = -0, -(-0) = +0, |-0| = +0, +0 - +0 = +0, -0 - +0 = -0.
#include "check.hpp"

#include <bit>
#include <cstdint>

using namespace kiln_test;

template <class B>
class signed_zero_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(signed_zero_test, backend_types);

namespace {

float zero(bool negative) { return negative ? -0.0f : 0.0f; }

/// f(a, b) over operands a[i] = ±0 by bit 0 of i, b[i] = ±0 by bit 1; every position of
/// one combination must hold the same bits, and (when given) ieee(a, b) exactly.
template <class B, class F>
void check_zero_signs(const char* op, const F& f, float (*ieee)(float, float) = nullptr) {
  for (std::size_t n : {std::size_t(23), std::size_t(1031)}) {
    std::vector<float> a(n), b(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = zero(i & 1);
      b[i] = zero(i & 2);
    }
    const auto got = eval<float, B>(f, a, b);
    for (std::size_t i = 0; i < n; ++i) {
      const auto bits = std::bit_cast<std::uint32_t>(got[i]);
      EXPECT_EQ(bits, std::bit_cast<std::uint32_t>(got[i % 4]))
          << op << "(" << a[i] << ", " << b[i] << ") at " << i << " of " << n << " gives " << got[i]
          << " where element " << i % 4 << " gives " << got[i % 4];
      if (ieee) {
        EXPECT_EQ(bits, std::bit_cast<std::uint32_t>(ieee(a[i], b[i])))
            << op << "(" << a[i] << ", " << b[i] << ") at " << i << " of " << n << " gives " << got[i];
      }
    }
  }
}

}  // namespace

TYPED_TEST(signed_zero_test, negation) {
  check_zero_signs<TypeParam>("neg", [](const auto& a, const auto&) { return -a; },
                              [](float a, float) { return -a; });
  check_zero_signs<TypeParam>("neg(neg)", [](const auto& a, const auto& b) { return -(-a) + b * 0.0f; },
                              [](float a, float b) { return a + b * 0.0f; });
}

TYPED_TEST(signed_zero_test, abs) {
  check_zero_signs<TypeParam>("abs", [](const auto& a, const auto&) { return kiln::abs(a); },
                              [](float a, float) { return std::abs(a); });
}

TYPED_TEST(signed_zero_test, subtraction) {
  check_zero_signs<TypeParam>("sub", [](const auto& a, const auto& b) { return a - b; },
                              [](float a, float b) { return a - b; });
  check_zero_signs<TypeParam>("0 - x", [](const auto& a, const auto&) { return 0.0f - a; },
                              [](float a, float) { return 0.0f - a; });
  check_zero_signs<TypeParam>("x - 0", [](const auto& a, const auto&) { return a - 0.0f; },
                              [](float a, float) { return a - 0.0f; });
}

// min, max, relu and clamp of equal zeros may return either (IEEE 754 leaves the sign of
// min(+0, -0) open), but not differently in lanes and tail.
TYPED_TEST(signed_zero_test, selections) {
  check_zero_signs<TypeParam>("min", [](const auto& a, const auto& b) { return kiln::min(a, b); });
  check_zero_signs<TypeParam>("max", [](const auto& a, const auto& b) { return kiln::max(a, b); });
  check_zero_signs<TypeParam>("relu", [](const auto& a, const auto&) { return kiln::relu(a); });
  check_zero_signs<TypeParam>("leaky_relu", [](const auto& a, const auto&) { return kiln::leaky_relu(a); });
  check_zero_signs<TypeParam>("clamp", [](const auto& a, const auto& b) { return kiln::clamp(a, b, 1.0f); });
  check_zero_signs<TypeParam>("clamp", [](const auto& a, const auto& b) { return kiln::clamp(a, -1.0f, b); });
}

namespace {

/// neg_op on batches of Arch (plain floats when Arch is void): IEEE negation, bit for bit.
template <class Arch>
void check_neg_lanes(const char* label) {
  const float in[] = {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min()};
  for (float x : in) {
    float lane = 0.0f;
    if constexpr (std::is_void_v<Arch>) lane = kiln::neg_op::apply(x);
    else lane = kiln::neg_op::apply(xsimd::batch<float, Arch>(x)).get(0);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(lane), std::bit_cast<std::uint32_t>(x) ^ 0x80000000u)
        << label << ": -(" << x << ") gives " << lane;
  }
}

}  // namespace

// Every vector width this build can run: xsimd spells a batch's unary minus 0 - x on
// AVX-512, where -(+0) came out +0.
TEST(signed_zero_cpu, negation_on_every_simd_width) {
  check_neg_lanes<void>("scalar");
#if XSIMD_WITH_SSE2
  check_neg_lanes<xsimd::sse2>("sse2");
#endif
#if XSIMD_WITH_AVX2
  check_neg_lanes<xsimd::avx2>("avx2");
#endif
#if XSIMD_WITH_AVX512F
  check_neg_lanes<xsimd::avx512f>("avx512f");
#endif
}
