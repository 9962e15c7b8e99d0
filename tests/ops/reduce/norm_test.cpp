// tests/ops/reduce/norm_test.cpp — layer_norm and rms_norm on every backend against a
// float64 reference (PyTorch's semantics: biased variance, eps inside the square root),
// extents 1 .. 4097 and 1<<20, with and without weight and bias, rows with a large mean,
// f16 weights, fused prologues and epilogues (one kernel), the planner's rule for a
// second structural op, and errors. Tolerances in reduce_check.hpp (ref_norm).
#include <gtest/gtest.h>

#include "reduce_check.hpp"

using namespace kiln_test;

template <class B>
class norm_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(norm_test, backend_types);

namespace {

template <class B>
void check_norms(kiln::index_t rows, kiln::index_t n, float lo = -3.0f, float hi = 3.0f) {
  auto& c = ctx<B>();
  auto g = rng();
  const auto hx = uniform(g, static_cast<std::size_t>(rows * n), lo, hi);
  const auto hw = uniform(g, static_cast<std::size_t>(n), -2.0f, 2.0f);
  const auto hb = uniform(g, static_cast<std::size_t>(n), -1.0f, 1.0f);
  auto x = kiln::from_host(c, {rows, n}, std::span<const float>(hx));
  auto w = kiln::from_host(c, {n}, std::span<const float>(hw));
  auto b = kiln::from_host(c, {n}, std::span<const float>(hb));
  const std::string where = "[" + std::to_string(rows) + ", " + std::to_string(n) + "]";
  kiln::tensor<float, B> y;
  y = kiln::layer_norm(x, w, b);
  EXPECT_TRUE(close(y.to_host(), ref_norm(hx, n, hw, hb, 1e-5, false), "layer_norm " + where));
  y = kiln::layer_norm(x, 1e-3f);
  EXPECT_TRUE(close(y.to_host(), ref_norm(hx, n, {}, {}, 1e-3, false), "layer_norm without affine " + where));
  y = kiln::rms_norm(x, w);
  EXPECT_TRUE(close(y.to_host(), ref_norm(hx, n, hw, {}, 1e-6, true), "rms_norm " + where));
}

}  // namespace

TYPED_TEST(norm_test, every_extent) {
  for (kiln::index_t n : {1, 7, 16, 17, 1000, 4097}) check_norms<TypeParam>(5, n);
  check_norms<TypeParam>(2000, 7);
  check_norms<TypeParam>(2, kiln::index_t(1) << 20);
}

// Enough rows that a CPU task runs several rows, and several blocks of rows, with each
// row's last pass overlapping the next row's first (cpu/reduce/row.hpp, pipelined run).
TYPED_TEST(norm_test, many_rows) {
  check_norms<TypeParam>(300, 4096);
  check_norms<TypeParam>(20000, 37);
}

// Rows around 1e4 with a spread of 0.1: a float mean near 1e4 is only good to 1e-3,
// which would be 2% of the spread.
TYPED_TEST(norm_test, large_mean_rows) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (kiln::index_t n : {64, 4096, 20000}) {
    auto hx = uniform(g, static_cast<std::size_t>(3 * n), -0.1f, 0.1f);
    for (auto& v : hx) v += 1e4f;
    auto x = kiln::from_host(c, {3, n}, std::span<const float>(hx));
    kiln::tensor<float, TypeParam> y;
    y = kiln::layer_norm(x);
    EXPECT_TRUE(close(y.to_host(), ref_norm(hx, n, {}, {}, 1e-5, false), "layer_norm around 1e4, n " + std::to_string(n)));
  }
}

