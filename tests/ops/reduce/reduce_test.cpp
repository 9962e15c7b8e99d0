// tests/ops/reduce/reduce_test.cpp — sum, mean, amax, amin, argmax, argmin and a custom
// reducer on every backend against a float64 reference: axes 0, 1, -1 and all elements,
// extents 1 .. 4097 and 1<<20 along the reduced axis, many short rows, transposed,
// sliced and broadcast inputs, keepdims, empty axes, NaN/inf, f16 and integer inputs.
// Tolerances: exact for amax/amin/argmax; sums to their accumulation bound
// (reduce_check.hpp: (n/16 + 64) * 2^-24 * sum|x|).
#include <gtest/gtest.h>

#include "reduce_check.hpp"

using namespace kiln_test;

template <class B>
class reduce_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(reduce_test, backend_types);

namespace {

/// A custom reducer: the product (one struct, no backend code).
struct prod_reducer {
  static constexpr std::string_view name = "prod";
  template <class V>
  static V identity() { return V(1); }
  template <class V>
  static V combine(const V& a, const V& b) { return a * b; }
  static constexpr std::string_view glsl_identity = "{T}(1)";
  static constexpr std::string_view glsl = "({0} * {1})";
};

/// Runs every reducer over `axis` (all: every element) of a random [shape] input and
/// compares with the reference.
template <class B>
void check_all_reducers(const kiln::shape& s, int axis, bool all = false) {
  auto& c = ctx<B>();
  auto g = rng();
  const auto host = uniform(g, static_cast<std::size_t>(s.numel()), -1.0f, 1.0f);
  auto x = kiln::from_host(c, s, std::span<const float>(host));
  const line_split p = split_of(s, axis, all);
  const std::string where = "shape " + s.to_string() + (all ? " all" : " axis " + std::to_string(axis));
  auto run = [&](auto&& e) {
    kiln::tensor<float, B> out;
    out = e;
    return out.to_host();
  };
  if (all) {
    EXPECT_TRUE(close(run(kiln::sum(x)), ref_reduce(host, p, red::sum), "sum " + where));
    EXPECT_TRUE(close(run(kiln::mean(x)), ref_reduce(host, p, red::mean), "mean " + where));
    EXPECT_TRUE(close(run(kiln::amax(x)), ref_reduce(host, p, red::max), "amax " + where));
    EXPECT_TRUE(close(run(kiln::min(x)), ref_reduce(host, p, red::min), "min " + where));
    kiln::tensor<std::int32_t, B> i;
    i = kiln::argmax(x);
    EXPECT_EQ(i.to_host(), ref_arg(host, p, true)) << where;
    i = kiln::argmin(x);
    EXPECT_EQ(i.to_host(), ref_arg(host, p, false)) << where;
    return;
  }
  EXPECT_TRUE(close(run(kiln::sum(x, axis)), ref_reduce(host, p, red::sum), "sum " + where));
  EXPECT_TRUE(close(run(kiln::mean(x, axis)), ref_reduce(host, p, red::mean), "mean " + where));
  EXPECT_TRUE(close(run(kiln::amax(x, axis)), ref_reduce(host, p, red::max), "amax " + where));
  EXPECT_TRUE(close(run(kiln::amin(x, axis)), ref_reduce(host, p, red::min), "amin " + where));
  kiln::tensor<std::int32_t, B> i;
  i = kiln::argmax(x, axis);
  EXPECT_EQ(i.to_host(), ref_arg(host, p, true)) << where;
  i = kiln::argmin(x, axis);
  EXPECT_EQ(i.to_host(), ref_arg(host, p, false)) << where;
}

}  // namespace

TYPED_TEST(reduce_test, last_axis_every_extent) {
  for (kiln::index_t n : {1, 7, 16, 17, 1000, 4097}) check_all_reducers<TypeParam>({3, n}, -1);
  check_all_reducers<TypeParam>({2, kiln::index_t(1) << 20}, 1);  // rows longer than a buffer
  check_all_reducers<TypeParam>({5000, 7}, -1);                   // many short rows
}

