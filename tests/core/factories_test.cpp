// tests/core/factories_test.cpp — empty, zeros, full, from_host, random, clone, copy_to
// and to_host (of contiguous tensors and of strided / broadcast views), for each dtype.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "backends.hpp"
#include "checks.hpp"

namespace {

using kiln_test::has;
using kiln_test::iota;
using kiln_test::shape_error_of;

template <class T>
std::vector<float> as_floats(const std::vector<T>& v) {
  std::vector<float> f;
  for (const T& x : v) f.push_back(static_cast<float>(x));
  return f;
}

}  // namespace

template <class B>
class factories : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(factories, kiln_test::backend_types);

TYPED_TEST(factories, empty_is_contiguous_with_fresh_storage) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto t = kiln::empty<float>(ctx, {3, 4, 5});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.shape(), (kiln::shape{3, 4, 5}));
  EXPECT_EQ(t.strides(), (kiln::strides{20, 5, 1}));
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.numel(), 60);
  EXPECT_EQ(t.size(-1), 5);
  EXPECT_EQ(t.offset(), 0);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.dtype(), kiln::dtype::f32);
  EXPECT_TRUE(t.context() == ctx);
  EXPECT_EQ(t.describe(), "f32[3, 4, 5] on " + ctx.device_name());
  auto u = kiln::empty<float>(ctx, {3, 4, 5});
  EXPECT_NE(u.storage(), t.storage());
  auto like = kiln::empty_like(t);
  EXPECT_EQ(like.shape(), t.shape());
  EXPECT_NE(like.storage(), t.storage());
  EXPECT_EQ(kiln::empty<std::int8_t>(ctx, {2}).dtype(), kiln::dtype::i8);
  EXPECT_EQ(kiln::empty<kiln::half>(ctx, {2}).dtype(), kiln::dtype::f16);
}

TYPED_TEST(factories, empty_with_zero_extent) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto t = kiln::empty<float>(ctx, {0, 3});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.to_host().empty());
  EXPECT_EQ(t.clone().shape(), (kiln::shape{0, 3}));
  t = 1.0f;  // nothing to write
  EXPECT_EQ(kiln::zeros<float>(ctx, {0}).numel(), 0);
}

TYPED_TEST(factories, rank_zero_tensor_holds_one_element) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto t = kiln::full(ctx, {}, 2.5f);
  EXPECT_EQ(t.rank(), 0);
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.to_host(), std::vector<float>{2.5f});
}

TYPED_TEST(factories, zeros_for_every_dtype) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  const kiln::shape s{3, 67};  // not a multiple of any vector width
  EXPECT_EQ(kiln::zeros<float>(ctx, s).to_host(), std::vector<float>(201, 0.0f));
  EXPECT_EQ(kiln::zeros<std::int32_t>(ctx, s).to_host(), std::vector<std::int32_t>(201, 0));
  EXPECT_EQ(kiln::zeros<std::int8_t>(ctx, s).to_host(), std::vector<std::int8_t>(201, 0));
  EXPECT_EQ(kiln::zeros<std::uint8_t>(ctx, s).to_host(), std::vector<std::uint8_t>(201, 0));
  for (const auto h : kiln::zeros<kiln::half>(ctx, s).to_host()) ASSERT_EQ(h.bits, 0u);
  for (const auto b : kiln::zeros<kiln::bfloat16>(ctx, s).to_host()) ASSERT_EQ(b.bits, 0u);
}

TYPED_TEST(factories, full_for_every_dtype) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  const kiln::shape s{5, 13};
  EXPECT_EQ(kiln::full(ctx, s, -1.25f).to_host(), std::vector<float>(65, -1.25f));
  EXPECT_EQ(kiln::full(ctx, s, std::int32_t(-123456789)).to_host(), std::vector<std::int32_t>(65, -123456789));
  EXPECT_EQ(kiln::full(ctx, s, std::int8_t(-7)).to_host(), std::vector<std::int8_t>(65, -7));
  EXPECT_EQ(kiln::full(ctx, s, std::uint8_t(250)).to_host(), std::vector<std::uint8_t>(65, 250));
  for (const auto h : kiln::full(ctx, s, kiln::half(0.1f)).to_host()) ASSERT_EQ(h.bits, kiln::half(0.1f).bits);
  for (const auto b : kiln::full(ctx, s, kiln::bfloat16(-3.0f)).to_host()) ASSERT_EQ(b.bits, 0xc040u);
}

