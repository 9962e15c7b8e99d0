// tests/core/views_test.cpp — slice, transpose, permute, reshape, broadcast_to, squeeze,
// unsqueeze: each view's shape, strides and offset, that it shares the input's storage,
// the values it reads (to_host) and writes, and the errors for bad arguments.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <numeric>
#include <string>
#include <vector>

#include "backends.hpp"
#include "checks.hpp"

namespace {

using kiln_test::has;
using kiln_test::iota;
using kiln_test::shape_error_of;

}  // namespace

template <class B>
class views : public kiln_test::backend_test<B> {
 protected:
  /// 3x4 tensor holding 0..11 row-major.
  kiln::tensor<float, B> m34() { return kiln::from_host(kiln_test::ctx<B>(), {3, 4}, iota(12)); }
  /// 2x3x4 tensor holding 0..23 row-major.
  kiln::tensor<float, B> t234() { return kiln::from_host(kiln_test::ctx<B>(), {2, 3, 4}, iota(24)); }
};
TYPED_TEST_SUITE(views, kiln_test::backend_types);

TYPED_TEST(views, slice_columns) {
  auto x = this->m34();
  auto v = kiln::slice(x, 1, 1, 3);
  EXPECT_EQ(v.shape(), (kiln::shape{3, 2}));
  EXPECT_EQ(v.strides(), (kiln::strides{4, 1}));
  EXPECT_EQ(v.offset(), 1);
  EXPECT_EQ(v.storage(), x.storage());
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(v.to_host(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
}

TYPED_TEST(views, slice_rows_is_contiguous) {
  auto x = this->m34();
  auto v = kiln::slice(x, 0, 1, 3);
  EXPECT_EQ(v.shape(), (kiln::shape{2, 4}));
  EXPECT_EQ(v.offset(), 4);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v.to_host(), iota(8, 4.0f));
}

TYPED_TEST(views, slice_with_steps) {
  auto x = this->m34();
  auto v = kiln::slice(x, 1, 0, 4, 2);
  EXPECT_EQ(v.shape(), (kiln::shape{3, 2}));
  EXPECT_EQ(v.strides(), (kiln::strides{4, 2}));
  EXPECT_EQ(v.to_host(), (std::vector<float>{0, 2, 4, 6, 8, 10}));
  auto w = kiln::slice(x, 1, 0, 4, 3);  // 0 and 3
  EXPECT_EQ(w.shape(), (kiln::shape{3, 2}));
  EXPECT_EQ(w.to_host(), (std::vector<float>{0, 3, 4, 7, 8, 11}));
  auto r = kiln::slice(kiln::slice(x, 0, 0, 3, 2), 1, 1, 4, 2);  // rows 0, 2; columns 1, 3
  EXPECT_EQ(r.shape(), (kiln::shape{2, 2}));
  EXPECT_EQ(r.strides(), (kiln::strides{8, 2}));
  EXPECT_EQ(r.storage(), x.storage());
  EXPECT_EQ(r.to_host(), (std::vector<float>{1, 3, 9, 11}));
  auto big = kiln::slice(x, 0, 0, 3, 10);  // a step past the end: one element
  EXPECT_EQ(big.shape(), (kiln::shape{1, 4}));
  EXPECT_EQ(big.to_host(), iota(4));
}

TYPED_TEST(views, slice_negative_indices_count_from_the_end) {
  auto x = this->m34();
  auto v = kiln::slice(x, -1, -3, -1);  // columns 1, 2
  EXPECT_EQ(v.shape(), (kiln::shape{3, 2}));
  EXPECT_EQ(v.offset(), 1);
  EXPECT_EQ(v.to_host(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  auto last_row = kiln::slice(x, -2, -1, 3);
  EXPECT_EQ(last_row.shape(), (kiln::shape{1, 4}));
  EXPECT_EQ(last_row.to_host(), iota(4, 8.0f));
}

TYPED_TEST(views, slice_bounds_are_clamped) {
  auto x = this->m34();
  auto all = kiln::slice(x, 0, -100, 100);
  EXPECT_EQ(all.shape(), (kiln::shape{3, 4}));
  EXPECT_EQ(all.to_host(), iota(12));
  auto past = kiln::slice(x, 0, 5, 10);
  EXPECT_EQ(past.shape(), (kiln::shape{0, 4}));
  EXPECT_EQ(past.numel(), 0);
  EXPECT_TRUE(past.to_host().empty());
  auto backwards = kiln::slice(x, 1, 3, 1);
  EXPECT_EQ(backwards.shape(), (kiln::shape{3, 0}));
  EXPECT_TRUE(backwards.to_host().empty());
  auto tail = kiln::slice(x, 1, 2, 100);
  EXPECT_EQ(tail.shape(), (kiln::shape{3, 2}));
  EXPECT_EQ(tail.to_host(), (std::vector<float>{2, 3, 6, 7, 10, 11}));
}

TYPED_TEST(views, slice_errors) {
  auto x = this->m34();
  const std::string step = shape_error_of([&] { (void)kiln::slice(x, 1, 0, 4, 0); });
  EXPECT_TRUE(has(step, "kiln::slice"));
  EXPECT_TRUE(has(step, "step 0"));
  EXPECT_TRUE(has(step, "f32[3, 4]"));
  EXPECT_THROW((void)kiln::slice(x, 1, 0, 4, -1), kiln::shape_error);
  const std::string dim = shape_error_of([&] { (void)kiln::slice(x, 2, 0, 1); });
  EXPECT_TRUE(has(dim, "dimension 2"));
  EXPECT_TRUE(has(dim, "f32[3, 4]"));
  EXPECT_THROW((void)kiln::slice(x, -3, 0, 1), kiln::shape_error);
}

TYPED_TEST(views, writes_through_a_slice_reach_the_tensor) {
  auto x = this->m34();
  auto v = kiln::slice(x, 1, 1, 4, 2);  // columns 1 and 3
  v = -1.0f;
  EXPECT_EQ(x.to_host(), (std::vector<float>{0, -1, 2, -1, 4, -1, 6, -1, 8, -1, 10, -1}));
  v = v * 0.0f + kiln::slice(x, 1, 0, 3, 2);  // columns 0 and 2 into 1 and 3
  EXPECT_EQ(x.to_host(), (std::vector<float>{0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10}));
}

TYPED_TEST(views, transpose_reverses_dimensions) {
  auto x = this->m34();
  auto t = kiln::transpose(x);
  EXPECT_EQ(t.shape(), (kiln::shape{4, 3}));
  EXPECT_EQ(t.strides(), (kiln::strides{1, 4}));
  EXPECT_EQ(t.storage(), x.storage());
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.to_host(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  auto tt = kiln::transpose(t);
  EXPECT_EQ(tt.shape(), x.shape());
  EXPECT_EQ(tt.strides(), x.strides());
  EXPECT_TRUE(tt.is_contiguous());
  auto c = t.clone();
  EXPECT_NE(c.storage(), x.storage());
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_host(), t.to_host());
  auto v = kiln::from_host(kiln_test::ctx<TypeParam>(), iota(5));
  EXPECT_EQ(kiln::transpose(v).shape(), (kiln::shape{5}));
  EXPECT_EQ(kiln::transpose(v).to_host(), iota(5));
}

TYPED_TEST(views, transpose_two_dimensions) {
  auto x = this->t234();
  auto t = kiln::transpose(x, 0, 2);
  EXPECT_EQ(t.shape(), (kiln::shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (kiln::strides{1, 4, 12}));
  EXPECT_EQ(t.storage(), x.storage());
  const auto h = t.to_host();
  ASSERT_EQ(h.size(), 24u);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) EXPECT_EQ(h[std::size_t(i * 6 + j * 2 + k)], float(k * 12 + j * 4 + i));
  auto u = kiln::transpose(x, -1, -2);
  EXPECT_EQ(u.shape(), (kiln::shape{2, 4, 3}));
  EXPECT_EQ(u.strides(), (kiln::strides{12, 1, 4}));
  EXPECT_THROW((void)kiln::transpose(x, 0, 3), kiln::shape_error);
}

TYPED_TEST(views, permute_reorders_dimensions) {
  auto x = this->t234();
  auto p = kiln::permute(x, {2, 0, 1});
  EXPECT_EQ(p.shape(), (kiln::shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (kiln::strides{1, 12, 4}));
  EXPECT_EQ(p.storage(), x.storage());
  const auto h = p.to_host();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(h[std::size_t(i * 6 + j * 3 + k)], float(j * 12 + k * 4 + i));
  auto same = kiln::permute(x, {-3, -2, -1});
  EXPECT_EQ(same.strides(), x.strides());
  const std::string count = shape_error_of([&] { (void)kiln::permute(x, {1, 0}); });
  EXPECT_TRUE(has(count, "kiln::permute"));
  EXPECT_TRUE(has(count, "f32[2, 3, 4]"));
  const std::string repeat = shape_error_of([&] { (void)kiln::permute(x, {0, 2, 0}); });
  EXPECT_TRUE(has(repeat, "repeated"));
  EXPECT_THROW((void)kiln::permute(x, {0, 1, 3}), kiln::shape_error);
}

TYPED_TEST(views, reshape_contiguous) {
  auto x = this->m34();
  auto r = kiln::reshape(x, {2, 6});
  EXPECT_EQ(r.shape(), (kiln::shape{2, 6}));
  EXPECT_EQ(r.strides(), (kiln::strides{6, 1}));
  EXPECT_EQ(r.storage(), x.storage());
  EXPECT_EQ(r.to_host(), iota(12));
  auto flat = kiln::reshape(x, {-1});
  EXPECT_EQ(flat.shape(), (kiln::shape{12}));
  EXPECT_EQ(flat.strides(), (kiln::strides{1}));
  EXPECT_EQ(kiln::reshape(x, {4, -1}).shape(), (kiln::shape{4, 3}));
  auto r3 = kiln::reshape(x, {2, -1, 2});
  EXPECT_EQ(r3.shape(), (kiln::shape{2, 3, 2}));
  EXPECT_EQ(r3.strides(), (kiln::strides{6, 2, 1}));
  auto ones = kiln::reshape(x, {1, 3, 1, 4, 1});
  EXPECT_EQ(ones.shape(), (kiln::shape{1, 3, 1, 4, 1}));
  EXPECT_EQ(ones.to_host(), iota(12));
  flat = 7.0f;  // writes through the view
  EXPECT_EQ(x.to_host(), std::vector<float>(12, 7.0f));
}

TYPED_TEST(views, reshape_of_views_without_copy) {
  auto x = this->m34();
  auto rows = kiln::slice(x, 0, 1, 3);  // contiguous rows 1..2
  auto flat = kiln::reshape(rows, {8});
  EXPECT_EQ(flat.offset(), 4);
  EXPECT_EQ(flat.storage(), x.storage());
  EXPECT_EQ(flat.to_host(), iota(8, 4.0f));
  auto cols = kiln::slice(x, 1, 0, 4, 2);  // 3x2, strides {4, 2}: rows stay separate
  auto c3 = kiln::reshape(cols, {3, 1, 2});
  EXPECT_EQ(c3.strides()[0], 4);
  EXPECT_EQ(c3.strides()[2], 2);
  EXPECT_EQ(c3.to_host(), cols.to_host());
  auto t = kiln::transpose(x);  // 4x3, strides {1, 4}
  auto t3 = kiln::reshape(t, {2, 2, 3});  // splitting the outer dimension needs no copy
  EXPECT_EQ(t3.strides(), (kiln::strides{2, 1, 4}));
  EXPECT_EQ(t3.to_host(), t.to_host());
  auto t4 = kiln::reshape(t, {4, 3, 1});
  EXPECT_EQ(t4.to_host(), t.to_host());
}

TYPED_TEST(views, reshape_that_needs_a_copy_throws) {
  auto x = this->m34();
  auto t = kiln::transpose(x);
  const std::string msg = shape_error_of([&] { (void)kiln::reshape(t, {12}); });
  EXPECT_TRUE(has(msg, "kiln::reshape"));
  EXPECT_TRUE(has(msg, "f32[4, 3]"));
  EXPECT_TRUE(has(msg, "[12]"));
  EXPECT_TRUE(has(msg, "without a copy"));
  EXPECT_TRUE(has(msg, "clone"));
  EXPECT_THROW((void)kiln::reshape(kiln::slice(x, 1, 0, 2), {6}), kiln::shape_error);
  // the advertised fix works
  EXPECT_EQ(kiln::reshape(t.clone(), {12}).to_host(), t.to_host());
}

TYPED_TEST(views, reshape_checks_strides_across_unit_extents) {
  // {2, 1, 3} with strides {4, 3, 1}: rows of a 2x4 tensor, first three columns; the unit
  // extent between them must not hide the gap at the end of each row
  auto x = kiln::from_host(kiln_test::ctx<TypeParam>(), {2, 4}, iota(8));
  auto u = kiln::unsqueeze(kiln::slice(x, 1, 0, 3), 1);
  EXPECT_EQ(u.shape(), (kiln::shape{2, 1, 3}));
  EXPECT_EQ(u.to_host(), (std::vector<float>{0, 1, 2, 4, 5, 6}));
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::reshape(u, {6}); }), "without a copy"));
  auto ok = kiln::reshape(u, {2, 3});  // only the unit extent goes
  EXPECT_EQ(ok.strides(), (kiln::strides{4, 1}));
  EXPECT_EQ(ok.to_host(), (std::vector<float>{0, 1, 2, 4, 5, 6}));
  auto b = kiln::broadcast_to(kiln::from_host(kiln_test::ctx<TypeParam>(), iota(3)), {2, 3});
  EXPECT_THROW((void)kiln::reshape(b, {6}), kiln::shape_error);  // stride 0 rows cannot flatten
  auto b3 = kiln::reshape(b, {2, 3, 1});
  EXPECT_EQ(b3.to_host(), (std::vector<float>{0, 1, 2, 0, 1, 2}));
}

