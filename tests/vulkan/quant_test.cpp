// tests/vulkan/quant_test.cpp — the quant family's Vulkan kernels (kernels/quant/*.comp)
// on the device with validation on, against references written here from the formats
// and formulas of ops/quant/scheme.hpp and ops/quant/qmatmul.hpp:
//   pack        codes bit-exact for int8 / int4 / ternary, groups 32 / 64 / 128, one
//               scale per row or per tensor, K not a multiple of the chunk (padding)
//   dequantize  (code - offset) * scale, exact, with a fused epilogue: one kernel
//   matvec      M = 1 and 5, K = 32 / 96 / 4096 (and a K past shared memory, in
//               segments), N = 37; the reference quantizes x exactly as the kernel must
//               (so the int32 sums agree) and the tolerance covers only the float sums
//               over groups: (G + 2) 2^-24 sum_g |s_x scale_g isum_g| (+ 2^-11 |y| for an
//               f16 result, 2^-8 |y| for bf16); exact integer data gives exact results; f16 activations; a
//               fused prologue, `+ bias` and gelu as one kernel; NaN / Inf rows -> NaN.
//   tiled       (more than quant_matvec_rows rows of x) the same checks with M = 5, 17,
//               64, 130, N = 37 and 70 (not multiples of a tile), K = 32 / 96 / 4096 and
//               past shared memory, every scheme; and its rows bit for bit equal to the
//               matvec kernel's on the same rows; sizes within the device's limits; a
//               GPU's sizes (integer products) and a CPU device's forced by
//               KILN_VULKAN_QUANT on whatever device runs the tests.
//   split       the GPUs' matvec (K split over a column's invocations) forced on the
//               device: the reference and the plain matvec kernel's bits, every scheme,
//               M = 1 / 3, f32 and f16; its sizes within the device's limits, else the
//               plain matvec (an error when forced)
//   dot products (packed 4x8-bit OpSDot, where the device has shaderIntegerDotProduct)
//               forced on and off by KILN_VULKAN_QUANT for the matvec kernel and both
//               tiled sizes, M = 1 / 5 / 70, every scheme, f32 and f16: the same bits
//               as the plain integer path, exact on integer data at the extremes (x_q and
//               codes at +-127); chosen by default only where the device reports them
//               accelerated; KILN_VULKAN_QUANT's words parsed and checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "random.hpp"
#include "scoped_env.hpp"
#include "vulkan_fixture.hpp"

namespace {

using quant = kiln_test::vulkan_test;
using kiln::index_t;
namespace qs = kiln::quant;

template <class S>
constexpr int fields = 8 / S::bits;  // fields a byte

/// Signed code of weight (n, k) in the packed words (ops/quant/scheme.hpp's layout).
template <class S>
int code_at(const std::vector<std::int32_t>& words, index_t W, index_t n, index_t k) {
  const index_t c = k / S::chunk, r = k % S::chunk, s = r / 32, j = r % 32;
  const std::uint32_t word = static_cast<std::uint32_t>(words[static_cast<std::size_t>(n * W + c * 8 + j / 4)]);
  const std::uint32_t byte = (word >> (8 * (j % 4))) & 0xffu;
  return int((byte >> (S::bits * s)) & ((1u << S::bits) - 1u)) - S::offset;
}

/// The packed words of signed codes [N, K] (padding: code 0).
template <class S>
std::vector<std::int32_t> pack_words(const std::vector<int>& codes, index_t N, index_t K) {
  const index_t chunks = (K + S::chunk - 1) / S::chunk, W = chunks * 8;
  std::vector<std::int32_t> out(static_cast<std::size_t>(N * W));
  for (index_t n = 0; n < N; ++n) {
    for (index_t w = 0; w < W; ++w) {
      std::uint32_t word = 0;
      for (int b = 0; b < 4; ++b) {
        std::uint32_t byte = 0;
        for (int s = 0; s < fields<S>; ++s) {
          const index_t k = (w / 8) * S::chunk + 32 * s + (w % 8) * 4 + b;
          const int code = k < K ? codes[static_cast<std::size_t>(n * K + k)] : 0;
          byte |= std::uint32_t(code + S::offset) << (S::bits * s);
        }
        word |= byte << (8 * b);
      }
      out[static_cast<std::size_t>(n * W + w)] = static_cast<std::int32_t>(word);
    }
  }
  return out;
}

/// Round half to even, written out.
float rne(float v) {
  const float f = std::floor(v);
  const float d = v - f;
  if (d > 0.5f) return f + 1;
  if (d < 0.5f) return f;
  return std::fmod(f, 2.0f) == 0.0f ? f : f + 1;
}

/// q's scales read back as floats (int4 keeps them as f16).
template <class Q>
std::vector<float> host_scales(const Q& q) {
  const auto h = q.scales().to_host();
  return std::vector<float>(h.begin(), h.end());
}

struct ref_codes {
  std::vector<int> codes;     // signed, [N, K]
  std::vector<float> scales;  // [N, G], or [1] per tensor
};

/// Reference quantization of w [N, K]: int8 / int4 absmax per group (group 0: per row),
/// ternary absmean with the gamma the device computed (a float mean whose last bits
/// depend on the summation order; `gammas`).
template <class S>
ref_codes ref_quantize(const std::vector<float>& w, index_t N, index_t K, index_t group, bool per_row,
                       const std::vector<float>& gammas, float eps = 1e-5f) {
  ref_codes r;
  r.codes.resize(w.size());
  if constexpr (std::is_same_v<S, qs::ternary>) {
    r.scales = gammas;
    for (index_t n = 0; n < N; ++n) {
      const float gm = gammas[per_row ? n : 0];
      const float inv = 1.0f / (gm + eps);
      for (index_t k = 0; k < K; ++k) {
        r.codes[n * K + k] = int(std::clamp(rne(w[n * K + k] * inv), -1.0f, 1.0f));
      }
    }
  } else {
    const index_t g = group == 0 ? K : group, G = K / g;
    r.scales.resize(static_cast<std::size_t>(N * G));
    for (index_t n = 0; n < N; ++n) {
      for (index_t gi = 0; gi < G; ++gi) {
        float amax = 0;
        for (index_t k = gi * g; k < (gi + 1) * g; ++k) amax = std::max(amax, std::abs(w[n * K + k]));
        r.scales[n * G + gi] = float(typename S::scale_type(amax / float(S::qmax)));  // int4: stored as f16
        const float inv = amax > 0 ? float(S::qmax) / amax : 0.0f;
        for (index_t k = gi * g; k < (gi + 1) * g; ++k) {
          r.codes[n * K + k] = int(std::clamp(rne(w[n * K + k] * inv), -float(S::qmax), float(S::qmax)));
        }
      }
    }
  }
  return r;
}

template <class S>
kiln::quant_options options(index_t group, bool per_row) {
  kiln::quant_options o;
  if constexpr (std::is_same_v<S, qs::ternary>) o.per_row = per_row;
  else o.group = int(group);
  return o;
}

/// quantize<S>(w) on the device, codes and scales checked bit for bit against the reference.
template <class S>
void check_pack(kiln::context<kiln::vulkan>& ctx, std::mt19937_64& g, index_t N, index_t K, index_t group, bool per_row) {
  const std::string what = std::string(S::name) + " N " + std::to_string(N) + " K " + std::to_string(K) + " group " +
                           std::to_string(group) + (per_row ? " per row" : "") + " " + kiln_test::seed_note();
  const auto wh = kiln_test::uniform(g, static_cast<std::size_t>(N * K), -2.0f, 2.0f);
  const auto w = kiln::from_host(ctx, {N, K}, wh);
  const auto q = kiln::quantize<S>(w, options<S>(group, per_row));
  const auto words = q.codes().to_host();
  const auto scales = host_scales(q);
  const ref_codes ref = ref_quantize<S>(wh, N, K, group, per_row, scales);
  ASSERT_EQ(scales.size(), ref.scales.size()) << what;
  for (std::size_t i = 0; i < scales.size(); ++i) {
    if constexpr (std::is_same_v<S, qs::ternary>) {
      // gamma: a float mean, against the double one
      double m = 0;
      const index_t rows = per_row ? 1 : N;
      for (index_t k = 0; k < rows * K; ++k) m += std::abs(double(wh[static_cast<std::size_t>(i) * K + k]));
      EXPECT_NEAR(scales[i], m / double(rows * K), 1e-6 * m / double(rows * K)) << what;
    } else {
      EXPECT_EQ(scales[i], ref.scales[i]) << what << ": scale " << i;
    }
  }
  const auto want = pack_words<S>(ref.codes, N, K);
  ASSERT_EQ(words.size(), want.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < words.size() && bad < 5; ++i) {
    if (words[i] != want[i]) {
      ++bad;
      ADD_FAILURE() << what << ": word " << i << " (row " << i / (want.size() / N) << ") is " << std::hex
                    << std::uint32_t(words[i]) << ", want " << std::uint32_t(want[i]) << std::dec;
    }
  }
}

}  // namespace

