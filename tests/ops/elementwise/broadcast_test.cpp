// tests/ops/elementwise/broadcast_test.cpp — NumPy broadcasting and strided views, against
// Eigen's rowwise/colwise/replicate/transpose/strided-slice expressions: row and column
// broadcasts, scalars and rank-0 tensors, rank mismatch, size-1 dimensions, transposed
// and step-sliced views both as inputs and as outputs, aliasing, and the shape_error a
// mismatch throws.
#include "check.hpp"

#include <string>

using namespace kiln_test;

template <class B>
class broadcast_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(broadcast_test, backend_types);

namespace {

using ArrayRd = Eigen::Array<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ArrayRf = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ArrayRowd = Eigen::Array<double, 1, Eigen::Dynamic>;

/// Row-major host data as a rows x cols Eigen array of double.
ArrayRd as_2d(const std::vector<float>& v, Eigen::Index rows, Eigen::Index cols) {
  return Eigen::Map<const ArrayRf>(v.data(), rows, cols).cast<double>();
}

/// A 2-D oracle flattened in row-major order, as kiln's to_host returns it.
ArrayXd flat(const ArrayRd& a) { return Eigen::Map<const ArrayXd>(a.data(), a.size()); }

/// (rows, cols) pairs: tiny, around vector widths, and large enough (> 2^16 elements) for
/// the threaded path, whose chunks start in the middle of rows.
struct extent2 {
  kiln::index_t rows, cols;
};
constexpr extent2 shapes_2d[] = {{1, 1}, {3, 7}, {4, 16}, {5, 17}, {33, 1025}, {129, 1025}, {1025, 129}};

std::string label(extent2 e) {
  std::string s = "[";
  s += std::to_string(e.rows);
  s += ", ";
  s += std::to_string(e.cols);
  return s + "]";
}

}  // namespace

TYPED_TEST(broadcast_test, row_broadcast) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (auto [m, n] : shapes_2d) {
    SCOPED_TRACE(label({m, n}));
    const auto ha = draw(g, std::size_t(m * n), {}), hb = draw(g, std::size_t(n), {});
    auto a = kiln::from_host(c, {m, n}, ha);
    auto b = kiln::from_host(c, {n}, hb);
    auto y = kiln::empty<float>(c, {m, n});
    // [M, N] op [N]: the row repeats down the rows. Products only, so that no FMA
    // contraction can change the rounding: two roundings, each relative.
    y = a * b * b;
    const ArrayRowd br = as_2d(hb, 1, n);
    const ArrayRd want = (as_2d(ha, m, n).rowwise() * br).rowwise() * br;
    EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::elementwise));
  }
}

TYPED_TEST(broadcast_test, column_broadcast) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (auto [m, n] : shapes_2d) {
    SCOPED_TRACE(label({m, n}));
    const auto ha = draw(g, std::size_t(m * n), {}), hb = draw(g, std::size_t(m), {});
    auto a = kiln::from_host(c, {m, n}, ha);
    auto b = kiln::from_host(c, {m, 1}, hb);
    auto y = kiln::empty<float>(c, {m, n});
    y = b - a;  // [M, 1] op [M, N]: the column repeats across the columns
    const ArrayXd bc = to_double(hb);
    const ArrayRd want = -(as_2d(ha, m, n).colwise() - bc);
    EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::exact));
  }
}

TYPED_TEST(broadcast_test, row_and_column_together) {
  // [M, 1] op [1, N] -> [M, N]: an outer sum
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (auto [m, n] : shapes_2d) {
    SCOPED_TRACE(label({m, n}));
    const auto hcol = draw(g, std::size_t(m), {}), hrow = draw(g, std::size_t(n), {});
    auto col = kiln::from_host(c, {m, 1}, hcol);
    auto row = kiln::from_host(c, {1, n}, hrow);
    auto y = kiln::empty<float>(c, {m, n});
    y = col + row;
    const ArrayRd want = to_double(hcol).replicate(1, n).rowwise() + as_2d(hrow, 1, n).row(0);
    EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::exact));
  }
}

TYPED_TEST(broadcast_test, scalar_and_rank0_tensor) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (auto [m, n] : shapes_2d) {
    SCOPED_TRACE(label({m, n}));
    const auto ha = draw(g, std::size_t(m * n), {}), hs = draw(g, 1, {-4.0f, 4.0f, false});
    auto a = kiln::from_host(c, {m, n}, ha);
    auto s = kiln::from_host(c, kiln::shape{}, hs);  // rank 0: one element, broadcast everywhere
    auto y = kiln::empty<float>(c, {m, n});
    y = a * s * 1.5f;
    const ArrayRd want = as_2d(ha, m, n) * double(hs[0]) * 1.5;
    EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::elementwise));
  }
}

