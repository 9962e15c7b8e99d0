// tests/ops/reduce/softmax_test.cpp — softmax and log_softmax on every backend against a
// float64 reference: axes -1, 0 and a middle axis, extents 1 .. 4097 and a 1M-element
// row, NaN / +inf / all -inf lines, empty axes, a fused prologue with a broadcast mask
// (one kernel), and in-place use. Tolerance: a few ulps per exp plus the sum's
// accumulation bound, relative (reduce_check.hpp).
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "reduce_check.hpp"

using namespace kiln_test;

template <class B>
class softmax_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(softmax_test, backend_types);

namespace {

template <class B>
void check_softmax(const kiln::shape& s, int axis, float lo = -8.0f, float hi = 8.0f) {
  auto& c = ctx<B>();
  auto g = rng();
  const auto host = uniform(g, static_cast<std::size_t>(s.numel()), lo, hi);
  auto x = kiln::from_host(c, s, std::span<const float>(host));
  const line_split p = split_of(s, axis);
  const std::string where = "shape " + s.to_string() + " axis " + std::to_string(axis);
  kiln::tensor<float, B> y;
  y = kiln::softmax(x, axis);
  EXPECT_EQ(y.shape(), s);
  EXPECT_TRUE(close(y.to_host(), ref_softmax(host, p, false), "softmax " + where));
  y = kiln::log_softmax(x, axis);
  EXPECT_TRUE(close(y.to_host(), ref_softmax(host, p, true), "log_softmax " + where));
}

}  // namespace

TYPED_TEST(softmax_test, last_axis_every_extent) {
  for (kiln::index_t n : {1, 7, 16, 17, 1000, 4097}) check_softmax<TypeParam>({5, n}, -1);
  check_softmax<TypeParam>({3000, 7}, -1);
}

TYPED_TEST(softmax_test, one_million_element_row) { check_softmax<TypeParam>({1, kiln::index_t(1) << 20}, -1); }

TYPED_TEST(softmax_test, other_axes) {
  check_softmax<TypeParam>({17, 6}, 0);
  check_softmax<TypeParam>({3, 33, 5}, 1);
  check_softmax<TypeParam>({1000, 3}, 0);
}

TYPED_TEST(softmax_test, nan_inf_and_all_minus_inf_lines) {
  auto& c = ctx<TypeParam>();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> h = {1, nan, 3, /**/ 1, inf, 2, /**/ -inf, -inf, -inf, /**/ -inf, 0, -inf};
  auto x = kiln::from_host(c, {4, 3}, std::span<const float>(h));
  kiln::tensor<float, TypeParam> y;
  y = kiln::softmax(x);
  const auto v = y.to_host();
  for (int i = 0; i < 9; ++i) EXPECT_TRUE(std::isnan(v[static_cast<std::size_t>(i)])) << "element " << i;
  EXPECT_EQ(v[9], 0.0f);
  EXPECT_EQ(v[10], 1.0f);
  EXPECT_EQ(v[11], 0.0f);
  y = kiln::log_softmax(x);
  const auto l = y.to_host();
  for (int i = 0; i < 9; ++i) EXPECT_TRUE(std::isnan(l[static_cast<std::size_t>(i)])) << "element " << i;
  EXPECT_EQ(l[9], -inf);
  EXPECT_EQ(l[10], 0.0f);
}

TYPED_TEST(softmax_test, empty_axis_gives_empty_result) {
  auto& c = ctx<TypeParam>();
  auto x = kiln::empty<float>(c, {4, 0});
  kiln::tensor<float, TypeParam> y;
  y = kiln::softmax(x);
  EXPECT_EQ(y.shape(), kiln::shape({4, 0}));
}