TEST_F(quant, pack_codes_are_bit_exact_for_every_scheme_group_and_padding) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  check_pack<qs::int8>(c, g, 7, 96, 0, false);    // per row, K not a multiple of 32... of 128
  check_pack<qs::int8>(c, g, 5, 96, 32, false);
  check_pack<qs::int8>(c, g, 3, 192, 64, false);
  check_pack<qs::int8>(c, g, 4, 256, 128, false);
  check_pack<qs::int8>(c, g, 1, 5, 0, false);
  check_pack<qs::int4>(c, g, 7, 32, 32, false);   // half a chunk: the high nibbles are padding
  check_pack<qs::int4>(c, g, 5, 96, 32, false);
  check_pack<qs::int4>(c, g, 3, 192, 64, false);
  check_pack<qs::int4>(c, g, 2, 384, 128, false);
  check_pack<qs::ternary>(c, g, 3, 5, 0, false);  // per tensor
  check_pack<qs::ternary>(c, g, 6, 200, 0, true);  // per row
  check_pack<qs::ternary>(c, g, 4, 256, 0, false);
}

TEST_F(quant, pack_takes_the_weights_from_any_float_dtype_and_view) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  const index_t N = 6, K = 64;
  const auto wh = kiln_test::uniform(g, static_cast<std::size_t>(N * K), -1.0f, 1.0f);
  std::vector<kiln::half> hh(wh.begin(), wh.end());
  std::vector<float> wr(hh.begin(), hh.end());  // the f16 values
  const auto wf16 = kiln::from_host(c, {N, K}, hh);
  const auto q = kiln::quantize<qs::int4>(wf16, {.group = 32});
  const ref_codes ref = ref_quantize<qs::int4>(wr, N, K, 32, false, {});
  EXPECT_EQ(q.codes().to_host(), pack_words<qs::int4>(ref.codes, N, K));
  EXPECT_EQ(host_scales(q), ref.scales);
  // a transposed view (quantize copies it to a contiguous weight first)
  std::vector<float> th(static_cast<std::size_t>(N * K));
  for (index_t n = 0; n < N; ++n)
    for (index_t k = 0; k < K; ++k) th[k * N + n] = wr[n * K + k];
  const auto wt = kiln::transpose(kiln::from_host(c, {K, N}, th));
  const auto qt = kiln::quantize<qs::int4>(wt, {.group = 32});
  EXPECT_EQ(qt.codes().to_host(), pack_words<qs::int4>(ref.codes, N, K));
}

TEST_F(quant, dequantize_is_one_kernel_with_its_epilogue_and_exact) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  const index_t N = 9, K = 96;
  const auto wh = kiln_test::uniform(g, static_cast<std::size_t>(N * K), -3.0f, 3.0f);
  const auto w = kiln::from_host(c, {N, K}, wh);
  const auto bh = kiln_test::uniform(g, static_cast<std::size_t>(K), -1.0f, 1.0f);
  const auto bias = kiln::from_host(c, {K}, bh);
  const auto check = [&](const auto& q, const std::string& what) {
    using S = typename std::remove_cvref_t<decltype(q)>::scheme_type;
    const auto words = q.codes().to_host();
    const auto scales = host_scales(q);
    const index_t W = q.layout().words, srs = q.layout().scale_row_stride(), grp = q.layout().group;
    auto y = kiln::empty<float>(c, {N, K});
    EXPECT_EQ(kiln::kernel_variant(kiln::dequantize(q) * 2.0f + bias), "vulkan.quant.dequantize") << what;
    const std::uint64_t before = c.kernels_launched();
    y = kiln::dequantize(q) * 2.0f + bias;
    EXPECT_EQ(c.kernels_launched() - before, 1u) << what;
    const auto yh = y.to_host();
    int bad = 0;
    for (index_t n = 0; n < N && bad < 5; ++n) {
      for (index_t k = 0; k < K && bad < 5; ++k) {
        const float v = float(code_at<S>(words, W, n, k)) * scales[static_cast<std::size_t>(n * srs + k / grp)];
        const float want = v * 2.0f + bh[static_cast<std::size_t>(k)];
        if (yh[static_cast<std::size_t>(n * K + k)] != want) {
          ++bad;
          ADD_FAILURE() << what << ": y[" << n << ", " << k << "] = " << yh[n * K + k] << ", want " << want;
        }
      }
    }
    // f16 output, alone
    auto h = kiln::empty<kiln::half>(c, {N, K});
    h = kiln::cast<kiln::half>(kiln::dequantize(q));
    const auto hh = h.to_host();
    for (index_t i = 0; i < 4; ++i) {
      const float v = float(code_at<S>(words, W, i, i)) * scales[static_cast<std::size_t>(i * srs + i / grp)];
      EXPECT_EQ(float(hh[static_cast<std::size_t>(i * K + i)]), float(kiln::half(v))) << what;
    }
  };
  check(kiln::quantize<qs::int8>(w), "int8 per row");
  check(kiln::quantize<qs::int8>(w, {.group = 32}), "int8 group 32");
  check(kiln::quantize<qs::int4>(w, {.group = 32}), "int4 group 32");
  check(kiln::quantize<qs::ternary>(w), "ternary per tensor");
  check(kiln::quantize<qs::ternary>(w, {.per_row = true}), "ternary per row");
}

namespace {

struct qref {
  std::vector<double> value, tol;
};

/// The reference product of x [M, K] (its values as the kernel sees them after the
/// prologue) and q's codes and scales (read back): x quantized per row exactly as the
/// kernel does it, int32 sums per group, then float; tol: the float sums' rounding.
template <class S>
qref ref_qmatmul(const std::vector<float>& x, index_t M, index_t K, const std::vector<std::int32_t>& words,
                 const std::vector<float>& scales, const kiln::detail::quant_layout& l) {
  const index_t N = l.N;
  qref r;
  r.value.assign(static_cast<std::size_t>(M * N), 0.0);
  r.tol.assign(r.value.size(), 0.0);
  std::vector<int> xq(static_cast<std::size_t>(K));
  for (index_t m = 0; m < M; ++m) {
    float amax = 0;
    bool finite = true;
    for (index_t k = 0; k < K; ++k) {
      const float v = x[static_cast<std::size_t>(m * K + k)];
      finite = finite && std::isfinite(v);
      amax = std::max(amax, std::abs(v));
    }
    const float inv = finite && amax > 0 ? 127.0f / amax : 0.0f;
    const float sx = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
    for (index_t k = 0; k < K; ++k) xq[k] = finite ? int(std::clamp(rne(x[m * K + k] * inv), -127.0f, 127.0f)) : 0;
    for (index_t n = 0; n < N; ++n) {
      double y = 0, mag = 0;
      for (index_t gi = 0; gi < l.groups; ++gi) {
        std::int64_t isum = 0;
        for (index_t k = gi * l.group; k < std::min(K, (gi + 1) * l.group); ++k) {
          isum += std::int64_t(xq[k]) * code_at<S>(words, l.words, n, k);
        }
        const double t = double(scales[static_cast<std::size_t>(n * l.scale_row_stride() + gi)]) * double(isum);
        y += t;
        mag += std::abs(t);
      }
      r.value[m * N + n] = double(sx) * y;
      r.tol[m * N + n] = double(l.groups + 2) * 0x1p-24 * double(sx) * mag + 1e-30;
    }
  }
  return r;
}

template <class T>
void expect_close(const std::vector<T>& got, const qref& ref, const std::string& what, double rel = 0.0) {
  ASSERT_EQ(got.size(), ref.value.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < got.size() && bad < 5; ++i) {
    const double gv = double(float(got[i])), w = ref.value[i];
    const bool ok = std::isnan(w) ? std::isnan(gv) : std::abs(gv - w) <= ref.tol[i] + rel * std::abs(w);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": y[" << i << "] = " << gv << ", want " << w << " (tol " << ref.tol[i] + rel * std::abs(w)
                    << ") " << kiln_test::seed_note();
    }
  }
}

