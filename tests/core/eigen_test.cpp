// tests/core/eigen_test.cpp — kiln/eigen.hpp: as_eigen maps CPU tensors and their views
// without copying; from_eigen copies dense Eigen expressions of either storage order.
#include <gtest/gtest.h>

#include <kiln/eigen.hpp>
#include <kiln/kiln.hpp>

#include <Eigen/Core>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "backends.hpp"
#include "checks.hpp"

namespace {

using cpu_ctx = kiln::context<kiln_test::cpu>;

using kiln_test::has;
using kiln_test::iota;
using kiln_test::shape_error_of;

cpu_ctx& ctx() { return kiln_test::ctx<kiln_test::cpu>(); }

}  // namespace

TEST(eigen, as_eigen_maps_a_matrix_without_copying) {
  auto x = kiln::from_host(ctx(), {3, 4}, iota(12));
  auto m = kiln::as_eigen(x);
  ASSERT_EQ(m.rows(), 3);
  ASSERT_EQ(m.cols(), 4);
  EXPECT_EQ(m.data(), x.data());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(m(i, j), float(i * 4 + j));
  m(1, 2) = -5.0f;  // writes reach the tensor
  EXPECT_EQ(x.to_host()[6], -5.0f);
  Eigen::MatrixXf copy = m;  // usable in Eigen expressions
  EXPECT_EQ(copy(2, 3), 11.0f);
  EXPECT_FLOAT_EQ(m.sum(), 66.0f - 6.0f - 5.0f);
}

TEST(eigen, as_eigen_of_a_transposed_view) {
  auto x = kiln::from_host(ctx(), {3, 4}, iota(12));
  auto m = kiln::as_eigen(kiln::transpose(x));
  ASSERT_EQ(m.rows(), 4);
  ASSERT_EQ(m.cols(), 3);
  EXPECT_EQ(m.data(), x.data());
  EXPECT_EQ(m.outerStride(), 1);
  EXPECT_EQ(m.innerStride(), 4);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(m(i, j), float(j * 4 + i));
  // against Eigen's own transpose of the original
  EXPECT_TRUE(m.isApprox(kiln::as_eigen(x).transpose()));
}

TEST(eigen, as_eigen_of_sliced_and_stepped_views) {
  auto x = kiln::from_host(ctx(), {4, 6}, iota(24));
  auto v = kiln::slice(kiln::slice(x, 0, 1, 4, 2), 1, 1, 6, 2);  // rows 1, 3; columns 1, 3, 5
  auto m = kiln::as_eigen(v);
  ASSERT_EQ(m.rows(), 2);
  ASSERT_EQ(m.cols(), 3);
  EXPECT_EQ(m.data(), x.data() + 7);
  const float want[2][3] = {{7, 9, 11}, {19, 21, 23}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(m(i, j), want[i][j]);
  m.setZero();
  const auto h = x.to_host();
  EXPECT_EQ(h[7], 0.0f);
  EXPECT_EQ(h[23], 0.0f);
  EXPECT_EQ(h[8], 8.0f) << "an element outside the view changed";
  EXPECT_EQ(h[13], 13.0f) << "an element outside the view changed";
}

TEST(eigen, as_eigen_of_rank_one_is_a_column) {
  auto x = kiln::from_host(ctx(), iota(10));
  auto m = kiln::as_eigen(x);
  ASSERT_EQ(m.rows(), 10);
  ASSERT_EQ(m.cols(), 1);
  EXPECT_EQ(m.col(0).sum(), 45.0f);
  auto every_third = kiln::as_eigen(kiln::slice(x, 0, 1, 10, 3));  // 1, 4, 7
  ASSERT_EQ(every_third.rows(), 3);
  EXPECT_EQ(every_third(0, 0), 1.0f);
  EXPECT_EQ(every_third(1, 0), 4.0f);
  EXPECT_EQ(every_third(2, 0), 7.0f);
  const Eigen::VectorXf as_vector = every_third;
  EXPECT_EQ(as_vector.size(), 3);
  // a column of a matrix is a rank-1 strided view
  auto mat = kiln::from_host(ctx(), {3, 4}, iota(12));
  auto col = kiln::as_eigen(kiln::squeeze(kiln::slice(mat, 1, 2, 3), 1));
  EXPECT_EQ(col.rows(), 3);
  EXPECT_EQ(col(2, 0), 10.0f);
}

TEST(eigen, as_eigen_of_integer_tensors_and_unit_extents) {
  std::vector<std::int32_t> h{1, 2, 3, 4, 5, 6};
  auto x = kiln::from_host(ctx(), {2, 3}, h);
  auto m = kiln::as_eigen(x);
  EXPECT_EQ(m.sum(), 21);
  auto row = kiln::from_host(ctx(), {1, 3}, iota(3));
  auto b = kiln::broadcast_to(row, {1, 3});  // unit extent, no actual broadcast
  EXPECT_EQ(kiln::as_eigen(b).cols(), 3);
  auto e = kiln::empty<float>(ctx(), {0, 5});
  EXPECT_EQ(kiln::as_eigen(e).size(), 0);
}

TEST(eigen, as_eigen_rejects_other_ranks_and_broadcast_views) {
  auto x3 = kiln::zeros<float>(ctx(), {2, 3, 4});
  const std::string rank = shape_error_of([&] { (void)kiln::as_eigen(x3); });
  EXPECT_TRUE(has(rank, "kiln::as_eigen"));
  EXPECT_TRUE(has(rank, "rank-1 or rank-2"));
  EXPECT_TRUE(has(rank, "f32[2, 3, 4] on cpu"));
  auto s = kiln::zeros<float>(ctx(), {});
  EXPECT_THROW((void)kiln::as_eigen(s), kiln::shape_error);
  auto row = kiln::from_host(ctx(), iota(3));
  const std::string bc = shape_error_of([&] { (void)kiln::as_eigen(kiln::broadcast_to(row, {4, 3})); });
  EXPECT_TRUE(has(bc, "kiln::as_eigen"));
  EXPECT_TRUE(has(bc, "broadcast"));
  EXPECT_TRUE(has(bc, "f32[4, 3]"));
  kiln::tensor<float, kiln_test::cpu> empty;
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::as_eigen(empty); }), "empty"));
}