TYPED_TEST(reduce_test, first_axis_every_extent) {
  for (kiln::index_t n : {1, 7, 16, 17, 1000, 4097}) check_all_reducers<TypeParam>({n, 5}, 0);
  check_all_reducers<TypeParam>({33, 3000}, 0);  // more columns than one block
}

TYPED_TEST(reduce_test, middle_axis_and_rank_three) {
  check_all_reducers<TypeParam>({4, 17, 9}, 1);
  check_all_reducers<TypeParam>({4, 17, 9}, -3);
  check_all_reducers<TypeParam>({1, 1, 1}, 1);
}

TYPED_TEST(reduce_test, all_elements) {
  for (kiln::index_t n : {1, 7, 17, 1000, 4097}) check_all_reducers<TypeParam>({n}, 0, true);
  check_all_reducers<TypeParam>({37, 101}, 0, true);
  check_all_reducers<TypeParam>({(kiln::index_t(1) << 20) + 3}, 0, true);  // split across threads / workgroups
}

TYPED_TEST(reduce_test, keepdims_shapes) {
  auto& c = ctx<TypeParam>();
  auto x = kiln::full(c, {3, 4, 5}, 1.0f);
  kiln::tensor<float, TypeParam> y;
  y = kiln::sum(x, 1, true);
  EXPECT_EQ(y.shape(), kiln::shape({3, 1, 5}));
  EXPECT_EQ(y.to_host(), std::vector<float>(15, 4.0f));
  kiln::tensor<float, TypeParam> z;
  z = kiln::sum(x, 1);
  EXPECT_EQ(z.shape(), kiln::shape({3, 5}));
  kiln::tensor<float, TypeParam> t;
  t = kiln::sum(x);
  EXPECT_EQ(t.shape(), kiln::shape({}));
  EXPECT_EQ(t.to_host(), std::vector<float>{60.0f});
  // a keepdims result broadcast into a larger output: evaluated first, then broadcast
  auto w = kiln::empty<float>(c, {3, 4, 5});
  w = kiln::sum(x, 1, true) + x;
  EXPECT_EQ(w.to_host(), std::vector<float>(60, 5.0f));
}

TYPED_TEST(reduce_test, strided_transposed_and_broadcast_inputs) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const auto h = uniform(g, 40 * 30, -1.0f, 1.0f);
  auto x = kiln::from_host(c, {40, 30}, std::span<const float>(h));
  // transpose: sum over the last axis of x^T is the sum over x's first axis
  kiln::tensor<float, TypeParam> y;
  y = kiln::sum(kiln::transpose(x), -1);
  EXPECT_TRUE(close(y.to_host(), ref_reduce(h, split_of({40, 30}, 0), red::sum), "sum of transpose"));
  // a slice with a step: every other row, columns 3..23
  std::vector<float> hs;
  for (int r = 0; r < 40; r += 2)
    for (int k = 3; k < 23; ++k) hs.push_back(h[static_cast<std::size_t>(r * 30 + k)]);
  kiln::tensor<float, TypeParam> m;
  m = kiln::amax(kiln::slice(kiln::slice(x, 0, 0, 40, 2), 1, 3, 23), -1);
  EXPECT_TRUE(close(m.to_host(), ref_reduce(hs, split_of({20, 20}, -1), red::max), "amax of slice"));
  // a broadcast operand in the prologue: sum over axis 0 of x + row
  const auto hr = uniform(g, 30, -1.0f, 1.0f);
  auto row = kiln::from_host(c, {30}, std::span<const float>(hr));
  std::vector<float> sum_in(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) sum_in[i] = h[i] + hr[i % 30];
  kiln::tensor<float, TypeParam> s;
  s = kiln::sum(x + row, 0);
  EXPECT_TRUE(close(s.to_host(), ref_reduce(sum_in, split_of({40, 30}, 0), red::sum), "sum of x + row"));
}

