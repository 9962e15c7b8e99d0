// tests/ops/paged/paged_attention_test.cpp — kiln::paged_attention, kiln::paged_write and
// kiln::paged_kv_cache on every backend of the build, against the float64 attention of
// tests/support/attention_reference.hpp (with its derived per-element bound) and against
// kiln::attention over the same keys and values laid out contiguously: random block
// tables (shuffled, non-contiguous blocks, unused entries -1), block sizes that do and do
// not divide the lengths, lengths 0 and 1, GQA and MQA, odd head dims, B = 1 .. 16 of
// mixed lengths, decode and causal prefill chunks, softcap and scale, f32, f16 and bf16; on the
// CPU, decoding on one thread gives the contiguous kernel's bits. Writes through tables
// leave the rest of the pool alone. The pool's accounting: 16 sequences of mixed lengths
// in the memory a contiguous cache takes for 4 of the longest, a full pool reported
// (false, or kiln::out_of_memory), blocks back on release. Bad tables, lengths and shapes:
// kiln errors naming the op, the operands' shapes, dtypes and device (Vulkan: at the next
// synchronisation).
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_reference.hpp"
#include "backends.hpp"
#include "checks.hpp"
#include "random.hpp"

namespace {

using kiln::index_t;
using namespace kiln_test::attn;

/// One batch: the sequences' lengths, the shapes, the options.
struct paged_case {
  index_t Hq = 4, Hkv = 2, Sq = 1, D = 64, Dv = 64, bs = 16;
  std::vector<index_t> lens;
  kiln::attention_options o;
  std::string str() const {
    std::string s = "Hq=" + std::to_string(Hq) + " Hkv=" + std::to_string(Hkv) + " Sq=" + std::to_string(Sq) +
                    " D=" + std::to_string(D) + " Dv=" + std::to_string(Dv) + " bs=" + std::to_string(bs) + " lens=";
    for (index_t l : lens) s += std::to_string(l) + ",";
    return s + (o.causal ? " causal" : "") + (o.softcap > 0 ? " softcap" : "");
  }
};

/// Host data of a case: pools [N, Hkv, bs, D|Dv] of shuffled blocks, tables [B, M]
/// (unused entries -1), q [B, Hq, Sq, D], all values of dtype T.
template <class T>
struct paged_host {
  index_t N = 0, M = 1;
  std::vector<T> k, v, q;
  std::vector<std::int32_t> tables, lens;
};

template <class T>
std::vector<T> random_of(std::mt19937_64& g, std::size_t n) {
  const auto f = kiln_test::uniform(g, n, -1.0f, 1.0f);
  return std::vector<T>(f.begin(), f.end());
}

template <class T>
paged_host<T> make_host(std::mt19937_64& g, const paged_case& c) {
  paged_host<T> h;
  const auto B = static_cast<index_t>(c.lens.size());
  index_t used = 0;
  for (index_t l : c.lens) {
    used += (l + c.bs - 1) / c.bs;
    h.M = std::max(h.M, (l + c.bs - 1) / c.bs + 1);  // one spare column: -1
  }
  h.N = used + 3;  // blocks no sequence owns
  std::vector<std::int32_t> ids(static_cast<std::size_t>(h.N));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), g);
  h.tables.assign(static_cast<std::size_t>(B * h.M), -1);
  std::size_t next = 0;
  for (index_t b = 0; b < B; ++b) {
    for (index_t j = 0; j < (c.lens[std::size_t(b)] + c.bs - 1) / c.bs; ++j) h.tables[std::size_t(b * h.M + j)] = ids[next++];
    h.lens.push_back(static_cast<std::int32_t>(c.lens[std::size_t(b)]));
  }
  h.k = random_of<T>(g, std::size_t(h.N * c.Hkv * c.bs * c.D));
  h.v = random_of<T>(g, std::size_t(h.N * c.Hkv * c.bs * c.Dv));
  h.q = random_of<T>(g, std::size_t(B * c.Hq * c.Sq * c.D));
  return h;
}