TYPED_TEST(factories, from_host_copies_the_values) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  std::vector<float> host = iota(6);
  auto t = kiln::from_host(ctx, {2, 3}, host);
  host[0] = 100.0f;  // a copy, not a view of the host vector
  EXPECT_EQ(t.shape(), (kiln::shape{2, 3}));
  EXPECT_EQ(t.to_host(), iota(6));
  auto v = kiln::from_host(ctx, std::span<const float>(host));
  EXPECT_EQ(v.shape(), (kiln::shape{6}));
  EXPECT_EQ(v.to_host()[0], 100.0f);
  const std::array<std::int32_t, 4> arr{1, -2, 3, -4};
  auto a = kiln::from_host(ctx, {2, 2}, arr);
  EXPECT_EQ(a.dtype(), kiln::dtype::i32);
  EXPECT_EQ(a.to_host(), (std::vector<std::int32_t>{1, -2, 3, -4}));
  auto e = kiln::from_host(ctx, {0, 5}, std::vector<float>{});
  EXPECT_EQ(e.numel(), 0);
}

TYPED_TEST(factories, from_host_size_mismatch_throws) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  const std::string msg = shape_error_of([&] { (void)kiln::from_host(ctx, {2, 3}, iota(5)); });
  EXPECT_TRUE(has(msg, "kiln::from_host"));
  EXPECT_TRUE(has(msg, "5 host elements"));
  EXPECT_TRUE(has(msg, "[2, 3]"));
  EXPECT_TRUE(has(msg, "6 elements"));
  EXPECT_THROW((void)kiln::from_host(ctx, {2}, iota(3)), kiln::shape_error);
  EXPECT_THROW((void)kiln::from_host(ctx, {}, std::vector<float>{}), kiln::shape_error);  // rank 0 holds one
}

TYPED_TEST(factories, random_floats_are_in_range_and_reproducible) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  const auto a = kiln::random<float>(ctx, {1000}).to_host();
  for (float v : a) ASSERT_TRUE(v >= 0.0f && v < 1.0f) << v;
  EXPECT_EQ(kiln::random<float>(ctx, {1000}).to_host(), a) << "same (default) seed, same values";
  EXPECT_NE(kiln::random<float>(ctx, {1000}, 0.0, 1.0, 7).to_host(), a);
  EXPECT_GT(std::set<float>(a.begin(), a.end()).size(), 900u) << "values look constant";
  const auto b = kiln::random<float>(ctx, {2000}, -3.0, -2.0, 11).to_host();
  const auto [lo, hi] = std::minmax_element(b.begin(), b.end());
  EXPECT_GE(*lo, -3.0f);
  EXPECT_LT(*hi, -2.0f);
  EXPECT_LT(*lo, -2.9f);
  EXPECT_GT(*hi, -2.1f);
}

TYPED_TEST(factories, random_integers_cover_the_closed_range) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  const auto v = kiln::random<std::int8_t>(ctx, {1000}, -3, 3, 5).to_host();
  const std::set<std::int8_t> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::set<std::int8_t>{-3, -2, -1, 0, 1, 2, 3}));
  const auto u = kiln::random<std::uint8_t>(ctx, {5000}, 0, 255, 5).to_host();
  EXPECT_EQ(*std::max_element(u.begin(), u.end()), 255);
}

TYPED_TEST(factories, random_half_and_bfloat16_round_the_float_draws) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  const auto h = as_floats(kiln::random<kiln::half>(ctx, {500}, -2.0, 2.0, 3).to_host());
  for (float v : h) ASSERT_TRUE(v >= -2.0f && v <= 2.0f) << v;  // rounding may reach the bound
  EXPECT_GT(std::set<float>(h.begin(), h.end()).size(), 300u);
  const auto b = as_floats(kiln::random<kiln::bfloat16>(ctx, {500}, 1.0, 2.0, 3).to_host());
  for (float v : b) ASSERT_TRUE(v >= 1.0f && v <= 2.0f) << v;
}

