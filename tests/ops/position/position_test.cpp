// tests/ops/position/position_test.cpp — kiln::rope and kiln::embedding on every backend
// against float64 references: both rope conventions, odd S and D/2, batch axes,
// non-monotonic, negative and large positions (Hugging Face's float angle), strided
// views, f16 / bf16, empty and 1-element inputs, NaN, fused prologues and epilogues (one
// kernel), in place, and the errors (odd D, positions of the wrong length, bad ids).
//
// Tolerance of rope: each output is x0 * cos - x1 * sin in float from cos and sin good to
// an ulp or two of 1, so |error| <= 4 * 2^-24 * (|x0| + |x1|) (the reference computes the
// same float angle, then cos, sin and the rotation in double). embedding copies: exact.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backends.hpp"
#include "checks.hpp"
#include "random.hpp"
#include "reference.hpp"

using namespace kiln_test;

template <class B>
class position_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(position_test, backend_types);

namespace {

/// The float64 rope of row-major x [rows, D] with rows at sequence index r % S; angle:
/// float(position) * inv_freq in float (f32_angle) or in double.
std::vector<double> ref_rope(const std::vector<float>& x, std::int64_t D, const std::vector<std::int32_t>& pos,
                             float theta, bool interleaved, bool f32_angle = true) {
  const std::int64_t h = D / 2, S = static_cast<std::int64_t>(pos.size());
  std::vector<double> out(x.size());
  if (D == 0) return out;
  const std::int64_t rows = static_cast<std::int64_t>(x.size()) / D;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t s = r % S;
    for (std::int64_t i = 0; i < h; ++i) {
      const float inv = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(D));
      const double a = f32_angle ? double(static_cast<float>(pos[s]) * inv) : double(pos[s]) * double(inv);
      const double c = std::cos(a), sn = std::sin(a);
      const std::int64_t j0 = r * D + (interleaved ? 2 * i : i), j1 = interleaved ? j0 + 1 : j0 + h;
      const double x0 = x[j0], x1 = x[j1];
      out[j0] = x0 * c - x1 * sn;
      out[j1] = x1 * c + x0 * sn;
    }
  }
  return out;
}

/// got == want within rel * (the size of the pair's inputs) + abs_tol, NaN where want is.
::testing::AssertionResult near(const std::vector<float>& got, const std::vector<double>& want,
                                const std::vector<float>& x, std::int64_t D, bool interleaved, double rel,
                                const std::string& what, double abs_tol = 0.0) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << want.size();
  for (std::size_t k = 0; k < got.size(); ++k) {
    const std::int64_t j = static_cast<std::int64_t>(k) % D;
    const std::int64_t partner = interleaved ? (j ^ 1) : (j < D / 2 ? j + D / 2 : j - D / 2);
    const double scale = std::abs(double(x[k])) + std::abs(double(x[k - j + partner]));
    if (std::isnan(want[k])) {
      if (!std::isnan(got[k])) return ::testing::AssertionFailure() << what << ": [" << k << "] " << got[k] << ", want NaN; " << seed_note();
      continue;
    }
    if (!(std::abs(double(got[k]) - want[k]) <= rel * scale + abs_tol)) {
      return ::testing::AssertionFailure() << what << ": [" << k << "] " << got[k] << ", want " << want[k] << " (tolerance "
                                           << rel * scale + abs_tol << "); " << seed_note();
    }
  }
  return ::testing::AssertionSuccess();
}

constexpr double rope_tol = 4.0 * 0x1p-24;

template <class B>
void check_rope(const kiln::shape& s, bool interleaved, std::int32_t lo, std::int32_t hi, float theta = 10000.0f) {
  auto& c = ctx<B>();
  auto g = rng();
  const std::int64_t S = s[s.rank() - 2], D = s[s.rank() - 1];
  const auto hx = uniform(g, static_cast<std::size_t>(s.numel()), -3.0f, 3.0f);
  const auto hp = uniform_int<std::int32_t>(g, static_cast<std::size_t>(S), lo, hi);
  auto x = kiln::from_host(c, s, std::span<const float>(hx));
  auto p = kiln::from_host(c, {S}, std::span<const std::int32_t>(hp));
  kiln::tensor<float, B> y;
  y = kiln::rope(x, p, {theta, interleaved});
  EXPECT_TRUE(near(y.to_host(), ref_rope(hx, D, hp, theta, interleaved), hx, D, interleaved, rope_tol,
                   std::string("rope ") + (interleaved ? "interleaved " : "") + s.to_string()));
}

}  // namespace

