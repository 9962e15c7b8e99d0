// tests/vulkan/attention_test.cpp — kiln::attention on Vulkan (kernels/attention/*.comp
// with the statement's prologue and epilogue spliced in) against a float64 reference
// written here: causal (bottom-right) and not, Sq = Skv, Sq < Skv (chunked prefill),
// Sq > Skv (rows that see no key: zeros), Sq = 1 decoding over up to 4096 keys, GQA
// ratios 1, 2, 4 and MQA, head dims 64, 80, 128 and 7, [B, S, H, D] storage seen through
// kiln::transpose, broadcast additive masks with whole masked blocks and fully masked
// rows, softcap, an explicit scale, large logits, f16 storage, the fused forms (a
// prologue on q, `attention(q, k, v) * gate`) as the variant's dispatches, and every
// variant forced (KILN_VULKAN_ATTENTION) and chosen by shape, with the name
// kiln::kernel_variant gives. Distinct kernels are kept few: lavapipe compiles each
// pipeline for seconds.
//
// Tolerance per output element: |v|max of the row * (2 * e_s + 2^-17) (+ 2^-11 |ref| for
// an f16 result), e_s = (D + 4) * 2^-24 * scale * max_j sum_d |q_d k_jd| + 2^-20 * (softcap
// + max |mask|): the error of an f32 score moves each softmax weight by a relative e_s;
// the weights sum to 1 and the output is their combination of v.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "random.hpp"
#include "scoped_env.hpp"
#include "vulkan_fixture.hpp"

