// tests/core/limits_test.cpp — sizes at and past what kiln can address, empty tensors used
// as inputs, and the shapes a statement may write into: every case gives the right result
// or a clear kiln error, never a wrapped size, an out-of-bounds write or a crash.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends.hpp"
#include "checks.hpp"

namespace {

using kiln::index_t;
using kiln_test::has;
using kiln_test::iota;
using kiln_test::shape_error_of;

}  // namespace

TEST(limits, shapes_past_two_to_the_59_throw) {
  EXPECT_TRUE(has(shape_error_of([] { kiln::shape s{(index_t(1) << 62) + 16}; }), "more than 2^59"));
  EXPECT_TRUE(has(shape_error_of([] { kiln::shape s{index_t(1) << 40, index_t(1) << 30}; }), "[1099511627776, 1073741824]"));
  EXPECT_THROW((kiln::shape{index_t(1) << 31, index_t(1) << 31}), kiln::shape_error);
  // a zero extent does not excuse a huge one: contiguous strides would still overflow
  EXPECT_THROW((kiln::shape{0, index_t(1) << 40, index_t(1) << 40}), kiln::shape_error);
  // the limit itself is a valid shape; its strides are exact
  const kiln::shape at{index_t(1) << 29, index_t(1) << 30};
  EXPECT_EQ(at.numel(), kiln::max_numel);
  EXPECT_EQ(kiln::contiguous_strides(at)[0], index_t(1) << 30);
  EXPECT_THROW((kiln::shape{(index_t(1) << 29) + 1, index_t(1) << 30}), kiln::shape_error);
}

TEST(limits, broadcasting_past_the_limit_throws) {
  kiln::shape out;
  const std::string msg = shape_error_of([&] {
    (void)kiln::broadcast_shapes(kiln::shape{index_t(1) << 40, 1}, kiln::shape{1, index_t(1) << 40}, out);
  });
  EXPECT_TRUE(has(msg, "broadcasting [1099511627776, 1] with [1, 1099511627776]"));
  EXPECT_TRUE(has(msg, "2^59"));
}

template <class B>
class limits : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(limits, kiln_test::backend_types);

TYPED_TEST(limits, factories_reject_huge_shapes) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  // 2^62 + 16 floats used to wrap to a 64-byte allocation that slices then wrote past
  EXPECT_THROW((void)kiln::empty<float>(ctx, {(index_t(1) << 62) + 16}), kiln::shape_error);
  EXPECT_THROW((void)kiln::empty<float>(ctx, {index_t(1) << 40, index_t(1) << 30}), kiln::shape_error);
  // within the element limit but far past any memory: out_of_memory, nothing allocated
  EXPECT_THROW((void)kiln::empty<float>(ctx, {index_t(1) << 31, index_t(1) << 27}), kiln::out_of_memory);
  EXPECT_THROW((void)kiln::zeros<float>(ctx, {index_t(1) << 31, index_t(1) << 27}), kiln::out_of_memory);
  EXPECT_THROW((void)kiln::random<float>(ctx, {index_t(1) << 31, index_t(1) << 27}), kiln::out_of_memory);
  // the context still works
  auto y = kiln::full(ctx, {5}, 2.0f);
  y = y * 3.0f;
  EXPECT_EQ(y.to_host(), (std::vector<float>(5, 6.0f)));
}

TYPED_TEST(limits, reshape_rejects_overflowing_extents) {
  auto x = kiln::full(kiln_test::ctx<TypeParam>(), {4}, 1.0f);
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::reshape(x, {(index_t(1) << 62) + 1, 4}); }), "kiln::reshape"));
  EXPECT_THROW((void)kiln::reshape(x, {index_t(1) << 40, index_t(1) << 40, -1}), kiln::shape_error);
  EXPECT_THROW((void)kiln::reshape(x, {-1, index_t(1) << 40, index_t(1) << 40, 0}), kiln::shape_error);
  const std::vector<std::uint64_t> wrapped{std::uint64_t(1) << 63, 4};  // -2^63 as index_t
  EXPECT_THROW((void)kiln::reshape(x, wrapped), kiln::shape_error);
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::reshape(x, {2, -3}); }), "negative extent -3"));
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::reshape(x, std::vector<int>(9, 1)); }), "more than 8 extents"));
}

TYPED_TEST(limits, reshape_takes_a_shape_or_a_range) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto x = kiln::from_host(ctx, {12}, iota(12));
  const kiln::shape s{3, 4};
  EXPECT_EQ(kiln::reshape(x, s).shape(), s);
  EXPECT_EQ(kiln::reshape(x, std::vector<int>{2, -1}).shape(), (kiln::shape{2, 6}));
  EXPECT_EQ(kiln::reshape(x, std::array<index_t, 3>{2, 2, 3}).shape(), (kiln::shape{2, 2, 3}));
  const std::vector<index_t> v{6, 2};
  EXPECT_EQ(kiln::reshape(x, std::span<const index_t>(v)).shape(), (kiln::shape{6, 2}));
  auto y = kiln::empty<float>(ctx, {4, 3});
  y = kiln::reshape(x, y.shape()) * 2.0f;
  std::vector<float> want = iota(12);
  for (auto& w : want) w *= 2.0f;
  EXPECT_EQ(y.to_host(), want);
}

TYPED_TEST(limits, slices_with_huge_steps_and_bounds) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto x = kiln::from_host(ctx, {10}, iota(10));
  constexpr index_t huge = INT64_MAX;
  auto one = kiln::slice(x, 0, 3, huge, huge);  // (stop - start + step - 1) used to overflow
  EXPECT_EQ(one.shape(), (kiln::shape{1}));
  EXPECT_EQ(one.to_host(), (std::vector<float>{3.0f}));
  auto none = kiln::slice(x, 0, huge, -huge, huge);
  EXPECT_EQ(none.numel(), 0);
  auto two = kiln::slice(x, 0, -huge, huge, 7);
  EXPECT_EQ(two.to_host(), (std::vector<float>{0.0f, 7.0f}));
}