TYPED_TEST(position_test, rope_shapes_both_conventions) {
  for (bool il : {false, true}) {
    check_rope<TypeParam>({1, 2}, il, 0, 10);
    check_rope<TypeParam>({5, 6}, il, 0, 100);
    check_rope<TypeParam>({7, 130}, il, -50, 5000);
    check_rope<TypeParam>({2, 3, 5, 64}, il, 0, 2048);
    check_rope<TypeParam>({3, 11, 2}, il, 0, 30);
  }
  check_rope<TypeParam>({2, 4, 9, 128}, false, 0, 100000, 500000.0f);
}

// Positions past any trained length: the angle is float(position) * inv_freq rounded to
// float, as Hugging Face's float32 matmul; a double angle differs by up to ~0.004 rad at
// position 100000, far outside the tolerance, so the check tells the two apart.
TYPED_TEST(position_test, rope_large_positions_use_the_float_angle) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const std::int64_t S = 6, D = 128;
  const std::vector<std::int32_t> hp = {100000, 99999, 65537, 131071, 1, -100000};
  const auto hx = uniform(g, static_cast<std::size_t>(S * D), -2.0f, 2.0f);
  auto x = kiln::from_host(c, {S, D}, std::span<const float>(hx));
  auto p = kiln::from_host(c, {S}, std::span<const std::int32_t>(hp));
  kiln::tensor<float, TypeParam> y;
  y = kiln::rope(x, p);
  const auto got = y.to_host();
  EXPECT_TRUE(near(got, ref_rope(hx, D, hp, 10000.0f, false), hx, D, false, rope_tol, "rope at large positions"));
  const auto dbl = ref_rope(hx, D, hp, 10000.0f, false, false);
  double dev = 0.0;
  for (std::size_t k = 0; k < got.size(); ++k) dev = std::max(dev, std::abs(double(got[k]) - dbl[k]));
  EXPECT_GT(dev, 1e-4) << "the double-angle reference should differ at position 100000";
}

// Angles past 2^17 * pi/2 (about 205887 radians: positions past 205887 on the first
// frequency): the CPU redoes its table in double there, the Vulkan kernel reduces the
// angle by Payne-Hanek; both stay within the tolerance for every finite float angle:
// the int32 extremes, random positions past 2^17 and 2^24, and theta = 1e-30 (inverse
// frequencies up to 1e22: angles near 1e31). Each pair also keeps its norm.
TYPED_TEST(position_test, rope_past_the_exact_reduction) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const std::int64_t D = 8;
  std::vector<std::int32_t> hp = {1000000, 205888, -3000000, std::numeric_limits<std::int32_t>::max(),
                                  std::numeric_limits<std::int32_t>::min(), 16777217, -16777215, 411775};
  for (const auto v : uniform_int<std::int32_t>(g, 24, 205888, std::numeric_limits<std::int32_t>::max())) hp.push_back(v);
  for (const auto v : uniform_int<std::int32_t>(g, 24, std::numeric_limits<std::int32_t>::min(), -205888)) hp.push_back(v);
  const std::int64_t S = static_cast<std::int64_t>(hp.size());
  const auto hx = uniform(g, static_cast<std::size_t>(S * D), -2.0f, 2.0f);
  auto x = kiln::from_host(c, {S, D}, std::span<const float>(hx));
  auto p = kiln::from_host(c, {S}, std::span<const std::int32_t>(hp));
  for (const float theta : {10000.0f, 1e-30f}) {
    kiln::tensor<float, TypeParam> y;
    y = kiln::rope(x, p, {theta, false});
    const auto got = y.to_host();
    EXPECT_TRUE(near(got, ref_rope(hx, D, hp, theta, false), hx, D, false, rope_tol,
                     "rope past 205887 radians, theta " + std::to_string(theta)));
    for (std::int64_t r = 0; r < S; ++r)
      for (std::int64_t i = 0; i < D / 2; ++i) {
        const std::int64_t j0 = r * D + i, j1 = j0 + D / 2;
        const double n0 = double(hx[j0]) * hx[j0] + double(hx[j1]) * hx[j1];
        const double n1 = double(got[j0]) * got[j0] + double(got[j1]) * got[j1];
        EXPECT_NEAR(n1, n0, 1e-5 * n0 + 1e-12) << "row " << r << ", pair " << i;
      }
  }
}