/// Sequence b's keys (or values) as a contiguous [1, Hkv, len, W] array.
template <class T>
std::vector<T> gather(const paged_host<T>& h, const std::vector<T>& pool, const paged_case& c, index_t b, index_t W) {
  const index_t len = c.lens[std::size_t(b)];
  std::vector<T> out(std::size_t(c.Hkv * len * W));
  for (index_t hk = 0; hk < c.Hkv; ++hk)
    for (index_t j = 0; j < len; ++j) {
      const index_t blk = h.tables[std::size_t(b * h.M + j / c.bs)];
      for (index_t x = 0; x < W; ++x)
        out[std::size_t((hk * len + j) * W + x)] = pool[std::size_t(((blk * c.Hkv + hk) * c.bs + j % c.bs) * W + x)];
    }
  return out;
}

template <class T, class Bk>
kiln::tensor<T, Bk> up(const std::vector<T>& v, const kiln::shape& s) {
  return kiln::from_host(kiln_test::ctx<Bk>(), s, std::span<const T>(v));
}

/// Runs the case on backend Bk: paged_attention against the float64 reference of each
/// sequence and against kiln::attention over its contiguous keys (both within the
/// reference's bound). Returns the paged result.
template <class T, class Bk>
std::vector<T> check_case(std::mt19937_64& g, const paged_case& c, const std::string& what) {
  const auto h = make_host<T>(g, c);
  const auto B = static_cast<index_t>(c.lens.size());
  const std::string label = what + " " + c.str() + " " + kiln_test::seed_note();
  auto kp = up<T, Bk>(h.k, {h.N, c.Hkv, c.bs, c.D});
  auto vp = up<T, Bk>(h.v, {h.N, c.Hkv, c.bs, c.Dv});
  auto tb = up<std::int32_t, Bk>(h.tables, {B, h.M});
  auto ln = up<std::int32_t, Bk>(h.lens, {B});
  auto q = up<T, Bk>(h.q, {B, c.Hq, c.Sq, c.D});
  kiln::tensor<T, Bk> y;
  auto& ctx = kiln_test::ctx<Bk>();
  const std::uint64_t before = ctx.kernels_launched();
  y = kiln::paged_attention(q, kp, vp, tb, ln, c.o);
  EXPECT_EQ(ctx.kernels_launched() - before, B * c.Hq * c.Sq * c.Dv > 0 ? 1u : 0u) << label;
  EXPECT_EQ(y.shape(), (kiln::shape{B, c.Hq, c.Sq, c.Dv})) << label;
  const std::vector<T> got = y.to_host();
  const double scale = c.o.scale ? *c.o.scale : 1.0 / std::sqrt(double(c.D));
  const double round = std::is_same_v<T, kiln::half> ? 0x1p-11 : std::is_same_v<T, kiln::bfloat16> ? 0x1p-8 : 0.0;
  const index_t per = c.Hq * c.Sq * c.Dv;
  for (index_t b = 0; b < B; ++b) {
    const index_t len = c.lens[std::size_t(b)];
    const dims d{1, c.Hq, c.Hkv, c.Sq, len, c.D, c.Dv};
    const std::vector<T> qb(h.q.begin() + b * c.Hq * c.Sq * c.D, h.q.begin() + (b + 1) * c.Hq * c.Sq * c.D);
    const auto kb = gather(h, h.k, c, b, c.D), vb = gather(h, h.v, c, b, c.Dv);
    const auto ref = ref_attention(d, doubles(qb), doubles(kb), doubles(vb), {}, {}, c.o.causal, scale, c.o.softcap, round);
    const std::vector<T> mine(got.begin() + b * per, got.begin() + (b + 1) * per);
    expect_close(mine, ref, label + " sequence " + std::to_string(b) + " vs float64");
    // the contiguous kernel on the same data: within the same bound of the reference
    kiln::tensor<T, Bk> yc;
    yc = kiln::attention(up<T, Bk>(qb, {1, c.Hq, c.Sq, c.D}), up<T, Bk>(kb, {1, c.Hkv, len, c.D}),
                         up<T, Bk>(vb, {1, c.Hkv, len, c.Dv}), c.o);
    expect_close(yc.to_host(), ref, label + " sequence " + std::to_string(b) + " contiguous vs float64");
  }
  return got;
}

