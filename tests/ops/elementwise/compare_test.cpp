// tests/ops/elementwise/compare_test.cpp — ==, !=, <, <=, >, >= against Eigen's comparisons,
// stored as 0/1 in uint8_t tensors: NaN compares unequal to everything (only != is true),
// -0 == 0, ties (inputs on a coarse grid), scalars on either side, every integer dtype and
// half operands.
#include "check.hpp"

#include <tuple>

using namespace kiln_test;

template <class B>
class compare_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(compare_test, backend_types);

namespace {

/// One comparison: its name, and one generic lambda that spells it for kiln tensors and
/// for Eigen arrays alike (the oracle).
template <class F>
struct comparison {
  const char* name;
  F op;
};

const auto comparisons = std::make_tuple(
    comparison{"==", [](const auto& a, const auto& b) { return a == b; }},
    comparison{"!=", [](const auto& a, const auto& b) { return a != b; }},
    comparison{"<", [](const auto& a, const auto& b) { return a < b; }},
    comparison{"<=", [](const auto& a, const auto& b) { return a <= b; }},
    comparison{">", [](const auto& a, const auto& b) { return a > b; }},
    comparison{">=", [](const auto& a, const auto& b) { return a >= b; }});

template <class Check>
void for_each_comparison(const Check& check) {
  std::apply([&](const auto&... c) { (check(c), ...); }, comparisons);
}

/// f(a, b) stored as a mask in a uint8_t tensor, against the Eigen mask oracle(a, b).
template <class B, class F, class O, class V>
void check_mask(const F& f, const O& oracle, const std::vector<V>& a, const std::vector<V>& b) {
  const auto got = eval<std::uint8_t, B>(f, a, b);
  if constexpr (std::is_integral_v<V>) {
    const ArrayXl al = to_int64(a), bl = to_int64(b);
    const ArrayXb want = oracle(al, bl);
    EXPECT_TRUE(all_equal(got, want));
  } else {
    const ArrayXd ad = to_double(a), bd = to_double(b);
    const ArrayXb want = oracle(ad, bd);
    EXPECT_TRUE(all_equal(got, want));
  }
}

}  // namespace

TYPED_TEST(compare_test, f32_tensors) {
  for_each_comparison([](const auto& c) {
    SCOPED_TRACE(c.name);
    auto g = rng();
    for (std::size_t n : test_sizes) {
      SCOPED_TRACE("size " + std::to_string(n));
      const auto a = draw_grid(g, n);
      auto b = draw_grid(g, n);
      std::rotate(b.begin(), b.begin() + std::ptrdiff_t(n / 3), b.end());  // NaN meets numbers
      check_mask<TypeParam>(c.op, c.op, a, b);
    }
    SCOPED_TRACE("every pair of special values");
    std::vector<float> a, b;
    for (float x : special_values) {
      for (float y : special_values) {
        a.push_back(x);
        b.push_back(y);
      }
    }
    check_mask<TypeParam>(c.op, c.op, a, b);
  });
}

TYPED_TEST(compare_test, f32_scalar_on_either_side) {
  for_each_comparison([](const auto& c) {
    SCOPED_TRACE(c.name);
    auto g = rng();
    for (std::size_t n : test_sizes) {
      SCOPED_TRACE("size " + std::to_string(n));
      const auto x = draw_grid(g, n);
      const auto got_right = eval<std::uint8_t, TypeParam>([&](const auto& t) { return c.op(t, 0.5f); }, x);
      const auto got_left = eval<std::uint8_t, TypeParam>([&](const auto& t) { return c.op(0.5f, t); }, x);
      const ArrayXd xd = to_double(x), half = ArrayXd::Constant(xd.size(), 0.5);
      const ArrayXb want_right = c.op(xd, half), want_left = c.op(half, xd);
      EXPECT_TRUE(all_equal(got_right, want_right));
      EXPECT_TRUE(all_equal(got_left, want_left));
    }
  });
}

TYPED_TEST(compare_test, integers) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_comparison([](const auto& c) {
      SCOPED_TRACE(c.name);
      auto g = rng();
      for (std::size_t n : test_sizes) {
        SCOPED_TRACE("size " + std::to_string(n) + ", dtype " + std::string(kiln::dtype_name_v<T>));
        // a small range meets ties; draw_int adds the dtype's extremes
        const auto a = draw_int<T>(g, n, 0, 3);
        auto b = draw_int<T>(g, n, 0, 3);
        std::rotate(b.begin(), b.begin() + std::ptrdiff_t(n / 3), b.end());
        check_mask<TypeParam>(c.op, c.op, a, b);
        const auto got = eval<std::uint8_t, TypeParam>([&](const auto& t) { return c.op(t, 2); }, a);
        const ArrayXl al = to_int64(a);
        const ArrayXb want = c.op(al, ArrayXl::Constant(al.size(), 2));
        EXPECT_TRUE(all_equal(got, want));
      }
    });
  });
}

TYPED_TEST(compare_test, half_operands) {
  for_each_comparison([](const auto& c) {
    SCOPED_TRACE(c.name);
    auto g = rng();
    for (std::size_t n : test_sizes) {
      SCOPED_TRACE("size " + std::to_string(n));
      const auto a = convert_all<kiln::half>(draw_grid(g, n));
      auto b = convert_all<kiln::half>(draw_grid(g, n));
      std::rotate(b.begin(), b.begin() + std::ptrdiff_t(n / 3), b.end());
      check_mask<TypeParam>(c.op, c.op, a, b);
    }
  });
}
