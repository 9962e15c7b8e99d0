// tests/vulkan/attention_test.cpp — kiln::attention on Vulkan (kernels/attention/*.comp
// with the statement's prologue and epilogue spliced in) against a float64 reference
// written here: causal (bottom-right) and not, Sq = Skv, Sq < Skv (chunked prefill),
// Sq > Skv (rows that see no key: zeros), Sq = 1 decoding over up to 4096 keys, GQA
// ratios 1, 2, 4 and MQA, head dims 64, 80, 128 and 7 (decode also 133 and 256), [B, S, H, D] storage seen through
// kiln::transpose, broadcast additive masks with whole masked blocks and fully masked
// rows, softcap, an explicit scale, large logits, f16 storage, the fused forms (a
// prologue on q, `attention(q, k, v) * gate`) as the variant's dispatches, and every
// variant forced (KILN_VULKAN_ATTENTION) and chosen by shape
// (flash_lanes on CPU devices, flash_slices on GPUs, flash where subgroups cannot shuffle), with the name kiln::kernel_variant gives. Distinct kernels are kept few: lavapipe compiles each
// pipeline for seconds.
//
// The reference and its tolerance: tests/support/attention_reference.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "attention_reference.hpp"
#include "checks.hpp"
#include "random.hpp"
#include "scoped_env.hpp"
#include "vulkan_fixture.hpp"