template <class B>
class paged_attention_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(paged_attention_test, kiln_test::backend_types);

kiln::attention_options causal_opts() {
  kiln::attention_options o;
  o.causal = true;
  return o;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

// Decoding: B = 1 .. 16 sequences of mixed lengths (0, 1, around and past block
// boundaries), block sizes 16 and 7, GQA 4:2, 8:2 and MQA 6:1, head dims 64, 33 and 128.
TYPED_TEST(paged_attention_test, decode_matches_contiguous_and_reference) {
  auto g = kiln_test::rng();
  std::uniform_int_distribution<index_t> len(0, 300);
  for (index_t B : {1, 4, 16}) {
    for (const auto& [Hq, Hkv, D, bs] : std::vector<std::array<index_t, 4>>{{4, 2, 64, 16}, {8, 2, 33, 7}, {6, 1, 128, 16}}) {
      paged_case c;
      c.Hq = Hq, c.Hkv = Hkv, c.D = c.Dv = D, c.bs = bs;
      for (index_t b = 0; b < B; ++b) c.lens.push_back(b == 0 ? (B == 1 ? 257 : 0) : b == 1 ? 1 : b == 2 ? bs : len(g));
      c.o.causal = B % 2 == 0;
      check_case<float, TypeParam>(g, c, "decode f32");
    }
  }
}

// A chunk of prefill (Sq > 1) over lengths that include the chunk, causal relative to
// each sequence's length; a length below the chunk leaves its first queries no key
// (zeros); Dv other than D.
TYPED_TEST(paged_attention_test, prefill_chunk_causal) {
  auto g = kiln_test::rng();
  paged_case c;
  c.Hq = 4, c.Hkv = 2, c.Sq = 9, c.D = 48, c.Dv = 40, c.bs = 8;
  c.lens = {9, 70, 5, 33};
  c.o.causal = true;
  check_case<float, TypeParam>(g, c, "prefill chunk");
  c.o.causal = false;
  c.lens = {1, 70};
  check_case<float, TypeParam>(g, c, "chunk, not causal");
}

// f16 and bf16 storage (q, pools, result), softcap and an explicit scale.
TYPED_TEST(paged_attention_test, f16_bf16_softcap_scale) {
  auto g = kiln_test::rng();
  paged_case c;
  c.Hq = 8, c.Hkv = 4, c.D = c.Dv = 64, c.bs = 16;
  c.lens = {100, 17, 0, 64, 300};
  c.o.causal = true;
  check_case<kiln::half, TypeParam>(g, c, "f16");
  check_case<kiln::bfloat16, TypeParam>(g, c, "bf16");
  c.o.softcap = 5.0f;
  c.o.scale = 0.3f;
  check_case<float, TypeParam>(g, c, "softcap, scale");
}

// The epilogue and the prologue fuse: one kernel for paged_attention(q * 2) * 0.5.
TYPED_TEST(paged_attention_test, fused_one_kernel) {
  auto g = kiln_test::rng();
  paged_case c;
  c.lens = {20, 3};
  const auto h = make_host<float>(g, c);
  auto kp = up<float, TypeParam>(h.k, {h.N, c.Hkv, c.bs, c.D});
  auto vp = up<float, TypeParam>(h.v, {h.N, c.Hkv, c.bs, c.Dv});
  auto tb = up<std::int32_t, TypeParam>(h.tables, {2, h.M});
  auto ln = up<std::int32_t, TypeParam>(h.lens, {2});
  auto q = up<float, TypeParam>(h.q, {2, c.Hq, 1, c.D});
  kiln::tensor<float, TypeParam> plain, fused;
  plain = kiln::paged_attention(q, kp, vp, tb, ln);
  auto& ctx = kiln_test::ctx<TypeParam>();
  const std::uint64_t before = ctx.kernels_launched();
  kiln::attention_options half_scale;
  half_scale.scale = 0.0625f;
  fused = kiln::paged_attention(q * 2.0f, kp, vp, tb, ln, half_scale) * 0.5f;
  EXPECT_EQ(ctx.kernels_launched() - before, 1u);
  const auto a = plain.to_host(), b = fused.to_host();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i] * 0.5f, b[i], 1e-5f) << i;
}