/// " dot4x8" where the products on c take packed integer dot products (KILN_VULKAN_QUANT's
/// dot / plain, else the device's acceleration), else "".
std::string dot_suffix(kiln::context<kiln::vulkan>& c) {
  const auto& d = kiln::vulkan::device(c);
  const bool dot = d.integer_dot_product && kiln::detail::vk::forced_quant().dot.value_or(d.dot4x8_signed_accelerated);
  return dot ? " dot4x8" : "";
}

/// The kernel a product of M rows of x runs on c (or the one KILN_VULKAN_QUANT forces).
/// (A GPU's matvec splits K over the invocations of a column where x's row and the group
/// sums fit its shared memory: select_quant with the device's caps.)
template <class S>
std::string product_variant(kiln::context<kiln::vulkan>& c, index_t M, const kiln::qtensor<S, kiln::vulkan>& q) {
  namespace vk = kiln::detail::vk;
  const vk::quant_force f = vk::forced_quant().kernel;
  const bool tiled = f != vk::quant_force::matvec && f != vk::quant_force::split &&
                     (M > vk::quant_matvec_rows || f != vk::quant_force::none);
  if (tiled) return "vulkan.quant.tiled" + dot_suffix(c);
  const auto& l = q.layout();
  const auto caps = vk::device_caps_of(*q.codes().storage()->ctx);
  const bool split = vk::select_quant(vk::quant_kind::matvec, l.K, caps, "op", l.N, M, S::bits, vk::forced_quant(), l.group).lanes > 0;
  return std::string("vulkan.quant.matvec") + (split ? " split" : "") + dot_suffix(c);
}

/// The matvec kernel's name on c for a [4, 64] int8 weight (a GPU's splits K).
std::string matvec_name(kiln::context<kiln::vulkan>& c) {
  return kiln::detail::vk::device_caps_of(*kiln::zeros<float>(c, {1}).storage()->ctx).cpu ? "vulkan.quant.matvec"
                                                                                           : "vulkan.quant.matvec split";
}

/// KILN_VULKAN_QUANT naming `kernel` ("": the shape's) and the arithmetic now forced, if any.
std::string with_kernel(const std::string& kernel) {
  const auto dot = kiln::detail::vk::forced_quant().dot;
  return kernel + (dot ? (*dot ? " dot" : " plain") : "");
}

/// y = matmul(x, q) for x [M, K] on the device against the reference, one kernel (matvec
/// or tiled by M); for the tiled kernel also its first rows against the matvec kernel's
/// on those rows alone, bit for bit.
template <class S, class T = float>
void check_matvec(kiln::context<kiln::vulkan>& c, std::mt19937_64& g, index_t M, index_t N, index_t K,
                  kiln::quant_options o) {
  const std::string what = std::string(S::name) + " M " + std::to_string(M) + " N " + std::to_string(N) + " K " +
                           std::to_string(K) + " group " + std::to_string(o.group) +
                           (std::is_same_v<T, float> ? "" : " f16");
  const auto wh = kiln_test::uniform(g, static_cast<std::size_t>(N * K), -1.0f, 1.0f);
  const auto q = kiln::quantize<S>(kiln::from_host(c, {N, K}, wh), o);
  const auto xf = kiln_test::uniform(g, static_cast<std::size_t>(M * K), -3.0f, 3.0f);
  const std::vector<T> xt(xf.begin(), xf.end());
  const std::vector<float> xv(xt.begin(), xt.end());
  const auto x = kiln::from_host(c, {M, K}, xt);
  auto y = kiln::empty<T>(c, {M, N});
  EXPECT_EQ(kiln::kernel_variant(kiln::matmul(x, q)), product_variant(c, M, q)) << what;
  const std::uint64_t before = c.kernels_launched();
  y = kiln::matmul(x, q);
  EXPECT_EQ(c.kernels_launched() - before, 1u) << what;
  qref ref = ref_qmatmul<S>(xv, M, K, q.codes().to_host(), host_scales(q), q.layout());
  const auto yh = y.to_host();
  expect_close(yh, ref, what, std::is_same_v<T, float> ? 0.0 : std::is_same_v<T, kiln::half> ? 0x1p-11 : 0x1p-8);
  const index_t R = std::min<index_t>(M, kiln::detail::vk::quant_matvec_rows);
  if (product_variant(c, M, q).starts_with("vulkan.quant.tiled")) {
    kiln_test::scoped_env matvec("KILN_VULKAN_QUANT", with_kernel("matvec").c_str());
    const auto xr = kiln::from_host(c, {R, K}, std::vector<T>(xt.begin(), xt.begin() + R * K));
    auto yr = kiln::empty<T>(c, {R, N});
    ASSERT_EQ(kiln::kernel_variant(kiln::matmul(xr, q)), "vulkan.quant.matvec" + dot_suffix(c));
    yr = kiln::matmul(xr, q);
    const auto rh = yr.to_host();
    for (std::size_t i = 0; i < rh.size(); ++i) {
      const float a = float(yh[i]), b = float(rh[i]);
      if (!(a == b || (std::isnan(a) && std::isnan(b)))) {
        ADD_FAILURE() << what << ": tiled y[" << i << "] = " << a << ", matvec " << b;
        break;
      }
    }
  }
}

}  // namespace

TEST_F(quant, matvec_matches_the_reference_for_every_scheme_and_shape) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  for (index_t M : {1, 5}) {
    for (index_t K : {32, 96, 4096}) {
      check_matvec<qs::int8>(c, g, M, 37, K, {});
      check_matvec<qs::int8>(c, g, M, 37, K, {.group = 32});
      check_matvec<qs::int4>(c, g, M, 37, K, {.group = 32});
      check_matvec<qs::ternary>(c, g, M, 37, K, {});
      check_matvec<qs::ternary>(c, g, M, 37, K, {.per_row = true});
    }
    check_matvec<qs::int8>(c, g, M, 37, 4096, {.group = 128});
    check_matvec<qs::int4>(c, g, M, 37, 4096, {.group = 64});
    check_matvec<qs::int4>(c, g, M, 37, 4096, {.group = 128});
    check_matvec<qs::ternary>(c, g, M, 37, 5, {});
    check_matvec<qs::int8>(c, g, M, 3, 5, {});
  }
  // several column blocks, and (on a CPU device) 2 or 4 columns per invocation
  check_matvec<qs::int8>(c, g, 64, 130, 256, {.group = 64});
  check_matvec<qs::int4>(c, g, 1, 1100, 256, {.group = 64});
  check_matvec<qs::ternary>(c, g, 3, 2100, 128, {.per_row = true});
  check_matvec<qs::int8>(c, g, 2, 4099, 96, {});
}