TYPED_TEST(position_test, rope_strided_views_and_broadcast_batch) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  // [B, S, H, D] seen as [B, H, S, D] (the layout after a q projection), D/2 odd
  const std::int64_t Bn = 2, S = 7, H = 3, D = 10;
  const auto hx = uniform(g, static_cast<std::size_t>(Bn * S * H * D));
  const auto hp = uniform_int<std::int32_t>(g, static_cast<std::size_t>(S), 0, 700);
  auto x = kiln::from_host(c, {Bn, S, H, D}, std::span<const float>(hx));
  auto p = kiln::from_host(c, {S}, std::span<const std::int32_t>(hp));
  auto xt = kiln::permute(x, {0, 2, 1, 3});
  kiln::tensor<float, TypeParam> y;
  y = kiln::rope(xt, p);
  std::vector<float> hxt(hx.size());
  for (std::int64_t b = 0; b < Bn; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t s = 0; s < S; ++s)
        for (std::int64_t d = 0; d < D; ++d) hxt[((b * H + h) * S + s) * D + d] = hx[((b * S + s) * H + h) * D + d];
  EXPECT_TRUE(near(y.to_host(), ref_rope(hxt, D, hp, 10000.0f, false), hxt, D, false, rope_tol, "rope of a permuted view"));

  // strided positions (every other element) and an output view
  std::vector<std::int32_t> hp2(static_cast<std::size_t>(2 * S));
  for (std::int64_t s = 0; s < S; ++s) hp2[2 * s] = hp[s], hp2[2 * s + 1] = -1;
  auto p2 = kiln::slice(kiln::from_host(c, {2 * S}, std::span<const std::int32_t>(hp2)), 0, 0, 2 * S, 2);
  auto out = kiln::zeros<float>(c, {Bn, S, H, D});
  auto ov = kiln::permute(out, {0, 2, 1, 3});
  ov = kiln::rope(xt, p2, {10000.0f, true});
  std::vector<float> back = kiln::permute(out, {0, 2, 1, 3}).to_host();
  EXPECT_TRUE(near(back, ref_rope(hxt, D, hp, 10000.0f, true), hxt, D, true, rope_tol, "rope into a permuted output"));
}

TYPED_TEST(position_test, rope_f16_bf16) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const std::int64_t S = 5, D = 18;
  const auto hx = uniform(g, static_cast<std::size_t>(2 * S * D));
  const auto hp = uniform_int<std::int32_t>(g, static_cast<std::size_t>(S), 0, 4000);
  auto p = kiln::from_host(c, {S}, std::span<const std::int32_t>(hp));
  std::vector<kiln::half> hh(hx.begin(), hx.end());
  std::vector<float> xr(hh.begin(), hh.end());  // the values x holds
  auto xh = kiln::from_host(c, {2, S, D}, std::span<const kiln::half>(hh));
  kiln::tensor<kiln::half, TypeParam> yh;
  yh = kiln::rope(xh, p);
  const auto gh = yh.to_host();
  EXPECT_TRUE(near(std::vector<float>(gh.begin(), gh.end()), ref_rope(xr, D, hp, 10000.0f, false), xr, D, false, 1.0e-3,
                   "rope f16"));
  std::vector<kiln::bfloat16> hb(hx.begin(), hx.end());
  std::vector<float> xb(hb.begin(), hb.end());
  auto xbt = kiln::from_host(c, {2, S, D}, std::span<const kiln::bfloat16>(hb));
  kiln::tensor<kiln::bfloat16, TypeParam> yb;
  yb = kiln::rope(xbt, p, {10000.0f, true});
  const auto gb = yb.to_host();
  EXPECT_TRUE(near(std::vector<float>(gb.begin(), gb.end()), ref_rope(xb, D, hp, 10000.0f, true), xb, D, true, 8.0e-3,
                   "rope bf16"));
}