// On the CPU, decoding on one thread runs the contiguous kernel's rows path without a key
// split: the same tiles, dot products and softmax, so the same bits.
TEST(paged_attention_cpu, decode_bitwise_equal_to_contiguous_on_one_thread) {
  using Bk = kiln::cpu<>;
  kiln::context<Bk> one{kiln::threads{1}};
  auto g = kiln_test::rng();
  paged_case c;
  c.Hq = 8, c.Hkv = 2, c.D = c.Dv = 64, c.bs = 16;
  c.lens = {700, 1, 33, 256};
  c.o.causal = true;
  const auto h = make_host<float>(g, c);
  const auto B = static_cast<index_t>(c.lens.size());
  auto put = [&](const auto& v, const kiln::shape& s) {
    using T = typename std::remove_cvref_t<decltype(v)>::value_type;
    return kiln::from_host(one, s, std::span<const T>(v));
  };
  kiln::tensor<float, Bk> y;
  y = kiln::paged_attention(put(h.q, {B, c.Hq, 1, c.D}), put(h.k, {h.N, c.Hkv, c.bs, c.D}),
                            put(h.v, {h.N, c.Hkv, c.bs, c.Dv}), put(h.tables, {B, h.M}), put(h.lens, {B}), c.o);
  const auto got = y.to_host();
  const index_t per = c.Hq * c.Dv;
  for (index_t b = 0; b < B; ++b) {
    const index_t len = c.lens[std::size_t(b)];
    const std::vector<float> qb(h.q.begin() + b * c.Hq * c.D, h.q.begin() + (b + 1) * c.Hq * c.D);
    kiln::tensor<float, Bk> yc;
    yc = kiln::attention(put(qb, {1, c.Hq, 1, c.D}), put(gather(h, h.k, c, b, c.D), {1, c.Hkv, len, c.D}),
                         put(gather(h, h.v, c, b, c.Dv), {1, c.Hkv, len, c.Dv}), c.o);
    const auto want = yc.to_host();
    for (index_t i = 0; i < per; ++i) {
      ASSERT_EQ(got[std::size_t(b * per + i)], want[std::size_t(i)]) << "sequence " << b << " element " << i;
    }
  }
}

// One sequence of a long context and one kv head on two threads: the keys are split in
// chunks and the partial softmaxes merged (the contiguous kernel's flash-decoding); a
// second, short sequence leaves most chunks without keys. Against the float64 reference.
TEST(paged_attention_cpu, key_split_long_context) {
  using Bk = kiln::cpu<>;
  kiln::context<Bk> two{kiln::threads{2}};
  auto g = kiln_test::rng();
  paged_case c;
  c.Hq = 4, c.Hkv = 1, c.D = c.Dv = 64, c.bs = 16;  // enough work for two threads, two tasks
  c.lens = {3001, 5};
  c.o.causal = true;
  const auto h = make_host<float>(g, c);
  const index_t B = 2;
  auto put = [&](const auto& v, const kiln::shape& s) {
    using T = typename std::remove_cvref_t<decltype(v)>::value_type;
    return kiln::from_host(two, s, std::span<const T>(v));
  };
  auto q = put(h.q, {B, c.Hq, 1, c.D});
  auto kp = put(h.k, {h.N, c.Hkv, c.bs, c.D}), vp = put(h.v, {h.N, c.Hkv, c.bs, c.Dv});
  auto tb = put(h.tables, {B, h.M}), ln = put(h.lens, {B});
  const std::string variant = kiln::kernel_variant(kiln::paged_attention(q, kp, vp, tb, ln, c.o));
  EXPECT_TRUE(has(variant, "cpu.paged_attention.rows split ")) << variant;
  kiln::tensor<float, Bk> y;
  y = kiln::paged_attention(q, kp, vp, tb, ln, c.o);
  const auto got = y.to_host();
  const index_t per = c.Hq * c.Dv;
  for (index_t b = 0; b < B; ++b) {
    const index_t len = c.lens[std::size_t(b)];
    const std::vector<float> qb(h.q.begin() + b * c.Hq * c.D, h.q.begin() + (b + 1) * c.Hq * c.D);
    const auto ref = ref_attention({1, c.Hq, c.Hkv, 1, len, c.D, c.Dv}, doubles(qb), doubles(gather(h, h.k, c, b, c.D)),
                                   doubles(gather(h, h.v, c, b, c.Dv)), {}, {}, true, 1.0 / std::sqrt(double(c.D)), 0.0, 0.0);
    expect_close(std::vector<float>(got.begin() + b * per, got.begin() + (b + 1) * per), ref,
                 variant + " sequence " + std::to_string(b) + " " + kiln_test::seed_note());
  }
}