TYPED_TEST(broadcast_test, rank_mismatch) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  {
    SCOPED_TRACE("[2, 3, 4] + [4]");
    const auto ha = draw(g, 24, {}), hb = draw(g, 4, {});
    auto a = kiln::from_host(c, {2, 3, 4}, ha);
    auto b = kiln::from_host(c, {4}, hb);
    auto y = kiln::empty<float>(c, {2, 3, 4});
    y = a + b;
    const ArrayRd want = as_2d(ha, 6, 4).rowwise() + as_2d(hb, 1, 4).row(0);
    EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::exact));
  }
  {
    SCOPED_TRACE("[3, 1] + [1, 4]");
    const auto ha = draw(g, 3, {}), hb = draw(g, 4, {});
    auto a = kiln::from_host(c, {3, 1}, ha);
    auto b = kiln::from_host(c, {1, 4}, hb);
    auto y = kiln::empty<float>(c, {3, 4});
    y = a + b;
    const ArrayRd want = to_double(ha).replicate(1, 4).rowwise() + as_2d(hb, 1, 4).row(0);
    EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::exact));
  }
  {
    SCOPED_TRACE("[4] * [3, 1] * [2, 1, 1] -> [2, 3, 4]");
    const auto ha = draw(g, 4, {}), hb = draw(g, 3, {}), hc = draw(g, 2, {});
    auto a = kiln::from_host(c, {4}, ha);
    auto b = kiln::from_host(c, {3, 1}, hb);
    auto d = kiln::from_host(c, {2, 1, 1}, hc);
    auto y = kiln::empty<float>(c, {2, 3, 4});
    y = a * b * d;
    // rows of the [6, 4] view: row r is (i, j) = (r / 3, r % 3)
    const ArrayXd bd = to_double(hb), cd = to_double(hc);
    const ArrayXd bc = bd.replicate(2, 1) * cd.replicate(1, 3).transpose().reshaped(6, 1);
    const ArrayRd want = bc.replicate(1, 4).rowwise() * as_2d(ha, 1, 4).row(0);
    EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::elementwise));
  }
}

TYPED_TEST(broadcast_test, size_one_dimensions) {
  // [5, 1, 7] op [1, 3, 1] -> [5, 3, 7]; and a [1, N] target taking an [N] expression
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const auto ha = draw(g, 35, {}), hb = draw(g, 3, {});
  auto a = kiln::from_host(c, {5, 1, 7}, ha);
  auto b = kiln::from_host(c, {1, 3, 1}, hb);
  auto y = kiln::empty<float>(c, {5, 3, 7});
  y = kiln::max(a, b);
  // as [5, 21]: row i is a's row i three times, over b's values each seven times
  const ArrayRd a21 = as_2d(ha, 5, 7).replicate(1, 3);
  const ArrayRd b21 = ArrayRd(to_double(hb).transpose().replicate(7, 1).reshaped(1, 21)).replicate(5, 1);
  // NaN-propagating, as kiln::max is
  const ArrayRd want = (a21.isNaN() || b21.isNaN()).select(ArrayRd::Constant(5, 21, std::nan("")), a21.max(b21));
  EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::exact));

  const auto hr = draw(g, 129, {});
  auto r = kiln::from_host(c, {129}, hr);
  auto y1 = kiln::empty<float>(c, {1, 129});
  y1 = kiln::relu(r);
  const ArrayXd rd = to_double(hr);
  EXPECT_TRUE(all_close(y1.to_host(), rd.isNaN().select(rd, rd.max(0.0)).eval(), tol::exact));
}

TYPED_TEST(broadcast_test, expression_broadcast_into_larger_target) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const kiln::index_t m = 33, n = 1025;
  const auto hb = draw(g, std::size_t(n), {});
  auto b = kiln::from_host(c, {n}, hb);
  auto y = kiln::empty<float>(c, {m, n});
  y = b * 2.0f;  // every row of y takes the [N] expression
  const ArrayRd want = (2.0 * as_2d(hb, 1, n)).replicate(m, 1);
  EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::exact));
}

TYPED_TEST(broadcast_test, broadcast_to_view_as_input) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const kiln::index_t m = 17, n = 33;
  const auto ha = draw(g, std::size_t(m * n), {}), hb = draw(g, std::size_t(n), {});
  auto a = kiln::from_host(c, {m, n}, ha);
  auto b = kiln::from_host(c, {n}, hb);
  auto y = kiln::empty<float>(c, {m, n});
  y = a / kiln::broadcast_to(b, {m, n});
  const ArrayRd want = as_2d(ha, m, n).rowwise() / as_2d(hb, 1, n).row(0);
  EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::exact));
}

