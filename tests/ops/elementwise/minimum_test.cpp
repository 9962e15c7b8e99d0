// tests/ops/elementwise/minimum_test.cpp — kiln::min, the elementwise minimum, against Eigen:
// a NaN in either operand gives NaN, tensors and scalars on either side, every integer dtype.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class minimum_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(minimum_test, backend_types);

namespace {
// NaN-propagating (Eigen's own min leaves NaN handling unspecified, so say it explicitly)
ArrayXd eigen_min(const ArrayXd& a, const ArrayXd& b) {
  return (a.isNaN() || b.isNaN()).select(ArrayXd::Constant(a.size(), std::nan("")), a.min(b));
}
ArrayXd eigen_min(const ArrayXd& a, double s) { return eigen_min(a, ArrayXd::Constant(a.size(), s)); }
}  // namespace

TYPED_TEST(minimum_test, f32_tensors_propagate_nan) {
  // check_binary also pairs NaN, ±inf and ±0 with each other
  check_binary<TypeParam>([](const auto& a, const auto& b) { return kiln::min(a, b); },
                          [](const ArrayXd& a, const ArrayXd& b) { return eigen_min(a, b); }, exact_tol);
}

TYPED_TEST(minimum_test, f32_scalar_on_either_side) {
  check_unary<TypeParam>([](const auto& x) { return kiln::min(x, 0.5f); },
                         [](const ArrayXd& x) { return eigen_min(x, 0.5); }, exact_tol);
  check_unary<TypeParam>([](const auto& x) { return kiln::min(-1.0f, x); },
                         [](const ArrayXd& x) { return eigen_min(x, -1.0); }, exact_tol);
}

TYPED_TEST(minimum_test, integers) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    check_int_binary<TypeParam, T>([](const auto& a, const auto& b) { return kiln::min(a, b); },
                                   [](const ArrayXl& a, const ArrayXl& b) -> ArrayXl { return a.min(b); });
    check_int_unary<TypeParam, T>([](const auto& x) { return kiln::min(x, 5); },
                                  [](const ArrayXl& x) -> ArrayXl { return x.min(std::int64_t(5)); });
  });
}

TYPED_TEST(minimum_test, half_and_bfloat16_operands) {
  auto f = [](const auto& a, const auto& b) { return kiln::min(a, b); };
  auto o = [](const ArrayXd& a, const ArrayXd& b) { return eigen_min(a, b); };
  check_binary_lowp<TypeParam, kiln::half>(f, o, f16_tol);
  check_binary_lowp<TypeParam, kiln::bfloat16>(f, o, bf16_tol);
}