namespace {

using attention = kiln_test::vulkan_test;
using kiln::index_t;
using gpu_f32 = kiln::tensor<float, kiln::vulkan>;
using namespace kiln_test::attn;

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

template <class Q, class K, class V, class... M>
std::string check(const dims& d, const Q& q, const K& k, const V& v, const kiln::attention_options& o,
                  const std::string& what, const M&... mask) {
  return kiln_test::attn::check(kiln_test::gpu(), d, q, k, v, o, what, mask...);
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

// The shared-memory flash kernel forced (a CPU device such as lavapipe otherwise runs
// flash_lanes, so this keeps the GPUs' kernel checked there): causal tails, Sq > Skv,
// GQA with an odd head dim.
TEST_F(attention, flash_shared_tiles_forced) {
  auto g = kiln_test::rng();
  kiln_test::scoped_env env("KILN_VULKAN_ATTENTION", "flash");
  const operands x = make(g, {1, 2, 2, 37, 37, 64, 64});
  EXPECT_NE(check(x, causal(), "forced flash, causal").find("vulkan.attention.flash "), std::string::npos);
  check(make(g, {1, 2, 2, 70, 33, 64, 64}), causal(), "forced flash, Sq > Skv");
  check(make(g, {2, 8, 2, 21, 29, 7, 7}), {}, "forced flash, gqa 4, D 7");
}

// The GPU kernel with each row spread over a subgroup's invocations, forced (lavapipe
// runs flash_lanes by shape): causal tails, Sq > Skv, GQA with an odd head dim, D 64
// (one invocation a row), D 128 (two), a mask with a fully masked row, softcap, strided
// k / v (element reads), f16 storage, and the tuning form flash_slices:LxBKV (4 and 8
// invocations a row).
TEST_F(attention, flash_slices_forced) {
  const auto& info = kiln::vulkan::device(kiln_test::gpu());
  const auto& ops = info.subgroup_operations;
  if (!info.subgroups_in_compute || std::find(ops.begin(), ops.end(), "shuffle") == ops.end()) {
    GTEST_SKIP() << "no subgroup shuffles in compute shaders";
  }
  auto g = kiln_test::rng();
  kiln_test::scoped_env env("KILN_VULKAN_ATTENTION", "flash_slices");
  const operands x = make(g, {1, 2, 2, 37, 37, 64, 64});
  const std::string name = check(x, causal(), "forced flash_slices, causal");
  EXPECT_NE(name.find("vulkan.attention.flash_slices 128x32 (1 invocation a row)"), std::string::npos) << name;
  check(x, {}, "forced flash_slices, full");
  check(make(g, {1, 2, 2, 70, 33, 64, 64}), causal(), "forced flash_slices, Sq > Skv");
  check(make(g, {2, 8, 2, 21, 29, 7, 7}), {}, "forced flash_slices, gqa 4, D 7");
  const operands y = make(g, {1, 4, 1, 45, 150, 128, 128}, 3.0f);
  kiln::attention_options o = causal();
  o.softcap = 5.0f;
  EXPECT_NE(check(y, o, "forced flash_slices, mqa, D 128, softcap").find("(2 invocations a row)"), std::string::npos);
  const float inf = std::numeric_limits<float>::infinity();
  auto h = kiln_test::uniform(g, static_cast<std::size_t>(37 * 37), -2.0f, 2.0f);
  for (index_t j = 0; j < 37; ++j) h[static_cast<std::size_t>(5 * 37 + j)] = -inf;  // row 5 sees nothing
  auto m = kiln::from_host(kiln_test::gpu(), {37, 37}, std::span<const float>(h));
  check(x.d, x.q, x.k, x.v, kiln::attention_options{}, "forced flash_slices, mask", m);
  const dims d{2, 4, 2, 23, 31, 64, 64};
  auto ks = rand_tensor(g, {d.B, d.Skv, d.Hkv, d.D});
  auto vs = rand_tensor(g, {d.B, d.Skv, d.Hkv, d.Dv});
  check(d, rand_tensor(g, {d.B, d.Hq, d.Sq, d.D}), kiln::transpose(ks, 1, 2), kiln::transpose(vs, 1, 2), causal(),
        "forced flash_slices, bshd k / v");
  const dims f{1, 2, 2, 29, 41, 64, 64};
  check(f, rand_tensor<kiln::half>(g, {f.B, f.Hq, f.Sq, f.D}), rand_tensor<kiln::half>(g, {f.B, f.Hkv, f.Skv, f.D}),
        rand_tensor<kiln::half>(g, {f.B, f.Hkv, f.Skv, f.Dv}), causal(), "forced flash_slices, f16");
  // the tuning form flash_slices:LxBKV fixes the invocations a row and the tile
  {
    kiln_test::scoped_env shape("KILN_VULKAN_ATTENTION", "flash_slices:4x16");
    const std::string tuned = check(x, causal(), "forced flash_slices:4x16, causal");
    EXPECT_NE(tuned.find("vulkan.attention.flash_slices 32x16 (4 invocations a row)"), std::string::npos) << tuned;
  }
  {
    kiln_test::scoped_env shape("KILN_VULKAN_ATTENTION", "flash_slices:8x8");
    const std::string tuned = check(y, o, "forced flash_slices:8x8, mqa, D 128, softcap");
    EXPECT_NE(tuned.find("vulkan.attention.flash_slices 16x8 (8 invocations a row)"), std::string::npos) << tuned;
  }
  for (const char* bad : {"flash_slices:3x32", "flash_slices:4x2", "flash_slices:4", "flash_slices:4x32x"}) {
    kiln_test::scoped_env shape("KILN_VULKAN_ATTENTION", bad);
    EXPECT_TRUE(kiln_test::has(kiln_test::message_of<kiln::device_error>([&] { (void)kiln::kernel_variant(kiln::attention(x.q, x.k, x.v)); }),
                               std::string("KILN_VULKAN_ATTENTION is '") + bad + "'"));
  }
}

// Long rows (thousands of key tiles per workgroup) on the variant chosen by shape: vec4
// rows (D 64) and element reads (D 7).
TEST_F(attention, long_rows) {
  auto g = kiln_test::rng();
  check(make(g, {1, 1, 1, 8, 20000, 64, 64}), {}, "8 rows x 20000 keys");
  check(make(g, {1, 1, 1, 9, 9000, 7, 7}), causal(), "9 rows x 9000 keys, D 7");
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
  // head dims past 128 (a CPU device keeps the loops over q rolled there), odd D, Dv != D
  check(make(g, {1, 4, 2, 2, 150, 256, 256}), causal(), "split, D 256");
  kiln_test::scoped_env one("KILN_VULKAN_ATTENTION", "decode");
  EXPECT_EQ(check(make(g, {1, 4, 2, 2, 150, 256, 256}), causal(), "decode, D 256"), "vulkan.attention.decode");
  EXPECT_EQ(check(make(g, {1, 2, 1, 1, 77, 133, 96}), {}, "decode, D 133, Dv 96"), "vulkan.attention.decode");
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

// A row whose scores are all NaN (a NaN mask row, NaN keys) is NaN as on the CPU, on every
// variant: GLSL's max() may drop a NaN, and such rows used to take the "sees no key" path
// and come out as zeros. Other rows stay finite.
TEST_F(attention, a_row_of_nan_scores_is_nan) {
  auto g = kiln_test::rng();
  const index_t Sq = 40, Skv = 70, D = 8;
  auto q = rand_tensor(g, {1, 1, Sq, D});
  auto k = rand_tensor(g, {1, 1, Skv, D});
  auto v = rand_tensor(g, {1, 1, Skv, D});
  std::vector<float> mh(static_cast<std::size_t>(Sq * Skv), 0.0f);
  for (index_t j = 0; j < Skv; ++j) mh[static_cast<std::size_t>(3 * Skv + j)] = std::numeric_limits<float>::quiet_NaN();
  auto mask = kiln::from_host(kiln_test::gpu(), {Sq, Skv}, std::span<const float>(mh));
  auto nan_k = kiln::full(kiln_test::gpu(), {1, 1, Skv, D}, std::numeric_limits<float>::quiet_NaN());
  for (const char* variant : {"flash", "flash_lanes", "flash_slices", "decode", "split"}) {
    kiln_test::scoped_env env("KILN_VULKAN_ATTENTION", variant);
    try {  // flash_lanes runs on CPU devices only, flash_slices where subgroups shuffle
      (void)kiln::kernel_variant(kiln::attention(q, k, v));
    } catch (const kiln::device_error& e) {
      EXPECT_NE(std::string(e.what()).find("which needs"), std::string::npos) << e.what();
      continue;
    }
    for (index_t rows : {index_t(1), Sq}) {
      gpu_f32 y;
      y = kiln::attention(kiln::slice(q, 2, 0, rows), k, v, kiln::slice(mask, 0, Sq - rows, Sq));
      const auto h = y.to_host();
      for (index_t i = 0; i < rows; ++i)
        for (index_t c = 0; c < D; ++c) {
          const float e = h[static_cast<std::size_t>(i * D + c)];
          if (Sq - rows + i == 3) {
            EXPECT_TRUE(std::isnan(e)) << variant << " rows " << rows << ": row " << i << " is " << e;
          } else {
            EXPECT_TRUE(std::isfinite(e)) << variant << " rows " << rows << ": row " << i << " is " << e;
          }
        }
      gpu_f32 z;
      z = kiln::attention(kiln::slice(q, 2, 0, rows), nan_k, v);
      for (float e : z.to_host()) EXPECT_TRUE(std::isnan(e)) << variant << " rows " << rows << ", NaN keys: " << e;
    }
  }
}