TYPED_TEST(reduce_test, nan_and_inf) {
  auto& c = ctx<TypeParam>();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> h = {1, nan, 3, 4, /**/ 1, inf, -inf, 2, /**/ -inf, -inf, -inf, -inf, /**/ 5, 5, 1, 5};
  auto x = kiln::from_host(c, {4, 4}, std::span<const float>(h));
  kiln::tensor<float, TypeParam> y;
  y = kiln::sum(x, -1);
  auto s = y.to_host();
  EXPECT_TRUE(std::isnan(s[0]));
  EXPECT_TRUE(std::isnan(s[1]));  // inf + -inf
  EXPECT_EQ(s[2], -inf);
  EXPECT_EQ(s[3], 16.0f);
  y = kiln::amax(x, -1);
  s = y.to_host();
  EXPECT_TRUE(std::isnan(s[0]));
  EXPECT_EQ(s[1], inf);
  EXPECT_EQ(s[2], -inf);
  y = kiln::amin(x, -1);
  s = y.to_host();
  EXPECT_TRUE(std::isnan(s[0]));
  EXPECT_EQ(s[1], -inf);
  kiln::tensor<std::int32_t, TypeParam> i;
  i = kiln::argmax(x, -1);
  EXPECT_EQ(i.to_host(), (std::vector<std::int32_t>{1, 1, 0, 0}));  // NaN wins; first of ties
  i = kiln::argmin(x, -1);
  EXPECT_EQ(i.to_host(), (std::vector<std::int32_t>{1, 2, 0, 2}));
}

// A NaN inside a long row (the vector body, not a scalar tail): on x86 the vector max
// drops a NaN operand and xsimd's batch != is the ordered compare, so NaNs must be
// tracked apart. Rows of several vector widths, NaN at the middle and near the end.
TYPED_TEST(reduce_test, nan_in_long_rows) {
  auto& c = ctx<TypeParam>();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int n : {64, 100, 1000}) {
    std::vector<float> h(static_cast<std::size_t>(3 * n), 0.5f);
    h[static_cast<std::size_t>(n / 2)] = nan;
    h[static_cast<std::size_t>(2 * n - 3)] = nan;  // row 2 stays finite
    auto x = kiln::from_host(c, {3, n}, std::span<const float>(h));
    kiln::tensor<float, TypeParam> y;
    for (int op = 0; op < 2; ++op) {
      if (op == 0) y = kiln::amax(x, -1);
      else y = kiln::amin(x, -1);
      const auto s = y.to_host();
      EXPECT_TRUE(std::isnan(s[0]) && std::isnan(s[1])) << "n " << n << (op ? " amin" : " amax");
      EXPECT_EQ(s[2], 0.5f) << "n " << n;
    }
    kiln::tensor<std::int32_t, TypeParam> i;
    i = kiln::argmax(x, -1);
    EXPECT_EQ(i.to_host(), (std::vector<std::int32_t>{n / 2, n - 3, 0})) << "n " << n;
    i = kiln::argmin(x, -1);
    EXPECT_EQ(i.to_host(), (std::vector<std::int32_t>{n / 2, n - 3, 0})) << "n " << n;
  }
}

TYPED_TEST(reduce_test, empty_axes) {
  auto& c = ctx<TypeParam>();
  auto x = kiln::empty<float>(c, {3, 0});
  kiln::tensor<float, TypeParam> y;
  y = kiln::sum(x, 1);
  EXPECT_EQ(y.to_host(), std::vector<float>(3, 0.0f));
  y = kiln::amax(x, 1);
  EXPECT_EQ(y.to_host(), std::vector<float>(3, -std::numeric_limits<float>::infinity()));
  y = kiln::mean(x, 1);
  for (float v : y.to_host()) EXPECT_TRUE(std::isnan(v));
  kiln::tensor<float, TypeParam> e;
  e = kiln::sum(x, 0);  // empty result
  EXPECT_EQ(e.shape(), kiln::shape({0}));
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::argmax(x, 1); }), "argmax"));
  kiln::tensor<float, TypeParam> t;
  t = kiln::sum(x);
  EXPECT_EQ(t.to_host(), std::vector<float>{0.0f});
}