TYPED_TEST(position_test, rope_fuses_and_runs_in_place) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const std::int64_t S = 9, D = 16;
  const auto hx = uniform(g, static_cast<std::size_t>(3 * S * D));
  const auto hp = uniform_int<std::int32_t>(g, static_cast<std::size_t>(S), 0, 300);
  auto x = kiln::from_host(c, {3, S, D}, std::span<const float>(hx));
  auto p = kiln::from_host(c, {S}, std::span<const std::int32_t>(hp));
  kiln::tensor<float, TypeParam> y;
  const auto k = kernels_of<TypeParam>([&] { y = kiln::rope(x * 2.0f, p) * 0.25f + 1.0f; });
  EXPECT_EQ(k, 1u) << "prologue, rope and epilogue should be one kernel";
  std::vector<float> x2(hx.size());
  for (std::size_t i = 0; i < hx.size(); ++i) x2[i] = 2.0f * hx[i];
  auto want = ref_rope(x2, D, hp, 10000.0f, false);
  for (auto& v : want) v = v * 0.25 + 1.0;
  EXPECT_TRUE(near(y.to_host(), want, x2, D, false, rope_tol * 0.25, "fused rope", 2.5e-7));

  const std::string prefix = std::is_same_v<TypeParam, kiln_test::cpu> ? "cpu." : "vulkan.";
  EXPECT_EQ(kiln::kernel_variant(kiln::rope(x, p)), prefix + "rope half-split");
  EXPECT_EQ(kiln::kernel_variant(kiln::rope(x, p, {10000.0f, true})), prefix + "rope interleaved");
  EXPECT_EQ(kiln::kernel_variant(kiln::embedding(kiln::reshape(x, {3 * S, D}), p)), prefix + "embedding");

  x = kiln::rope(x, p, {10000.0f, true});  // in place: each line is read before it is written
  EXPECT_TRUE(near(x.to_host(), ref_rope(hx, D, hp, 10000.0f, true), hx, D, true, rope_tol, "rope in place"));
}

TYPED_TEST(position_test, rope_empty_one_element_nan) {
  auto& c = ctx<TypeParam>();
  auto x0 = kiln::zeros<float>(c, {2, 0, 4});
  auto p0 = kiln::zeros<std::int32_t>(c, {0});
  kiln::tensor<float, TypeParam> y;
  y = kiln::rope(x0, p0);
  EXPECT_EQ(y.shape(), (kiln::shape{2, 0, 4}));
  auto xd = kiln::zeros<float>(c, {3, 0});  // D = 0
  kiln::tensor<float, TypeParam> yd;
  yd = kiln::rope(xd, kiln::zeros<std::int32_t>(c, {3}));
  EXPECT_EQ(yd.shape(), (kiln::shape{3, 0}));

  const std::vector<float> one = {1.5f, -0.5f};
  const std::vector<std::int32_t> p1 = {3};
  kiln::tensor<float, TypeParam> y1;
  y1 = kiln::rope(kiln::from_host(c, {1, 2}, std::span<const float>(one)), kiln::from_host(c, {1}, std::span<const std::int32_t>(p1)));
  EXPECT_TRUE(near(y1.to_host(), ref_rope(one, 2, p1, 10000.0f, false), one, 2, false, rope_tol, "rope [1, 2]"));

  // a NaN spoils its own pair only
  std::vector<float> hx(2 * 8, 0.5f);
  hx[1] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::int32_t> hp = {4, 9};
  kiln::tensor<float, TypeParam> yn;
  yn = kiln::rope(kiln::from_host(c, {2, 8}, std::span<const float>(hx)), kiln::from_host(c, {2}, std::span<const std::int32_t>(hp)));
  const auto got = yn.to_host();
  for (int j = 0; j < 16; ++j) EXPECT_EQ(std::isnan(got[j]), j == 1 || j == 5) << "element " << j;
  EXPECT_TRUE(near(got, ref_rope(hx, 8, hp, 10000.0f, false), hx, 8, false, rope_tol, "rope with a NaN"));
}

