// tests/vulkan/reduce_test.cpp — structural kernels on Vulkan (reductions, argmax,
// softmax, norms; kernels/reduce/*.comp with generated prologues and epilogues) against
// the CPU backend as the oracle, on the same host data: every op over axis 0, 1, -1 and
// all elements at several lengths, fused statements as one dispatch (kernels_launched
// deltas; the split pass for lines of 64Ki elements and more is two dispatches), the
// numeric edge cases (NaN, +inf, all -inf lines, empty axes), strided and broadcast
// operands, f16 and int inputs.
// Tolerances: relative to max(1, |want|, scale). A float sum of n terms is rounded at
// every partial sum, and the partial sums of data in [-4, 4] grow like sqrt(n) while
// the total may cancel to near zero: two summation orders differ by a multiple of
// 2^-24 * n * rms(x), so sums compare relative to scale = 4 * sqrt(n) (the size of
// their partial sums), never to the result alone (a row of 1000 whose sum cancelled
// to 0.057 differed by 2.2e-5 between the backends). Softmax and norms 1e-5 (both
// compute exp / sqrt in float; the GPU's exp is within a few ulp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>  // setenv
#include <type_traits>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "random.hpp"
#include "vulkan_fixture.hpp"

namespace {

using reduce = kiln_test::vulkan_test;
using cpu_ctx = kiln::context<kiln::cpu<>>;
using gpu_ctx = kiln::context<kiln::vulkan>;
using kiln_test::inf;
using kiln_test::qnan;

/// got == want within tol * max(1, |want|, scale); NaN matches NaN, infinities match exactly.
template <class T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, double tol, const std::string& what,
                  double scale = 1.0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < got.size() && bad < 5; ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::abs(g - w) <= tol * std::max({1.0, std::abs(w), scale});
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", the CPU gives " << w;
    }
  }
}

/// Runs stmt(x) (x: shape s with values h) on both backends and compares; asserts the
/// Vulkan statement took `dispatches` dispatches.
template <class Stmt>
void same_as_cpu(gpu_ctx& g, const kiln::shape& s, const std::vector<float>& h, Stmt stmt, double tol,
                 const std::string& what, int dispatches = 1, double scale = 1.0) {
  cpu_ctx c;
  auto xc = kiln::from_host(c, s, std::span(h));
  auto xg = kiln::from_host(g, s, std::span(h));
  const auto want = stmt(xc).to_host();
  const std::uint64_t before = g.kernels_launched();
  auto yg = stmt(xg);
  EXPECT_EQ(g.kernels_launched() - before, std::uint64_t(dispatches)) << what;
  expect_close(yg.to_host(), want, tol, what, scale);
}

/// The scale a float sum of n terms in [-4, 4] is compared at: its partial sums' size.
double sum_scale(kiln::index_t n) { return 4.0 * std::sqrt(double(n)); }

std::vector<float> data(std::size_t n, float lo = -4.0f, float hi = 4.0f) {
  auto r = kiln_test::rng();
  return kiln_test::uniform(r, n, lo, hi);
}

#define KILN_STMT(T, expr)                      \
  [&](const auto& x) {                          \
    using B = typename std::remove_cvref_t<decltype(x)>::backend_type; \
    kiln::tensor<T, B> y;                       \
    y = expr;                                   \
    return y;                                   \
  }

}  // namespace