TYPED_TEST(reduce_test, one_element_and_rank_zero) {
  auto& c = ctx<TypeParam>();
  auto x = kiln::full(c, {}, 2.5f);
  kiln::tensor<float, TypeParam> y;
  y = kiln::sum(x);
  EXPECT_EQ(y.to_host(), std::vector<float>{2.5f});
  y = kiln::amax(x, 0);
  EXPECT_EQ(y.to_host(), std::vector<float>{2.5f});
  kiln::tensor<std::int32_t, TypeParam> i;
  i = kiln::argmax(kiln::full(c, {1}, 7.0f), 0);
  EXPECT_EQ(i.to_host(), std::vector<std::int32_t>{0});
}

TYPED_TEST(reduce_test, half_and_integer_inputs) {
  auto& c = ctx<TypeParam>();
  // f16 accumulates in float: 4096 ones sum to 4096 exactly (an f16 sum would stop at 2048)
  auto h = kiln::full(c, {2, 4096}, kiln::half(1.0f));
  kiln::tensor<kiln::half, TypeParam> hs;
  hs = kiln::sum(h, -1);
  for (auto v : hs.to_host()) EXPECT_EQ(static_cast<float>(v), 4096.0f);
  // int8 sums in int32
  std::vector<std::int8_t> hi(1000, 100);
  auto i8 = kiln::from_host(c, {1000}, std::span<const std::int8_t>(hi));
  kiln::tensor<std::int32_t, TypeParam> is;
  is = kiln::sum(i8);
  EXPECT_EQ(is.to_host(), std::vector<std::int32_t>{100000});
  // int32 max with a mask turned into numbers
  auto g = rng();
  const auto vals = uniform_int<std::int32_t>(g, 3 * 77, -100000, 100000);
  auto i32 = kiln::from_host(c, {3, 77}, std::span<const std::int32_t>(vals));
  kiln::tensor<std::int32_t, TypeParam> im;
  im = kiln::amax(i32, 1);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(im.to_host()[static_cast<std::size_t>(r)], *std::max_element(vals.begin() + r * 77, vals.begin() + (r + 1) * 77));
  }
  kiln::tensor<std::int32_t, TypeParam> cnt;
  cnt = kiln::sum(kiln::cast<std::int32_t>(i32 > 0), -1);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(cnt.to_host()[static_cast<std::size_t>(r)],
              std::count_if(vals.begin() + r * 77, vals.begin() + (r + 1) * 77, [](int v) { return v > 0; }));
  }
}

TYPED_TEST(reduce_test, custom_reducer) {
  auto& c = ctx<TypeParam>();
  std::vector<float> h = {1, 2, 3, 4, 0.5f, 0.5f, 2, 2};
  auto x = kiln::from_host(c, {2, 4}, std::span<const float>(h));
  kiln::tensor<float, TypeParam> y;
  y = kiln::reduce<prod_reducer>(x, -1);
  EXPECT_EQ(y.to_host(), (std::vector<float>{24.0f, 1.0f}));
  kiln::tensor<float, TypeParam> all;
  all = kiln::reduce<prod_reducer>(x * 2.0f);
  EXPECT_EQ(all.to_host(), std::vector<float>{24.0f * 256.0f});
}

TYPED_TEST(reduce_test, errors_name_the_op_and_input) {
  auto& c = ctx<TypeParam>();
  auto x = kiln::empty<float>(c, {3, 4});
  const std::string msg = shape_error_of([&] { (void)kiln::sum(x, 2); });
  EXPECT_TRUE(has(msg, "kiln::sum"));
  EXPECT_TRUE(has(msg, "axis 2"));
  EXPECT_TRUE(has(msg, "[3, 4]"));
  kiln::tensor<float, TypeParam> e;
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::mean(e, 0); }), "empty tensor"));
  auto y = kiln::empty<float>(c, {4});
  EXPECT_TRUE(has(shape_error_of([&] { y = kiln::sum(x, 1); }), "cannot write"));
}