TYPED_TEST(limits, empty_tensor_as_an_input_throws) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  kiln::tensor<float, TypeParam> e;
  auto y = kiln::full(ctx, {4}, 1.0f);
  const std::string op = shape_error_of([&] { y = e + 1.0f; });
  EXPECT_TRUE(has(op, "kiln::add"));
  EXPECT_TRUE(has(op, "empty tensor"));
  EXPECT_TRUE(has(shape_error_of([&] { y = kiln::relu(e); }), "kiln::relu"));
  EXPECT_TRUE(has(shape_error_of([&] { y = y * kiln::exp(e); }), "kiln::exp"));
  EXPECT_TRUE(has(shape_error_of([&] { y = e; }), "source tensor is empty"));
  EXPECT_TRUE(has(shape_error_of([&] { y = kiln::cast<float>(e); }), "kiln::cast"));
  auto moved = kiln::full(ctx, {4}, 2.0f);
  auto taken = std::move(moved);
  EXPECT_THROW(y = moved * taken, kiln::shape_error);
  EXPECT_THROW(y = kiln::reshape(e, {1}) + 1.0f, kiln::shape_error);  // a view of nothing is empty too
  EXPECT_EQ(y.to_host(), (std::vector<float>(4, 1.0f)));  // untouched by the failed statements
  kiln::tensor<float, TypeParam> fresh;
  fresh = taken + 1.0f;  // an empty target is still allocated
  EXPECT_EQ(fresh.to_host(), (std::vector<float>(4, 3.0f)));
}

// Structural ops whose operands are within the element limit (broadcast views) but whose
// result is not: a clear error naming the op and the result's shape, never a result
// tensor whose element count wrapped (it used to come out empty).
TYPED_TEST(limits, structural_results_past_the_limit_throw) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  constexpr index_t g32 = index_t(1) << 32;
  auto one = kiln::full(ctx, {1, 1}, 1.0f);
  kiln::tensor<float, TypeParam> y;
  const std::string mm = shape_error_of([&] {
    y = kiln::matmul(kiln::broadcast_to(one, kiln::shape{g32, 1}), kiln::broadcast_to(one, kiln::shape{1, g32}));
  });
  EXPECT_TRUE(has(mm, "kiln::matmul: the result [4294967296, 4294967296]")) << mm;
  EXPECT_TRUE(has(mm, "2^59")) << mm;
  // batch dimensions broadcast against each other
  auto one4 = kiln::full(ctx, {1, 1, 1, 1}, 1.0f);
  EXPECT_TRUE(has(shape_error_of([&] {
                    y = kiln::matmul(kiln::broadcast_to(one4, kiln::shape{g32, 1, 1, 1}),
                                     kiln::broadcast_to(one4, kiln::shape{1, g32, 1, 1}));
                  }),
                  "kiln::matmul: the result [4294967296, 4294967296, 1, 1]"));
  EXPECT_TRUE(has(shape_error_of([&] {
                    y = kiln::linear(kiln::broadcast_to(one, kiln::shape{g32, 1}), kiln::broadcast_to(one, kiln::shape{g32, 1}));
                  }),
                  "kiln::linear: the result"));
  const kiln::shape qs{index_t(1) << 30, 1, index_t(1) << 29, 1}, vs{index_t(1) << 30, 1, 1, index_t(1) << 29};
  auto q = kiln::broadcast_to(one4, qs);
  const std::string at = shape_error_of([&] { y = kiln::attention(q, kiln::slice(q, 2, 0, 1), kiln::broadcast_to(one4, vs)); });
  EXPECT_TRUE(has(at, "kiln::attention: the result [1073741824, 1, 536870912, 536870912]")) << at;
  auto table = kiln::zeros<float>(ctx, {4, 4096});
  auto ids = kiln::broadcast_to(kiln::zeros<std::int32_t>(ctx, {1}), kiln::shape{index_t(1) << 50});
  EXPECT_TRUE(has(shape_error_of([&] { y = kiln::embedding(table, ids); }), "kiln::embedding: the result [1125899906842624, 4096]"));
  auto w = kiln::full(ctx, {4096, 32}, 0.5f);
  const auto qw = kiln::quantize<kiln::quant::int8>(w);
  auto x = kiln::broadcast_to(kiln::full(ctx, {1, 32}, 1.0f), kiln::shape{index_t(1) << 48, 32});
  EXPECT_TRUE(has(shape_error_of([&] { y = kiln::linear(x, qw); }), "kiln::linear: the result [281474976710656, 4096]"));
  EXPECT_FALSE(y.defined());  // no statement wrote anything
}

// An expression broadcasts into its target as NumPy's `y[...] = x` and PyTorch's
// `y.copy_(x)` do; the target keeps its shape.
TYPED_TEST(limits, assignment_broadcasts_into_the_target) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto row = kiln::from_host(ctx, {4}, iota(4));
  auto y = kiln::empty<float>(ctx, {3, 4});
  y = row;
  std::vector<float> want;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) want.push_back(static_cast<float>(c));
  EXPECT_EQ(y.to_host(), want);
  auto z = kiln::empty<float>(ctx, {4});
  const std::string msg = shape_error_of([&] { z = y + 1.0f; });  // the target never grows
  EXPECT_TRUE(has(msg, "[3, 4]"));
}
