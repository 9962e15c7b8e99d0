// tests/ops/reduce/cumsum_test.cpp — kiln::cumsum on every backend against a float64
// reference computed here: extents 1 .. 4097 and lines past 64Ki, every axis of a 3-D
// tensor (negative too), transposed and sliced views as input and output, a prologue with
// broadcasting and an epilogue (one kernel), f32 / f16 / bf16 (result in the input's
// dtype) and int8 / int32 / uint8 (int32 result, wrapping), empty and rank-0 tensors,
// NaN / inf propagation, in-place use, and the axis error.
// Tolerance of element k of a line (float): the prefix x[0] + ... + x[k] is a sum of k + 1
// terms, held to reduce_check.hpp's accumulation bound, plus the output dtype's rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "reduce_check.hpp"

using namespace kiln_test;

template <class B>
class cumsum_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(cumsum_test, backend_types);

namespace {

/// Inclusive prefix sums of every line of x (row-major, shape split by p) in float64;
/// `rel`: the output dtype's relative rounding.
reference ref_cumsum(const std::vector<double>& x, const line_split& p, double rel = 0.0) {
  reference r;
  r.value.resize(x.size());
  r.tol.resize(x.size());
  for (std::int64_t o = 0; o < p.outer; ++o) {
    for (std::int64_t j = 0; j < p.inner; ++j) {
      double acc = 0, abs_sum = 0;
      for (std::int64_t k = 0; k < p.extent; ++k) {
        const std::size_t i = at(p, o, k, j);
        acc += x[i];
        abs_sum += std::fabs(x[i]);
        r.value[i] = acc;
        r.tol[i] = sum_tolerance(k + 1, abs_sum) + rel * std::fabs(acc);
      }
    }
  }
  return r;
}

/// The same for integers, wrapping like int32.
std::vector<std::int32_t> ref_cumsum_int(const std::vector<std::int64_t>& x, const line_split& p) {
  std::vector<std::int32_t> r(x.size());
  for (std::int64_t o = 0; o < p.outer; ++o) {
    for (std::int64_t j = 0; j < p.inner; ++j) {
      std::uint32_t acc = 0;
      for (std::int64_t k = 0; k < p.extent; ++k) {
        const std::size_t i = at(p, o, k, j);
        acc += static_cast<std::uint32_t>(x[i]);
        r[i] = static_cast<std::int32_t>(acc);
      }
    }
  }
  return r;
}

std::vector<double> cumsum_widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

/// cumsum of a random f32 tensor of shape s over axis, checked.
template <class B>
void check_cumsum_f32(const kiln::shape& s, int axis) {
  auto& c = ctx<B>();
  auto g = rng();
  const auto host = uniform(g, static_cast<std::size_t>(s.numel()));
  auto x = kiln::from_host(c, s, std::span<const float>(host));
  kiln::tensor<float, B> y;
  y = kiln::cumsum(x, axis);
  EXPECT_EQ(y.shape(), s);
  EXPECT_TRUE(close(y.to_host(), ref_cumsum(cumsum_widen(host), split_of(s, axis)),
                    "cumsum over " + s.to_string() + " axis " + std::to_string(axis)));
}

}  // namespace

TYPED_TEST(cumsum_test, last_axis_every_extent) {
  for (kiln::index_t n : {1, 7, 16, 33, 1000, 1025, 4097}) check_cumsum_f32<TypeParam>({5, n}, -1);
  check_cumsum_f32<TypeParam>({3000, 7}, -1);
  check_cumsum_f32<TypeParam>({4097}, 0);
}

TYPED_TEST(cumsum_test, long_lines) {
  check_cumsum_f32<TypeParam>({2, 70001}, 1);                  // past 64Ki and several CPU buffers
  check_cumsum_f32<TypeParam>({1, kiln::index_t(1) << 20}, -1);  // one line of 1M
  check_cumsum_f32<TypeParam>({70001, 3}, 0);                  // a long axis before the last
}

// The CPU kernel reads a plain input where it lies and writes the bare op's output in
// place; with a prologue or an epilogue it goes through its buffer instead: each mix.
TYPED_TEST(cumsum_test, prologue_or_epilogue_alone) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (const kiln::shape& s : {kiln::shape{3, 1000}, kiln::shape{2, 70001}}) {
    const auto host = uniform(g, static_cast<std::size_t>(s.numel()));
    auto x = kiln::from_host(c, s, std::span<const float>(host));
    const reference plain = ref_cumsum(cumsum_widen(host), split_of(s, -1));
    kiln::tensor<float, TypeParam> y = kiln::empty<float>(c, s);
    y = kiln::cumsum(x, -1) * 2.0f;
    reference want = plain;
    for (std::size_t i = 0; i < want.value.size(); ++i) want.value[i] *= 2.0, want.tol[i] *= 2.0;
    EXPECT_TRUE(close(y.to_host(), want, "cumsum(x) * 2 over " + s.to_string()));
    y = kiln::cumsum(x * 2.0f, -1);
    EXPECT_TRUE(close(y.to_host(), want, "cumsum(x * 2) over " + s.to_string()));
    y = kiln::cumsum(kiln::slice(x, 1, 0, s[1]), -1);  // a view: read through the buffer
    EXPECT_TRUE(close(y.to_host(), plain, "cumsum(a full slice) over " + s.to_string()));
  }
}