TEST(eigen, from_eigen_copies_a_column_major_matrix_into_row_major) {
  Eigen::MatrixXf m(2, 3);
  m << 1, 2, 3, 4, 5, 6;
  auto t = kiln::from_eigen(ctx(), m);
  EXPECT_EQ(t.shape(), (kiln::shape{2, 3}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.to_host(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  m(0, 0) = 100.0f;  // a copy
  EXPECT_EQ(t.to_host()[0], 1.0f);
}

TEST(eigen, from_eigen_row_major_arrays_and_expressions) {
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> r(2, 2);
  r << 1, 2, 3, 4;
  EXPECT_EQ(kiln::from_eigen(ctx(), r).to_host(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(kiln::from_eigen(ctx(), r.transpose()).to_host(), (std::vector<float>{1, 3, 2, 4}));
  Eigen::ArrayXXf a(2, 3);
  a << 1, 2, 3, 4, 5, 6;
  auto t = kiln::from_eigen(ctx(), a * 2.0f + 1.0f);
  EXPECT_EQ(t.shape(), (kiln::shape{2, 3}));
  EXPECT_EQ(t.to_host(), (std::vector<float>{3, 5, 7, 9, 11, 13}));
  Eigen::MatrixXf big = Eigen::MatrixXf::Random(37, 19);
  auto block = kiln::from_eigen(ctx(), big.block(3, 2, 5, 7));
  EXPECT_EQ(block.shape(), (kiln::shape{5, 7}));
  EXPECT_TRUE(kiln::as_eigen(block).isApprox(big.block(3, 2, 5, 7), 0.0f));
  Eigen::VectorXf v = Eigen::VectorXf::LinSpaced(4, 0.0f, 3.0f);
  EXPECT_EQ(kiln::from_eigen(ctx(), v).shape(), (kiln::shape{4, 1}));
  EXPECT_EQ(kiln::from_eigen(ctx(), v.transpose()).shape(), (kiln::shape{1, 4}));
  Eigen::Matrix<std::int8_t, 2, 2> small;
  small << -1, 2, -3, 4;
  auto i8 = kiln::from_eigen(ctx(), small);
  EXPECT_EQ(i8.dtype(), kiln::dtype::i8);
  EXPECT_EQ(i8.to_host(), (std::vector<std::int8_t>{-1, 2, -3, 4}));
  EXPECT_EQ(kiln::from_eigen(ctx(), Eigen::MatrixXi(0, 3)).shape(), (kiln::shape{0, 3}));
}

TEST(eigen, round_trip_and_kiln_expressions_on_eigen_data) {
  Eigen::MatrixXf w = Eigen::MatrixXf::Random(16, 9);
  auto t = kiln::from_eigen(ctx(), w);
  EXPECT_TRUE(kiln::as_eigen(t).isApprox(w, 0.0f));
  auto y = kiln::empty<float>(ctx(), {16, 9});
  y = kiln::relu(t * 2.0f);
  const Eigen::MatrixXf want = (w * 2.0f).cwiseMax(0.0f);
  EXPECT_TRUE(kiln::as_eigen(y).isApprox(want, 0.0f));
  // the transposed view agrees with Eigen's transpose
  EXPECT_TRUE(kiln::as_eigen(kiln::transpose(y)).isApprox(want.transpose(), 0.0f));
}