TYPED_TEST(views, reshape_errors) {
  auto x = this->m34();
  const std::string count = shape_error_of([&] { (void)kiln::reshape(x, {5, 3}); });
  EXPECT_TRUE(has(count, "kiln::reshape"));
  EXPECT_TRUE(has(count, "[5, 3]"));
  EXPECT_TRUE(has(count, "element counts differ"));
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::reshape(x, {-1, -1}); }), "more than one -1"));
  EXPECT_THROW((void)kiln::reshape(x, {5, -1}), kiln::shape_error);
  EXPECT_THROW((void)kiln::reshape(x, {-2, -6}), kiln::shape_error);
}

TYPED_TEST(views, reshape_empty) {
  auto e = kiln::empty<float>(kiln_test::ctx<TypeParam>(), {0, 4});
  auto r = kiln::reshape(e, {4, 0, 2});
  EXPECT_EQ(r.shape(), (kiln::shape{4, 0, 2}));
  EXPECT_EQ(r.numel(), 0);
  EXPECT_EQ(kiln::reshape(e, {3, -1, 2}).shape(), (kiln::shape{3, 0, 2}));
}

TYPED_TEST(views, broadcast_to_uses_stride_zero) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto row = kiln::from_host(ctx, iota(3));
  auto b = kiln::broadcast_to(row, {2, 3});
  EXPECT_EQ(b.shape(), (kiln::shape{2, 3}));
  EXPECT_EQ(b.strides(), (kiln::strides{0, 1}));
  EXPECT_EQ(b.storage(), row.storage());
  EXPECT_EQ(b.to_host(), (std::vector<float>{0, 1, 2, 0, 1, 2}));
  auto col = kiln::from_host(ctx, {3, 1}, iota(3));
  auto c = kiln::broadcast_to(col, {2, 3, 4});
  EXPECT_EQ(c.shape(), (kiln::shape{2, 3, 4}));
  EXPECT_EQ(c.strides(), (kiln::strides{0, 1, 0}));
  const auto h = c.to_host();
  for (std::size_t i = 0; i < h.size(); ++i) EXPECT_EQ(h[i], float((i / 4) % 3));
  auto same = kiln::broadcast_to(col, {3, 1});
  EXPECT_EQ(same.strides(), col.strides());
}