TYPED_TEST(cumsum_test, every_axis_of_a_3d_tensor) {
  for (int axis : {0, 1, 2, -1, -2, -3}) {
    check_cumsum_f32<TypeParam>({7, 33, 5}, axis);
    check_cumsum_f32<TypeParam>({4, 1, 1000}, axis);
  }
}

TYPED_TEST(cumsum_test, views_as_input_and_output) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const kiln::shape s{6, 35, 9};
  const auto host = uniform(g, static_cast<std::size_t>(s.numel()));
  auto x = kiln::from_host(c, s, std::span<const float>(host));
  // the transpose [9, 35, 6] and the slice [6, 17, 9] (every other row of axis 1), on the host
  std::vector<double> ht(host.size()), hs;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 35; ++j)
      for (int k = 0; k < 9; ++k) ht[std::size_t((k * 35 + j) * 6 + i)] = host[std::size_t((i * 35 + j) * 9 + k)];
  for (int i = 0; i < 6; ++i)
    for (int j = 1; j < 35; j += 2)
      for (int k = 0; k < 9; ++k) hs.push_back(host[std::size_t((i * 35 + j) * 9 + k)]);
  for (int axis : {0, 1, 2}) {
    const std::string a = " axis " + std::to_string(axis);
    kiln::tensor<float, TypeParam> y;
    y = kiln::cumsum(kiln::transpose(x, 0, 2), axis);
    EXPECT_EQ(y.shape(), kiln::shape({9, 35, 6}));
    EXPECT_TRUE(close(y.to_host(), ref_cumsum(ht, split_of({9, 35, 6}, axis)), "cumsum of a transpose" + a));
    kiln::tensor<float, TypeParam> z;
    z = kiln::cumsum(kiln::slice(x, 1, 1, 35, 2), axis);
    EXPECT_EQ(z.shape(), kiln::shape({6, 17, 9}));
    EXPECT_TRUE(close(z.to_host(), ref_cumsum(hs, split_of({6, 17, 9}, axis)), "cumsum of a slice" + a));
    // a transposed output: transpose(w) = cumsum(transpose(x)) is x's cumsum along the mirrored axis
    auto w = kiln::zeros<float>(c, s);
    kiln::transpose(w, 0, 2) = kiln::cumsum(kiln::transpose(x, 0, 2), axis);
    EXPECT_TRUE(close(w.to_host(), ref_cumsum(cumsum_widen(host), split_of(s, 2 - axis)), "cumsum into a transposed view" + a));
  }
}

TYPED_TEST(cumsum_test, fused_prologue_and_epilogue_are_one_kernel) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const kiln::shape s{4, 33, 50};
  const auto hx = uniform(g, static_cast<std::size_t>(s.numel()), -1.0f, 1.0f);
  const auto hb = uniform(g, 33, -1.0f, 1.0f);
  auto x = kiln::from_host(c, s, std::span<const float>(hx));
  auto b = kiln::from_host(c, {33, 1}, std::span<const float>(hb));  // broadcast over axes 0 and 2
  for (int axis : {-1, 1, 0}) {
    const line_split p = split_of(s, axis);
    std::vector<double> in(hx.size());
    for (std::size_t i = 0; i < hx.size(); ++i) in[i] = double(hx[i]) * 2.0 + hb[(i / 50) % 33];
    reference want = ref_cumsum(in, p);
    for (std::size_t i = 0; i < want.value.size(); ++i) {
      const double e = 3.0 * std::exp(want.value[i] * 0.05);
      want.tol[i] = (want.tol[i] * 0.05 + 6e-7) * e;
      want.value[i] = e;
    }
    kiln::tensor<float, TypeParam> y = kiln::empty<float>(c, s);
    EXPECT_EQ(kernels_of<TypeParam>([&] { y = kiln::exp(kiln::cumsum(x * 2.0f + b, axis) * 0.05f) * 3.0f; }), 1u)
        << "axis " << axis;
    EXPECT_TRUE(close(y.to_host(), want, "exp(cumsum(x * 2 + b) * 0.05) * 3, axis " + std::to_string(axis)));
  }
  // a prologue and epilogue around a rank-1 input
  auto v = kiln::from_host(c, {50}, std::span<const float>(hx.data(), 50));
  kiln::tensor<float, TypeParam> y = kiln::empty<float>(c, {50});
  EXPECT_EQ(kernels_of<TypeParam>([&] { y = kiln::cumsum(v * 2.0f + 1.0f, -1) - 1.0f; }), 1u);
  std::vector<double> in(50);
  for (std::size_t i = 0; i < 50; ++i) in[i] = double(hx[i]) * 2.0 + 1.0;
  reference want = ref_cumsum(in, split_of({50}, 0));
  for (auto& w : want.value) w -= 1.0;
  for (auto& t : want.tol) t += 1e-6;
  EXPECT_TRUE(close(y.to_host(), want, "cumsum(v * 2 + 1) - 1"));
}