TYPED_TEST(position_test, rope_errors) {
  auto& c = ctx<TypeParam>();
  auto p = kiln::zeros<std::int32_t>(c, {4});
  auto odd = kiln::zeros<float>(c, {4, 5});
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::rope(odd, p); }), "D even"));
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::rope(odd, p); }), "f32[4, 5]"));
  auto x = kiln::zeros<float>(c, {2, 4, 6});
  auto p3 = kiln::zeros<std::int32_t>(c, {3});
  const std::string m = shape_error_of([&] { (void)kiln::rope(x, p3); });
  EXPECT_TRUE(has(m, "positions must be [S] = [4]"));
  EXPECT_TRUE(has(m, "i32[3]"));
  auto p2d = kiln::zeros<std::int32_t>(c, {1, 4});
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::rope(x, p2d); }), "positions must be"));
  auto r1 = kiln::zeros<float>(c, {6});
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::rope(r1, p); }), "[..., S, D]"));
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::rope(x, kiln::zeros<std::int32_t>(c, {4}), {-1.0f}); }), "theta"));
  kiln::tensor<float, TypeParam> none;
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::rope(none, p); }), "empty tensor"));
}

namespace {

template <class T, class B>
void check_embedding(std::int64_t V, std::int64_t D, const kiln::shape& ids_shape) {
  auto& c = ctx<B>();
  auto g = rng();
  const auto hf = uniform(g, static_cast<std::size_t>(V * D));
  const std::vector<T> ht(hf.begin(), hf.end());
  const auto hi = uniform_int<std::int32_t>(g, static_cast<std::size_t>(ids_shape.numel()), 0, static_cast<int>(V - 1));
  auto t = kiln::from_host(c, {V, D}, std::span<const T>(ht));
  auto ids = kiln::from_host(c, ids_shape, std::span<const std::int32_t>(hi));
  kiln::tensor<T, B> y;
  y = kiln::embedding(t, ids);
  kiln::shape want_shape = ids_shape;
  want_shape.push_back(D);
  ASSERT_EQ(y.shape(), want_shape);
  const auto got = y.to_host();
  for (std::size_t k = 0; k < hi.size(); ++k)
    for (std::int64_t d = 0; d < D; ++d)
      ASSERT_EQ(float(got[k * D + d]), float(ht[hi[k] * D + d])) << "row " << k << " (id " << hi[k] << "), column " << d;
}

}  // namespace

TYPED_TEST(position_test, embedding_every_dtype_and_shape) {
  check_embedding<float, TypeParam>(37, 19, {5});
  check_embedding<float, TypeParam>(1000, 64, {2, 7});
  check_embedding<float, TypeParam>(5, 3, {});  // rank-0 ids: one row
  check_embedding<float, TypeParam>(1, 1, {1});
  check_embedding<float, TypeParam>(6, 5000, {3});
  check_embedding<kiln::half, TypeParam>(50, 33, {3, 4});
  check_embedding<kiln::bfloat16, TypeParam>(50, 8, {2, 1, 3});
  check_embedding<float, TypeParam>(7, 4, {0});
  check_embedding<float, TypeParam>(7, 0, {3});
}

