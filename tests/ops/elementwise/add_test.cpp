// tests/ops/elementwise/add_test.cpp — a + b against Eigen: floats, integers (wrapping),
// scalars on either side, half/bfloat16 operands, and an output large enough to stream.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class add_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(add_test, backend_types);

TYPED_TEST(add_test, f32_tensors) {
  check_binary<TypeParam>([](const auto& a, const auto& b) { return a + b; },
                          [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return a + b; }, exact_tol);
}

TYPED_TEST(add_test, f32_scalar_on_either_side) {
  check_unary<TypeParam>([](const auto& x) { return x + 2.75f; },
                         [](const ArrayXd& x) -> ArrayXd { return x + 2.75; }, exact_tol);
  check_unary<TypeParam>([](const auto& x) { return -1.25f + x; },
                         [](const ArrayXd& x) -> ArrayXd { return -1.25 + x; }, exact_tol);
}

TYPED_TEST(add_test, integers_wrap) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    check_int_binary<TypeParam, T>([](const auto& a, const auto& b) { return a + b; },
                                   [](const ArrayXl& a, const ArrayXl& b) -> ArrayXl { return a + b; });
    // the maximum is among the inputs, so int8 127 + 1 = -128 (and u8 255 + 1 = 0) is checked
    check_int_unary<TypeParam, T>([](const auto& x) { return x + 1; },
                                  [](const ArrayXl& x) -> ArrayXl { return x + 1; });
  });
}

TYPED_TEST(add_test, half_and_bfloat16_operands) {
  auto f = [](const auto& a, const auto& b) { return a + b; };
  auto o = [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return a + b; };
  check_binary_lowp<TypeParam, kiln::half>(f, o, f16_tol);
  check_binary_lowp<TypeParam, kiln::bfloat16>(f, o, bf16_tol);
}

// 16 MiB and more of float output takes the streaming-store path (unaligned head, vector
// body, scalar tail on each thread).
TYPED_TEST(add_test, large_output) {
  auto g = rng();
  const std::size_t n = (std::size_t(1) << 22) + 3;
  const auto a = draw(g, n, {}), b = draw(g, n, {-4.0f, 4.0f, false});
  const auto got = eval<float, TypeParam>([](const auto& x, const auto& y) { return x + y; }, a, b);
  const ArrayXd want = to_double(a) + to_double(b);
  EXPECT_TRUE(all_close(got, want, tol::exact));
}