// The attention-score pattern: scale, an additive mask [S, S] broadcast over [B, H, S, S],
// softmax; one kernel.
TYPED_TEST(softmax_test, fused_prologue_with_broadcast_mask_is_one_kernel) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const kiln::index_t B = 2, H = 3, S = 37;
  const auto hs = uniform(g, static_cast<std::size_t>(B * H * S * S), -8.0f, 8.0f);
  std::vector<float> hm(static_cast<std::size_t>(S * S));
  for (kiln::index_t i = 0; i < S; ++i)
    for (kiln::index_t j = 0; j < S; ++j) hm[static_cast<std::size_t>(i * S + j)] = j <= i ? 0.0f : -1e9f;
  auto s = kiln::from_host(c, {B, H, S, S}, std::span<const float>(hs));
  auto mask = kiln::from_host(c, {S, S}, std::span<const float>(hm));
  auto p = kiln::empty<float>(c, {B, H, S, S});
  EXPECT_EQ(kernels_of<TypeParam>([&] { p = kiln::softmax(s * 0.125f + mask); }), 1u);
  std::vector<float> in(hs.size());
  for (std::size_t i = 0; i < hs.size(); ++i) in[i] = hs[i] * 0.125f + hm[i % hm.size()];
  EXPECT_TRUE(close(p.to_host(), ref_softmax(in, split_of({B, H, S, S}, -1), false), "softmax(s * 0.125 + mask)"));
  // and an epilogue on top: still one kernel
  EXPECT_EQ(kernels_of<TypeParam>([&] { p = kiln::softmax(s * 0.125f + mask) * 2.0f - 1.0f; }), 1u);
}

TYPED_TEST(softmax_test, in_place) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const auto h = uniform(g, 6 * 50, -4.0f, 4.0f);
  auto x = kiln::from_host(c, {6, 50}, std::span<const float>(h));
  x = kiln::softmax(x);
  EXPECT_TRUE(close(x.to_host(), ref_softmax(h, split_of({6, 50}, -1), false), "x = softmax(x)"));
}

// Enough rows that a CPU task runs several rows, and several blocks of rows, with each
// row's last pass overlapping the next row's first (cpu/reduce/row.hpp, pipelined run):
// read in place, through a prologue, and in place into the input itself.
TYPED_TEST(softmax_test, many_rows) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  for (auto [R, N] : {std::pair<kiln::index_t, kiln::index_t>{300, 4096}, {20000, 37}}) {
    const std::string where = "[" + std::to_string(R) + ", " + std::to_string(N) + "]";
    const auto h = uniform(g, static_cast<std::size_t>(R * N), -8.0f, 8.0f);
    const auto hm = uniform(g, static_cast<std::size_t>(N), -2.0f, 0.0f);
    auto x = kiln::from_host(c, {R, N}, std::span<const float>(h));
    auto mask = kiln::from_host(c, {N}, std::span<const float>(hm));
    kiln::tensor<float, TypeParam> y;
    for (bool log : {false, true}) {
      if (log) y = kiln::log_softmax(x);
      else y = kiln::softmax(x);
      EXPECT_TRUE(close(y.to_host(), ref_softmax(h, split_of({R, N}, -1), log), "softmax " + where));
    }
    y = kiln::softmax(x * 0.5f + mask);
    std::vector<float> in(h.size());
    for (std::size_t i = 0; i < h.size(); ++i) in[i] = h[i] * 0.5f + hm[i % hm.size()];
    EXPECT_TRUE(close(y.to_host(), ref_softmax(in, split_of({R, N}, -1), false), "softmax(x * 0.5 + mask) " + where));
    x = kiln::softmax(x);
    EXPECT_TRUE(close(x.to_host(), ref_softmax(h, split_of({R, N}, -1), false), "x = softmax(x) " + where));
  }
}

TYPED_TEST(softmax_test, half_input_and_output) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const auto h = uniform(g, 4 * 100, -4.0f, 4.0f);
  std::vector<kiln::half> hh(h.begin(), h.end());
  std::vector<float> rounded(hh.begin(), hh.end());
  auto x = kiln::from_host(c, {4, 100}, std::span<const kiln::half>(hh));
  kiln::tensor<kiln::half, TypeParam> y;
  y = kiln::softmax(x);
  auto want = ref_softmax(rounded, split_of({4, 100}, -1), false);
  for (std::size_t i = 0; i < want.tol.size(); ++i) want.tol[i] += std::fabs(want.value[i]) * 1e-3 + 6e-8;
  EXPECT_TRUE(close(y.to_host(), want, "softmax of f16"));
}