TYPED_TEST(views, broadcast_to_errors_and_read_only) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto row = kiln::from_host(ctx, iota(3));
  const std::string msg = shape_error_of([&] { (void)kiln::broadcast_to(row, {4}); });
  EXPECT_TRUE(has(msg, "kiln::broadcast_to"));
  EXPECT_TRUE(has(msg, "f32[3]"));
  EXPECT_TRUE(has(msg, "[4]"));
  EXPECT_THROW((void)kiln::broadcast_to(this->m34(), {4}), kiln::shape_error);  // cannot drop dimensions
  EXPECT_THROW((void)kiln::broadcast_to(this->m34(), {3, 1}), kiln::shape_error);
  auto b = kiln::broadcast_to(row, {2, 3});
  EXPECT_TRUE(has(shape_error_of([&] { b = 1.0f; }), "broadcast view"));
  EXPECT_TRUE(has(shape_error_of([&] { b = row * 2.0f; }), "broadcast view"));
  EXPECT_EQ(row.to_host(), iota(3)) << "a refused write must not touch the storage";
}

TYPED_TEST(views, squeeze_one_dimension) {
  auto x = kiln::reshape(this->m34(), {3, 1, 4});
  auto s = kiln::squeeze(x, 1);
  EXPECT_EQ(s.shape(), (kiln::shape{3, 4}));
  EXPECT_EQ(s.strides(), (kiln::strides{4, 1}));
  EXPECT_EQ(s.storage(), x.storage());
  EXPECT_EQ(s.to_host(), iota(12));
  EXPECT_EQ(kiln::squeeze(x, -2).shape(), (kiln::shape{3, 4}));
  const std::string msg = shape_error_of([&] { (void)kiln::squeeze(x, 0); });
  EXPECT_TRUE(has(msg, "kiln::squeeze"));
  EXPECT_TRUE(has(msg, "f32[3, 1, 4]"));
  EXPECT_TRUE(has(msg, "not 1"));
  EXPECT_THROW((void)kiln::squeeze(x, 3), kiln::shape_error);
}

