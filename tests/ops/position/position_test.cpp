// tests/ops/position/position_test.cpp — kiln::rope and kiln::embedding on every backend
// against float64 references: both rope conventions, odd S and D/2, batch axes,
// non-monotonic, negative and large positions (Hugging Face's float angle), strided
// views, f16 / bf16, empty and 1-element inputs, NaN, fused prologues and epilogues (one
// kernel), in place, and the errors (odd D, positions of the wrong length, bad ids).
// rope's frequencies are uploaded once per context and (theta, D), and freed with the
// context; embedding's ids are checked without a wait on Vulkan (the error comes at the
// next synchronisation, exactly as the CPU words it).
//
// Tolerance of rope: each output is x0 * cos - x1 * sin in float from cos and sin good to
// an ulp or two of 1, so |error| <= 4 * 2^-24 * (|x0| + |x1|) (the reference computes the
// same float angle, then cos, sin and the rotation in double). embedding copies: exact.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
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

namespace {

/// The message both backends give for `id` at ids[at] (as "1, 2") of table t and ids.
template <class Tt, class Ti>
std::string bad_id_message(std::int64_t id, const std::string& at, std::int64_t V, const Tt& t, const Ti& ids) {
  return "kiln::embedding: id " + std::to_string(id) + " at ids[" + at + "] is outside [0, " + std::to_string(V) +
         "), the table's rows (table " + t.describe() + ", ids " + ids.describe() + ")";
}

template <class B>
constexpr bool is_vulkan() {
#if defined(KILN_TEST_VULKAN)
  return std::is_same_v<B, kiln::vulkan>;
#else
  return false;
#endif
}

}  // namespace

// The CPU throws when the statement runs, before writing; Vulkan records without waiting
// and throws at the next synchronisation (here: reading y), the same message, after
// writing clamped rows. Either way the context goes on working.
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
      if constexpr (is_vulkan<TypeParam>()) (void)y.to_host();
    } catch (const kiln::index_error& e) {
      msg = e.what();
    }
    EXPECT_EQ(msg, bad_id_message(bad, "1, 2", 5, t, ids));
    const auto got = y.to_host();  // the check is consumed: no second throw
    for (float v : got) ASSERT_EQ(v, is_vulkan<TypeParam>() ? 2.0f : 7.0f) << "CPU: nothing written; Vulkan: clamped rows";
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

// A table of no rows: every id is bad (the Vulkan kernel reads no table row for it).
TYPED_TEST(position_test, embedding_bad_ids_of_degenerate_tables) {
  auto& c = ctx<TypeParam>();
  auto t0 = kiln::zeros<float>(c, {0, 4});
  const std::vector<std::int32_t> hi = {0, 0};
  auto ids = kiln::from_host(c, {2}, std::span<const std::int32_t>(hi));
  kiln::tensor<float, TypeParam> y;
  const std::string m0 = message_of<kiln::index_error>([&] {
    y = kiln::embedding(t0, ids);
    c.synchronize();
  });
  EXPECT_EQ(m0, bad_id_message(0, "0", 0, t0, ids));
  c.synchronize();
}

// Many workgroups, several bad ids: the first in ids' order is reported, with its value,
// at its position; ids that are not contiguous are checked in their own order.
TYPED_TEST(position_test, embedding_reports_the_first_bad_id) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const std::int64_t V = 11, D = 300;
  const auto ht = uniform(g, static_cast<std::size_t>(V * D));
  auto t = kiln::from_host(c, {V, D}, std::span<const float>(ht));
  auto hi = uniform_int<std::int32_t>(g, 40, 0, static_cast<int>(V - 1));
  hi[33] = -7;
  hi[17] = 99;  // [2, 1] of [5, 8]: the first
  hi[38] = 11;
  auto ids = kiln::from_host(c, {5, 8}, std::span<const std::int32_t>(hi));
  kiln::tensor<float, TypeParam> y;
  std::string m = message_of<kiln::index_error>([&] {
    y = kiln::embedding(t, ids);
    c.synchronize();
  });
  EXPECT_EQ(m, bad_id_message(99, "2, 1", V, t, ids));
  // transposed [8, 5]: positions count row-major over the view
  auto idt = kiln::transpose(ids);
  kiln::tensor<float, TypeParam> yt;
  m = message_of<kiln::index_error>([&] {
    yt = kiln::embedding(t, idt);
    (void)yt.to_host();
  });
  // the view's element [a, b] is ids[b, a]: its first bad element in row-major order
  std::string at;
  std::int32_t first = 0;
  for (std::int64_t a = 0; a < 8 && at.empty(); ++a)
    for (std::int64_t b = 0; b < 5 && at.empty(); ++b) {
      const std::int32_t v = hi[static_cast<std::size_t>(b * 8 + a)];
      if (v < 0 || v >= V) at = std::to_string(a) + ", " + std::to_string(b), first = v;
    }
  EXPECT_EQ(m, bad_id_message(first, at, V, t, idt));
  c.synchronize();  // consumed: no second throw
}