// paged_write puts each row at its position through the table and leaves every other
// pool row as it was; a prologue (here a scaled expression) is evaluated on the way.
TYPED_TEST(paged_attention_test, write_through_tables) {
  auto g = kiln_test::rng();
  const index_t N = 9, Hkv = 3, bs = 4, D = 5, S = 6;
  auto pool = kiln::full(kiln_test::ctx<TypeParam>(), {N, Hkv, bs, D}, -7.0f);
  // sequence 0 writes positions 2 .. 7 (its blocks 5, 1), sequence 1 positions 9 .. 14
  // (its blocks 3, 8); the entries of positions not written (-1, 4, 2) are not read
  const std::vector<std::int32_t> full_tables = {5, 1, -1, -1, 4, 2, 3, 8}, starts = {2, 9};
  std::vector<float> rows = kiln_test::uniform(g, std::size_t(2 * Hkv * S * D));
  auto x = up<float, TypeParam>(rows, {2, Hkv, S, D});
  auto tb = up<std::int32_t, TypeParam>(full_tables, {2, 4});
  auto st = up<std::int32_t, TypeParam>(starts, {2});
  auto& ctx = kiln_test::ctx<TypeParam>();
  const std::uint64_t before = ctx.kernels_launched();
  kiln::paged_write(pool, x * 2.0f, tb, st);
  EXPECT_EQ(ctx.kernels_launched() - before, 1u);
  std::vector<float> want(std::size_t(N * Hkv * bs * D), -7.0f);
  for (index_t b = 0; b < 2; ++b)
    for (index_t h = 0; h < Hkv; ++h)
      for (index_t s = 0; s < S; ++s) {
        const index_t t = starts[std::size_t(b)] + s, blk = full_tables[std::size_t(b * 4 + t / bs)];
        for (index_t d = 0; d < D; ++d)
          want[std::size_t(((blk * Hkv + h) * bs + t % bs) * D + d)] = 2.0f * rows[std::size_t(((b * Hkv + h) * S + s) * D + d)];
      }
  EXPECT_EQ(pool.to_host(), want);
  // an f16 pool, the rows cast on the way (the prologue)
  auto hpool = kiln::full(kiln_test::ctx<TypeParam>(), {N, Hkv, bs, D}, kiln::half(-7.0f));
  kiln::paged_write(hpool, kiln::cast<kiln::half>(x * 2.0f), tb, st);
  const std::vector<kiln::half> got = hpool.to_host();
  for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(float(got[i]), float(kiln::half(want[i]))) << i;
}