TEST_F(reduce, every_op_over_every_axis_and_all_elements_matches_the_cpu) {
  for (kiln::index_t n : {1, 7, 17, 1000, 4097}) {
    const kiln::shape s{3, n};
    const auto h = data(std::size_t(3 * n));
    const std::string at = " over [3, " + std::to_string(n) + "]";
    for (int axis : {0, 1, -1}) {
      const std::string a = at + " axis " + std::to_string(axis);
      const double tol = n >= 1000 ? 2e-5 : 1e-5;
      const kiln::index_t summed = axis == 0 ? 3 : n;
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::sum(x, axis)), tol, "sum" + a, 1, sum_scale(summed));
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::mean(x, axis)), tol, "mean" + a);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::amax(x, axis)), 0, "amax" + a);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::amin(x, axis, true)), 0, "amin keepdims" + a);
      same_as_cpu(ctx(), s, h, KILN_STMT(std::int32_t, kiln::argmax(x, axis)), 0, "argmax" + a);
      same_as_cpu(ctx(), s, h, KILN_STMT(std::int32_t, kiln::argmin(x, axis)), 0, "argmin" + a);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::softmax(x, axis)), 1e-5, "softmax" + a);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::log_softmax(x, axis)), 1e-5, "log_softmax" + a);
    }
    same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::layer_norm(x)), 1e-4, "layer_norm" + at);
    same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::rms_norm(x)), 1e-5, "rms_norm" + at);
    same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::sum(x)), 1e-5, "sum of all" + at, 1, sum_scale(3 * n));
    same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::amax(x)), 0, "amax of all" + at);
    same_as_cpu(ctx(), s, h, KILN_STMT(std::int32_t, kiln::argmax(x)), 0, "argmax of all" + at);
  }
}

TEST_F(reduce, axes_of_a_rank_3_tensor_and_strided_inputs) {
  const kiln::shape s{4, 5, 6};
  const auto h = data(120);
  for (int axis : {0, 1, 2}) {
    const std::string a = " axis " + std::to_string(axis);
    same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::sum(x, axis)), 1e-5, "sum" + a, 1, sum_scale(s[axis]));
    same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::softmax(x, axis)), 1e-5, "softmax" + a);
    same_as_cpu(ctx(), s, h, KILN_STMT(std::int32_t, kiln::argmax(x, axis, true)), 0, "argmax" + a);
  }
  same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::sum(kiln::transpose(x, 0, 2), -1)), 1e-5, "sum of a transpose", 1, sum_scale(4));
  same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::softmax(kiln::transpose(x), -1)), 1e-5, "softmax of a transpose");
  same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::layer_norm(kiln::transpose(x, 1, 2))), 1e-4, "layer_norm of a transpose");
}

TEST_F(reduce, numerics_nan_inf_all_minus_inf_and_empty_axes) {
  const std::vector<float> h = {1, 2, qnan, 4,      // NaN
                                1, inf, 3, 4,      // +inf
                                -inf, -inf, -inf, -inf,
                                -inf, 3, -inf, 1,  // some -inf
                                5, 5, 2, 5};       // ties
  const kiln::shape s{5, 4};
  same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::softmax(x, -1)), 1e-6, "softmax");
  same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::log_softmax(x, -1)), 1e-6, "log_softmax");
  same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::sum(x, -1)), 1e-6, "sum");
  same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::amax(x, -1)), 0, "amax");
  same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::amin(x, 0)), 0, "amin");
  same_as_cpu(ctx(), s, h, KILN_STMT(std::int32_t, kiln::argmax(x, -1)), 0, "argmax");
  same_as_cpu(ctx(), s, h, KILN_STMT(std::int32_t, kiln::argmin(x, 0)), 0, "argmin");
  same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::layer_norm(x)), 1e-5, "layer_norm");
  // Empty axes: sum 0, max -inf, mean NaN; nothing to dispatch for an empty output. Checked
  // against the values (the CPU backend's sum over [3, 0] divides by zero in its row loop).
  const std::vector<float> none;
  auto x = kiln::from_host(ctx(), {3, 0}, std::span(none));
  kiln::tensor<float, kiln::vulkan> y;
  y = kiln::sum(x, -1);
  EXPECT_EQ(y.to_host(), std::vector<float>(3, 0.0f));
  y = kiln::amax(x, -1);
  EXPECT_EQ(y.to_host(), std::vector<float>(3, -inf));
  y = kiln::mean(x, -1);
  for (float v : y.to_host()) EXPECT_TRUE(std::isnan(v));
  const std::uint64_t before = ctx().kernels_launched();
  kiln::tensor<float, kiln::vulkan> z;
  z = kiln::softmax(x, -1);
  EXPECT_EQ(ctx().kernels_launched(), before);
  EXPECT_EQ(z.shape(), (kiln::shape{3, 0}));
}