TYPED_TEST(position_test, embedding_fuses_and_takes_views) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const std::int64_t V = 23, D = 12;
  const auto ht = uniform(g, static_cast<std::size_t>(V * D));
  auto t = kiln::from_host(c, {V, D}, std::span<const float>(ht));
  const std::vector<std::int32_t> hi = {22, 0, 5, 5, 17, 1};
  auto ids = kiln::from_host(c, {2, 3}, std::span<const std::int32_t>(hi));
  kiln::tensor<float, TypeParam> y;
  const auto k = kernels_of<TypeParam>([&] { y = kiln::embedding(t * 3.0f, ids) * 0.5f + 1.0f; });
  EXPECT_EQ(k, 1u) << "embedding with its prologue and epilogue should be one kernel";
  auto got = y.to_host();
  for (std::size_t r = 0; r < hi.size(); ++r)
    for (std::int64_t d = 0; d < D; ++d)
      EXPECT_FLOAT_EQ(got[r * D + d], (3.0f * ht[hi[r] * D + d]) * 0.5f + 1.0f);

  // transposed ids [3, 2], a table of every other column [V, 6], an output view
  auto idt = kiln::transpose(ids);
  auto half_cols = kiln::slice(t, 1, 1, D, 2);
  auto out = kiln::zeros<float>(c, {2, 3, 6});
  auto ov = kiln::permute(out, {1, 0, 2});
  ov = kiln::embedding(half_cols, idt);
  got = out.to_host();
  for (std::int64_t a = 0; a < 2; ++a)
    for (std::int64_t b = 0; b < 3; ++b)
      for (std::int64_t d = 0; d < 6; ++d)
        EXPECT_EQ(got[(a * 3 + b) * 6 + d], ht[hi[a * 3 + b] * D + 1 + 2 * d]) << a << ", " << b << ", " << d;
}

TYPED_TEST(position_test, embedding_bad_ids) {
  auto& c = ctx<TypeParam>();
  auto t = kiln::full<float>(c, {5, 4}, 1.0f);
  for (std::int32_t bad : {5, -1, 1 << 30}) {
    const std::vector<std::int32_t> hi = {0, 1, 2, 3, 4, bad};
    auto ids = kiln::from_host(c, {2, 3}, std::span<const std::int32_t>(hi));
    auto y = kiln::full<float>(c, {2, 3, 4}, 7.0f);
    std::string msg = "<no kiln::index_error>";
    try {
      y = kiln::embedding(t, ids) * 2.0f;
    } catch (const kiln::index_error& e) {
      msg = e.what();
    }
    EXPECT_TRUE(has(msg, "kiln::embedding"));
    EXPECT_TRUE(has(msg, "id " + std::to_string(bad)));
    EXPECT_TRUE(has(msg, "ids[1, 2]"));
    EXPECT_TRUE(has(msg, "[0, 5)"));
    EXPECT_TRUE(has(msg, "f32[5, 4]"));
    for (float v : y.to_host()) ASSERT_EQ(v, 7.0f) << "nothing is written for a bad id";
  }
  auto t3 = kiln::zeros<float>(c, {2, 3, 4});
  auto ids = kiln::zeros<std::int32_t>(c, {2});
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::embedding(t3, ids); }), "[V, D]"));
  kiln::tensor<std::int32_t, TypeParam> none;
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::embedding(t, none); }), "empty tensor"));
  // rank-8 ids leave no room for D: the error names the op (it used to be a bare
  // "kiln: rank above the maximum of 8")
  auto ids8 = kiln::zeros<std::int32_t>(c, {1, 1, 1, 1, 1, 1, 1, 2});
  const std::string r8 = shape_error_of([&] { (void)kiln::embedding(t, ids8); });
  EXPECT_TRUE(has(r8, "kiln::embedding: the ids i32[1, 1, 1, 1, 1, 1, 1, 2]")) << r8;
  EXPECT_TRUE(has(r8, "maximum rank of 8")) << r8;
  auto ids7 = kiln::zeros<std::int32_t>(c, {1, 1, 1, 1, 1, 1, 2});
  kiln::tensor<float, TypeParam> y7;
  y7 = kiln::embedding(t, ids7);
  EXPECT_EQ(y7.shape(), (kiln::shape{1, 1, 1, 1, 1, 1, 2, 4}));
  EXPECT_EQ(y7.to_host(), (std::vector<float>(8, 1.0f)));
}