TEST_F(quant, tiled_matches_the_reference_and_the_matvec_kernel_for_every_scheme_and_shape) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  for (index_t M : {5, 17, 64, 130}) {
    for (index_t K : {32, 96, 4096}) {
      const index_t N = M % 2 ? 70 : 37;
      check_matvec<qs::int8>(c, g, M, N, K, {});
      check_matvec<qs::int8>(c, g, M, N, K, {.group = 32});
      check_matvec<qs::int4>(c, g, M, N, K, {.group = 32});
      check_matvec<qs::ternary>(c, g, M, N, K, {});
      check_matvec<qs::ternary>(c, g, M, N, K, {.per_row = true});
    }
    check_matvec<qs::int8>(c, g, M, 70, 4096, {.group = 64});
    check_matvec<qs::int8>(c, g, M, 37, 4096, {.group = 128});
    check_matvec<qs::int4>(c, g, M, 70, 4096, {.group = 64});
    check_matvec<qs::int4>(c, g, M, 37, 4096, {.group = 128});
    check_matvec<qs::ternary>(c, g, M, 37, 5, {});  // K below a chunk: padded codes
    check_matvec<qs::int8>(c, g, M, 3, 100, {});
  }
  // several column tiles and row tiles
  check_matvec<qs::int4>(c, g, 70, 300, 256, {.group = 64});
  check_matvec<qs::ternary>(c, g, 9, 1100, 384, {.per_row = true});
}

TEST_F(quant, tiled_with_a_gpus_and_a_cpus_sizes_matches_the_reference_and_the_matvec_kernel) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  for (const char* f : {"tiled gpu", "tiled cpu"}) {
    kiln_test::scoped_env force("KILN_VULKAN_QUANT", f);
    for (index_t M : {1, 5, 70}) {
      for (index_t K : {96, 4096}) {
        check_matvec<qs::int8>(c, g, M, 37, K, {});
        check_matvec<qs::int8>(c, g, M, 70, K, {.group = 32});
        check_matvec<qs::int4>(c, g, M, 37, K, {.group = 32});
        check_matvec<qs::ternary>(c, g, M, 70, K, {});
        check_matvec<qs::ternary>(c, g, M, 37, K, {.per_row = true});
      }
    }
    check_matvec<qs::int4, kiln::half>(c, g, 9, 37, 96, {.group = 32});
  }
  // and the matvec kernel forced for many rows
  kiln_test::scoped_env force("KILN_VULKAN_QUANT", "matvec");
  check_matvec<qs::int8>(c, g, 17, 37, 96, {.group = 32});
}

/// The GPUs' matvec (K split over the invocations of a column, per-group sums in shared
/// memory) forced on whatever device runs the tests: the reference, and the bits of the
/// one-column-an-invocation kernel (which the tiled kernel also gives).
TEST_F(quant, split_matvec_matches_the_reference_and_the_matvec_kernels_bits) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  const auto same = [&](auto scheme, auto type, index_t M, index_t N, index_t K, kiln::quant_options o) {
    using S = decltype(scheme);
    using T = decltype(type);
    const std::string what = std::string(S::name) + (std::is_same_v<T, float> ? "" : " f16") + " M " + std::to_string(M) +
                             " N " + std::to_string(N) + " K " + std::to_string(K) + " group " + std::to_string(o.group) +
                             (o.per_row ? " per row" : "");
    const auto wh = kiln_test::uniform(g, static_cast<std::size_t>(N * K), -1.0f, 1.0f);
    const auto q = kiln::quantize<S>(kiln::from_host(c, {N, K}, wh), o);
    const auto xf = kiln_test::uniform(g, static_cast<std::size_t>(M * K), -3.0f, 3.0f);
    const std::vector<T> xt(xf.begin(), xf.end());
    const auto x = kiln::from_host(c, {M, K}, xt);
    std::vector<T> got[2];
    for (int split = 0; split < 2; ++split) {
      kiln_test::scoped_env env("KILN_VULKAN_QUANT", with_kernel(split ? "split" : "matvec").c_str());
      ASSERT_EQ(kiln::kernel_variant(kiln::matmul(x, q)), product_variant(c, M, q)) << what;
      ASSERT_EQ(kiln::kernel_variant(kiln::matmul(x, q)).find("split") != std::string::npos, split == 1) << what;
      auto y = kiln::empty<T>(c, {M, N});
      const std::uint64_t before = c.kernels_launched();
      y = kiln::matmul(x, q);
      EXPECT_EQ(c.kernels_launched() - before, 1u) << what;
      got[split] = y.to_host();
    }
    const qref ref = ref_qmatmul<S>(std::vector<float>(xt.begin(), xt.end()), M, K, q.codes().to_host(),
                                    host_scales(q), q.layout());
    expect_close(got[1], ref, what + " split", std::is_same_v<T, float> ? 0.0 : 0x1p-11);
    for (std::size_t i = 0; i < got[0].size(); ++i) {
      const float a = float(got[0][i]), b = float(got[1][i]);
      if (std::memcmp(&a, &b, sizeof a) != 0 && !(std::isnan(a) && std::isnan(b))) {
        ADD_FAILURE() << what << ": y[" << i << "] matvec " << a << ", split " << b;
        break;
      }
    }
  };
  for (const index_t M : {1, 3}) {
    for (const index_t K : {32, 96, 4096}) {
      same(qs::int8{}, float{}, M, 37, K, {});
      same(qs::int8{}, float{}, M, 37, K, {.group = 32});
      same(qs::int4{}, float{}, M, 70, K, {.group = 32});
      same(qs::ternary{}, float{}, M, 37, K, {});
      same(qs::ternary{}, float{}, M, 70, K, {.per_row = true});
    }
    same(qs::int8{}, float{}, M, 37, 4096, {.group = 128});
    same(qs::int4{}, float{}, M, 37, 4096, {.group = 64});
    same(qs::int4{}, float{}, M, 37, 4096, {.group = 128});
    same(qs::ternary{}, float{}, M, 37, 5, {});  // K below a chunk: padded codes
    same(qs::ternary{}, float{}, M, 3, 100, {.per_row = true});
    same(qs::int8{}, kiln::half{}, M, 37, 96, {.group = 32});
    same(qs::int4{}, kiln::half{}, M, 9, 2816, {.group = 64});  // 11 field blocks a lane past 32 lanes
  }
  same(qs::int8{}, float{}, 1, 1100, 352, {.group = 32});  // several column blocks
}

TEST_F(quant, matvec_walks_a_k_past_shared_memory_in_segments) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  // lavapipe holds 32 KiB of shared memory: K = 40960 int8 activations take two segments
  const index_t K = std::max<index_t>(40960, index_t(kiln::vulkan::device(c).max_shared_memory) + 4096) / 128 * 128;
  check_matvec<qs::int8>(c, g, 2, 11, K, {});
  check_matvec<qs::int8>(c, g, 1, 11, K, {.group = 128});
  check_matvec<qs::int4>(c, g, 1, 11, K, {.group = 32});
  check_matvec<qs::ternary>(c, g, 2, 11, K + 5, {});
  // the tiled kernel stages K in chunks whatever K is
  check_matvec<qs::int8>(c, g, 6, 11, K, {.group = 128});
  check_matvec<qs::int4>(c, g, 5, 11, K, {.group = 32});
  check_matvec<qs::ternary>(c, g, 7, 11, K + 5, {});
}

TEST_F(quant, matvec_takes_f16_activations_and_gives_f16) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  check_matvec<qs::int8, kiln::half>(c, g, 1, 37, 4096, {});
  check_matvec<qs::int4, kiln::half>(c, g, 5, 37, 96, {.group = 32});
  check_matvec<qs::ternary, kiln::half>(c, g, 5, 37, 96, {});
  check_matvec<qs::int8, kiln::bfloat16>(c, g, 3, 37, 96, {.group = 32});
  // the tiled kernel
  check_matvec<qs::int8, kiln::half>(c, g, 17, 37, 4096, {});
  check_matvec<qs::int4, kiln::half>(c, g, 64, 70, 96, {.group = 32});
  check_matvec<qs::ternary, kiln::bfloat16>(c, g, 5, 37, 96, {});
  check_matvec<qs::int8, kiln::bfloat16>(c, g, 130, 37, 96, {.group = 32});
}

