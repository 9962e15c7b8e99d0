// tests/ops/elementwise/silu_test.cpp — x * sigmoid(x) against Eigen (double).
// At -inf the formula is -inf / inf: NaN, in double too; the oracle is the formula, so the
// specials hold kiln to that.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class silu_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(silu_test, backend_types);

namespace {
const auto kiln_silu = [](const auto& x) { return kiln::silu(x); };
const auto eigen_silu = [](const ArrayXd& x) -> ArrayXd { return x / (1.0 + (-x).exp()); };
}  // namespace

TYPED_TEST(silu_test, f32) { check_unary<TypeParam>(kiln_silu, eigen_silu, transcendental_tol); }

TYPED_TEST(silu_test, f32_tails) { check_unary<TypeParam>(kiln_silu, eigen_silu, transcendental_tol, {-80.0f, 80.0f}); }

TYPED_TEST(silu_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_silu, eigen_silu, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_silu, eigen_silu, bf16_tol);
}
