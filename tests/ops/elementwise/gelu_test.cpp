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