TYPED_TEST(views, squeeze_all) {
  auto x = kiln::reshape(this->m34(), {1, 3, 1, 4, 1});
  auto s = kiln::squeeze(x);
  EXPECT_EQ(s.shape(), (kiln::shape{3, 4}));
  EXPECT_EQ(s.strides(), (kiln::strides{4, 1}));
  EXPECT_EQ(s.to_host(), iota(12));
  auto one = kiln::from_host(kiln_test::ctx<TypeParam>(), {1, 1}, std::vector<float>{5.0f});
  auto scalar = kiln::squeeze(one);
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.to_host(), std::vector<float>{5.0f});
}

TYPED_TEST(views, unsqueeze_inserts_unit_dimensions) {
  auto x = this->m34();
  auto a = kiln::unsqueeze(x, 0);
  EXPECT_EQ(a.shape(), (kiln::shape{1, 3, 4}));
  EXPECT_EQ(a.strides(), (kiln::strides{12, 4, 1}));
  EXPECT_EQ(a.storage(), x.storage());
  EXPECT_TRUE(a.is_contiguous());
  auto b = kiln::unsqueeze(x, 1);
  EXPECT_EQ(b.shape(), (kiln::shape{3, 1, 4}));
  EXPECT_EQ(b.strides(), (kiln::strides{4, 4, 1}));
  auto c = kiln::unsqueeze(x, 2);
  EXPECT_EQ(c.shape(), (kiln::shape{3, 4, 1}));
  EXPECT_EQ(c.strides(), (kiln::strides{4, 1, 1}));
  EXPECT_EQ(kiln::unsqueeze(x, -1).shape(), (kiln::shape{3, 4, 1}));
  EXPECT_EQ(kiln::unsqueeze(x, -3).shape(), (kiln::shape{1, 3, 4}));
  EXPECT_EQ(c.to_host(), iota(12));
  auto t = kiln::unsqueeze(kiln::transpose(x), 1);  // of a strided view
  EXPECT_EQ(t.shape(), (kiln::shape{4, 1, 3}));
  EXPECT_EQ(t.to_host(), kiln::transpose(x).to_host());
  const std::string msg = shape_error_of([&] { (void)kiln::unsqueeze(x, 3); });
  EXPECT_TRUE(has(msg, "kiln::unsqueeze"));
  EXPECT_TRUE(has(msg, "position 3"));
  EXPECT_TRUE(has(msg, "f32[3, 4]"));
  EXPECT_THROW((void)kiln::unsqueeze(x, -4), kiln::shape_error);
}