namespace {

using attention = kiln_test::vulkan_test;
using kiln::index_t;
using gpu_f32 = kiln::tensor<float, kiln::vulkan>;
constexpr double ninf = -std::numeric_limits<double>::infinity();

struct dims {
  index_t B = 1, Hq = 1, Hkv = 1, Sq = 1, Skv = 1, D = 64, Dv = 64;
  std::string str() const {
    return "B=" + std::to_string(B) + " Hq=" + std::to_string(Hq) + " Hkv=" + std::to_string(Hkv) +
           " Sq=" + std::to_string(Sq) + " Skv=" + std::to_string(Skv) + " D=" + std::to_string(D) +
           " Dv=" + std::to_string(Dv);
  }
};

template <class T>
std::vector<double> doubles(const std::vector<T>& v) {
  std::vector<double> d(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) d[i] = static_cast<double>(static_cast<float>(v[i]));
  return d;
}

struct reference {
  std::vector<double> value, tol;
};

/// The float64 attention of logical row-major q [B, Hq, Sq, D], k, v [B, Hkv, Skv, D|Dv]
/// and a mask of shape mshape (broadcast to [B, Hq, Sq, Skv]; empty: none).
reference ref_attention(const dims& d, const std::vector<double>& q, const std::vector<double>& k,
                        const std::vector<double>& v, const std::vector<double>& mask, const kiln::shape& mshape,
                        bool causal, double scale, double softcap, double out_round) {
  reference r;
  r.value.assign(static_cast<std::size_t>(d.B * d.Hq * d.Sq * d.Dv), 0.0);
  r.tol.assign(r.value.size(), 0.0);
  index_t mst[4] = {0, 0, 0, 0};
  if (!mask.empty()) {
    const index_t full[4] = {d.B, d.Hq, d.Sq, d.Skv};
    index_t st = 1;
    for (int i = mshape.rank() - 1; i >= 0; --i) {
      const int at = 4 - mshape.rank() + i;
      mst[at] = mshape[i] == 1 && full[at] != 1 ? 0 : st;
      st *= mshape[i];
    }
  }
  const index_t group = d.Hq / d.Hkv;
  std::vector<double> s(static_cast<std::size_t>(d.Skv));
  for (index_t b = 0; b < d.B; ++b)
    for (index_t h = 0; h < d.Hq; ++h)
      for (index_t i = 0; i < d.Sq; ++i) {
        const index_t hk = h / group;
        const double* qr = &q[static_cast<std::size_t>(((b * d.Hq + h) * d.Sq + i) * d.D)];
        double mx = ninf, es = 0.0, mabs = 0.0;
        for (index_t j = 0; j < d.Skv; ++j) {
          const double* kr = &k[static_cast<std::size_t>(((b * d.Hkv + hk) * d.Skv + j) * d.D)];
          double dot = 0.0, mag = 0.0;
          for (index_t c = 0; c < d.D; ++c) dot += qr[c] * kr[c], mag += std::fabs(qr[c] * kr[c]);
          double x = dot * scale;
          es = std::max(es, double(d.D + 4) * 0x1p-24 * std::fabs(scale) * mag);
          if (softcap > 0) x = softcap * std::tanh(x / softcap);
          if (!mask.empty()) {
            const double mv = mask[static_cast<std::size_t>(b * mst[0] + h * mst[1] + i * mst[2] + j * mst[3])];
            x += mv;
            if (std::isfinite(mv)) mabs = std::max(mabs, std::fabs(mv));
          }
          if (causal && j > i + d.Skv - d.Sq) x = ninf;
          s[static_cast<std::size_t>(j)] = x;
          mx = std::max(mx, x);
        }
        const std::size_t o = static_cast<std::size_t>(((b * d.Hq + h) * d.Sq + i) * d.Dv);
        if (mx == ninf) continue;  // no visible key: zeros
        double l = 0.0, vmax = 0.0;
        for (index_t j = 0; j < d.Skv; ++j) {
          const double p = std::exp(s[static_cast<std::size_t>(j)] - mx);
          l += p;
          const double* vr = &v[static_cast<std::size_t>(((b * d.Hkv + hk) * d.Skv + j) * d.Dv)];
          for (index_t c = 0; c < d.Dv; ++c) {
            r.value[o + static_cast<std::size_t>(c)] += p * vr[c];
            if (p > 0) vmax = std::max(vmax, std::fabs(vr[c]));
          }
        }
        const double e = 2.0 * (es + 0x1p-20 * (softcap + mabs + std::fabs(mx))) + 0x1p-17;
        for (index_t c = 0; c < d.Dv; ++c) {
          double& x = r.value[o + static_cast<std::size_t>(c)];
          x /= l;
          r.tol[o + static_cast<std::size_t>(c)] = vmax * e + out_round * std::fabs(x);
        }
      }
  return r;
}

template <class T>
void expect_close(const std::vector<T>& got_t, const reference& ref, const std::string& what) {
  ASSERT_EQ(got_t.size(), ref.value.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < got_t.size() && bad < 5; ++i) {
    const double g = static_cast<double>(static_cast<float>(got_t[i])), w = ref.value[i];
    if (!(std::fabs(g - w) <= ref.tol[i])) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", want " << w << " (tol " << ref.tol[i] << ") "
                    << kiln_test::seed_note();
    }
  }
}

template <class T = float>
kiln::tensor<T, kiln::vulkan> rand_tensor(std::mt19937_64& g, const kiln::shape& s, float lo = -1.0f, float hi = 1.0f) {
  const auto h = kiln_test::uniform(g, static_cast<std::size_t>(s.numel()), lo, hi);
  std::vector<T> t(h.begin(), h.end());
  return kiln::from_host(kiln_test::gpu(), s, std::span<const T>(t));
}

struct operands {
  dims d;
  gpu_f32 q, k, v;
};

operands make(std::mt19937_64& g, const dims& d, float range = 1.0f) {
  return {d, rand_tensor(g, {d.B, d.Hq, d.Sq, d.D}, -range, range), rand_tensor(g, {d.B, d.Hkv, d.Skv, d.D}, -range, range),
          rand_tensor(g, {d.B, d.Hkv, d.Skv, d.Dv})};
}

