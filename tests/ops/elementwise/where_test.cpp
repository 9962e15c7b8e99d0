// tests/ops/elementwise/where_test.cpp — where(m, a, b) against Eigen's select: masks from
// comparisons (of the branches' dtype or another), uint8_t mask tensors (non-zero is
// true), scalar branches, NaN in the branches and in the compared values, every dtype.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class where_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(where_test, backend_types);

TYPED_TEST(where_test, f32_mask_from_comparison) {
  // a NaN in a makes a > 0 false, so b is chosen; NaN in the chosen branch comes through
  check_binary<TypeParam>([](const auto& a, const auto& b) { return kiln::where(a > 0.0f, a, b); },
                          [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return (a > 0.0).select(a, b); },
                          exact_tol);
}

TYPED_TEST(where_test, f32_scalar_branches) {
  check_unary<TypeParam>([](const auto& x) { return kiln::where(x < 1.0f, x, 0.25f); },
                         [](const ArrayXd& x) -> ArrayXd { return (x < 1.0).select(x, 0.25); }, exact_tol);
  check_unary<TypeParam>([](const auto& x) { return kiln::where(x != x, -1.0f, x * 2.0f); },
                         [](const ArrayXd& x) -> ArrayXd { return x.isNaN().select(-1.0, 2.0 * x); }, exact_tol);
}

TYPED_TEST(where_test, uint8_mask_tensor_nonzero_is_true) {
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n));
    const auto m = draw_int<std::uint8_t>(g, n, 0, 3);  // 0..3 and 255: zero and several non-zeros
    const auto a = draw(g, n, {}), b = draw(g, n, {});
    const auto got = eval<float, TypeParam>([](const auto& mt, const auto& at, const auto& bt) {
      return kiln::where(mt, at, bt);
    }, m, a, b);
    const ArrayXl ml = to_int64(m);
    const ArrayXd want = (ml != 0).select(to_double(a), to_double(b));
    EXPECT_TRUE(all_close(got, want, tol::exact));
  }
}

TYPED_TEST(where_test, stored_mask_round_trips) {
  // a comparison stored as 0/1 in a uint8_t tensor selects the same as the comparison itself
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n));
    const auto ha = draw(g, n, {}), hb = draw(g, n, {});
    auto a = kiln::from_host(c, {kiln::index_t(n)}, ha);
    auto b = kiln::from_host(c, {kiln::index_t(n)}, hb);
    auto m = kiln::empty<std::uint8_t>(c, {kiln::index_t(n)});
    m = a <= b;
    auto y = kiln::empty<float>(c, {kiln::index_t(n)});
    y = kiln::where(m, a - b, b - a);
    const ArrayXd ad = to_double(ha), bd = to_double(hb);
    const ArrayXd want = (ad <= bd).select(ad - bd, bd - ad);
    EXPECT_TRUE(all_close(y.to_host(), want, tol::exact));
  }
}

TYPED_TEST(where_test, integer_branches) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    // mask of the branches' own dtype
    check_int_binary<TypeParam, T>([](const auto& a, const auto& b) { return kiln::where(a < b, a, b); },
                                   [](const ArrayXl& a, const ArrayXl& b) -> ArrayXl { return (a < b).select(a, b); });
    check_int_unary<TypeParam, T>([](const auto& x) { return kiln::where(x, 7, x); },
                                  [](const ArrayXl& x) -> ArrayXl { return (x != 0).select(std::int64_t(7), x); });
  });
}

TYPED_TEST(where_test, mask_of_another_dtype) {
  // float comparisons choosing integer lanes and integer comparisons choosing float lanes:
  // the mask is converted between lane types
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n));
    const auto x = draw(g, n, {});
    const auto i32 = draw_int<std::int32_t>(g, n);
    const auto i8 = draw_int<std::int8_t>(g, n);
    const ArrayXd xd = to_double(x);
    const ArrayXl i32l = to_int64(i32), i8l = to_int64(i8);

    const auto got_i32 = eval<std::int32_t, TypeParam>(
        [](const auto& xt, const auto& it) { return kiln::where(xt > 0.0f, it, -it); }, x, i32);
    EXPECT_TRUE(all_equal(got_i32, wrap_to<std::int32_t>((xd > 0.0).select(i32l, -i32l))));

    const auto got_i8 = eval<std::int8_t, TypeParam>(
        [](const auto& xt, const auto& it) { return kiln::where(xt >= 1.0f, it, 5); }, x, i8);
    EXPECT_TRUE(all_equal(got_i8, wrap_to<std::int8_t>((xd >= 1.0).select(i8l, std::int64_t(5)))));

    const auto got_f32 = eval<float, TypeParam>(
        [](const auto& it, const auto& xt) { return kiln::where(it < 0, xt, 2.0f * xt); }, i8, x);
    const ArrayXd want_f32 = (i8l < 0).select(xd, 2.0 * xd);
    EXPECT_TRUE(all_close(got_f32, want_f32, tol::exact));
  }
}

TYPED_TEST(where_test, half_and_bfloat16_branches) {
  auto f = [](const auto& a, const auto& b) { return kiln::where(a > b, a, b); };
  auto o = [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return (a > b).select(a, b); };
  check_binary_lowp<TypeParam, kiln::half>(f, o, f16_tol);
  check_binary_lowp<TypeParam, kiln::bfloat16>(f, o, bf16_tol);
}