TYPED_TEST(cumsum_test, low_precision_floats_keep_their_dtype) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const kiln::shape s{3, 1000};
  const auto host = uniform(g, static_cast<std::size_t>(s.numel()), -1.0f, 1.0f);
  std::vector<kiln::half> h16(host.begin(), host.end());
  std::vector<kiln::bfloat16> hb16(host.begin(), host.end());
  std::vector<double> in16(host.size()), inb16(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    in16[i] = static_cast<float>(h16[i]);
    inb16[i] = static_cast<float>(hb16[i]);
  }
  auto x16 = kiln::from_host(c, s, std::span<const kiln::half>(h16));
  auto xb16 = kiln::from_host(c, s, std::span<const kiln::bfloat16>(hb16));
  static_assert(std::is_same_v<typename decltype(kiln::cumsum(x16, 1))::value_type, kiln::half>);
  static_assert(std::is_same_v<typename decltype(kiln::cumsum(xb16, 1))::value_type, kiln::bfloat16>);
  kiln::tensor<kiln::half, TypeParam> y16;
  y16 = kiln::cumsum(x16, 1);
  EXPECT_TRUE(close(y16.to_host(), ref_cumsum(in16, split_of(s, 1), 0x1p-11), "f16 cumsum"));
  kiln::tensor<kiln::bfloat16, TypeParam> yb16;
  yb16 = kiln::cumsum(xb16, 0);
  EXPECT_TRUE(close(yb16.to_host(), ref_cumsum(inb16, split_of(s, 0), 0x1p-8), "bf16 cumsum"));
}

TYPED_TEST(cumsum_test, integers_give_int32_and_wrap) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const kiln::shape s{5, 1001};
  // int32 values near 2^30: the sums wrap many times
  const auto h32 = uniform_int<std::int32_t>(g, static_cast<std::size_t>(s.numel()), -(1 << 30), 1 << 30);
  const auto h8 = uniform_int<std::int8_t>(g, static_cast<std::size_t>(s.numel()), -128, 127);
  const auto hu8 = uniform_int<std::uint8_t>(g, static_cast<std::size_t>(s.numel()), 0, 255);
  auto x32 = kiln::from_host(c, s, std::span<const std::int32_t>(h32));
  auto x8 = kiln::from_host(c, s, std::span<const std::int8_t>(h8));
  auto xu8 = kiln::from_host(c, s, std::span<const std::uint8_t>(hu8));
  static_assert(std::is_same_v<typename decltype(kiln::cumsum(x8, 0))::value_type, std::int32_t>);
  static_assert(std::is_same_v<typename decltype(kiln::cumsum(xu8, 0))::value_type, std::int32_t>);
  for (int axis : {0, 1}) {
    const line_split p = split_of(s, axis);
    kiln::tensor<std::int32_t, TypeParam> y;
    y = kiln::cumsum(x32, axis);
    EXPECT_EQ(y.to_host(), ref_cumsum_int({h32.begin(), h32.end()}, p)) << "int32, axis " << axis;
    y = kiln::cumsum(x8, axis);
    EXPECT_EQ(y.to_host(), ref_cumsum_int({h8.begin(), h8.end()}, p)) << "int8, axis " << axis;
    y = kiln::cumsum(xu8, axis);
    EXPECT_EQ(y.to_host(), ref_cumsum_int({hu8.begin(), hu8.end()}, p)) << "uint8, axis " << axis;
    // a mask counted along the axis, with an epilogue: one kernel
    std::vector<std::int64_t> m(h8.size());
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = h8[i] > 0 ? 1 : 0;
    auto want = ref_cumsum_int(m, p);
    for (auto& w : want) w = w * 2 + 1;
    EXPECT_EQ(kernels_of<TypeParam>([&] { y = kiln::cumsum(x8 > std::int8_t(0), axis) * 2 + 1; }), 1u);
    EXPECT_EQ(y.to_host(), want) << "mask, axis " << axis;
  }
}