TEST_F(reduce, layer_norm_of_rows_with_a_large_mean_and_a_small_spread) {
  // Against float64: the kernel never rounds the mean to a float near 1e4 (its ulp there,
  // 1e-3, times 1/std ~ 17 would be 1.7e-2), so 1e-3 holds.
  const kiln::index_t R = 4, N = 10000;
  auto r = kiln_test::rng();
  std::vector<float> h = kiln_test::uniform(r, std::size_t(R * N), -0.1f, 0.1f);
  for (auto& v : h) v += 1e4f;
  auto x = kiln::from_host(ctx(), {R, N}, std::span(h));
  kiln::tensor<float, kiln::vulkan> y;
  y = kiln::layer_norm(x);
  const auto got = y.to_host();
  for (kiln::index_t i = 0; i < R; ++i) {
    double mean = 0, var = 0;
    for (kiln::index_t j = 0; j < N; ++j) mean += h[std::size_t(i * N + j)];
    mean /= double(N);
    for (kiln::index_t j = 0; j < N; ++j) var += (h[std::size_t(i * N + j)] - mean) * (h[std::size_t(i * N + j)] - mean);
    var /= double(N);
    int bad = 0;
    for (kiln::index_t j = 0; j < N && bad < 5; ++j) {
      const double want = (h[std::size_t(i * N + j)] - mean) / std::sqrt(var + 1e-5);
      if (std::abs(got[std::size_t(i * N + j)] - want) > 1e-3) {
        ++bad;
        ADD_FAILURE() << "row " << i << " element " << j << ": " << got[std::size_t(i * N + j)] << " vs " << want;
      }
    }
  }
  same_as_cpu(ctx(), {R, N}, h, KILN_STMT(float, kiln::rms_norm(x)), 1e-5, "rms_norm around 1e4");
}

TEST_F(reduce, int_and_half_inputs) {
  auto r = kiln_test::rng();
  const auto hi = kiln_test::uniform_int<std::int32_t>(r, 3 * 1000, -1000, 1000);
  cpu_ctx c;
  for (int axis : {0, -1}) {
    auto xc = kiln::from_host(c, {3, 1000}, std::span(hi));
    auto xg = kiln::from_host(ctx(), {3, 1000}, std::span(hi));
    kiln::tensor<std::int32_t, kiln::cpu<>> sc, mc;
    kiln::tensor<std::int32_t, kiln::vulkan> sg, mg, ag;
    sc = kiln::sum(xc, axis);
    sg = kiln::sum(xg, axis);
    mc = kiln::amax(xc, axis);
    mg = kiln::amax(xg, axis);
    EXPECT_EQ(sg.to_host(), sc.to_host()) << "int32 sum, axis " << axis;
    EXPECT_EQ(mg.to_host(), mc.to_host()) << "int32 amax, axis " << axis;
  }
  const auto hf = data(2 * 300);
  std::vector<kiln::half> hh(hf.begin(), hf.end());
  auto xc = kiln::from_host(c, {2, 300}, std::span(hh));
  auto xg = kiln::from_host(ctx(), {2, 300}, std::span(hh));
  kiln::tensor<kiln::half, kiln::cpu<>> yc;
  kiln::tensor<kiln::half, kiln::vulkan> yg;
  yc = kiln::softmax(xc, -1);
  yg = kiln::softmax(xg, -1);
  const auto a = yc.to_host(), b = yg.to_host();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(float(b[i]), float(a[i]), 1e-3) << i;
}