// A decoding loop over a paged_kv_cache (prompts of different lengths written as one
// chunk each, then steps of one row for all of them together) equals, at every step,
// attention over the same keys in a contiguous kv_cache per sequence.
TYPED_TEST(paged_attention_test, cache_decode_loop_matches_kv_cache) {
  using Bk = TypeParam;
  auto g = kiln_test::rng();
  auto& ctx = kiln_test::ctx<Bk>();
  const index_t Hq = 4, Hkv = 2, D = 32, layers = 2;
  const std::vector<index_t> prompts = {5, 17, 1};
  kiln::paged_kv_cache<float, Bk> cache(ctx, {.layers = layers, .kv_heads = Hkv, .head_dim = D, .block_size = 8, .blocks = 40});
  std::vector<typename kiln::paged_kv_cache<float, Bk>::sequence> seqs;
  std::vector<std::vector<kiln::kv_cache<float, Bk>>> ref(prompts.size());
  for (index_t p : prompts) {
    seqs.push_back(cache.add());
    for (index_t l = 0; l < layers; ++l) ref[seqs.size() - 1].emplace_back(ctx, 1, Hkv, 64, D);
    (void)p;
  }
  auto rnd = [&](const kiln::shape& s) { return up<float, Bk>(kiln_test::uniform(g, std::size_t(s.numel()), -1.0f, 1.0f), s); };
  // prompts: one sequence a step, a chunk each
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const index_t S = prompts[i];
    cache.append(seqs[i], S);
    const auto batch = cache.batch(std::span(&seqs[i], 1), S);
    for (index_t l = 0; l < layers; ++l) {
      auto k = rnd({1, Hkv, S, D}), v = rnd({1, Hkv, S, D}), q = rnd({1, Hq, S, D});
      cache.write(l, k, v, batch);
      ref[i][std::size_t(l)].append(k, v);
      kiln::tensor<float, Bk> y, yc;
      y = kiln::paged_attention(q, cache.k(l), cache.v(l), batch.tables, batch.lens, causal_opts());
      yc = kiln::attention(q, ref[i][std::size_t(l)].k(), ref[i][std::size_t(l)].v(), causal_opts());
      const auto a = y.to_host(), b = yc.to_host();
      for (std::size_t e = 0; e < a.size(); ++e) ASSERT_NEAR(a[e], b[e], 2e-6f) << "prompt " << i << " layer " << l;
    }
  }
  // decode steps: all sequences at once
  const auto B = static_cast<index_t>(seqs.size());
  for (int step = 0; step < 12; ++step) {
    for (auto s : seqs) cache.append(s, 1);
    const auto batch = cache.batch(seqs, 1);
    for (index_t l = 0; l < layers; ++l) {
      auto k = rnd({B, Hkv, 1, D}), v = rnd({B, Hkv, 1, D}), q = rnd({B, Hq, 1, D});
      cache.write(l, k, v, batch);
      kiln::tensor<float, Bk> y;
      y = kiln::paged_attention(q, cache.k(l), cache.v(l), batch.tables, batch.lens, causal_opts());
      const auto a = y.to_host();
      for (index_t b = 0; b < B; ++b) {
        auto& kc = ref[std::size_t(b)][std::size_t(l)];
        kc.append(kiln::slice(k, 0, b, b + 1), kiln::slice(v, 0, b, b + 1));
        kiln::tensor<float, Bk> yc;
        yc = kiln::attention(kiln::slice(q, 0, b, b + 1), kc.k(), kc.v(), causal_opts());
        const auto w = yc.to_host();
        for (std::size_t e = 0; e < w.size(); ++e) {
          ASSERT_NEAR(a[std::size_t(b) * w.size() + e], w[e], 2e-6f) << "step " << step << " sequence " << b;
        }
      }
    }
  }
  EXPECT_EQ(cache.length(seqs[1]), 17 + 12);
  EXPECT_EQ(cache.block_table(seqs[1]).size(), std::size_t((17 + 12 + 7) / 8));
}