TYPED_TEST(broadcast_test, broadcast_view_as_output_throws) {
  auto& c = ctx<TypeParam>();
  auto b = kiln::zeros<float>(c, {4});
  auto a = kiln::zeros<float>(c, {3, 4});
  auto view = kiln::broadcast_to(b, {3, 4});
  EXPECT_THROW(view = a + 1.0f, kiln::shape_error);
}

TYPED_TEST(broadcast_test, transposed_input) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (auto [m, n] : shapes_2d) {
    SCOPED_TRACE(label({m, n}));
    const auto ha = draw(g, std::size_t(m * n), {}), hb = draw(g, std::size_t(m * n), {}),
               hr = draw(g, std::size_t(m), {});
    auto a = kiln::from_host(c, {n, m}, ha);  // read as its [M, N] transpose
    auto b = kiln::from_host(c, {m, n}, hb);
    auto r = kiln::from_host(c, {m}, hr);
    auto y = kiln::empty<float>(c, {m, n});
    y = kiln::transpose(a) * b;
    const ArrayRd at = as_2d(ha, n, m).transpose();
    EXPECT_TRUE(all_close(y.to_host(), flat(at * as_2d(hb, m, n)), tol::exact));
    // a transposed [N, M] view, a row broadcast over it, into an [N, M] target
    auto yt = kiln::empty<float>(c, {n, m});
    yt = kiln::transpose(b) + r;
    const ArrayRd want = as_2d(hb, m, n).transpose().rowwise() + as_2d(hr, 1, m).row(0);
    EXPECT_TRUE(all_close(yt.to_host(), flat(want), tol::exact));
  }
}

TYPED_TEST(broadcast_test, permuted_3d_input) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const auto ha = draw(g, 2 * 3 * 5, {});
  auto a = kiln::from_host(c, {2, 3, 5}, ha);
  auto y = kiln::empty<float>(c, {5, 3, 2});
  y = -kiln::transpose(a);  // y[k, j, i] = -a[i, j, k]
  const ArrayRd a2 = as_2d(ha, 2, 15);  // a[i, j, k] = a2(i, 5 j + k)
  ArrayRd want(15, 2);                  // y[k, j, i] = want(3 k + j, i)
  for (Eigen::Index k = 0; k < 5; ++k) {
    for (Eigen::Index j = 0; j < 3; ++j) want.row(3 * k + j) = -a2.col(5 * j + k).transpose();
  }
  EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::exact));
}

TYPED_TEST(broadcast_test, step_sliced_input) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (auto [m, n] : shapes_2d) {
    SCOPED_TRACE(label({m, n}));
    // every other column from 1 of an [M, 2N + 1] tensor, and every third row of a [3M, N] one
    const auto hx = draw(g, std::size_t(m * (2 * n + 1)), {}), hz = draw(g, std::size_t(3 * m * n), {});
    auto x = kiln::from_host(c, {m, 2 * n + 1}, hx);
    auto z = kiln::from_host(c, {3 * m, n}, hz);
    auto y = kiln::empty<float>(c, {m, n});
    y = kiln::slice(x, 1, 1, 2 * n + 1, 2) * 2.0f - kiln::slice(z, 0, 2, 3 * m, 3);
    const ArrayRd xs = as_2d(hx, m, 2 * n + 1)(Eigen::all, Eigen::seqN(1, n, 2));
    const ArrayRd zs = as_2d(hz, 3 * m, n)(Eigen::seqN(2, m, 3), Eigen::all);
    EXPECT_TRUE(all_close(y.to_host(), flat(2.0 * xs - zs), tol::exact));
  }
}

TYPED_TEST(broadcast_test, transposed_output) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (auto [m, n] : shapes_2d) {
    SCOPED_TRACE(label({m, n}));
    const auto ha = draw(g, std::size_t(m * n), {}), hb = draw(g, std::size_t(n), {});
    auto a = kiln::from_host(c, {m, n}, ha);
    auto b = kiln::from_host(c, {n}, hb);
    auto y = kiln::empty<float>(c, {n, m});
    kiln::transpose(y) = a + b;  // writes y[j, i] = a[i, j] + b[j]
    const ArrayRd sum = as_2d(ha, m, n).rowwise() + as_2d(hb, 1, n).row(0);
    const ArrayRd want = sum.transpose();
    EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::exact));
  }
}