TYPED_TEST(views, views_keep_the_storage_alive) {
  kiln::tensor<float, TypeParam> v;
  {
    auto x = this->m34();
    v = kiln::slice(x, 0, 2, 3);  // v is empty: takes a new tensor with the values
  }
  EXPECT_EQ(v.to_host(), iota(4, 8.0f));
  kiln::tensor<float, TypeParam> w = [&] {
    auto x = this->m34();
    return kiln::transpose(x);  // the handle outlives x
  }();
  EXPECT_EQ(w.to_host(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
}

TYPED_TEST(views, other_dtypes) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  std::vector<std::int8_t> h(12);
  std::iota(h.begin(), h.end(), std::int8_t(0));
  auto x = kiln::from_host(ctx, {3, 4}, h);
  EXPECT_EQ(kiln::transpose(x).to_host(), (std::vector<std::int8_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(kiln::slice(x, 1, 1, 4, 2).to_host(), (std::vector<std::int8_t>{1, 3, 5, 7, 9, 11}));
  std::vector<kiln::half> hh;
  for (int i = 0; i < 6; ++i) hh.push_back(kiln::half(float(i) * 0.5f));
  auto y = kiln::transpose(kiln::from_host(ctx, {2, 3}, hh));
  const auto got = y.to_host();
  const float want[] = {0.0f, 1.5f, 0.5f, 2.0f, 1.0f, 2.5f};
  ASSERT_EQ(got.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(static_cast<float>(got[i]), want[i]);
}