// Means 6 to 16 standard deviations from 0, both signs, with weight and bias: the CPU
// kernel centres such rows in one subtraction (|centre| * scale <= 16) or past the bound
// in two (cpu/reduce/row.hpp); either way to the reference tolerance.
TYPED_TEST(norm_test, means_near_the_one_subtraction_bound) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const kiln::index_t n = 4096;
  const float offsets[] = {6.0f, -12.0f, 15.9f, -16.1f, 20.0f};  // in standard deviations
  const auto rows = static_cast<kiln::index_t>(std::size(offsets));
  auto hx = uniform(g, static_cast<std::size_t>(rows * n), -1.0f, 1.0f);  // std 1/sqrt(3)
  for (kiln::index_t r = 0; r < rows; ++r)
    for (kiln::index_t i = 0; i < n; ++i) hx[static_cast<std::size_t>(r * n + i)] += offsets[r] * 0.57735f;
  const auto hw = uniform(g, static_cast<std::size_t>(n), -2.0f, 2.0f);
  const auto hb = uniform(g, static_cast<std::size_t>(n), -1.0f, 1.0f);
  auto x = kiln::from_host(c, {rows, n}, std::span<const float>(hx));
  auto w = kiln::from_host(c, {n}, std::span<const float>(hw));
  auto b = kiln::from_host(c, {n}, std::span<const float>(hb));
  kiln::tensor<float, TypeParam> y;
  y = kiln::layer_norm(x, w, b);
  EXPECT_TRUE(close(y.to_host(), ref_norm(hx, n, hw, hb, 1e-5, false), "layer_norm, mean near 16 std"));
  y = kiln::layer_norm(x);
  EXPECT_TRUE(close(y.to_host(), ref_norm(hx, n, {}, {}, 1e-5, false), "layer_norm without affine, mean near 16 std"));
}

// A first element far from the rest: kernels that shift by it must not lose the variance.
TYPED_TEST(norm_test, outlier_first_element) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (kiln::index_t n : {100, 4096}) {
    auto hx = uniform(g, static_cast<std::size_t>(2 * n), -1.0f, 1.0f);
    hx[0] = 3e3f;
    hx[static_cast<std::size_t>(n)] = -5e3f;
    auto x = kiln::from_host(c, {2, n}, std::span<const float>(hx));
    kiln::tensor<float, TypeParam> y;
    y = kiln::layer_norm(x);
    EXPECT_TRUE(close(y.to_host(), ref_norm(hx, n, {}, {}, 1e-5, false), "layer_norm, outlier first, n " + std::to_string(n)));
  }
}

TYPED_TEST(norm_test, half_weight_and_strided_input) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const auto hx = uniform(g, 24 * 10, -3.0f, 3.0f);
  const auto hw = uniform(g, 24, -2.0f, 2.0f);
  std::vector<kiln::half> hwh(hw.begin(), hw.end());
  std::vector<float> hw_r(hwh.begin(), hwh.end());
  auto x = kiln::from_host(c, {24, 10}, std::span<const float>(hx));
  auto w = kiln::from_host(c, {24}, std::span<const kiln::half>(hwh));
  kiln::tensor<float, TypeParam> y;
  y = kiln::rms_norm(kiln::transpose(x), w);  // [10, 24], read through strides
  std::vector<float> xt(hx.size());
  for (int r = 0; r < 24; ++r)
    for (int k = 0; k < 10; ++k) xt[static_cast<std::size_t>(k * 24 + r)] = hx[static_cast<std::size_t>(r * 10 + k)];
  EXPECT_TRUE(close(y.to_host(), ref_norm(xt, 24, hw_r, {}, 1e-6, true), "rms_norm of a transpose, f16 weight"));
}