// The acceptance point: 16 sequences of mixed lengths fit in the memory a
// contiguous cache ([4, Hkv, longest, D] keys and values per layer) needs for 4 of the
// longest; the 17th long one does not (try_append false, nothing changed; append throws
// kiln::out_of_memory); released sequences give their blocks back and it fits.
TYPED_TEST(paged_attention_test, pool_accounting) {
  using Bk = TypeParam;
  auto& ctx = kiln_test::ctx<Bk>();
  const index_t layers = 2, Hkv = 2, D = 16, longest = 2048;
  const std::vector<index_t> lens = {2048, 1500, 1023, 800, 640, 512, 400, 333, 256, 200, 129, 100, 64, 31, 16, 1};
  std::size_t contiguous = 0;
  {
    std::vector<kiln::kv_cache<kiln::half, Bk>> c;
    for (index_t l = 0; l < layers; ++l) {
      c.emplace_back(ctx, 4, Hkv, longest, D);
      const kiln::shape ks = c.back().k().shape();  // [4, Hkv, 0, D]: capacity() positions allocated
      contiguous += std::size_t(2 * ks[0] * ks[1] * c.back().capacity() * ks[3]) * sizeof(kiln::half);
    }
  }
  EXPECT_EQ(contiguous, std::size_t(layers * 2 * 4 * Hkv * longest * D) * sizeof(kiln::half));
  kiln::paged_kv_cache<kiln::half, Bk> cache(ctx, {.layers = layers, .kv_heads = Hkv, .head_dim = D, .block_size = 16,
                                                   .bytes = contiguous});
  EXPECT_LE(cache.bytes(), contiguous);
  EXPECT_EQ(cache.num_blocks(), 4 * longest / 16);
  std::vector<typename kiln::paged_kv_cache<kiln::half, Bk>::sequence> s;
  index_t blocks = 0;
  for (index_t l : lens) {
    s.push_back(cache.add());
    ASSERT_TRUE(cache.try_append(s.back(), l)) << "length " << l;
    blocks += (l + 15) / 16;
  }
  EXPECT_EQ(cache.sequences(), 16);
  EXPECT_EQ(cache.used_blocks(), blocks);
  EXPECT_EQ(cache.free_blocks(), cache.num_blocks() - blocks);
  // every block owned once
  std::vector<int> owners(std::size_t(cache.num_blocks()), 0);
  for (auto q : s)
    for (std::int32_t b : cache.block_table(q)) ++owners[std::size_t(b)];
  for (int o : owners) EXPECT_LE(o, 1);
  // a 17th sequence of the longest length: no room
  const auto extra = cache.add();
  EXPECT_FALSE(cache.try_append(extra, longest));
  EXPECT_EQ(cache.length(extra), 0);
  EXPECT_EQ(cache.used_blocks(), blocks);
  const std::string msg = kiln_test::message_of<kiln::out_of_memory>([&] { cache.append(extra, longest); });
  EXPECT_TRUE(has(msg, "kiln::paged_kv_cache::append: the pool is full")) << msg;
  EXPECT_TRUE(has(msg, "128 more blocks of 16")) << msg;
  // sequences end: their blocks return
  cache.release(s[0]);
  cache.release(s[1]);
  EXPECT_EQ(cache.used_blocks(), blocks - 128 - 94);
  EXPECT_TRUE(cache.try_append(extra, longest));
  cache.truncate(extra, 100);
  EXPECT_EQ(cache.block_table(extra).size(), 7u);
  for (std::size_t i = 2; i < s.size(); ++i) cache.release(s[i]);
  cache.release(extra);
  EXPECT_EQ(cache.used_blocks(), 0);
  EXPECT_EQ(cache.sequences(), 0);
  EXPECT_THROW(cache.length(extra), kiln::index_error);
}

