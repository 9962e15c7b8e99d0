// tests/ops/elementwise/maximum_test.cpp — kiln::max, the elementwise maximum, against Eigen:
// a NaN in either operand gives NaN, tensors and scalars on either side, every integer dtype.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class maximum_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(maximum_test, backend_types);

namespace {
// NaN-propagating (Eigen's own max leaves NaN handling unspecified, so say it explicitly)
ArrayXd eigen_max(const ArrayXd& a, const ArrayXd& b) {
  return (a.isNaN() || b.isNaN()).select(ArrayXd::Constant(a.size(), std::nan("")), a.max(b));
}
ArrayXd eigen_max(const ArrayXd& a, double s) { return eigen_max(a, ArrayXd::Constant(a.size(), s)); }
}  // namespace

TYPED_TEST(maximum_test, f32_tensors_propagate_nan) {
  // check_binary also pairs NaN, ±inf and ±0 with each other
  check_binary<TypeParam>([](const auto& a, const auto& b) { return kiln::max(a, b); },
                          [](const ArrayXd& a, const ArrayXd& b) { return eigen_max(a, b); }, exact_tol);
}

TYPED_TEST(maximum_test, f32_scalar_on_either_side) {
  check_unary<TypeParam>([](const auto& x) { return kiln::max(x, 0.5f); },
                         [](const ArrayXd& x) { return eigen_max(x, 0.5); }, exact_tol);
  check_unary<TypeParam>([](const auto& x) { return kiln::max(-1.0f, x); },
                         [](const ArrayXd& x) { return eigen_max(x, -1.0); }, exact_tol);
}

TYPED_TEST(maximum_test, integers) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    check_int_binary<TypeParam, T>([](const auto& a, const auto& b) { return kiln::max(a, b); },
                                   [](const ArrayXl& a, const ArrayXl& b) -> ArrayXl { return a.max(b); });
    check_int_unary<TypeParam, T>([](const auto& x) { return kiln::max(x, 5); },
                                  [](const ArrayXl& x) -> ArrayXl { return x.max(std::int64_t(5)); });
  });
}

TYPED_TEST(maximum_test, half_and_bfloat16_operands) {
  auto f = [](const auto& a, const auto& b) { return kiln::max(a, b); };
  auto o = [](const ArrayXd& a, const ArrayXd& b) { return eigen_max(a, b); };
  check_binary_lowp<TypeParam, kiln::half>(f, o, f16_tol);
  check_binary_lowp<TypeParam, kiln::bfloat16>(f, o, bf16_tol);
}
