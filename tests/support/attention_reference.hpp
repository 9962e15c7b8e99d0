// tests/support/attention_reference.hpp — the float64 attention every attention test
// checks against (tests/ops/attention on the CPU, tests/vulkan/attention_test.cpp), and
// the check that runs a statement and compares it.
//
// Tolerance per output element: |v|max of the row * (2 * e_s + 2^-17) (+ 2^-11 |ref| for
// an f16 result, 2^-8 for bf16), e_s = (D + 4) * 2^-24 * scale * max_j sum_d |q_d k_jd| +
// 2^-20 * (softcap + max |mask|): the error of an f32 score moves each softmax weight by a
// relative e_s; the weights sum to 1 and the output is their combination of v.
#pragma once

#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "random.hpp"

namespace kiln_test::attn {

using kiln::index_t;
inline constexpr double ninf = -std::numeric_limits<double>::infinity();

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
inline reference ref_attention(const dims& d, const std::vector<double>& q, const std::vector<double>& k,
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

/// y = attention(q, k, v[, mask], o) on ctx checked against the reference: the values,
/// the shape, and the kernel count (two dispatches for a Vulkan split, one kernel on the
/// CPU, whose key split merges inside it); returns the variant.
template <class Ctx, class Q, class K, class V, class... M>
std::string check(Ctx& ctx, const dims& d, const Q& q, const K& k, const V& v, const kiln::attention_options& o,
                  const std::string& what, const M&... mask) {
  const std::string variant = kiln::kernel_variant(kiln::attention(q, k, v, mask..., o));
  using R = typename Q::value_type;
  kiln::tensor<R, typename Q::backend_type> y;
  const std::uint64_t before = ctx.kernels_launched();
  y = kiln::attention(q, k, v, mask..., o);
  const std::uint64_t launched = ctx.kernels_launched() - before;
  const std::string label = what + " " + d.str() + " (" + variant + ")";
  if (d.B * d.Hq * d.Sq * d.Dv > 0) {
    const bool two = variant.rfind("vulkan.", 0) == 0 && variant.find("split") != std::string::npos;
    EXPECT_EQ(launched, two ? 2u : 1u) << label;  // a Vulkan split merges in a second dispatch
  }
  std::vector<double> mh;
  kiln::shape ms;
  ((mh = doubles(mask.to_host()), ms = mask.shape()), ...);
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(double(d.D));
  const double round = std::is_same_v<R, kiln::half> ? 0x1p-11 : std::is_same_v<R, kiln::bfloat16> ? 0x1p-8 : 0.0;
  const auto ref = ref_attention(d, doubles(q.to_host()), doubles(k.to_host()), doubles(v.to_host()), mh, ms, o.causal,
                                 scale, o.softcap, round);
  EXPECT_EQ(y.shape(), (kiln::shape{d.B, d.Hq, d.Sq, d.Dv})) << label;
  expect_close(y.to_host(), ref, label);
  return variant;
}

}  // namespace kiln_test::attn
