// tests/ops/elementwise/neg_test.cpp — unary minus against Eigen: floats (-0, ±inf, NaN)
// and integers (wrapping: -(-128) is -128 in int8).
#include "check.hpp"

using namespace kiln_test;

template <class B>
class neg_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(neg_test, backend_types);

TYPED_TEST(neg_test, f32) {
  check_unary<TypeParam>([](const auto& x) { return -x; }, [](const ArrayXd& x) -> ArrayXd { return -x; }, exact_tol);
}

TYPED_TEST(neg_test, f32_sign_of_zero_flips) {
  auto& c = ctx<TypeParam>();
  const std::vector<float> h = {0.0f, -0.0f};
  auto x = kiln::from_host(c, {2}, h);
  auto y = kiln::empty<float>(c, {2});
  y = -x;
  const auto got = y.to_host();
  for (std::size_t i = 0; i < h.size(); ++i) EXPECT_NE(std::signbit(got[i]), std::signbit(h[i])) << "element " << i;
}

TYPED_TEST(neg_test, integers_wrap) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    check_int_unary<TypeParam, T>([](const auto& x) { return -x; }, [](const ArrayXl& x) -> ArrayXl { return -x; });
  });
}

TYPED_TEST(neg_test, in_a_chain) {
  // negation is exact, so the chain rounds once (in the product)
  check_binary<TypeParam>([](const auto& a, const auto& b) { return -(-a * b); },
                          [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return -(-a * b); }, exact_tol);
}