TEST_F(reduce, fused_statements_are_one_dispatch) {
  const kiln::index_t B = 2, H = 3, S = 33;
  auto r = kiln_test::rng();
  const auto hs = kiln_test::uniform(r, std::size_t(B * H * S * S));
  const auto hm = kiln_test::uniform(r, std::size_t(S * S));
  cpu_ctx c;
  auto sc = kiln::from_host(c, {B, H, S, S}, std::span(hs));
  auto mc = kiln::from_host(c, {S, S}, std::span(hm));
  auto sg = kiln::from_host(ctx(), {B, H, S, S}, std::span(hs));
  auto mg = kiln::from_host(ctx(), {S, S}, std::span(hm));
  kiln::tensor<float, kiln::cpu<>> pc;
  kiln::tensor<float, kiln::vulkan> pg;
  pc = kiln::softmax(sc * 0.125f + mc);
  std::uint64_t before = ctx().kernels_launched();
  pg = kiln::softmax(sg * 0.125f + mg);
  EXPECT_EQ(ctx().kernels_launched() - before, 1u) << "softmax(s * 0.125f + mask)";
  expect_close(pg.to_host(), pc.to_host(), 1e-5, "softmax(s * 0.125f + mask)");

  const kiln::index_t N = 300;
  const auto hx = kiln_test::uniform(r, std::size_t(7 * N)), hr = kiln_test::uniform(r, std::size_t(7 * N));
  const auto hw = kiln_test::uniform(r, std::size_t(N)), hb = kiln_test::uniform(r, std::size_t(N));
  auto xc = kiln::from_host(c, {7, N}, std::span(hx)), rc = kiln::from_host(c, {7, N}, std::span(hr));
  auto wc = kiln::from_host(c, {N}, std::span(hw)), bc = kiln::from_host(c, {N}, std::span(hb));
  auto xg = kiln::from_host(ctx(), {7, N}, std::span(hx)), rg = kiln::from_host(ctx(), {7, N}, std::span(hr));
  auto wg = kiln::from_host(ctx(), {N}, std::span(hw)), bg = kiln::from_host(ctx(), {N}, std::span(hb));
  kiln::tensor<float, kiln::cpu<>> yc, nc;
  kiln::tensor<float, kiln::vulkan> yg, ng;
  yc = kiln::gelu(kiln::layer_norm(xc + rc, wc, bc)) * 2.0f;
  before = ctx().kernels_launched();
  yg = kiln::gelu(kiln::layer_norm(xg + rg, wg, bg)) * 2.0f;
  EXPECT_EQ(ctx().kernels_launched() - before, 1u) << "gelu(layer_norm(x + r, w, b)) * 2";
  expect_close(yg.to_host(), yc.to_host(), 1e-4, "gelu(layer_norm(x + r, w, b)) * 2");

  nc = kiln::sqrt(kiln::mean(kiln::square(xc), -1) + 1e-6f);
  before = ctx().kernels_launched();
  ng = kiln::sqrt(kiln::mean(kiln::square(xg), -1) + 1e-6f);
  EXPECT_EQ(ctx().kernels_launched() - before, 1u) << "sqrt(mean(square(x), -1) + 1e-6)";
  expect_close(ng.to_host(), nc.to_host(), 1e-5, "sqrt(mean(square(x), -1) + 1e-6)");

  // in place, and a second structural op evaluated first (two dispatches)
  yc = kiln::rms_norm(yc, wc);
  before = ctx().kernels_launched();
  yg = kiln::rms_norm(yg, wg);
  EXPECT_EQ(ctx().kernels_launched() - before, 1u) << "in place";
  expect_close(yg.to_host(), yc.to_host(), 1e-4, "rms_norm in place");
  kiln::tensor<float, kiln::cpu<>> tc;
  kiln::tensor<float, kiln::vulkan> tg;
  tc = kiln::softmax(xc - kiln::amax(xc, -1, true));
  before = ctx().kernels_launched();
  tg = kiln::softmax(xg - kiln::amax(xg, -1, true));
  EXPECT_EQ(ctx().kernels_launched() - before, 2u) << "softmax(x - amax(x)): the inner op first";
  expect_close(tg.to_host(), tc.to_host(), 1e-5, "softmax(x - amax(x))");
}