/// y = attention(q, k, v[, mask], o) checked against the reference; returns the variant.
template <class Q, class K, class V, class... M>
std::string check(const dims& d, const Q& q, const K& k, const V& v, const kiln::attention_options& o,
                  const std::string& what, const M&... mask) {
  auto& ctx = kiln_test::gpu();
  const std::string variant = kiln::kernel_variant(kiln::attention(q, k, v, mask..., o));
  using R = typename Q::value_type;
  kiln::tensor<R, kiln::vulkan> y;
  const std::uint64_t before = ctx.kernels_launched();
  y = kiln::attention(q, k, v, mask..., o);
  const std::uint64_t launched = ctx.kernels_launched() - before;
  const std::string label = what + " " + d.str() + " (" + variant + ")";
  if (d.B * d.Hq * d.Sq * d.Dv > 0) {
    EXPECT_EQ(launched, variant.find("split") != std::string::npos ? 2u : 1u) << label;
  }
  std::vector<double> mh;
  kiln::shape ms;
  ((mh = doubles(mask.to_host()), ms = mask.shape()), ...);
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(double(d.D));
  const double round = std::is_same_v<R, kiln::half> ? 0x1p-11 : 0.0;
  const auto ref = ref_attention(d, doubles(q.to_host()), doubles(k.to_host()), doubles(v.to_host()), mh, ms, o.causal,
                                 scale, o.softcap, round);
  EXPECT_EQ(y.shape(), (kiln::shape{d.B, d.Hq, d.Sq, d.Dv})) << label;
  expect_close(y.to_host(), ref, label);
  return variant;
}

std::string check(const operands& x, const kiln::attention_options& o, const std::string& what) {
  return check(x.d, x.q, x.k, x.v, o, what);
}

kiln::attention_options causal() {
  kiln::attention_options o;
  o.causal = true;
  return o;
}

}  // namespace

// One flash kernel (D = 64, f32, contiguous): causal and not, Sq = Skv, Sq < Skv, Sq > Skv
// (leading rows see no key), softcap, an explicit scale, tails of every tile.
TEST_F(attention, flash_causal_and_lengths) {
  auto g = kiln_test::rng();
  const dims shapes[] = {{1, 2, 2, 37, 37, 64, 64}, {2, 2, 2, 19, 77, 64, 64}, {1, 2, 2, 70, 33, 64, 64},
                         {1, 1, 1, 5, 5, 64, 64},   {1, 1, 1, 130, 130, 64, 64}};
  for (const dims& d : shapes) {
    const operands x = make(g, d);
    for (bool c : {false, true}) {
      kiln::attention_options o;
      o.causal = c;
      EXPECT_NE(check(x, o, c ? "causal" : "full").find("vulkan.attention.flash"), std::string::npos);
    }
  }
  const operands x = make(g, {1, 2, 2, 40, 61, 64, 64}, 4.0f);
  kiln::attention_options o = causal();
  o.softcap = 5.0f;
  check(x, o, "softcap 5");
  o.softcap = 0.0f;
  o.scale = 0.5f;
  check(x, o, "scale 0.5");
  // large logits (~1e4): the online softmax's rescaling keeps them finite
  const operands big = make(g, {1, 1, 1, 33, 70, 64, 64}, 16.0f);
  kiln::attention_options ob;
  ob.scale = 2.0f;
  check(big, ob, "logits ~1e4");
}

// Head dims 80, 128 and 7 (padded to vectors) with GQA ratios 2, 4 and MQA.
TEST_F(attention, head_dims_and_gqa) {
  auto g = kiln_test::rng();
  check(make(g, {1, 4, 2, 45, 45, 80, 80}), causal(), "gqa 2");
  check(make(g, {1, 4, 1, 33, 50, 128, 128}), causal(), "mqa");
  check(make(g, {2, 8, 2, 21, 29, 7, 7}), {}, "gqa 4");
}