// Bad input: a table entry outside the pool, a length past the table, a write past it,
// mismatched shapes; each error names the op, the operands' dtypes and shapes, and the
// device. Vulkan reports table and length errors at the next synchronisation, and the
// context stays usable.
TYPED_TEST(paged_attention_test, bad_tables_lengths_and_shapes) {
  using Bk = TypeParam;
  auto g = kiln_test::rng();
  paged_case c;
  c.lens = {20, 35};
  auto h = make_host<float>(g, c);
  const index_t B = 2;
  auto kp = up<float, Bk>(h.k, {h.N, c.Hkv, c.bs, c.D});
  auto vp = up<float, Bk>(h.v, {h.N, c.Hkv, c.bs, c.Dv});
  auto q = up<float, Bk>(h.q, {B, c.Hq, 1, c.D});
  auto ln = up<std::int32_t, Bk>(h.lens, {B});
  const std::string device = kiln_test::ctx<Bk>().device_name();
  const auto attend = [&](const std::vector<std::int32_t>& tables, const std::vector<std::int32_t>& lens) {
    kiln::tensor<float, Bk> y;
    y = kiln::paged_attention(q, kp, vp, up<std::int32_t, Bk>(tables, {B, h.M}), up<std::int32_t, Bk>(lens, {B}));
    (void)y.to_host();  // Vulkan: the synchronisation that reports
  };
  auto bad = h.tables;
  bad[std::size_t(h.M + 2)] = static_cast<std::int32_t>(h.N + 5);  // sequence 1's third block (positions 32 .. 34)
  std::string msg = kiln_test::message_of<kiln::index_error>([&] { attend(bad, h.lens); });
  EXPECT_TRUE(has(msg, "kiln::paged_attention: block table entry [1, 2] is " + std::to_string(h.N + 5))) << msg;
  EXPECT_TRUE(has(msg, "outside the pool's " + std::to_string(h.N) + " blocks")) << msg;
  EXPECT_TRUE(has(msg, "k pool f32[" + std::to_string(h.N) + ", 2, 16, 64]")) << msg;
  EXPECT_TRUE(has(msg, "block tables i32[2, " + std::to_string(h.M) + "]")) << msg;
  EXPECT_TRUE(has(msg, device)) << msg;
  bad = h.tables;
  bad[std::size_t(h.M + 2)] = -3;
  EXPECT_TRUE(has(kiln_test::message_of<kiln::index_error>([&] { attend(bad, h.lens); }), "is -3, outside"));
  // an entry past the length is never read: -1 there is fine
  EXPECT_NO_THROW(attend(h.tables, h.lens));
  auto long_lens = h.lens;
  long_lens[0] = static_cast<std::int32_t>(h.M * c.bs + 1);
  msg = kiln_test::message_of<kiln::index_error>([&] { attend(h.tables, long_lens); });
  EXPECT_TRUE(has(msg, "kiln::paged_attention: sequence 0 has length " + std::to_string(h.M * c.bs + 1))) << msg;
  EXPECT_TRUE(has(msg, "outside 0 .. " + std::to_string(h.M * c.bs))) << msg;
  EXPECT_TRUE(has(msg, device)) << msg;
  // writes: a start whose rows pass the table, an entry outside the pool
  auto rows = up<float, Bk>(std::vector<float>(std::size_t(B * c.Hkv * 3 * c.D), 1.0f), {B, c.Hkv, 3, c.D});
  const auto write = [&](const std::vector<std::int32_t>& tables, const std::vector<std::int32_t>& starts) {
    kiln::paged_write(kp, rows, up<std::int32_t, Bk>(tables, {B, h.M}), up<std::int32_t, Bk>(starts, {B}));
    (void)kp.to_host();
  };
  msg = kiln_test::message_of<kiln::index_error>([&] { write(h.tables, {0, static_cast<std::int32_t>(h.M * c.bs - 2)}); });
  EXPECT_TRUE(has(msg, "kiln::paged_write: sequence 1 starts at position " + std::to_string(h.M * c.bs - 2))) << msg;
  EXPECT_TRUE(has(msg, "its 3 rows do not fit")) << msg;
  bad = h.tables;
  bad[0] = static_cast<std::int32_t>(h.N);
  msg = kiln_test::message_of<kiln::index_error>([&] { write(bad, {0, 0}); });
  EXPECT_TRUE(has(msg, "kiln::paged_write: block table entry [0, 0]")) << msg;
  // shapes, at the call on every backend
  auto k33 = up<float, Bk>(std::vector<float>(std::size_t(h.N * c.Hkv * c.bs * 33)), {h.N, c.Hkv, c.bs, 33});
  msg = kiln_test::shape_error_of([&] { (void)kiln::paged_attention(q, k33, vp, up<std::int32_t, Bk>(h.tables, {B, h.M}), ln); });
  EXPECT_TRUE(has(msg, "kiln::paged_attention: q and the k pool differ in head dimension")) << msg;
  EXPECT_TRUE(has(msg, "q is f32[2, 4, 1, 64]")) << msg;
  EXPECT_TRUE(has(msg, device)) << msg;
  msg = kiln_test::shape_error_of([&] { (void)kiln::paged_attention(q, kp, vp, up<std::int32_t, Bk>(h.tables, {B, h.M}), up<std::int32_t, Bk>(h.lens, {1, 2})); });
  EXPECT_TRUE(has(msg, "the lengths must be [B]")) << msg;
  msg = kiln_test::shape_error_of([&] { kiln::paged_write(kp, kiln::slice(kp, 0, 0, 1), up<std::int32_t, Bk>(h.tables, {B, h.M}), ln); });
  EXPECT_TRUE(has(msg, "kiln::paged_write")) << msg;
  // the context is still usable
  EXPECT_NO_THROW(attend(h.tables, h.lens));
}