TEST_F(reduce, long_lines_take_the_split_pass_two_dispatches) {
  const kiln::index_t n = kiln::index_t(1) << 20;
  const auto h = data(std::size_t(n));
  same_as_cpu(ctx(), {1, n}, h, KILN_STMT(float, kiln::softmax(x, -1)), 1e-5, "softmax of a 1M row", 2);
  same_as_cpu(ctx(), {1, n}, h, KILN_STMT(float, kiln::layer_norm(x)), 1e-4, "layer_norm of a 1M row", 2);
  same_as_cpu(ctx(), {1, n}, h, KILN_STMT(std::int32_t, kiln::argmax(x, -1)), 0, "argmax of a 1M row", 2);
  {
    // against float64, within 1e-6 of the row's sum of magnitudes: two f32 sums of 1e5
    // terms differ by more than 1e-4 of a row sum that happens to cancel to ~10
    const auto hs = data(200000);
    auto xs = kiln::from_host(ctx(), {2, 100000}, std::span(hs));
    kiln::tensor<float, kiln::vulkan> ys;
    const std::uint64_t before = ctx().kernels_launched();
    ys = kiln::sum(xs, -1);
    EXPECT_EQ(ctx().kernels_launched() - before, 2u) << "sum of 100000-rows";
    const auto got = ys.to_host();
    for (int r = 0; r < 2; ++r) {
      double want = 0, mag = 0;
      for (int i = 0; i < 100000; ++i) {
        want += hs[std::size_t(100000 * r + i)];
        mag += std::abs(hs[std::size_t(100000 * r + i)]);
      }
      EXPECT_NEAR(got[std::size_t(r)], want, 1e-6 * mag) << "sum of 100000-rows, row " << r;
    }
  }
  // a long axis 0: one invocation per output walks it; against float64
  const auto hc = data(200000);
  auto xc = kiln::from_host(ctx(), {100000, 2}, std::span(hc));
  kiln::tensor<float, kiln::vulkan> yc;
  yc = kiln::sum(xc, 0);
  const auto got = yc.to_host();
  for (int j = 0; j < 2; ++j) {
    double want = 0;
    for (int r = 0; r < 100000; ++r) want += hc[std::size_t(2 * r + j)];
    EXPECT_NEAR(got[std::size_t(j)], want, 0.05) << "sum over a long axis 0, column " << j;
  }
}

TEST_F(reduce, sum_of_16m_elements_uses_many_workgroups) {
  const kiln::index_t n = kiln::index_t(1) << 24;
  std::vector<float> h = data(std::size_t(n), 0.0f, 1.0f);
  same_as_cpu(ctx(), {n}, h, KILN_STMT(float, kiln::sum(x)), 1e-4, "sum of 16M", 2);
  same_as_cpu(ctx(), {4096, 4096}, h, KILN_STMT(float, kiln::sum(x)), 1e-4, "sum of 4096 x 4096", 2);
}

namespace {

/// Sets KILN_VULKAN_ROWS (the rows mode's layout: "lanes", a subgroup a line, as CPU
/// devices get it; "groups", a workgroup a line with the line cache, as GPUs get it)
/// for its lifetime.
struct rows_layout {
  explicit rows_layout(const char* v) { ::setenv("KILN_VULKAN_ROWS", v, 1); }
  ~rows_layout() { ::unsetenv("KILN_VULKAN_ROWS"); }
  rows_layout(const rows_layout&) = delete;
  rows_layout& operator=(const rows_layout&) = delete;
};

/// Rows of n values with special values where the lanes mode's vec4 steps and blocks of
/// four steps (16 entries a lane, 128 a subgroup) meet them: row 0 plain, 1 a NaN past the
/// first block, 2 +inf in the middle, 3 all -inf, 4 -inf for the first 130 entries then
/// values, 5 -inf everywhere but the last entry, 6 a NaN first, 7 ties of the max.
std::vector<float> special_rows(kiln::index_t n) {
  auto h = data(std::size_t(8 * n));
  auto at = [&](kiln::index_t r, kiln::index_t i) -> float& { return h[std::size_t(r * n + i)]; };
  at(1, std::min<kiln::index_t>(n - 1, 200)) = qnan;
  at(2, n / 2) = inf;
  for (kiln::index_t i = 0; i < n; ++i) at(3, i) = -inf;
  for (kiln::index_t i = 0; i < std::min<kiln::index_t>(n - 1, 130); ++i) at(4, i) = -inf;
  for (kiln::index_t i = 0; i + 1 < n; ++i) at(5, i) = -inf;
  at(6, 0) = qnan;
  for (kiln::index_t i = 0; i < n; i += 3) at(7, i) = 9.0f;
  return h;
}

}  // namespace