TEST_F(quant, matvec_on_integer_data_is_exact) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  const auto run = [&](auto scheme, index_t M, index_t N, index_t K, index_t group) {
    using S = decltype(scheme);
    // weights: integers in [-qmax, qmax], each group holding a +-qmax (scale 1, codes = w)
    auto wi = kiln_test::uniform_int<float>(g, static_cast<std::size_t>(N * K), -S::qmax, S::qmax);
    const index_t grp = group ? group : K;
    for (index_t n = 0; n < N; ++n)
      for (index_t k0 = 0; k0 < K; k0 += grp) wi[n * K + k0 + (n + k0) % grp] = (n % 2 ? -1.0f : 1.0f) * S::qmax;
    auto xi = kiln_test::uniform_int<float>(g, static_cast<std::size_t>(M * K), -127, 127);
    for (index_t m = 0; m < M; ++m) xi[m * K + (7 * m) % K] = m % 2 ? 127.0f : -127.0f;  // max|x| = 127: x_q = x
    const auto q = kiln::quantize<S>(kiln::from_host(c, {N, K}, wi), options<S>(group, false));
    for (const float s : host_scales(q)) ASSERT_EQ(s, 1.0f);
    const auto x = kiln::from_host(c, {M, K}, xi);
    auto y = kiln::empty<float>(c, {M, N});
    y = kiln::matmul(x, q);
    const auto yh = y.to_host();
    for (index_t m = 0; m < M; ++m) {
      for (index_t n = 0; n < N; ++n) {
        std::int64_t want = 0;
        for (index_t k = 0; k < K; ++k) want += std::int64_t(xi[m * K + k]) * std::int64_t(wi[n * K + k]);
        ASSERT_EQ(double(yh[m * N + n]), double(want)) << S::name << " K " << K << " group " << group << " y[" << m << ", " << n << "]";
      }
    }
  };
  for (index_t K : {32, 96, 4096}) {
    run(qs::int8{}, 1, 37, K, 0);
    run(qs::int8{}, 5, 37, K, 32);
    run(qs::int4{}, 5, 37, K, 32);
  }
  run(qs::int4{}, 2, 37, 4096, 128);
  run(qs::int8{}, 2, 37, 4096, 64);
}

TEST_F(quant, tiled_on_integer_data_is_exact) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  const auto run = [&](auto scheme, index_t M, index_t N, index_t K, index_t group) {
    using S = decltype(scheme);
    const std::string what = std::string(S::name) + " M " + std::to_string(M) + " N " + std::to_string(N) + " K " +
                             std::to_string(K) + " group " + std::to_string(group);
    // weights: integers in [-qmax, qmax], each group (ternary: each row) holding a +-qmax,
    // so the scales are 1 (ternary per row: gamma = mean |w| = 1 with codes of magnitude 1)
    std::vector<float> wi;
    if constexpr (std::is_same_v<S, qs::ternary>) {
      wi = kiln_test::uniform_int<float>(g, static_cast<std::size_t>(N * K), 0, 1);
      for (auto& v : wi) v = v ? 1.0f : -1.0f;
    } else {
      wi = kiln_test::uniform_int<float>(g, static_cast<std::size_t>(N * K), -S::qmax, S::qmax);
      const index_t grp = group ? group : K;
      for (index_t n = 0; n < N; ++n)
        for (index_t k0 = 0; k0 < K; k0 += grp) wi[n * K + k0 + (n + k0) % grp] = (n % 2 ? -1.0f : 1.0f) * S::qmax;
    }
    auto xi = kiln_test::uniform_int<float>(g, static_cast<std::size_t>(M * K), -127, 127);
    for (index_t m = 0; m < M; ++m) xi[m * K + (7 * m) % K] = m % 2 ? 127.0f : -127.0f;  // max|x| = 127: x_q = x
    const auto q = kiln::quantize<S>(kiln::from_host(c, {N, K}, wi), options<S>(group, true));
    for (const float sc : host_scales(q)) ASSERT_NEAR(sc, 1.0f, (std::is_same_v<S, qs::ternary> ? 1e-5 : 0.0)) << what;
    const auto x = kiln::from_host(c, {M, K}, xi);
    auto y = kiln::empty<float>(c, {M, N});
    EXPECT_EQ(kiln::kernel_variant(kiln::matmul(x, q)), "vulkan.quant.tiled" + dot_suffix(c)) << what;
    y = kiln::matmul(x, q);
    const auto yh = y.to_host();
    const auto scales = host_scales(q);
    for (index_t m = 0; m < M; ++m) {
      for (index_t n = 0; n < N; ++n) {
        std::int64_t isum = 0;
        for (index_t k = 0; k < K; ++k) isum += std::int64_t(xi[m * K + k]) * std::int64_t(wi[n * K + k]);
        // the int32 sum, exact, times the scale (1, or ternary's gamma within rounding of 1)
        const float want = scales[static_cast<std::size_t>(n)] * float(isum);
        ASSERT_EQ(yh[m * N + n], want) << what << " y[" << m << ", " << n << "]";
        if constexpr (!std::is_same_v<S, qs::ternary>) {
          ASSERT_EQ(double(yh[m * N + n]), double(isum)) << what;
        }
      }
    }
  };
  for (index_t M : {5, 17, 64, 130}) {
    for (index_t K : {32, 96, 4096}) {
      const index_t N = M % 2 ? 37 : 70;
      run(qs::int8{}, M, N, K, 0);
      run(qs::int8{}, M, N, K, 32);
      run(qs::int4{}, M, N, K, 32);
      run(qs::ternary{}, M, N, K, 0);
    }
    run(qs::int8{}, M, 70, 4096, 64);
    run(qs::int8{}, M, 37, 4096, 128);
    run(qs::int4{}, M, 70, 4096, 64);
    run(qs::int4{}, M, 37, 4096, 128);
  }
}

TEST_F(quant, matvec_fuses_its_prologue_and_a_bias_then_gelu_epilogue) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  const index_t M = 5, N = 37, K = 96;
  const auto wh = kiln_test::uniform(g, static_cast<std::size_t>(N * K), -1.0f, 1.0f);
  const auto q = kiln::quantize<qs::int8>(kiln::from_host(c, {N, K}, wh), {.group = 32});
  const auto xh = kiln_test::uniform(g, static_cast<std::size_t>(M * K), -2.0f, 2.0f);
  const auto bh = kiln_test::uniform(g, static_cast<std::size_t>(N), -1.0f, 1.0f);
  const auto x = kiln::from_host(c, {M, K}, xh);
  const auto bias = kiln::from_host(c, {N}, bh);
  auto y = kiln::empty<float>(c, {M, N});
  EXPECT_EQ(kiln::kernel_variant(kiln::gelu(kiln::linear(x * 0.5f, q, bias))), product_variant(c, M, q));
  const std::uint64_t before = c.kernels_launched();
  y = kiln::gelu(kiln::linear(x * 0.5f, q, bias));
  EXPECT_EQ(c.kernels_launched() - before, 1u);
  std::vector<float> xs(xh.size());
  for (std::size_t i = 0; i < xh.size(); ++i) xs[i] = xh[i] * 0.5f;
  qref ref = ref_qmatmul<qs::int8>(xs, M, K, q.codes().to_host(), host_scales(q), q.layout());
  for (std::size_t i = 0; i < ref.value.size(); ++i) {
    const double v = ref.value[i] + bh[i % N];
    ref.value[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    ref.tol[i] = 1.2 * (ref.tol[i] + 0x1p-23 * std::abs(v)) + 2e-6 + 1e-6 * std::abs(v);
  }
  expect_close(y.to_host(), ref, "gelu(linear(x * 0.5, q, bias))");
  // bitlinear with a bias, into an f16 output
  const auto qt = kiln::quantize<qs::ternary>(kiln::from_host(c, {N, K}, wh));
  auto h = kiln::empty<kiln::half>(c, {M, N});
  const std::uint64_t b2 = c.kernels_launched();
  h = kiln::cast<kiln::half>(kiln::bitlinear(x, qt, bias));
  EXPECT_EQ(c.kernels_launched() - b2, 1u);
  qref rt = ref_qmatmul<qs::ternary>(xh, M, K, qt.codes().to_host(), host_scales(qt), qt.layout());
  for (std::size_t i = 0; i < rt.value.size(); ++i) {
    rt.value[i] += bh[i % N];
    rt.tol[i] += 0x1p-23 * std::abs(rt.value[i]);
  }
  expect_close(h.to_host(), rt, "bitlinear(x, q, bias) -> f16", 0x1p-11);
}