// rope uploads its frequencies once per context and (theta, D): a decode loop calling it
// again and again allocates and uploads nothing more.
TYPED_TEST(position_test, rope_uploads_its_frequencies_once) {
  auto& c = ctx<TypeParam>();
  auto g = rng();
  const std::int64_t S = 3, D = 32;
  const auto hx = uniform(g, static_cast<std::size_t>(2 * S * D));
  const std::vector<std::int32_t> hp = {5, 6, 7};
  auto x = kiln::from_host(c, {2, S, D}, std::span<const float>(hx));
  auto p = kiln::from_host(c, {S}, std::span<const std::int32_t>(hp));
  auto y = kiln::empty<float>(c, {2, S, D});
  static float fresh = 12345.5f;  // thetas no other test (or earlier repeat of this one) used
  const float theta = (fresh += 1.0f);
  auto allocations = [&] {
#if defined(KILN_TEST_VULKAN)
    if constexpr (std::is_same_v<TypeParam, kiln::vulkan>) {
      const auto m = kiln::vulkan::memory(c);
      return std::uint64_t(m.hits + m.misses);
    } else
#endif
      return std::uint64_t(c.state()->allocations.load());
  };
  auto& cache = c.state()->constants;
  const std::uint64_t made0 = cache.made();
  y = kiln::rope(x, p, {theta, false});
  EXPECT_EQ(cache.made(), made0 + 1) << "the first call uploads";
  const std::uint64_t a0 = allocations();
  for (int i = 0; i < 20; ++i) y = kiln::rope(x, p, {theta, i % 2 == 1});
  EXPECT_EQ(cache.made(), made0 + 1) << "later calls reuse the upload";
  EXPECT_EQ(allocations(), a0) << "later calls allocate nothing";
  EXPECT_TRUE(near(y.to_host(), ref_rope(hx, D, hp, theta, true), hx, D, true, rope_tol, "rope from cached frequencies"));
  y = kiln::rope(x, p, {theta * 2.0f, false});  // another theta: its own frequencies
  EXPECT_EQ(cache.made(), made0 + 2);
  EXPECT_TRUE(near(y.to_host(), ref_rope(hx, D, hp, theta * 2.0f, false), hx, D, false, rope_tol, "rope, theta 2"));
  auto x2 = kiln::from_host(c, {S, 2 * D}, std::span<const float>(hx));  // another D
  kiln::tensor<float, TypeParam> y2;
  y2 = kiln::rope(x2, p, {theta, false});
  EXPECT_EQ(cache.made(), made0 + 3);
  EXPECT_TRUE(near(y2.to_host(), ref_rope(hx, 2 * D, hp, theta, false), hx, 2 * D, false, rope_tol, "rope, D 64"));

  // Several threads asking for new frequencies at once: one upload, one tensor.
  const std::uint64_t made1 = cache.made();
  std::vector<const void*> seen(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&, i] {
      auto n = kiln::rope(x, p, {theta * 3.0f, false});
      seen[i] = std::get<1>(n.params).t.storage().get();
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(cache.made(), made1 + 1);
  for (const void* s : seen) EXPECT_EQ(s, seen[0]);
}

namespace {

template <class B>
kiln::context<B> fresh_context() {
#if defined(KILN_TEST_VULKAN)
  if constexpr (std::is_same_v<B, kiln::vulkan>) {
    kiln::vulkan::options o;
    o.validation = true;
    return kiln::context<B>{o};
  } else
#endif
    return kiln::context<B>{};
}

}  // namespace

// The cache lives in the context's state and its tensors do not own that state: the
// state (and the cached frequencies with it) goes with the last context handle and
// tensor, while a tensor handed out from the cache keeps the state alive as any other.
TYPED_TEST(position_test, rope_frequencies_go_with_their_context) {
  using state_type = typename kiln::context<TypeParam>::state_type;
  std::weak_ptr<state_type> gone;
  {
    auto c = fresh_context<TypeParam>();
    gone = c.state();
    auto x = kiln::zeros<float>(c, {2, 4, 8});
    auto p = kiln::zeros<std::int32_t>(c, {4});
    kiln::tensor<float, TypeParam> y;
    y = kiln::rope(x, p);
    y = kiln::rope(x, p, {500000.0f});
    EXPECT_EQ(c.state()->constants.size(), 2u);
    c.synchronize();
  }
  EXPECT_TRUE(gone.expired()) << "the cached frequencies keep their context alive (a cycle)";

  std::optional<kiln::tensor<float, TypeParam>> inv;  // a handle (tensor `=` would copy values)
  {
    auto c = fresh_context<TypeParam>();
    gone = c.state();
    auto x = kiln::zeros<float>(c, {2, 4, 8});
    auto p = kiln::zeros<std::int32_t>(c, {4});
    auto n = kiln::rope(x, p, {100.0f});
    inv.emplace(std::get<1>(n.params).t);
  }
  ASSERT_FALSE(gone.expired()) << "a tensor from the cache owns its context";
  const auto f = inv->to_host();
  ASSERT_EQ(f.size(), 4u);
  for (std::size_t i = 0; i < f.size(); ++i) EXPECT_EQ(f[i], 1.0f / std::pow(100.0f, float(2 * i) / 8.0f)) << i;
  inv.reset();
  EXPECT_TRUE(gone.expired());
}

#if defined(KILN_TEST_VULKAN)

namespace {

class position_vulkan_test : public kiln_test::backend_test<kiln::vulkan> {};

}  // namespace

// Recording checks nothing on the host: ids a kernel writes are not waited for (no
// submit while recording), the error comes at the next synchronisation (synchronize, a
// read, a read_async's wait), once, naming the first failing embedding of the batch, and
// the context keeps working.
TEST_F(position_vulkan_test, embedding_checks_ids_on_the_device_without_waiting) {
  auto& c = ctx<kiln::vulkan>();
  auto g = rng();
  const std::int64_t V = 9, D = 6;
  const auto ht = uniform(g, static_cast<std::size_t>(V * D));
  auto t = kiln::from_host(c, {V, D}, std::span<const float>(ht));
  const std::vector<std::int32_t> good = {0, 8, 3, 3}, bad_a = {1, 2, 13, -4}, bad_b = {-1, 0, 0, 0};
  auto up = [&](const std::vector<std::int32_t>& h) {
    auto src = kiln::from_host(c, {2, 2}, std::span<const std::int32_t>(h));
    auto ids = kiln::empty<std::int32_t>(c, {2, 2});
    ids = src + 0;  // written by a kernel: reading it on the host would wait for the GPU
    return ids;
  };
  auto ig = up(good), ia = up(bad_a), ib = up(bad_b);
  kiln::tensor<float, kiln::vulkan> yg, ya, yb;
  const auto before = kiln::vulkan::stream(c);
  yg = kiln::embedding(t, ig) * 2.0f;
  ya = kiln::embedding(t, ia);
  yb = kiln::embedding(t, kiln::transpose(ib));  // not contiguous: copied on the device
  const auto after = kiln::vulkan::stream(c);
  EXPECT_EQ(after.submits, before.submits) << "recording an embedding waited for its ids";
  EXPECT_EQ(after.dispatches - before.dispatches, 4u) << "three embeddings and one copy of the transposed ids";

  // the first failing embedding of the batch, at reading one written after it
  EXPECT_EQ(message_of<kiln::index_error>([&] { (void)yb.to_host(); }), bad_id_message(13, "1, 0", V, t, ia));
  c.synchronize();  // every check that batch covered is consumed
  const auto hg = yg.to_host();
  for (std::size_t r = 0; r < good.size(); ++r)
    for (std::int64_t d = 0; d < D; ++d) ASSERT_EQ(hg[r * D + d], 2.0f * ht[good[r] * D + d]) << r << ", " << d;
  const auto ha = ya.to_host();  // clamped rows where the ids were bad
  for (std::size_t r = 0; r < bad_a.size(); ++r)
    for (std::int64_t d = 0; d < D; ++d)
      ASSERT_EQ(ha[r * D + d], ht[std::clamp<std::int32_t>(bad_a[r], 0, V - 1) * D + d]) << r << ", " << d;

  // synchronize, and a read_async's wait, report too
  yb = kiln::embedding(t, kiln::transpose(ib));
  EXPECT_EQ(message_of<kiln::index_error>([&] { c.synchronize(); }), bad_id_message(-1, "0, 0", V, t, kiln::transpose(ib)));
  yb = kiln::embedding(t, ia);
  auto pending = kiln::vulkan::read_async(yb);
  EXPECT_EQ(message_of<kiln::index_error>([&] { (void)pending.get(); }), bad_id_message(13, "1, 0", V, t, ia));

  // and the context goes on
  kiln::tensor<float, kiln::vulkan> y2;
  y2 = kiln::embedding(t, kiln::transpose(ig));
  const auto h2 = y2.to_host();
  for (std::int64_t a = 0; a < 2; ++a)
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t d = 0; d < D; ++d) ASSERT_EQ(h2[(a * 2 + b) * D + d], ht[good[b * 2 + a] * D + d]);
  c.synchronize();
}

