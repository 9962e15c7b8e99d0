// tests/ops/elementwise/gelu_test.cpp — GELU, erf form, against Eigen (double, erf from
// unsupported/Eigen/SpecialFunctions): x/2 * (1 + erf(x / sqrt(2))).
// At -inf the formula is -inf * 0: NaN, in double too; the oracle is the formula, so the
// specials hold kiln to that.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class gelu_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(gelu_test, backend_types);

namespace {
const auto kiln_gelu = [](const auto& x) { return kiln::gelu(x); };
const auto eigen_gelu = [](const ArrayXd& x) -> ArrayXd { return 0.5 * x * (1.0 + (x / std::sqrt(2.0)).erf()); };
// for x < 0, 1 + erf cancels: the float error there is absolute (tol::gelu_abs)
constexpr tolerance gelu_tol{tol::transcendental, tol::gelu_abs};
constexpr tolerance gelu_f16_tol{tol::f16, tol::gelu_abs};
constexpr tolerance gelu_bf16_tol{tol::bf16, tol::gelu_abs};
}  // namespace

TYPED_TEST(gelu_test, f32) { check_unary<TypeParam>(kiln_gelu, eigen_gelu, gelu_tol); }

TYPED_TEST(gelu_test, f32_tails) { check_unary<TypeParam>(kiln_gelu, eigen_gelu, gelu_tol, {-20.0f, 20.0f}); }

TYPED_TEST(gelu_test, in_a_chain) {
  // a product feeding gelu in the same kernel (no sum: a * b + c may be contracted to an
  // FMA, and then cancels differently from any oracle rounding)
  check_binary<TypeParam>([](const auto& a, const auto& b) { return kiln::gelu(a * b); },
                          [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return eigen_gelu(a * b); }, gelu_tol,
                          {-2.0f, 2.0f}, {-2.0f, 2.0f});
}

TYPED_TEST(gelu_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_gelu, eigen_gelu, gelu_f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_gelu, eigen_gelu, gelu_bf16_tol);
}