TEST_F(quant, matvec_and_tiled_read_a_strided_x) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  for (const index_t M : {3, 7}) {
    const index_t N = 37, K = 64;
    const auto wh = kiln_test::uniform(g, static_cast<std::size_t>(N * K), -1.0f, 1.0f);
    const auto q = kiln::quantize<qs::int4>(kiln::from_host(c, {N, K}, wh), {.group = 32});
    const auto th = kiln_test::uniform(g, static_cast<std::size_t>(M * K), -1.0f, 1.0f);  // x^T [K, M]
    std::vector<float> xh(th.size());
    for (index_t m = 0; m < M; ++m)
      for (index_t k = 0; k < K; ++k) xh[m * K + k] = th[k * M + m];
    const auto xt = kiln::from_host(c, {K, M}, th);
    auto y = kiln::empty<float>(c, {M, N});
    y = kiln::matmul(kiln::transpose(xt), q);
    expect_close(y.to_host(), ref_qmatmul<qs::int4>(xh, M, K, q.codes().to_host(), host_scales(q), q.layout()),
                 "matmul(transpose(x^T), q)");
    // a batch of rows [2, 3, K]
    auto y3 = kiln::empty<float>(c, {2, 3, N});
    const auto x3h = kiln_test::uniform(g, static_cast<std::size_t>(6 * K), -1.0f, 1.0f);
    y3 = kiln::matmul(kiln::from_host(c, {2, 3, K}, x3h), q);
    expect_close(y3.to_host(), ref_qmatmul<qs::int4>(x3h, 6, K, q.codes().to_host(), host_scales(q), q.layout()),
                 "matmul(x [2, 3, K], q)");
  }
}

TEST_F(quant, matvec_and_tiled_give_nan_for_a_row_holding_nan_or_inf) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  for (const index_t M : {4, 9}) {  // rows past 4: the tiled kernel
    const index_t N = 37, K = 96;
    const auto wh = kiln_test::uniform(g, static_cast<std::size_t>(N * K), -1.0f, 1.0f);
    const auto q = kiln::quantize<qs::int8>(kiln::from_host(c, {N, K}, wh));
    auto xh = kiln_test::uniform(g, static_cast<std::size_t>(M * K), -1.0f, 1.0f);
    xh[1 * K + 17] = std::numeric_limits<float>::quiet_NaN();
    xh[2 * K + 95] = -std::numeric_limits<float>::infinity();
    for (index_t k = 0; k < K; ++k) xh[3 * K + k] = 0.0f;  // all zero: outputs 0
    auto y = kiln::empty<float>(c, {M, N});
    EXPECT_EQ(kiln::kernel_variant(kiln::matmul(kiln::from_host(c, {M, K}, xh), q)), product_variant(c, M, q));
    y = kiln::matmul(kiln::from_host(c, {M, K}, xh), q);
    const auto yh = y.to_host();
    for (index_t n = 0; n < N; ++n) {
      EXPECT_TRUE(std::isfinite(yh[n])) << n;
      EXPECT_TRUE(std::isnan(yh[N + n])) << n;
      EXPECT_TRUE(std::isnan(yh[2 * N + n])) << n;
      EXPECT_EQ(yh[3 * N + n], 0.0f) << n;
    }
    expect_close(std::vector<float>(yh.begin(), yh.begin() + N),
                 ref_qmatmul<qs::int8>(std::vector<float>(xh.begin(), xh.begin() + K), 1, K, q.codes().to_host(),
                                       host_scales(q), q.layout()),
                 "the finite row");
    for (index_t n = 0; n < N * (M - 4); ++n) EXPECT_TRUE(std::isfinite(yh[4 * N + n])) << n;
  }
}

namespace {

/// A device as select_quant sees it: workgroups of up to inv invocations, shm bytes of
/// shared memory, a CPU device or not, integer dot products (and accelerated).
kiln::detail::vk::device_caps quant_dev(std::uint32_t inv, std::uint32_t shm, bool cpu = false, bool dot = false,
                                        bool dot_fast = false) {
  kiln::detail::vk::device_caps c;
  c.max_invocations = c.max_wg_x = inv;
  c.shared_bytes = shm;
  c.cpu = cpu;
  c.dot = dot;
  c.dot_fast = dot_fast;
  return c;
}

}  // namespace

TEST_F(quant, matvec_names_the_shared_memory_limit_it_cannot_fit) {
  namespace vk = kiln::detail::vk;
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(64, 32768), "op").seg, 4096u);
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 96, quant_dev(64, 32768), "op").seg, 128u);
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 16384, quant_dev(64, 16384), "op").seg, 15872u);  // 16 KiB less the reduction's
  // columns per invocation: 1 on a GPU; on a CPU device 4, or 2, while 8 workgroups remain
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(64, 32768, false), "op", 4096, 1).nc, 1u);
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(64, 32768, true), "op", 4096, 1).nc, 4u);
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(64, 32768, true), "op", 1100, 1).nc, 2u);
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(64, 32768, true), "op", 37, 4).nc, 1u);
  try {
    (void)vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(64, 600), "kiln::matmul: x is ...");
    ADD_FAILURE() << "no exception";
  } catch (const kiln::shader_error& e) {
    EXPECT_NE(std::string(e.what()).find("maxComputeSharedMemorySize is 600"), std::string::npos) << e.what();
  }
}

TEST_F(quant, split_matvec_sizes_fit_the_device_or_fall_back) {
  namespace vk = kiln::detail::vk;
  // a GPU: 32 invocations a column (fewer for a short K), 256 a workgroup; x's row and the
  // group sums within shared memory, else fewer columns a workgroup, else the plain matvec
  const auto t = vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(1024, 49152), "op", 4096, 1, 8, {}, 32);
  EXPECT_EQ(t.name(), "vulkan.quant.matvec split");
  EXPECT_EQ(t.lanes, 32u);
  EXPECT_EQ(t.wg, 256u);
  EXPECT_EQ(t.groups, 128u);
  EXPECT_EQ(t.seg, 4096u);
  EXPECT_LE(t.shared_bytes(8), 49152u);
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 96, quant_dev(1024, 49152), "op", 4096, 1, 8).lanes, 4u);
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(1024, 49152), "op", 4096, 1, 2).lanes, 32u);
  const auto narrow = vk::select_quant(vk::quant_kind::matvec, 11008, quant_dev(1024, 16384), "op", 4096, 1, 8, {}, 32);
  EXPECT_EQ(narrow.lanes, 32u);
  EXPECT_LT(narrow.wg, 256u);
  EXPECT_LE(narrow.shared_bytes(8), 16384u);
  const auto wide = vk::select_quant(vk::quant_kind::matvec, 40960, quant_dev(1024, 32768), "op", 4096, 1, 8);
  EXPECT_EQ(wide.lanes, 0u);
  EXPECT_EQ(wide.name(), "vulkan.quant.matvec");
  // a CPU device keeps the plain matvec unless KILN_VULKAN_QUANT says split
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(1024, 32768, true), "op", 4096, 1, 8).lanes, 0u);
  const vk::quant_forcing split{vk::quant_force::split, std::nullopt};
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(1024, 32768, true), "op", 4096, 1, 8, split).lanes, 32u);
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(1024, 32768, true), "op", 4096, 9, 8, split).name(),
            "vulkan.quant.matvec split");  // forced: any number of rows
  try {
    (void)vk::select_quant(vk::quant_kind::matvec, 40960, quant_dev(1024, 32768, true), "kiln::matmul: x is ...", 4096, 1, 8, split);
    ADD_FAILURE() << "no exception";
  } catch (const kiln::shader_error& e) {
    EXPECT_NE(std::string(e.what()).find("KILN_VULKAN_QUANT=split"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("maxComputeSharedMemorySize is 32768"), std::string::npos) << e.what();
  }
}