// Both layouts of the rows mode on the same device: lanes (CPU devices' default: vec4
// steps with texel reads where every operand is f32, contiguous and 4-aligned, scalar
// steps otherwise) and groups (GPUs' default), every row op and reduction against the
// CPU, with the numeric edge cases placed inside vec4 steps and blocks.
TEST_F(reduce, both_row_layouts_with_vector_and_scalar_steps_match_the_cpu) {
  for (const char* layout : {"lanes", "groups"}) {
    const rows_layout guard(layout);
    for (kiln::index_t n : {4, 8, 60, 128, 132, 1000, 1028, 4096, 4099}) {
      const auto h = special_rows(n);
      const kiln::shape s{8, n};
      const std::string at = std::string(" (") + layout + ") over [8, " + std::to_string(n) + "]";
      const double tol = n >= 1000 ? 2e-5 : 1e-5;
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::softmax(x, -1)), 1e-5, "softmax" + at);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::log_softmax(x, -1)), 1e-5, "log_softmax" + at);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::sum(x, -1)), tol, "sum" + at, 1, sum_scale(n));
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::mean(x, -1)), tol, "mean" + at);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::amax(x, -1)), 0, "amax" + at);
      same_as_cpu(ctx(), s, h, KILN_STMT(std::int32_t, kiln::argmax(x, -1)), 0, "argmax" + at);
      same_as_cpu(ctx(), s, h, KILN_STMT(std::int32_t, kiln::argmin(x, -1)), 0, "argmin" + at);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::layer_norm(x)), 1e-4, "layer_norm" + at);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::rms_norm(x)), 1e-5, "rms_norm" + at);
      // a view starting one element in: lines off the 4-element grid (scalar steps)
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::softmax(kiln::slice(x, 1, 1, n), -1)), 1e-5, "softmax of a slice" + at);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::rms_norm(kiln::slice(x, 1, 1, n))), 1e-5, "rms_norm of a slice" + at);
      // weights, bias, prologue and epilogue: one dispatch
      std::vector<float> hw = data(std::size_t(n), 0.5f, 2.0f), hb = data(std::size_t(n), -1.0f, 1.0f);
      cpu_ctx c;
      auto wc = kiln::from_host(c, {n}, std::span<const float>(hw)), bc = kiln::from_host(c, {n}, std::span<const float>(hb));
      auto wg = kiln::from_host(ctx(), {n}, std::span<const float>(hw)), bg = kiln::from_host(ctx(), {n}, std::span<const float>(hb));
      auto pick = [&](const auto& x, const auto& cw, const auto& gw) -> const auto& {
        if constexpr (std::is_same_v<typename std::remove_cvref_t<decltype(x)>::backend_type, kiln::vulkan>) return gw;
        else return cw;
      };
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::layer_norm(x * 0.5f, pick(x, wc, wg), pick(x, bc, bg)) * 2.0f), 1e-4,
                  "layer_norm with weight and bias, fused" + at);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::rms_norm(x + 1.0f, pick(x, wc, wg)) + x), 1e-5,
                  "rms_norm with weight and a residual" + at);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::softmax(x * 0.125f + pick(x, bc, bg), -1) * 3.0f), 1e-5,
                  "softmax with a broadcast mask and an epilogue" + at);
      same_as_cpu(ctx(), s, h, KILN_STMT(float, kiln::sum(kiln::square(x - pick(x, wc, wg)), -1)), tol,
                  "sum of squared differences" + at);
    }
    // in place, and a one-element operand broadcast (a constant in the vec4 steps)
    const auto h = data(64 * 256);
    same_as_cpu(ctx(), {64, 256}, h, KILN_STMT(float, kiln::softmax(x - kiln::slice(kiln::slice(x, 0, 0, 1), 1, 0, 1), -1)), 1e-5,
                std::string("softmax minus a broadcast element (") + layout + ")");
    auto y = kiln::from_host(ctx(), {64, 256}, std::span<const float>(h));
    cpu_ctx c;
    auto yc = kiln::from_host(c, {64, 256}, std::span<const float>(h));
    y = kiln::softmax(y, -1);
    yc = kiln::softmax(yc, -1);
    expect_close(y.to_host(), yc.to_host(), 1e-5, std::string("softmax in place (") + layout + ")");
  }
}