TYPED_TEST(norm_test, fused_prologue_and_epilogue_is_one_kernel) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const kiln::index_t rows = 9, n = 300;
  const auto hx = uniform(g, static_cast<std::size_t>(rows * n), -3.0f, 3.0f);
  const auto hr = uniform(g, static_cast<std::size_t>(rows * n), -3.0f, 3.0f);
  const auto hw = uniform(g, static_cast<std::size_t>(n), -2.0f, 2.0f);
  const auto hb = uniform(g, static_cast<std::size_t>(n), -1.0f, 1.0f);
  auto x = kiln::from_host(c, {rows, n}, std::span<const float>(hx));
  auto r = kiln::from_host(c, {rows, n}, std::span<const float>(hr));
  auto w = kiln::from_host(c, {n}, std::span<const float>(hw));
  auto b = kiln::from_host(c, {n}, std::span<const float>(hb));
  auto y = kiln::empty<float>(c, {rows, n});
  EXPECT_EQ(kernels_of<TypeParam>([&] { y = kiln::gelu(kiln::layer_norm(x + r, w, b)) * 2.0f; }), 1u);
  std::vector<float> sum(hx.size());
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = hx[i] + hr[i];
  auto want = ref_norm(sum, n, hw, hb, 1e-5, false);
  for (std::size_t i = 0; i < want.value.size(); ++i) {
    const double v = want.value[i];
    want.value[i] = v * 0.5 * std::erfc(-v / std::sqrt(2.0)) * 2.0;
    want.tol[i] = want.tol[i] * 2.5 + 2e-6 * std::fabs(want.value[i]);
  }
  EXPECT_TRUE(close(y.to_host(), want, "gelu(layer_norm(x + r, w, b)) * 2"));

  // a reduction with an epilogue: the root mean square
  auto m = kiln::empty<float>(c, {rows});
  EXPECT_EQ(kernels_of<TypeParam>([&] { m = kiln::sqrt(kiln::mean(kiln::square(x), -1) + 1e-6f); }), 1u);
  std::vector<float> sq(hx.size());
  for (std::size_t i = 0; i < sq.size(); ++i) sq[i] = hx[i] * hx[i];
  auto rms = ref_reduce(sq, split_of({rows, n}, -1), red::mean);
  for (std::size_t i = 0; i < rms.value.size(); ++i) {
    rms.value[i] = std::sqrt(rms.value[i] + 1e-6);
    rms.tol[i] = rms.tol[i] / rms.value[i] + 4e-7 * rms.value[i];
  }
  EXPECT_TRUE(close(m.to_host(), rms, "sqrt(mean(square(x), -1) + 1e-6)"));
  // a squared distance: prologue x - r
  EXPECT_EQ(kernels_of<TypeParam>([&] { m = kiln::sum(kiln::square(x - r), -1); }), 1u);
}

// A second structural op in one statement is evaluated first, into a temporary.
TYPED_TEST(norm_test, second_structural_op_evaluates_first) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const auto hx = uniform(g, 8 * 40, -3.0f, 3.0f);
  auto x = kiln::from_host(c, {8, 40}, std::span<const float>(hx));
  auto m = kiln::empty<float>(c, {8});
  EXPECT_EQ(kernels_of<TypeParam>([&] { m = kiln::sum(kiln::softmax(x), -1); }), 2u);
  for (float v : m.to_host()) EXPECT_NEAR(v, 1.0f, 1e-5f);
  auto y = kiln::empty<float>(c, {8, 40});
  EXPECT_EQ(kernels_of<TypeParam>([&] { y = kiln::rms_norm(x) - kiln::layer_norm(x); }), 2u);
  const auto a = ref_norm(hx, 40, {}, {}, 1e-6, true), b = ref_norm(hx, 40, {}, {}, 1e-5, false);
  reference want = a;
  for (std::size_t i = 0; i < want.value.size(); ++i) {
    want.value[i] = a.value[i] - b.value[i];
    want.tol[i] = a.tol[i] + b.tol[i];
  }
  EXPECT_TRUE(close(y.to_host(), want, "rms_norm(x) - layer_norm(x)"));
}

TYPED_TEST(norm_test, errors) {
  auto& c = ctx<TypeParam>();
  auto x = kiln::empty<float>(c, {3, 4});
  auto w5 = kiln::full(c, {5}, 1.0f), w4 = kiln::full(c, {4}, 1.0f);
  const std::string msg = shape_error_of([&] { (void)kiln::layer_norm(x, w5, w4); });
  EXPECT_TRUE(has(msg, "kiln::layer_norm"));
  EXPECT_TRUE(has(msg, "weight"));
  EXPECT_TRUE(has(msg, "[5]"));
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::rms_norm(x, w4, -1.0f); }), "eps"));
}