// Decoding: one query row over up to 4096 keys, split over workgroups (chosen), the
// one-dispatch decode kernel (forced), and the flash kernel (forced) agree.
TEST_F(attention, decode_and_split) {
  auto g = kiln_test::rng();
  {
    const operands x = make(g, {1, 4, 1, 1, 4096, 64, 64});
    const std::string chosen = check(x, {}, "decode 4096");
    EXPECT_NE(chosen.find("vulkan.attention.split"), std::string::npos) << chosen;
    {
      kiln_test::scoped_env env("KILN_VULKAN_ATTENTION", "decode");
      EXPECT_EQ(check(x, {}, "decode 4096 forced"), "vulkan.attention.decode");
    }
    kiln_test::scoped_env env("KILN_VULKAN_ATTENTION", "flash");
    EXPECT_NE(check(x, {}, "decode 4096 on flash").find("vulkan.attention.flash"), std::string::npos);
  }
  // a few rows, causal (each sees a different prefix), GQA 2, odd length: decode kernel
  const operands x = make(g, {2, 4, 2, 3, 301, 64, 64});
  EXPECT_EQ(check(x, causal(), "decode 3 rows causal"), "vulkan.attention.decode");
  kiln_test::scoped_env env("KILN_VULKAN_ATTENTION", "split");
  EXPECT_NE(check(x, causal(), "split 3 rows causal").find("vulkan.attention.split"), std::string::npos);
  // Sq > Skv causal: row 0 sees no key in any split
  check(make(g, {1, 2, 2, 3, 2, 64, 64}), causal(), "split, a row with no key");
}

// [B, S, H, D] storage seen as [B, H, S, D] through kiln::transpose (no copies).
TEST_F(attention, strided_views) {
  auto g = kiln_test::rng();
  const dims d{2, 4, 2, 23, 31, 64, 64};
  auto qs = rand_tensor(g, {d.B, d.Sq, d.Hq, d.D});
  auto ks = rand_tensor(g, {d.B, d.Skv, d.Hkv, d.D});
  auto vs = rand_tensor(g, {d.B, d.Skv, d.Hkv, d.Dv});
  check(d, kiln::transpose(qs, 1, 2), kiln::transpose(ks, 1, 2), kiln::transpose(vs, 1, 2), causal(), "bshd views");
  const dims e{1, 4, 2, 1, 300, 64, 64};
  auto k1 = rand_tensor(g, {e.B, e.Skv, e.Hkv, e.D});
  auto v1 = rand_tensor(g, {e.B, e.Skv, e.Hkv, e.Dv});
  check(e, rand_tensor(g, {e.B, e.Hq, e.Sq, e.D}), kiln::transpose(k1, 1, 2), kiln::transpose(v1, 1, 2),
        kiln::attention_options{}, "bshd views, decode");
}

// Additive masks broadcast from [Sq, Skv] and [B, 1, 1, Skv] (padding): whole masked key
// tiles, a fully masked row (zeros), on the flash and decode kernels.
TEST_F(attention, masks) {
  auto g = kiln_test::rng();
  const dims d{2, 2, 2, 37, 75, 64, 64};
  const operands x = make(g, d);
  const float inf = std::numeric_limits<float>::infinity();
  {
    auto h = kiln_test::uniform(g, static_cast<std::size_t>(d.Sq * d.Skv), -2.0f, 2.0f);
    for (index_t j = 0; j < d.Skv; ++j) h[static_cast<std::size_t>(5 * d.Skv + j)] = -inf;  // row 5 sees nothing
    for (index_t i = 0; i < d.Sq; ++i)
      for (index_t j = 32; j < 64; ++j) h[static_cast<std::size_t>(i * d.Skv + j)] = -inf;  // a whole key tile
    auto m = kiln::from_host(kiln_test::gpu(), {d.Sq, d.Skv}, std::span<const float>(h));
    check(d, x.q, x.k, x.v, kiln::attention_options{}, "mask [Sq, Skv]", m);
    check(d, x.q, x.k, x.v, causal(), "mask [Sq, Skv] causal", m);
  }
  std::vector<float> pad(static_cast<std::size_t>(d.B * d.Skv), 0.0f);
  for (index_t j = 60; j < d.Skv; ++j) pad[static_cast<std::size_t>(j)] = -inf;             // batch 0: 60 keys
  for (index_t j = 0; j < d.Skv; ++j) pad[static_cast<std::size_t>(d.Skv + j)] = j % 3 - 1.0f;  // batch 1: a bias
  auto m = kiln::from_host(kiln_test::gpu(), {d.B, 1, 1, d.Skv}, std::span<const float>(pad));
  check(d, x.q, x.k, x.v, kiln::attention_options{}, "padding mask [B, 1, 1, Skv]", m);
  const dims e{2, 2, 2, 1, 75, 64, 64};
  const operands y = make(g, e);
  check(e, y.q, y.k, y.v, kiln::attention_options{}, "padding mask, decode", m);
}

