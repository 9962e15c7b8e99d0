// tests/ops/attention/attention_test.cpp — kiln::attention and kiln::kv_cache on the CPU
// (cpu/attention/flash.hpp) against the float64 reference of
// tests/support/attention_reference.hpp: causal (bottom-right) and not, Sq = Skv,
// Sq < Skv (chunked prefill), Sq > Skv (rows that see no key: zeros), Sq = 1 decoding
// over up to 8192 keys (one thread and the key split on two), GQA ratios 1, 2, 4, 8 and
// MQA, head dims 32 ... 256 and odd ones, [B, S, H, D] storage read through
// kiln::transpose, broadcast additive masks with whole masked blocks and fully masked rows,
// softcap, an explicit scale, large logits, f16 and bf16 storage, NaN, empty operands,
// both kernel paths by name, the causal prefill's skipped panels (GQA 4, lengths around
// the blocks and panels, one and two threads, every instruction set the CPU runs), the
// fused forms as one kernel, errors, and a decode loop over a kv_cache equal to attention
// over the whole sequence. (Vulkan: tests/vulkan.)
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "attention_reference.hpp"
#include "checks.hpp"
#include "random.hpp"

namespace {

using namespace kiln_test::attn;
using B = kiln::cpu<>;
using ctx_t = kiln::context<B>;

ctx_t& cpu() {
  static ctx_t c;
  return c;
}

template <class T = float>
kiln::tensor<T, B> rand_tensor(ctx_t& ctx, std::mt19937_64& g, const kiln::shape& s, float lo = -1.0f, float hi = 1.0f) {
  const auto h = kiln_test::uniform(g, static_cast<std::size_t>(s.numel()), lo, hi);
  std::vector<T> t(h.begin(), h.end());
  return kiln::from_host(ctx, s, std::span<const T>(t));
}

template <class T = float>
struct operands {
  dims d;
  kiln::tensor<T, B> q, k, v;
};

template <class T = float>
operands<T> make(ctx_t& ctx, std::mt19937_64& g, const dims& d, float range = 1.0f) {
  return {d, rand_tensor<T>(ctx, g, {d.B, d.Hq, d.Sq, d.D}, -range, range),
          rand_tensor<T>(ctx, g, {d.B, d.Hkv, d.Skv, d.D}, -range, range), rand_tensor<T>(ctx, g, {d.B, d.Hkv, d.Skv, d.Dv})};
}

template <class T>
std::string run(const operands<T>& x, const kiln::attention_options& o, const std::string& what, ctx_t& ctx = cpu()) {
  return check(ctx, x.d, x.q, x.k, x.v, o, what);
}

kiln::attention_options causal(bool c = true) {
  kiln::attention_options o;
  o.causal = c;
  return o;
}

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

// Lengths around the tiles, causal and not, Sq = Skv, Sq < Skv and Sq > Skv; the tiled
// path for long prefills, the rows path for a few queries.
TEST(attention, lengths_causal_and_paths) {
  auto g = kiln_test::rng();
  const dims shapes[] = {{1, 2, 2, 37, 37, 64, 64},   {2, 2, 2, 19, 77, 64, 64},  {1, 2, 2, 70, 33, 64, 64},
                         {1, 1, 1, 1, 1, 64, 64},     {1, 1, 1, 300, 300, 64, 64}, {1, 2, 1, 129, 515, 64, 64},
                         {1, 1, 1, 2, 1000, 64, 64}};
  for (const dims& d : shapes) {
    const auto x = make(cpu(), g, d);
    for (bool c : {false, true}) {
      const std::string v = run(x, causal(c), c ? "causal" : "full");
      EXPECT_TRUE(has(v, "cpu.attention.")) << v;
      if (d.Sq >= 129) {
        EXPECT_TRUE(has(v, "tiled")) << d.str() << " " << v;
      }
      if (d.Sq <= 2) {
        EXPECT_TRUE(has(v, "rows")) << d.str() << " " << v;
      }
    }
  }
}

// The causal prefill of a decoder (GQA 4, as Llama 1B's 32/8) on the tiled path, whose
// query and key panels past the diagonal are skipped: lengths around the 96-query block
// and the panels (12 keys, 32 queries on AVX-512), chunked prefill (Sq < Skv), rows that
// see no key (Sq > Skv), an odd head dim, and one thread and two.
TEST(attention, causal_prefill_skips_the_masked_panels) {
  auto g = kiln_test::rng();
  ctx_t two{kiln::threads{2}};
  const dims shapes[] = {{1, 8, 2, 95, 95, 64, 64},   {1, 8, 2, 96, 96, 64, 64},  {1, 8, 2, 97, 97, 64, 64},
                         {1, 8, 2, 128, 128, 64, 64}, {1, 4, 1, 200, 200, 64, 64}, {1, 4, 1, 100, 250, 64, 64},
                         {1, 4, 2, 150, 120, 64, 64}, {2, 4, 1, 61, 61, 33, 33}, {1, 8, 2, 13, 13, 64, 64}};
  for (const dims& d : shapes) {
    const auto x = make(cpu(), g, d);
    const std::string v = run(x, causal(), "causal prefill");
    if (d.Sq >= 95) {
      EXPECT_TRUE(has(v, "tiled")) << d.str() << " " << v;
    }
    run(make(two, g, d), causal(), "causal prefill, 2 threads", two);
  }
}

namespace {

// The causal prefill on instruction set Arch (its own micro-kernel tile, so other blocks
// and panels), two threads.
template <class Arch>
void causal_prefill_on(const char* name) {
  kiln::context<kiln::cpu<Arch>> c(kiln::threads{2});
  auto g = kiln_test::rng();
  const auto t = [&](const kiln::shape& s) {
    const auto h = kiln_test::uniform(g, static_cast<std::size_t>(s.numel()), -1.0f, 1.0f);
    return kiln::from_host(c, s, std::span<const float>(h));
  };
  for (const dims& d : {dims{1, 8, 2, 97, 97, 64, 64}, dims{1, 4, 1, 100, 250, 64, 64}, dims{1, 4, 2, 150, 120, 64, 64},
                        dims{2, 4, 1, 61, 61, 33, 33}}) {
    const auto q = t({d.B, d.Hq, d.Sq, d.D}), k = t({d.B, d.Hkv, d.Skv, d.D}), v = t({d.B, d.Hkv, d.Skv, d.Dv});
    const std::string variant = check(c, d, q, k, v, causal(), std::string("causal prefill on ") + name);
    EXPECT_TRUE(has(variant, "tiled")) << name << " " << d.str() << " " << variant;
  }
}

}  // namespace

TEST(attention, causal_prefill_on_every_instruction_set_this_cpu_runs) {
#if XSIMD_WITH_SSE2
  causal_prefill_on<xsimd::sse2>("sse2");
#endif
#if XSIMD_WITH_AVX2
  causal_prefill_on<xsimd::avx2>("avx2");
#endif
#if XSIMD_WITH_FMA3_AVX2
  causal_prefill_on<xsimd::fma3<xsimd::avx2>>("fma3<avx2>");
#endif
#if XSIMD_WITH_AVX512F
  causal_prefill_on<xsimd::avx512f>("avx512f");
#endif
}

// Every head dimension the issue names and odd ones, with GQA ratios 1, 2, 4, 8 and MQA.
TEST(attention, head_dims_and_gqa) {
  auto g = kiln_test::rng();
  const index_t ds[] = {32, 64, 80, 96, 128, 256, 7, 33};
  const index_t groups[][2] = {{4, 4}, {4, 2}, {8, 2}, {8, 1}, {4, 1}};
  int i = 0;
  for (index_t D : ds) {
    const auto& hg = groups[i++ % 5];
    run(make(cpu(), g, {1, hg[0], hg[1], 45, 61, D, D}), causal(), "prefill");
    run(make(cpu(), g, {2, hg[0], hg[1], 1, 203, D, D}), causal(false), "decode");
  }
  run(make(cpu(), g, {1, 4, 4, 20, 20, 64, 40}), causal(), "Dv != D");
}

// Decoding over up to 8192 keys: one thread, and two threads where the keys are split
// into chunks whose partial softmaxes are merged.
TEST(attention, decode_long_and_split) {
  auto g = kiln_test::rng();
  run(make(cpu(), g, {1, 8, 2, 1, 8192, 128, 128}), causal(), "decode 8192, GQA 4");
  ctx_t two{kiln::threads{2}};
  const auto x = make(two, g, {1, 1, 1, 1, 8192, 64, 64});
  EXPECT_TRUE(has(run(x, {}, "decode 8192 split over threads", two), "split")) << kiln::kernel_variant(kiln::attention(x.q, x.k, x.v));
  EXPECT_TRUE(has(run(make(two, g, {1, 1, 1, 3, 4099, 64, 64}), causal(), "3 rows causal, split", two), "split"));
}

// Options: softcap, an explicit scale, large logits (~1e4), all stable.
TEST(attention, softcap_scale_and_large_logits) {
  auto g = kiln_test::rng();
  const auto x = make(cpu(), g, {1, 2, 2, 40, 61, 64, 64}, 4.0f);
  kiln::attention_options o = causal();
  o.softcap = 5.0f;
  run(x, o, "softcap 5");
  o.softcap = 0.0f;
  o.scale = 0.5f;
  run(x, o, "scale 0.5");
  kiln::attention_options big;
  big.scale = 2.0f;
  run(make(cpu(), g, {1, 1, 1, 33, 70, 64, 64}, 16.0f), big, "logits ~1e4");
}

// Additive masks broadcast from [Skv], [Sq, Skv] and [B, 1, 1, Skv], with -inf padding over
// whole key tiles and rows whose every key is masked (zeros).
TEST(attention, masks) {
  auto g = kiln_test::rng();
  const dims d{2, 4, 2, 70, 150, 64, 64};
  const auto x = make(cpu(), g, d);
  const float ninf_f = -std::numeric_limits<float>::infinity();
  {  // padding: the last 70 keys of batch 1 masked (a whole 64-key tile and a tail)
    std::vector<float> m(static_cast<std::size_t>(d.B * d.Skv), 0.0f);
    for (index_t j = 80; j < d.Skv; ++j) m[static_cast<std::size_t>(d.Skv + j)] = ninf_f;
    auto mask = kiln::from_host(cpu(), {d.B, 1, 1, d.Skv}, std::span<const float>(m));
    check(cpu(), d, x.q, x.k, x.v, causal(false), "padding mask", mask);
  }
  {  // a bias per (query, key), rows 3 and 40 fully masked
    auto h = kiln_test::uniform(g, static_cast<std::size_t>(d.Sq * d.Skv), -2.0f, 2.0f);
    for (index_t j = 0; j < d.Skv; ++j) {
      h[static_cast<std::size_t>(3 * d.Skv + j)] = ninf_f;
      h[static_cast<std::size_t>(40 * d.Skv + j)] = ninf_f;
    }
    auto mask = kiln::from_host(cpu(), {d.Sq, d.Skv}, std::span<const float>(h));
    check(cpu(), d, x.q, x.k, x.v, causal(), "bias mask, causal", mask);
    const auto one = make(cpu(), g, {1, 2, 2, 1, 150, 64, 64});
    auto mrow = kiln::slice(mask, 0, 3, 4);  // a decode row with every key masked
    check(cpu(), one.d, one.q, one.k, one.v, causal(false), "decode, all keys masked", mrow);
  }
  {  // [Skv]
    auto h = kiln_test::uniform(g, static_cast<std::size_t>(d.Skv), -1.0f, 1.0f);
    auto mask = kiln::from_host(cpu(), {d.Skv}, std::span<const float>(h));
    check(cpu(), d, x.q, x.k, x.v, causal(false), "[Skv] mask", mask);
  }
}

// [B, S, H, D] storage read in place through kiln::transpose(t, 1, 2).
TEST(attention, strided_views) {
  auto g = kiln_test::rng();
  const dims d{2, 4, 2, 23, 131, 64, 64};
  auto qs = rand_tensor(cpu(), g, {d.B, d.Sq, d.Hq, d.D});
  auto ks = rand_tensor(cpu(), g, {d.B, d.Skv, d.Hkv, d.D});
  auto vs = rand_tensor(cpu(), g, {d.B, d.Skv, d.Hkv, d.Dv});
  check(cpu(), d, kiln::transpose(qs, 1, 2), kiln::transpose(ks, 1, 2), kiln::transpose(vs, 1, 2), causal(), "bshd");
  const dims e{1, 4, 2, 1, 300, 64, 64};
  auto qe = rand_tensor(cpu(), g, {e.B, e.Sq, e.Hq, e.D});
  auto ke = rand_tensor(cpu(), g, {e.B, e.Skv, e.Hkv, e.D});
  auto ve = rand_tensor(cpu(), g, {e.B, e.Skv, e.Hkv, e.Dv});
  check(cpu(), e, kiln::transpose(qe, 1, 2), kiln::transpose(ke, 1, 2), kiln::transpose(ve, 1, 2), {}, "bshd decode");
}

// f16 and bf16 storage, accumulated in f32, the result in q's dtype.
TEST(attention, half_and_bfloat16_storage) {
  auto g = kiln_test::rng();
  run(make<kiln::half>(cpu(), g, {1, 4, 2, 50, 77, 64, 64}), causal(), "f16");
  run(make<kiln::half>(cpu(), g, {1, 4, 2, 1, 500, 128, 128}), {}, "f16 decode");
  run(make<kiln::bfloat16>(cpu(), g, {1, 2, 1, 40, 40, 80, 80}), causal(), "bf16");
}

// A NaN in q poisons its own row only; an infinite key score in one row likewise.
TEST(attention, nan_stays_in_its_row) {
  auto g = kiln_test::rng();
  for (const dims& d : {dims{1, 1, 1, 4, 300, 64, 64}, dims{1, 1, 1, 130, 130, 64, 64}}) {
    auto qh = kiln_test::uniform(g, static_cast<std::size_t>(d.Sq * d.D), -1.0f, 1.0f);
    qh[static_cast<std::size_t>(2 * d.D + 5)] = std::numeric_limits<float>::quiet_NaN();
    auto q = kiln::from_host(cpu(), {1, 1, d.Sq, d.D}, std::span<const float>(qh));
    auto k = rand_tensor(cpu(), g, {1, 1, d.Skv, d.D});
    auto v = rand_tensor(cpu(), g, {1, 1, d.Skv, d.Dv});
    kiln::tensor<float, B> y;
    y = kiln::attention(q, k, v);
    const auto got = y.to_host();
    for (index_t i = 0; i < d.Sq; ++i) {
      for (index_t c = 0; c < d.Dv; ++c) {
        const float x = got[static_cast<std::size_t>(i * d.Dv + c)];
        if (i == 2) {
          EXPECT_TRUE(std::isnan(x)) << d.str() << " row " << i << " col " << c;
        } else {
          EXPECT_TRUE(std::isfinite(x)) << d.str() << " row " << i << " col " << c;
        }
      }
    }
  }
}

// Empty operands: no rows, no keys (zeros), no batch.
TEST(attention, empty_operands) {
  auto g = kiln_test::rng();
  run(make(cpu(), g, {1, 2, 2, 0, 10, 64, 64}), {}, "Sq = 0");
  run(make(cpu(), g, {1, 2, 2, 5, 0, 64, 64}), {}, "Skv = 0");
  run(make(cpu(), g, {0, 2, 2, 5, 5, 64, 64}), causal(), "B = 0");
}

// q's expression (the prologue) and elementwise work on the result (the epilogue) run in
// the attention kernel: one kernel in all.
TEST(attention, fused_forms_are_one_kernel) {
  auto g = kiln_test::rng();
  const dims d{1, 4, 2, 33, 90, 64, 64};
  const auto x = make(cpu(), g, d);
  auto gate = rand_tensor(cpu(), g, {d.B, d.Hq, d.Sq, d.Dv});
  kiln::tensor<float, B> plain, fused;
  plain = kiln::attention(x.q * 2.0f, x.k, x.v, causal());
  const auto before = cpu().kernels_launched();
  fused = kiln::attention(x.q * 2.0f, x.k, x.v, causal()) * gate;
  EXPECT_EQ(cpu().kernels_launched() - before, 1u);
  const auto p = plain.to_host(), f = fused.to_host(), gh = gate.to_host();
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_FLOAT_EQ(f[i], p[i] * gh[i]) << i;
  // the prologue against the reference: q * 2 is q with twice the scale
  auto q2 = kiln::empty<float>(cpu(), x.q.shape());
  q2 = x.q * 2.0f;
  check(cpu(), d, q2, x.k, x.v, causal(), "prologue q * 2 (materialised)");
  const auto ref = ref_attention(d, doubles(x.q.to_host()), doubles(x.k.to_host()), doubles(x.v.to_host()), {}, {}, true,
                                 2.0 / 8.0, 0.0, 0.0);
  expect_close(p, ref, "prologue q * 2 (fused)");
}

// Bad operands: errors name the op and every operand's shape.
TEST(attention, errors_name_the_shapes) {
  auto g = kiln_test::rng();
  auto q = rand_tensor(cpu(), g, {1, 6, 8, 64});
  auto k = rand_tensor(cpu(), g, {1, 4, 8, 64});
  auto v = rand_tensor(cpu(), g, {1, 4, 8, 64});
  const auto throws_with = [](auto&& f, const std::vector<std::string>& parts) {
    try {
      f();
      ADD_FAILURE() << "no exception";
    } catch (const kiln::shape_error& e) {
      const std::string m = e.what();
      for (const auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << m << " lacks " << p;
    }
  };
  throws_with([&] { (void)kiln::attention(q, k, v); }, {"kiln::attention", "[1, 6, 8, 64]", "[1, 4, 8, 64]"});
  auto q3 = rand_tensor(cpu(), g, {6, 8, 64});
  throws_with([&] { (void)kiln::attention(q3, k, v); }, {"kiln::attention", "rank 4"});
  auto k32 = rand_tensor(cpu(), g, {1, 4, 8, 32});
  auto q4 = rand_tensor(cpu(), g, {1, 4, 8, 64});
  throws_with([&] { (void)kiln::attention(q4, k32, v); }, {"head dimension", "[1, 4, 8, 32]"});
  auto m = rand_tensor(cpu(), g, {3, 8});
  throws_with([&] { (void)kiln::attention(q4, k, v, m); }, {"mask", "[3, 8]"});
  kiln::attention_options o;
  o.scale = std::numeric_limits<float>::infinity();
  throws_with([&] { (void)kiln::attention(q4, k, v, o); }, {"scale"});
  kiln::attention_options s;
  s.softcap = -1.0f;
  throws_with([&] { (void)kiln::attention(q4, k, v, s); }, {"softcap"});
  kiln::tensor<float, B> none;
  throws_with([&] { (void)kiln::attention(q4, none, v); }, {"k is an empty tensor"});
}

// kv_cache: positions appended one step at a time, attended causally over the views
// of the past, give attention over the whole sequence; appending past capacity throws
// and changes nothing.
TEST(attention, kv_cache_decode_loop_matches_full_attention) {
  auto g = kiln_test::rng();
  const dims d{1, 4, 2, 24, 24, 64, 64};
  const auto x = make(cpu(), g, d);
  kiln::tensor<float, B> full;
  full = kiln::attention(x.q, x.k, x.v, causal());
  const auto want = full.to_host();
  kiln::kv_cache<float, B> cache(cpu(), d.B, d.Hkv, 32, d.D);
  const index_t prefill = 9;
  cache.append(kiln::slice(x.k, 2, 0, prefill), kiln::slice(x.v, 2, 0, prefill));
  std::vector<float> got(want.size());
  {
    kiln::tensor<float, B> y;
    y = kiln::attention(kiln::slice(x.q, 2, 0, prefill), cache.k(), cache.v(), causal());
    const auto h = y.to_host();
    for (index_t h_ = 0; h_ < d.Hq; ++h_)
      for (index_t i = 0; i < prefill; ++i)
        for (index_t c = 0; c < d.Dv; ++c)
          got[static_cast<std::size_t>((h_ * d.Sq + i) * d.Dv + c)] = h[static_cast<std::size_t>((h_ * prefill + i) * d.Dv + c)];
  }
  for (index_t t = prefill; t < d.Sq; ++t) {
    cache.append(kiln::slice(x.k, 2, t, t + 1), kiln::slice(x.v, 2, t, t + 1));
    EXPECT_EQ(cache.size(), t + 1);
    kiln::tensor<float, B> y;
    y = kiln::attention(kiln::slice(x.q, 2, t, t + 1), cache.k(), cache.v(), causal());
    const auto h = y.to_host();
    for (index_t h_ = 0; h_ < d.Hq; ++h_)
      for (index_t c = 0; c < d.Dv; ++c)
        got[static_cast<std::size_t>((h_ * d.Sq + t) * d.Dv + c)] = h[static_cast<std::size_t>(h_ * d.Dv + c)];
  }
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
  // 24 of 32 positions used: 9 more overflow, and nothing changes
  const auto k_before = cache.k().to_host();
  auto k9 = rand_tensor(cpu(), g, {1, 2, 9, 64});
  EXPECT_THROW(cache.append(k9, k9), kiln::shape_error);
  EXPECT_EQ(cache.size(), 24);
  EXPECT_EQ(cache.k().to_host(), k_before);
  auto k8 = rand_tensor(cpu(), g, {1, 2, 8, 64});
  cache.append(k8, k8);
  EXPECT_EQ(cache.size(), 32);
  auto k1 = rand_tensor(cpu(), g, {1, 2, 1, 64});
  EXPECT_THROW(cache.append(k1, k1), kiln::shape_error);
}

// kv_cache sizes: a negative one, or a value_dim below -1 (-1 alone means head_dim), throw
// a kiln::shape_error naming kv_cache (value_dim -7 used to be taken as head_dim silently,
// a negative length gave a bare "kiln::shape: negative extent").
TEST(attention, kv_cache_rejects_bad_sizes) {
  const auto message = [](auto&& f) { return kiln_test::shape_error_of(f); };
  const std::string neg = message([] { kiln::kv_cache<float, B> c(cpu(), 1, 2, -4, 8); });
  EXPECT_TRUE(has(neg, "kiln::kv_cache")) << neg;
  EXPECT_TRUE(has(neg, "max_len -4")) << neg;
  EXPECT_TRUE(has(neg, "on cpu")) << neg;
  EXPECT_TRUE(has(message([] { kiln::kv_cache<float, B> c(cpu(), 1, 2, 4, 8, -7); }), "value_dim -7"));
  EXPECT_TRUE(has(message([] { kiln::kv_cache<float, B> c(cpu(), 1, -2, 4, 8); }), "heads -2"));
  kiln::kv_cache<float, B> dflt(cpu(), 1, 2, 4, 8, -1);
  EXPECT_EQ(dflt.v().shape(), (kiln::shape{1, 2, 0, 8}));
  kiln::kv_cache<float, B> other(cpu(), 1, 2, 4, 8, 16);
  EXPECT_EQ(other.v().shape(), (kiln::shape{1, 2, 0, 16}));
}