TEST_F(quant, tiled_sizes_come_from_the_device_and_fit_its_limits) {
  namespace vk = kiln::detail::vk;
  // the tiled kernel past quant_matvec_rows rows: GPU 64 x 64 tiles of 4 x 4, CPU 64 x 128 of
  // 8 x 8 (float multiply-adds); fewer rows for a small M; within the device's limits
  const auto tiled = vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(1024, 32768, false), "op", 4096, 64, 8);
  EXPECT_EQ(tiled.name(), "vulkan.quant.tiled");
  EXPECT_EQ(tiled.bm, 64u);
  EXPECT_EQ(tiled.bn, 64u);
  EXPECT_EQ(tiled.wg, 256u);
  EXPECT_FALSE(tiled.qf);
  const auto tcpu = vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(1024, 32768, true), "op", 4096, 64, 8);
  EXPECT_EQ(tcpu.bn, 128u);
  EXPECT_EQ(tcpu.tm, 8u);
  EXPECT_TRUE(tcpu.qf);
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(1024, 32768, false), "op", 4096, 5, 8).bm, 8u);
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(1024, 32768, false), "op", 4096, 4, 8).name(),
            "vulkan.quant.matvec split");
  for (const bool cpu : {false, true}) {
    for (const std::uint32_t inv : {64u, 128u, 256u, 1024u}) {
      for (const std::uint32_t shm : {8192u, 16384u, 32768u, 65536u}) {
        for (const int bits : {8, 4, 2}) {
          for (const index_t M : {5, 17, 64, 1000}) {
            for (const index_t K : {32, 96, 4096}) {
              const auto t = vk::select_quant(vk::quant_kind::matvec, K, quant_dev(inv, shm, cpu), "op", 4096, M, bits);
              if (t.kind != vk::quant_kind::tiled) continue;  // no tile fits: matvec
              EXPECT_LE(t.wg, inv);
              EXPECT_GE(t.wg, t.bm);
              EXPECT_EQ(t.wg, (t.bm / t.tm) * (t.bn / t.tn));
              EXPECT_LE(t.shared_bytes(bits), shm);
              EXPECT_EQ(t.bk % 128, 0u);
              EXPECT_LE(t.bk, std::max<std::uint32_t>(128, std::uint32_t(K + 127) / 128 * 128));
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(vk::select_quant(vk::quant_kind::matvec, 4096, quant_dev(256, 16384, false), "op", 4096, 64, 8).name(), "vulkan.quant.tiled");
}

TEST_F(quant, kernel_variants_are_named) {
  auto& c = ctx();
  const auto w = kiln::zeros<float>(c, {4, 64});
  const auto q = kiln::quantize<qs::int8>(w);
  EXPECT_EQ(kiln::kernel_variant(kiln::dequantize(q)), "vulkan.quant.dequantize");
  const std::string dot = dot_suffix(c);  // " dot4x8" on a device with accelerated dot products
  EXPECT_EQ(kiln::kernel_variant(kiln::matmul(kiln::zeros<float>(c, {2, 64}), q)), matvec_name(c) + dot);
  EXPECT_EQ(kiln::kernel_variant(kiln::matmul(kiln::zeros<float>(c, {5, 64}), q)), "vulkan.quant.tiled" + dot);
  EXPECT_EQ(kiln::kernel_variant(kiln::gelu(kiln::linear(kiln::zeros<float>(c, {2, 40, 64}), q))), "vulkan.quant.tiled" + dot);
  const auto d = kiln::dequantize(q);
  (void)d;
}

TEST_F(quant, kiln_vulkan_quant_names_a_kernel_and_an_arithmetic) {
  namespace vk = kiln::detail::vk;
  EXPECT_EQ(vk::parse_quant_forcing("").kernel, vk::quant_force::none);
  EXPECT_FALSE(vk::parse_quant_forcing("").dot.has_value());
  EXPECT_EQ(vk::parse_quant_forcing("tiled gpu").kernel, vk::quant_force::tiled_gpu);
  const auto f = vk::parse_quant_forcing("tiled cpu dot");
  EXPECT_EQ(f.kernel, vk::quant_force::tiled_cpu);
  EXPECT_EQ(f.dot, std::optional<bool>(true));
  const auto p = vk::parse_quant_forcing(" plain  matvec ");
  EXPECT_EQ(p.kernel, vk::quant_force::matvec);
  EXPECT_EQ(p.dot, std::optional<bool>(false));
  EXPECT_EQ(vk::parse_quant_forcing("dot").kernel, vk::quant_force::none);
  EXPECT_EQ(vk::parse_quant_forcing("split dot").kernel, vk::quant_force::split);
  for (const char* bad : {"gpu", "tiled matvec", "dot plain", "tiled fast", "Dot", "split matvec", "split gpu"}) {
    try {
      (void)vk::parse_quant_forcing(bad);
      ADD_FAILURE() << bad << ": no exception";
    } catch (const kiln::error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("KILN_VULKAN_QUANT='") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST_F(quant, dot_products_run_where_accelerated_or_forced) {
  namespace vk = kiln::detail::vk;
  using vk::quant_kind;
  const auto slow = quant_dev(1024, 32768, true, true, false);  // lavapipe: the feature, nothing accelerated
  const auto fast = quant_dev(1024, 32768, false, true, true);  // a GPU reporting signed 4x8 dots accelerated
  const auto none = quant_dev(1024, 32768, false, false, false);
  const vk::quant_forcing dot{vk::quant_force::none, true}, plain{vk::quant_force::none, false};
  for (const index_t M : {1, 64}) {
    const std::string kernel = M == 1 ? "vulkan.quant.matvec split" : "vulkan.quant.tiled";  // on a GPU
    const std::string kernel_cpu = M == 1 ? "vulkan.quant.matvec" : "vulkan.quant.tiled";
    EXPECT_FALSE(vk::select_quant(quant_kind::matvec, 4096, slow, "op", 4096, M, 8).dot);
    EXPECT_FALSE(vk::select_quant(quant_kind::matvec, 4096, none, "op", 4096, M, 8).dot);
    const auto f = vk::select_quant(quant_kind::matvec, 4096, fast, "op", 4096, M, 4);
    EXPECT_TRUE(f.dot);
    EXPECT_FALSE(f.qf);
    EXPECT_EQ(f.name(), kernel + " dot4x8");
    EXPECT_FALSE(vk::select_quant(quant_kind::matvec, 4096, fast, "op", 4096, M, 4, plain).dot);
    const auto forced = vk::select_quant(quant_kind::matvec, 4096, slow, "op", 4096, M, 2, dot);
    EXPECT_TRUE(forced.dot);
    EXPECT_FALSE(forced.qf);  // on a CPU device the dot replaces the float multiply-adds
    EXPECT_EQ(forced.name(), kernel_cpu + " dot4x8");
    EXPECT_EQ(vk::select_quant(quant_kind::matvec, 4096, slow, "op", 4096, M, 2).name(), kernel_cpu);
    try {
      (void)vk::select_quant(quant_kind::matvec, 4096, none, "kiln::matmul: x is ...", 4096, M, 8, dot);
      ADD_FAILURE() << "no exception";
    } catch (const kiln::shader_error& e) {
      EXPECT_NE(std::string(e.what()).find("shaderIntegerDotProduct"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(vk::select_quant(quant_kind::dequantize, 4096, fast, "op", 4096).dot);
  EXPECT_FALSE(vk::select_quant(quant_kind::pack, 4096, fast, "op", 4096).dot);
  // the device this runs on: the kernel by its acceleration
  kiln_test::scoped_env unset("KILN_VULKAN_QUANT", nullptr);
  auto& c = ctx();
  const auto& d = kiln::vulkan::device(c);
  const auto q = kiln::quantize<qs::int8>(kiln::zeros<float>(c, {4, 64}));
  const bool fast_here = d.integer_dot_product && d.dot4x8_signed_accelerated;
  EXPECT_EQ(kiln::kernel_variant(kiln::matmul(kiln::zeros<float>(c, {1, 64}), q)), matvec_name(c) + (fast_here ? " dot4x8" : ""));
}

TEST_F(quant, dot_products_and_plain_multiply_adds_give_the_same_bits) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  if (!kiln::vulkan::device(c).integer_dot_product) GTEST_SKIP() << "the device has no shaderIntegerDotProduct";
  // y = matmul(x, q) with KILN_VULKAN_QUANT = kernel + " plain" and + " dot": the same
  // bits, and the dot's against the reference
  const auto both = [&](auto scheme, auto type, const std::string& kernel, index_t M, index_t N, index_t K,
                        kiln::quant_options o) {
    using S = decltype(scheme);
    using T = decltype(type);
    const std::string what = std::string(S::name) + (std::is_same_v<T, float> ? "" : " f16") + " '" + kernel + "' M " +
                             std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K) + " group " +
                             std::to_string(o.group) + (o.per_row ? " per row" : "");
    const auto wh = kiln_test::uniform(g, static_cast<std::size_t>(N * K), -1.0f, 1.0f);
    const auto q = kiln::quantize<S>(kiln::from_host(c, {N, K}, wh), o);
    const auto xf = kiln_test::uniform(g, static_cast<std::size_t>(M * K), -3.0f, 3.0f);
    const std::vector<T> xt(xf.begin(), xf.end());
    const auto x = kiln::from_host(c, {M, K}, xt);
    std::vector<T> got[2];
    for (int dot = 0; dot < 2; ++dot) {
      const std::string force = kernel + (dot ? " dot" : " plain");
      kiln_test::scoped_env env("KILN_VULKAN_QUANT", force.c_str());
      const std::string v = kiln::kernel_variant(kiln::matmul(x, q));
      EXPECT_EQ(v.ends_with(" dot4x8"), dot == 1) << what << ": " << v;
      EXPECT_EQ(v, product_variant(c, M, q)) << what;
      auto y = kiln::empty<T>(c, {M, N});
      y = kiln::matmul(x, q);
      got[dot] = y.to_host();
    }
    const qref ref = ref_qmatmul<S>(std::vector<float>(xt.begin(), xt.end()), M, K, q.codes().to_host(),
                                    host_scales(q), q.layout());
    expect_close(got[1], ref, what + " dot", std::is_same_v<T, float> ? 0.0 : 0x1p-11);
    ASSERT_EQ(got[0].size(), got[1].size()) << what;
    for (std::size_t i = 0; i < got[0].size(); ++i) {
      const float a = float(got[0][i]), b = float(got[1][i]);
      if (std::memcmp(&a, &b, sizeof a) != 0) {
        ADD_FAILURE() << what << ": y[" << i << "] plain " << a << ", dot " << b;
        break;
      }
    }
  };
  for (const std::string kernel : {"", "matvec", "split", "tiled gpu", "tiled cpu"}) {
    for (const index_t M : {1, 5, 70}) {
      both(qs::int8{}, float{}, kernel, M, 37, 4096, {});
      both(qs::int8{}, float{}, kernel, M, 70, 96, {.group = 32});
      both(qs::int4{}, float{}, kernel, M, 37, 4096, {.group = 32});
      both(qs::int4{}, float{}, kernel, M, 70, 256, {.group = 128});
      both(qs::ternary{}, float{}, kernel, M, 70, 4096, {});
      both(qs::ternary{}, float{}, kernel, M, 37, 100, {.per_row = true});  // K past a chunk: padded codes
      both(qs::int8{}, kiln::half{}, kernel, M, 37, 96, {.group = 32});
      both(qs::int4{}, kiln::half{}, kernel, M, 70, 96, {.group = 32});
      both(qs::ternary{}, kiln::half{}, kernel, M, 37, 96, {});
    }
  }
}

TEST_F(quant, dot_products_on_integer_data_are_exact) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  if (!kiln::vulkan::device(c).integer_dot_product) GTEST_SKIP() << "the device has no shaderIntegerDotProduct";
  // codes at -qmax .. qmax (int8 also +-127 against x_q +-127), scales 1: the int32 sums exactly
  const auto run = [&](auto scheme, const std::string& kernel, index_t M, index_t N, index_t K) {
    using S = decltype(scheme);
    const std::string what = std::string(S::name) + " '" + kernel + "' M " + std::to_string(M) + " K " + std::to_string(K);
    const index_t grp = std::is_same_v<S, qs::int4> ? 32 : K;  // int8: a scale per row; int4: per 32
    auto wi = kiln_test::uniform_int<float>(g, static_cast<std::size_t>(N * K), -S::qmax, S::qmax);
    if constexpr (std::is_same_v<S, qs::ternary>) {
      for (auto& v : wi) v = v > 0 ? 1.0f : -1.0f;  // gamma = mean |w| = 1
    } else {
      for (index_t n = 0; n < N; ++n)  // a +-qmax in every group: scales 1
        for (index_t k0 = 0; k0 < K; k0 += grp) wi[n * K + k0 + (n + k0) % grp] = (n % 2 ? -1.0f : 1.0f) * S::qmax;
    }
    auto xi = kiln_test::uniform_int<float>(g, static_cast<std::size_t>(M * K), -127, 127);
    for (index_t m = 0; m < M; ++m) {
      xi[m * K + (7 * m) % K] = m % 2 ? 127.0f : -127.0f;  // max|x| = 127: x_q = x
      if (m == 0)
        for (index_t k = 0; k < K; ++k) xi[k] = k % 3 ? -127.0f : 127.0f;  // every product at the extremes
    }
    if (!std::is_same_v<S, qs::ternary>)
      for (index_t k = 0; k < K; ++k) wi[k] = float(S::qmax);  // row 0: all +qmax
    const auto q = kiln::quantize<S>(kiln::from_host(c, {N, K}, wi), options<S>(std::is_same_v<S, qs::int4> ? 32 : 0, true));
    const auto scales = host_scales(q);
    for (const float sc : scales) ASSERT_NEAR(sc, 1.0f, (std::is_same_v<S, qs::ternary> ? 1e-5 : 0.0)) << what;
    const auto x = kiln::from_host(c, {M, K}, xi);
    kiln_test::scoped_env env("KILN_VULKAN_QUANT", (kernel + " dot").c_str());
    auto y = kiln::empty<float>(c, {M, N});
    y = kiln::matmul(x, q);
    const auto yh = y.to_host();
    for (index_t m = 0; m < M; ++m) {
      for (index_t n = 0; n < N; ++n) {
        std::int64_t isum = 0;
        for (index_t k = 0; k < K; ++k) isum += std::int64_t(xi[m * K + k]) * std::int64_t(wi[n * K + k]);
        if constexpr (std::is_same_v<S, qs::ternary>) {  // gamma within rounding of 1
          ASSERT_EQ(yh[m * N + n], scales[static_cast<std::size_t>(n)] * float(isum)) << what << " y[" << m << ", " << n << "]";
        } else {
          ASSERT_EQ(double(yh[m * N + n]), double(isum)) << what << " y[" << m << ", " << n << "]";
        }
      }
    }
  };
  for (const std::string kernel : {"matvec", "tiled gpu", "tiled cpu"}) {
    for (const index_t K : {96, 4096}) {
      run(qs::int8{}, kernel, 3, 37, K);
      run(qs::int4{}, kernel, 3, 37, K);
      run(qs::ternary{}, kernel, 3, 37, K);
      run(qs::int8{}, kernel, 9, 70, K);
    }
  }
}