// f16 storage (q, k, v and the result), f32 accumulation.
TEST_F(attention, f16_storage) {
  auto g = kiln_test::rng();
  const dims d{1, 4, 2, 29, 41, 64, 64};
  auto q = rand_tensor<kiln::half>(g, {d.B, d.Hq, d.Sq, d.D});
  auto k = rand_tensor<kiln::half>(g, {d.B, d.Hkv, d.Skv, d.D});
  auto v = rand_tensor<kiln::half>(g, {d.B, d.Hkv, d.Skv, d.Dv});
  check(d, q, k, v, causal(), "f16");
}

// Elementwise work on q (the prologue) and on the result (the epilogue) in the variant's
// dispatches: y = attention(q * 2, k, v) * gate is one kernel.
TEST_F(attention, fused_prologue_and_epilogue) {
  auto& ctx = kiln_test::gpu();
  auto g = kiln_test::rng();
  for (const dims& d : {dims{1, 2, 2, 37, 37, 64, 64}, dims{1, 4, 1, 1, 4096, 64, 64}}) {
    const operands x = make(g, d);
    auto gate = rand_tensor(g, {d.B, d.Hq, d.Sq, d.Dv});
    gpu_f32 q2 = kiln::empty<float>(ctx, x.q.shape());
    q2 = x.q * 2.0f;
    gpu_f32 ref_y;
    ref_y = kiln::attention(q2, x.k, x.v, causal());
    const std::string variant = kiln::kernel_variant(kiln::attention(x.q * 2.0f, x.k, x.v, causal()));
    gpu_f32 y;
    const std::uint64_t before = ctx.kernels_launched();
    y = kiln::attention(x.q * 2.0f, x.k, x.v, causal()) * gate;
    EXPECT_EQ(ctx.kernels_launched() - before, variant.find("split") != std::string::npos ? 2u : 1u) << variant;
    const auto a = ref_y.to_host(), gt = gate.to_host(), got = y.to_host();
    ASSERT_EQ(got.size(), a.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], a[i] * gt[i], 1e-6f * (1.0f + std::fabs(a[i]))) << variant << " element " << i;
    }
    // and against the reference of the whole statement
    check(d, q2, x.k, x.v, causal(), "q * 2 (materialised)");
  }
}

// Empty operands: no rows dispatch nothing; no keys give zeros.
TEST_F(attention, empty_and_single) {
  auto& ctx = kiln_test::gpu();
  auto g = kiln_test::rng();
  const operands none = make(g, {1, 2, 2, 0, 5, 64, 64});
  gpu_f32 y;
  const std::uint64_t before = ctx.kernels_launched();
  y = kiln::attention(none.q, none.k, none.v);
  EXPECT_EQ(ctx.kernels_launched(), before);
  EXPECT_EQ(y.shape(), (kiln::shape{1, 2, 0, 64}));
  const operands nokeys = make(g, {1, 2, 2, 6, 0, 64, 64});
  gpu_f32 z;
  z = kiln::attention(nokeys.q, nokeys.k, nokeys.v);
  for (float v : z.to_host()) ASSERT_EQ(v, 0.0f);
  check(make(g, {1, 1, 1, 1, 1, 64, 64}), {}, "one key, one query");
}