// Parameters past the push constants go to a parameter buffer, bound after the check
// buffer; and without zero-copy the check buffer is staging memory.
TEST_F(position_vulkan_test, embedding_checks_with_a_parameter_buffer_and_without_zero_copy) {
  for (const bool zero_copy : {true, false}) {
    kiln::vulkan::options o;
    o.validation = true;
    o.max_push_constants = zero_copy ? 16 : 0;
    o.zero_copy = zero_copy;
    kiln::context<kiln::vulkan> c{o};
    const std::vector<float> ht = {0, 1, 2, 3, 4, 5};
    auto t = kiln::from_host(c, {3, 2}, std::span<const float>(ht));
    const std::vector<std::int32_t> hi = {2, 0, 3, 1};
    auto ids = kiln::from_host(c, {4}, std::span<const std::int32_t>(hi));
    kiln::tensor<float, kiln::vulkan> y;
    y = kiln::embedding(t * 2.0f, ids) + 1.0f;
    EXPECT_EQ(message_of<kiln::index_error>([&] { c.synchronize(); }), bad_id_message(3, "2", 3, t * 2.0f, ids));
    EXPECT_EQ(y.to_host(), (std::vector<float>{9, 11, 1, 3, 9, 11, 5, 7}));
  }
}

// Without zero-copy, rope's frequencies are one staged transfer, the first time only.
TEST_F(position_vulkan_test, rope_stages_its_frequencies_once) {
  kiln::vulkan::options o;
  o.validation = true;
  o.zero_copy = false;
  kiln::context<kiln::vulkan> c{o};
  auto x = kiln::zeros<float>(c, {2, 3, 16});
  auto p = kiln::zeros<std::int32_t>(c, {3});
  auto y = kiln::empty<float>(c, {2, 3, 16});
  c.synchronize();
  const auto s0 = kiln::vulkan::stream(c);
  y = kiln::rope(x, p);
  const auto s1 = kiln::vulkan::stream(c);
  EXPECT_EQ(s1.transfers - s0.transfers, 1u);
  for (int i = 0; i < 10; ++i) y = kiln::rope(x, p);
  EXPECT_EQ(kiln::vulkan::stream(c).transfers, s1.transfers);
  c.synchronize();
}

#endif