TYPED_TEST(factories, clone_is_a_deep_contiguous_copy) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto x = kiln::from_host(ctx, {3, 4}, iota(12));
  auto c = x.clone();
  EXPECT_NE(c.storage(), x.storage());
  EXPECT_EQ(c.shape(), x.shape());
  EXPECT_EQ(c.to_host(), iota(12));
  c = 0.0f;
  EXPECT_EQ(x.to_host(), iota(12)) << "writing the clone changed the original";
  auto handle = x;  // a copy is a handle
  EXPECT_EQ(handle.storage(), x.storage());
  auto v = kiln::slice(x, 1, 1, 4, 2);
  auto vc = v.clone();
  EXPECT_TRUE(vc.is_contiguous());
  EXPECT_EQ(vc.offset(), 0);
  EXPECT_EQ(vc.strides(), (kiln::strides{2, 1}));
  EXPECT_EQ(vc.to_host(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
}

TYPED_TEST(factories, copy_to_and_to_host_of_views) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto x = kiln::from_host(ctx, {3, 4}, iota(12));
  std::vector<float> out(12, -1.0f);
  kiln::transpose(x).copy_to(out);
  EXPECT_EQ(out, (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  std::vector<float> part(4);
  kiln::slice(x, 0, 2, 3).copy_to(part);  // contiguous view with an offset
  EXPECT_EQ(part, iota(4, 8.0f));
  std::vector<float> strided(3);
  kiln::slice(kiln::slice(x, 1, 3, 4), 0, 0, 3).copy_to(strided);  // last column
  EXPECT_EQ(strided, (std::vector<float>{3, 7, 11}));
  auto b = kiln::broadcast_to(kiln::slice(x, 0, 1, 2), {2, 3, 4});
  const auto bh = b.to_host();
  ASSERT_EQ(bh.size(), 24u);
  for (std::size_t i = 0; i < 24; ++i) EXPECT_EQ(bh[i], float(4 + i % 4));
  EXPECT_EQ(x.to_host(), iota(12)) << "reading views must not change the tensor";
}

TYPED_TEST(factories, copy_to_size_mismatch_throws) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto x = kiln::from_host(ctx, {3, 4}, iota(12));
  std::vector<float> small(11);
  const std::string msg = shape_error_of([&] { x.copy_to(small); });
  EXPECT_TRUE(has(msg, "kiln::copy_to"));
  EXPECT_TRUE(has(msg, "11"));
  EXPECT_TRUE(has(msg, "f32[3, 4]"));
  std::vector<float> big(13);
  EXPECT_THROW(x.copy_to(big), kiln::shape_error);
}

TYPED_TEST(factories, default_constructed_tensor_is_empty) {
  kiln::tensor<float, TypeParam> t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.storage(), nullptr);
  EXPECT_TRUE(has(t.describe(), "(empty)"));
  EXPECT_TRUE(has(shape_error_of([&] { (void)t.to_host(); }), "empty"));
  EXPECT_TRUE(has(shape_error_of([&] { (void)t.clone(); }), "kiln::clone"));
  EXPECT_TRUE(has(shape_error_of([&] { (void)t.context(); }), "kiln::context"));
  EXPECT_TRUE(has(shape_error_of([&] { t = 1.0f; }), "kiln::fill"));
}

TYPED_TEST(factories, moved_from_tensor_is_empty_and_assignable) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto x = kiln::from_host(ctx, iota(4));
  auto y = std::move(x);
  EXPECT_FALSE(x.defined());  // NOLINT(bugprone-use-after-move): the documented state
  EXPECT_EQ(y.to_host(), iota(4));
  x = y * 2.0f;  // an empty target takes the expression's shape
  EXPECT_EQ(x.to_host(), (std::vector<float>{0, 2, 4, 6}));
  EXPECT_NE(x.storage(), y.storage());
}