TYPED_TEST(broadcast_test, step_sliced_output_leaves_the_rest) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (auto [m, n] : shapes_2d) {
    SCOPED_TRACE(label({m, n}));
    const auto ha = draw(g, std::size_t(m * n), {}), hb = draw(g, std::size_t(m * n), {}),
               hy = draw(g, std::size_t(m * 2 * n), {});
    auto a = kiln::from_host(c, {m, n}, ha);
    auto b = kiln::from_host(c, {m, n}, hb);
    auto y = kiln::from_host(c, {m, 2 * n}, hy);
    auto even = kiln::slice(y, 1, 0, 2 * n, 2);
    even = a * b;  // writes the even columns of y only
    ArrayRd want = as_2d(hy, m, 2 * n);
    want(Eigen::all, Eigen::seqN(0, n, 2)) = as_2d(ha, m, n) * as_2d(hb, m, n);
    EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::exact));
  }
}

TYPED_TEST(broadcast_test, sliced_rows_output_with_broadcast_input) {
  // rows 1, 4, 7, ... of y take a row broadcast: strided rows, contiguous within a row
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const kiln::index_t m = 10, n = 37;
  const auto hy = draw(g, std::size_t(m * n), {}), hb = draw(g, std::size_t(n), {});
  auto y = kiln::from_host(c, {m, n}, hy);
  auto b = kiln::from_host(c, {n}, hb);
  kiln::slice(y, 0, 1, m, 3) = kiln::sigmoid(b);
  ArrayRd want = as_2d(hy, m, n);
  want(Eigen::seqN(1, 3, 3), Eigen::all) = as_2d(hb, 1, n).logistic().replicate(3, 1);
  EXPECT_TRUE(all_close(y.to_host(), flat(want), tol::transcendental, tol::transcendental_abs));
}

TYPED_TEST(broadcast_test, aliasing_output_and_input) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const kiln::index_t n = 67;
  const auto hx = draw(g, std::size_t(n * n), {});
  // exactly the output's own elements: read in place
  auto x = kiln::from_host(c, {n, n}, hx);
  x = x * 2.0f + 1.0f;
  EXPECT_TRUE(all_close(x.to_host(), flat(as_2d(hx, n, n) * 2.0 + 1.0), tol::exact));
  // its own transpose: overlaps the output the other way round, so kiln must not read
  // elements it has already overwritten
  auto t = kiln::from_host(c, {n, n}, hx);
  t = kiln::transpose(t) - t;
  const ArrayRd x2 = as_2d(hx, n, n);
  EXPECT_TRUE(all_close(t.to_host(), flat(x2.transpose() - x2), tol::exact));
}

TYPED_TEST(broadcast_test, integer_row_broadcast_wraps) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (auto [m, n] : shapes_2d) {
    SCOPED_TRACE(label({m, n}));
    const auto ha = draw_int<std::int8_t>(g, std::size_t(m * n)), hb = draw_int<std::int8_t>(g, std::size_t(n));
    auto a = kiln::from_host(c, {m, n}, ha);
    auto b = kiln::from_host(c, {n}, hb);
    auto y = kiln::empty<std::int8_t>(c, {m, n});
    y = a + b;
    using ArrayRl = Eigen::Array<std::int64_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const ArrayRl al = Eigen::Map<const ArrayXl>(to_int64(ha).data(), m * n).reshaped<Eigen::RowMajor>(m, n);
    const ArrayRl sum = al.rowwise() + to_int64(hb).transpose();
    const ArrayXl flat_sum = Eigen::Map<const ArrayXl>(sum.data(), sum.size());
    EXPECT_TRUE(all_equal(y.to_host(), wrap_to<std::int8_t>(flat_sum)));
  }
}

TYPED_TEST(broadcast_test, shape_mismatch_throws_naming_op_operands_and_device) {
  auto& c = ctx<TypeParam>();
  auto a = kiln::zeros<float>(c, {3, 4});
  auto b = kiln::zeros<float>(c, {5});
  try {
    auto e = a + b;
    (void)e;
    ADD_FAILURE() << "f32[3, 4] + f32[5] did not throw";
  } catch (const kiln::shape_error& err) {
    const std::string msg = err.what();
    EXPECT_NE(msg.find("kiln::add"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32[3, 4]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32[5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.device_name()), std::string::npos) << msg;
  }
  // a mismatch inside a larger expression names the op where it occurs, and is thrown
  // when the expression is built, before anything runs
  auto y = kiln::empty<float>(c, {3, 4});
  const auto before = c.kernels_launched();
  try {
    y = kiln::relu(kiln::relu(a) * b);
    ADD_FAILURE() << "relu(f32[3, 4]) * f32[5] did not throw";
  } catch (const kiln::shape_error& err) {
    EXPECT_NE(std::string(err.what()).find("kiln::mul"), std::string::npos) << err.what();
  }
  EXPECT_EQ(c.kernels_launched(), before);
  // an expression that does not fit its target
  auto small = kiln::empty<float>(c, {4});
  EXPECT_THROW(small = a + 1.0f, kiln::shape_error);
}
