// tests/ops/elementwise/clamp_test.cpp — x limited to [lo, hi] against Eigen: scalar and
// tensor bounds, NaN stays NaN, ±inf meet the bounds, every integer dtype.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class clamp_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(clamp_test, backend_types);

namespace {
template <class A, class Lo, class Hi>
auto eigen_clamp(const A& x, const Lo& lo, const Hi& hi) {
  return x.isNaN().select(x, x.max(lo).min(hi)).eval();
}
}  // namespace

TYPED_TEST(clamp_test, f32_scalar_bounds) {
  check_unary<TypeParam>([](const auto& x) { return kiln::clamp(x, -1.5f, 2.25f); },
                         [](const ArrayXd& x) -> ArrayXd { return eigen_clamp(x, -1.5, 2.25); }, exact_tol);
}

TYPED_TEST(clamp_test, f32_tensor_lower_bound) {
  // lo is a tensor in [-4, 0), hi a scalar above it (no special bounds: lo > hi means nothing)
  check_binary<TypeParam>([](const auto& x, const auto& lo) { return kiln::clamp(x, lo, 1.0f); },
                          [](const ArrayXd& x, const ArrayXd& lo) -> ArrayXd { return eigen_clamp(x, lo, 1.0); },
                          exact_tol, {}, {-4.0f, 0.0f, false});
}

TYPED_TEST(clamp_test, f32_tensor_upper_bound) {
  check_binary<TypeParam>([](const auto& x, const auto& hi) { return kiln::clamp(x, -1.0f, hi); },
                          [](const ArrayXd& x, const ArrayXd& hi) -> ArrayXd { return eigen_clamp(x, -1.0, hi); },
                          exact_tol, {}, {0.0f, 4.0f, false});
}

TYPED_TEST(clamp_test, integers) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    check_int_unary<TypeParam, T>([](const auto& x) { return kiln::clamp(x, 3, 100); },
                                  [](const ArrayXl& x) -> ArrayXl {
                                    return x.max(std::int64_t(3)).min(std::int64_t(100));
                                  });
  });
}

TYPED_TEST(clamp_test, half_and_bfloat16_operands) {
  auto f = [](const auto& x) { return kiln::clamp(x, -1.0f, 1.0f); };
  auto o = [](const ArrayXd& x) -> ArrayXd { return eigen_clamp(x, -1.0, 1.0); };
  check_unary_lowp<TypeParam, kiln::half>(f, o, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(f, o, bf16_tol);
}