TYPED_TEST(cumsum_test, empty_and_rank_0_tensors) {
  auto& c = ctx<TypeParam>();
  for (const kiln::shape& s : {kiln::shape{4, 0}, kiln::shape{0, 5}, kiln::shape{3, 0, 2}}) {
    auto x = kiln::empty<float>(c, s);
    for (int axis = 0; axis < s.rank(); ++axis) {
      kiln::tensor<float, TypeParam> y;
      y = kiln::cumsum(x, axis);
      EXPECT_EQ(y.shape(), s);
    }
  }
  auto t = kiln::full(c, kiln::shape{}, 2.5f);
  for (int axis : {0, -1}) {
    kiln::tensor<float, TypeParam> y;
    y = kiln::cumsum(t, axis);
    EXPECT_EQ(y.shape(), kiln::shape{});
    EXPECT_EQ(y.to_host(), std::vector<float>{2.5f});
  }
  auto one = kiln::full(c, {1, 1, 1}, 4.0f);
  kiln::tensor<float, TypeParam> y;
  y = kiln::cumsum(one * 2.0f, 1);
  EXPECT_EQ(y.to_host(), std::vector<float>{8.0f});
}

TYPED_TEST(cumsum_test, nan_and_inf_propagate_along_the_line) {
  auto& c = ctx<TypeParam>();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> h = {1, nan, 3, 4, /**/ 1, inf, 2, 5, /**/ 1, inf, -inf, 5, /**/ -inf, 1, 2, 3};
  auto x = kiln::from_host(c, {4, 4}, std::span<const float>(h));
  kiln::tensor<float, TypeParam> y;
  y = kiln::cumsum(x, 1);
  const auto v = y.to_host();
  EXPECT_EQ(v[0], 1.0f);
  for (int i : {1, 2, 3, 10, 11}) EXPECT_TRUE(std::isnan(v[std::size_t(i)])) << "element " << i;
  EXPECT_EQ(v[4], 1.0f);
  for (int i : {5, 6, 7, 9}) EXPECT_EQ(v[std::size_t(i)], inf) << "element " << i;
  for (int i : {12, 13, 14, 15}) EXPECT_EQ(v[std::size_t(i)], -inf) << "element " << i;
  // specials inside long lines, on every axis (the reference propagates them the same way)
  auto g = rng();
  const kiln::shape s{3, 2000, 3};
  auto hl = uniform(g, static_cast<std::size_t>(s.numel()));
  hl[std::size_t((0 * 2000 + 1500) * 3 + 1)] = nan;
  hl[std::size_t((1 * 2000 + 700) * 3 + 0)] = inf;
  hl[std::size_t((2 * 2000 + 5) * 3 + 2)] = -inf;
  hl[std::size_t((2 * 2000 + 1999) * 3 + 2)] = inf;
  auto xl = kiln::from_host(c, s, std::span<const float>(hl));
  for (int axis : {0, 1, 2}) {
    kiln::tensor<float, TypeParam> yl;
    yl = kiln::cumsum(xl, axis);
    EXPECT_TRUE(close(yl.to_host(), ref_cumsum(cumsum_widen(hl), split_of(s, axis)), "specials, axis " + std::to_string(axis)));
  }
}

TYPED_TEST(cumsum_test, in_place) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const kiln::shape s{5, 6000, 3};
  const auto host = uniform(g, static_cast<std::size_t>(s.numel()));
  for (int axis : {1, 2}) {
    auto x = kiln::from_host(c, s, std::span<const float>(host));
    x = kiln::cumsum(x, axis);
    EXPECT_TRUE(close(x.to_host(), ref_cumsum(cumsum_widen(host), split_of(s, axis)), "in place, axis " + std::to_string(axis)));
  }
}

TYPED_TEST(cumsum_test, axis_out_of_range_throws_naming_the_op) {
  auto& c = ctx<TypeParam>();
  auto x = kiln::zeros<float>(c, {3, 4});
  for (int axis : {2, -3}) {
    const std::string msg = shape_error_of([&] { (void)kiln::cumsum(x, axis); });
    EXPECT_TRUE(has(msg, "kiln::cumsum"));
    EXPECT_TRUE(has(msg, "axis " + std::to_string(axis)));
    EXPECT_TRUE(has(msg, "[3, 4]"));
  }
  auto t = kiln::full(c, kiln::shape{}, 1.0f);
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::cumsum(t, 1); }), "kiln::cumsum"));
  kiln::tensor<float, TypeParam> none;
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::cumsum(none, 0); }), "empty tensor"));
}
