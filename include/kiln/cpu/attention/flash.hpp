// kiln/cpu/attention/flash.hpp — kiln::attention on the CPU: flash-style, keys in tiles
// with an online softmax; the Sq x Skv scores are never stored (per task a tile of
// rows x 64..256 scores lives in L1/L2).
//
// Rows are (query head, query) pairs of one (batch, kv head) group: the Hq / Hkv query
// heads that share a kv head sit together, so a block of rows reads each K/V tile once
// (grouped-query attention and decoding read the cache once per kv head, not per query
// head). Blocks are contiguous runs of rows, so q is loaded (its prologue evaluated) and
// the result stored (its epilogue applied) one block at a time through structural_io.
// Paths (kiln::kernel_variant names them):
//   tiled  blocks of 8 MR rows (48 on AVX2): q k^T on the GEMM micro-kernel (q packed
//          once per block in MR-row panels, each 64-key tile of k packed in NR-key
//          panels), the softmax update on the score tile, then p v on the micro-kernel
//          (p packed, v read in place when its rows are contiguous).
//   rows   fewer than 2 MR rows per block (decoding, Sq = 1, or a few queries): dot
//          products of q rows with k rows read in place, v accumulated row by row; both
//          stream K/V once at memory speed, nothing packed.
// When the blocks are fewer than the threads can use and the keys are many (decoding a
// long context), keys are also split into chunks: each task keeps its partial softmax
// (max, sum, unnormalised output) and a second pass merges them in order (flash-decoding).
// Causal blocks skip the key tiles no row of theirs sees; tiles every row sees fully are
// not masked element by element; in a tile across the diagonal the tiled path computes
// q k^T only for the key panels (MR keys) a query panel (NR queries) sees, and p v only
// up to the last key an MR-query panel sees (with 96-query blocks: about a quarter of the
// products of a 128-token causal prefill, a tenth of a 512-token one).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <numeric>
#include <string>
#include <type_traits>

#include "kiln/cpu/gemm/kernel.hpp"
#include "kiln/cpu/gemm/pack.hpp"
#include "kiln/cpu/reduce/row.hpp"
#include "kiln/cpu/scheduler.hpp"
#include "kiln/cpu/structural.hpp"
#include "kiln/ops/attention/attention.hpp"
#include "kiln/ops/elementwise/tanh.hpp"

namespace kiln::detail {
namespace cpu_attn {

using cpu_gemm::fvec;
using cpu_gemm::tile;

inline constexpr float neg_inf = -std::numeric_limits<float>::infinity();

/// The node's operands as pointers and strides, and where the work splits.
template <class S>
struct operands {
  using KT = std::remove_cvref_t<decltype(std::get<0>(std::declval<S>().params).t.data()[0])>;
  using VT = std::remove_cvref_t<decltype(std::get<1>(std::declval<S>().params).t.data()[0])>;
  static constexpr bool has_mask = S::op_type::has_mask;

  attention_dims d;
  const KT* k = nullptr;
  const VT* v = nullptr;
  index_t ks[4] = {}, vs[4] = {};  // strides of b, h, s, d
  const void* mask = nullptr;
  std::array<index_t, 4> ms{};     // the mask's strides as [B, Hq, Sq, Skv]
  float softcap = 0.0f;
  bool causal = false;

  explicit operands(const S& s) : d(attention_dims_of(s)) {
    const auto& kt = std::get<0>(s.params).t;
    const auto& vt = std::get<1>(s.params).t;
    k = kt.data();
    v = vt.data();
    for (int i = 0; i < 4; ++i) {
      ks[i] = kt.strides()[i];
      vs[i] = vt.strides()[i];
    }
    if constexpr (has_mask) {
      const auto& mt = std::get<2>(s.params).t;
      mask = mt.data();
      ms = attention_mask_strides(mt);
    }
    softcap = s.op.softcap;
    causal = s.op.causal;
  }
  /// Query rows per (batch, kv head) group.
  index_t group_rows() const noexcept { return d.group() * d.Sq; }
};

/// How the work is cut: groups x blocks of rows x key chunks.
struct plan {
  bool tiled = false;
  index_t rows = 1;        // rows per block (the last block of a head may have fewer)
  index_t heads = 1;       // query heads per block (when Sq < rows: whole heads)
  index_t qblocks = 1;     // blocks per query head (when Sq >= rows)
  index_t hblocks = 1;     // blocks of heads per group
  index_t splits = 1;      // key chunks
  index_t chunk = 0;       // keys per chunk
  index_t key_tile = 64;   // keys per tile
  index_t blocks() const noexcept { return hblocks * qblocks; }
};

/// Threads for the work (the GEMM's rule: at least 2^18 multiply-adds each). Causal:
/// query i of Sq sees min(Skv, Skv - Sq + i + 1) keys (the queries are the last Sq
/// positions), about half of them when Sq = Skv and all of them for one query (decoding).
template <class S>
int attention_threads(const operands<S>& op, int num_threads) {
  double work = op.d.macs();
  if (op.causal && op.d.Skv > 0 && op.d.Sq > 0) {
    const double sq = double(std::min(op.d.Sq, op.d.Skv)), skv = double(op.d.Skv);
    work *= (sq * (skv - sq) + sq * (sq + 1) / 2) / (sq * skv);
  }
  return static_cast<int>(std::clamp(work / double(1 << 18), 1.0, double(std::max(1, num_threads))));
}

template <class A>
inline constexpr index_t tiled_rows =
    std::lcm(tile<A>::MR, tile<A>::NR) * std::max(1, 48 / std::lcm(tile<A>::MR, tile<A>::NR));

template <class A, class S>
plan make_plan(const operands<S>& op, int threads) {
  const attention_dims& d = op.d;
  plan p;
  const index_t R = op.group_rows();
  p.tiled = R >= 2 * tile<A>::MR && d.Sq > 1;
  const index_t want = p.tiled ? tiled_rows<A> : std::max<index_t>(R, 1);
  if (d.Sq >= want) {
    p.rows = want;
    p.qblocks = (d.Sq + want - 1) / want;
    p.heads = 1;
    p.hblocks = d.group();
  } else {
    p.heads = std::max<index_t>(1, std::min(d.group(), want / std::max<index_t>(d.Sq, 1)));
    p.rows = p.heads * d.Sq;
    p.hblocks = (d.group() + p.heads - 1) / p.heads;
    p.qblocks = 1;
  }
  p.key_tile = p.tiled ? 16 * tile<A>::MR : 256;
  const index_t tasks = d.B * d.Hkv * p.blocks();
  p.chunk = std::max<index_t>(d.Skv, 1);
  // few tasks and many keys: split the keys so that every thread has a few tasks
  if (threads > 1 && tasks < 4 * threads && d.Skv >= 4 * p.key_tile) {
    const index_t want_splits = std::min<index_t>((4 * threads + tasks - 1) / tasks, d.Skv / (2 * p.key_tile));
    if (want_splits > 1) {
      p.chunk = ((d.Skv + want_splits - 1) / want_splits + p.key_tile - 1) / p.key_tile * p.key_tile;
      p.splits = (d.Skv + p.chunk - 1) / p.chunk;
    }
  }
  return p;
}

template <class A>
std::string plan_name(const plan& p) {
  std::string s = p.tiled ? "cpu.attention.tiled " + std::to_string(tiled_rows<A>) + "x" + std::to_string(p.key_tile) : "cpu.attention.rows";
  if (p.splits > 1) s += " split " + std::to_string(p.splits);
  return s;
}

/// One block's running softmax: per row the max m, the sum l of exp(s - m), and the
/// unnormalised output o (rows x ldo floats).
struct block_state {
  float* m;
  float* l;
  float* o;
  index_t ldo;
};

/// The softmax update of one row of n scores (n a multiple of the vector width; scores
/// past the tile are -inf): s becomes p = exp(s - m'), m and l are updated; returns the
/// factor the row's output must be scaled by (1 when unchanged).
template <class A>
inline float update_row(float* s, index_t n, float& m, float& l) {
  using V = fvec<A>;
  constexpr index_t L = tile<A>::L;
  V mv(neg_inf);
  bool nan = false;
  float mt;
  if constexpr (simd::enabled<A>) {
    auto bad = xsimd::isnan(mv);  // not mv != mv: xsimd's != is the ordered compare on x86
    for (index_t j = 0; j < n; j += L) {
      const V x = cpu_gemm::vload<A>(s + j);
      bad = bad || xsimd::isnan(x);
      mv = xsimd::max(mv, x);
    }
    nan = xsimd::any(bad);
    alignas(64) float lanes[L];
    mv.store_aligned(lanes);
    mt = lanes[0];
    for (index_t j = 1; j < L; ++j) mt = std::max(mt, lanes[j]);
  } else {
    for (index_t j = 0; j < n; ++j) {
      nan = nan || s[j] != s[j];
      mv = std::max(mv, s[j]);
    }
    mt = mv;
  }
  if (nan) {  // a NaN score: the whole row is NaN, as the reference's softmax gives
    for (index_t j = 0; j < n; ++j) s[j] = std::numeric_limits<float>::quiet_NaN();
    l = std::numeric_limits<float>::quiet_NaN();
    return 1.0f;
  }
  const float m2 = std::max(m, mt);
  if (m2 == neg_inf) {  // nothing seen yet: no weight
    for (index_t j = 0; j < n; ++j) s[j] = 0.0f;
    return 1.0f;
  }
  const float alpha = m == m2 ? 1.0f : (m == neg_inf ? 0.0f : std::exp(m - m2));
  V sum(0.0f);
  const V mm(m2);
  for (index_t j = 0; j < n; j += L) {
    const V p = cpu_row::exp_nonpositive(cpu_gemm::vload<A>(s + j) - mm);
    cpu_gemm::vstore<A>(s + j, p);
    sum += p;
  }
  l = l * alpha + cpu_gemm::vsum<A>(sum);
  m = m2;
  return alpha;
}

template <class A>
inline void scale_row(float* o, index_t n, float f) {
  using V = fvec<A>;
  constexpr index_t L = tile<A>::L;
  const V fv(f);
  index_t j = 0;
  for (; j + L <= n; j += L) cpu_gemm::vstore<A>(o + j, cpu_gemm::vload<A>(o + j) * fv);
  for (; j < n; ++j) o[j] *= f;
}

/// The rows' scores for keys [j0, j0 + n) with the cap, the mask and causality applied.
/// s: rows x lds floats; columns [n, npad) are set to -inf. rowinfo gives each row's
/// head and query index.
template <class A, class S>
struct scorer {
  const operands<S>& op;
  index_t b = 0;        // batch
  index_t hq0 = 0;      // the block's first query head
  index_t i0 = 0;       // the block's first query index (within the head)
  index_t rows = 0;

  index_t head_of(index_t r) const noexcept { return hq0 + (i0 + r) / op.d.Sq; }
  index_t query_of(index_t r) const noexcept { return (i0 + r) % op.d.Sq; }
  /// The last key row r sees (causal), or Skv - 1.
  index_t last_key(index_t r) const noexcept {
    return op.causal ? std::min(op.d.Skv - 1, query_of(r) + op.d.Skv - op.d.Sq) : op.d.Skv - 1;
  }
  /// The keys any row sees: [0, end).
  index_t key_end() const noexcept {
    index_t e = 0;
    if (!op.causal) return op.d.Skv;
    const index_t last_q = rows >= op.d.Sq ? op.d.Sq - 1 : std::max(query_of(0), query_of(rows - 1));
    // a block of whole heads or one run inside a head: its largest query index is known
    e = std::min(op.d.Skv, last_q + op.d.Skv - op.d.Sq + 1);
    return std::max<index_t>(e, 0);
  }
  /// Whether every row sees every key below `end` (no per-element causal mask).
  bool all_see(index_t end) const noexcept {
    if (!op.causal) return true;
    const index_t first_q = rows >= op.d.Sq ? 0 : std::min(query_of(0), query_of(rows - 1));
    return end - 1 <= first_q + op.d.Skv - op.d.Sq;
  }

  void finish(float* s, index_t lds, index_t j0, index_t n, index_t npad) const {
    using V = fvec<A>;
    constexpr index_t L = tile<A>::L;
    const bool capped = op.softcap > 0.0f;
    const bool causal_cut = !all_see(j0 + n);
    for (index_t r = 0; r < rows; ++r) {
      float* sr = s + r * lds;
      for (index_t j = n; j < npad; ++j) sr[j] = neg_inf;
      if (capped) {
        const V c(op.softcap), ic(1.0f / op.softcap);
        for (index_t j = 0; j < npad; j += L) {
          cpu_gemm::vstore<A>(sr + j, c * tanh_approx(cpu_gemm::vload<A>(sr + j) * ic));
        }
        for (index_t j = n; j < npad; ++j) sr[j] = neg_inf;
      }
      if constexpr (S::op_type::has_mask) {
        using MT = std::remove_cvref_t<decltype(std::get<2>(std::declval<S>().params).t.data()[0])>;
        const MT* mp = static_cast<const MT*>(op.mask) + b * op.ms[0] + head_of(r) * op.ms[1] +
                       query_of(r) * op.ms[2] + j0 * op.ms[3];
        const index_t st = op.ms[3];
        if (st == 1) {
          index_t j = 0;
          if constexpr (std::is_same_v<MT, float>) {
            for (; j + L <= n; j += L) cpu_gemm::vstore<A>(sr + j, cpu_gemm::vload<A>(sr + j) + cpu_gemm::vload<A>(mp + j));
          }
          for (; j < n; ++j) sr[j] += static_cast<float>(mp[j]);
        } else {
          for (index_t j = 0; j < n; ++j) sr[j] += static_cast<float>(mp[j * st]);
        }
      }
      if (causal_cut) {
        const index_t last = last_key(r);
        for (index_t j = std::max<index_t>(0, last + 1 - j0); j < n; ++j) sr[j] = neg_inf;
      }
    }
  }
};

/// Frees what ::operator new(bytes, align_val_t{64}) gave.
struct aligned_delete {
  void operator()(float* p) const noexcept { ::operator delete(p, std::align_val_t{64}); }
};

/// Resizable per-thread buffers of a task (one scratch allocation).
struct arena {
  std::byte* base;
  std::size_t at = 0;
  float* take(std::size_t floats) {
    float* p = reinterpret_cast<float*>(base + at);
    at += (floats * sizeof(float) + 63) / 64 * 64;
    return p;
  }
};

inline std::size_t floats_bytes(std::size_t n) { return (n * sizeof(float) + 63) / 64 * 64; }

/// The kernel for one statement.
template <class A, class Io, class S>
struct flash {
  using ops_t = operands<S>;
  using KT = typename ops_t::KT;
  using VT = typename ops_t::VT;
  static constexpr int MR = tile<A>::MR, NR = tile<A>::NR;
  static constexpr index_t L = tile<A>::L;

  const Io& io;
  const S& s;
  const ops_t& op;
  const plan& p;
  float scale;
  const float* kpack = nullptr;  // the tiled path: k of every group in MR-key panels
  index_t kpack_group = 0;       // floats per group
  const float* vpack = nullptr;  // and v in NR-column panels, each all keys long
  index_t vpack_group = 0;

  /// Packs keys [j0, j1) of group grp (j0 a multiple of MR) into MR-key panels.
  void pack_keys(index_t grp, index_t j0, index_t j1, float* dst) const {  // (dst: the whole buffer)
    const index_t bq = grp / op.d.Hkv, hkv = grp % op.d.Hkv;
    const KT* k = op.k + bq * op.ks[0] + hkv * op.ks[1] + j0 * op.ks[2];
    cpu_gemm::pack_a<A>(cpu_gemm::strided<KT>{k, op.ks[2], op.ks[3]}, j1 - j0, 0, D(), dst + grp * kpack_group + j0 * D());
  }
  /// Packs rows [j0, j1) of group grp's v into its NR-column panels.
  void pack_values(index_t grp, index_t j0, index_t j1, float* dst) const {
    const index_t bq = grp / op.d.Hkv, hkv = grp % op.d.Hkv;
    const VT* v = op.v + bq * op.vs[0] + hkv * op.vs[1] + j0 * op.vs[2];
    const index_t keys = vpack_group / ldo();
    for (index_t c0 = 0; c0 < Dv(); c0 += NR) {
      cpu_gemm::pack_b_panel<A>(cpu_gemm::strided<VT>{v, op.vs[2], op.vs[3]}, j1 - j0, c0, std::min<index_t>(NR, Dv() - c0),
                                dst + grp * vpack_group + ((c0 / NR) * keys + j0) * NR);
    }
  }

  index_t D() const noexcept { return op.d.D; }
  index_t Dv() const noexcept { return op.d.Dv; }
  index_t ldo() const noexcept { return (Dv() + NR - 1) / NR * NR; }
  static index_t round_up(index_t x, index_t m) { return (x + m - 1) / m * m; }

  /// Scratch bytes one task needs.
  std::size_t scratch_bytes() const {
    const std::size_t rp = std::size_t(round_up(std::max<index_t>(p.rows, 1), std::lcm(MR, NR)));
    const std::size_t kt = std::size_t(p.key_tile), d = std::size_t(D()), dv = std::size_t(ldo());
    std::size_t b = floats_bytes(rp * d) * 2 + floats_bytes(rp * kt + MR) + floats_bytes(rp * dv) + floats_bytes(rp) * 3;
    b += floats_bytes(kt * std::max(d, dv));  // a packed v tile, or a gathered k tile
    return b + 1024;
  }

  /// Task (group, block, split): runs the block's rows over the split's keys; writes
  /// the result (one split) or the partial state (several) for the merge.
  void run_task(index_t grp, index_t blk, index_t split, float* partial) const {
    const attention_dims& d = op.d;
    const index_t bq = grp / d.Hkv, hkv = grp % d.Hkv;
    const index_t hb = blk / p.qblocks, qb = blk % p.qblocks;
    scorer<A, S> sc{op, bq, hkv * d.group() + hb * p.heads, qb * p.rows, 0};
    // rows of the group: [r0, r1)
    const index_t r0 = hb * p.heads * d.Sq + qb * p.rows;
    const index_t r1 = std::min(d.Sq >= p.rows ? (hb * d.Sq + std::min(d.Sq, qb * p.rows + p.rows)) : r0 + p.rows,
                                d.group() * d.Sq);
    const index_t rows = r1 - r0;
    sc.rows = rows;
    if (rows <= 0) return;
    const index_t grow = grp * op.group_rows();  // the group's first row of q and of the output
    arena ar{cpu_scheduler::scratch(scratch_bytes())};
    const index_t rp = round_up(rows, std::lcm(MR, NR));
    float* q = ar.take(std::size_t(rp * D()));
    float* qpack = ar.take(std::size_t(rp * D()));
    float* sbuf = ar.take(std::size_t(tile_ld() * p.key_tile + MR));
    float* o = ar.take(std::size_t(rp * ldo()));
    float* m = ar.take(std::size_t(rp));
    float* l = ar.take(std::size_t(rp));
    float* alpha = ar.take(std::size_t(rp));
    float* tilebuf = ar.take(std::size_t(p.key_tile * std::max(D(), ldo())));

    io.load((grow + r0) * D(), (grow + r1) * D(), q);
    {
      const fvec<A> sv(scale);
      const index_t n = rows * D();
      index_t i = 0;
      for (; i + L <= n; i += L) cpu_gemm::vstore<A>(q + i, cpu_gemm::vload<A>(q + i) * sv);
      for (; i < n; ++i) q[i] *= scale;
    }
    for (index_t r = 0; r < rp; ++r) {
      m[r] = neg_inf;
      l[r] = 0.0f;
    }
    std::fill(o, o + rp * ldo(), 0.0f);

    const index_t kb = split * p.chunk;
    const index_t ke = std::min({d.Skv, kb + p.chunk, sc.key_end()});
    const VT* vbase = op.v + bq * op.vs[0] + hkv * op.vs[1];
    if (p.tiled) {
      // q^T in NR-query panels (the micro-kernel's B), once for every key tile
      for (index_t c0 = 0; c0 < rows; c0 += NR) {
        cpu_gemm::pack_b_panel<A>(cpu_gemm::strided<float>{q, 1, D()}, D(), c0, std::min<index_t>(NR, rows - c0),
                                  qpack + c0 * D());
      }
      std::fill(sbuf, sbuf + tile_ld() * p.key_tile + MR, 0.0f);
      const float* kgroup = kpack + grp * kpack_group;
      for (index_t j0 = kb; j0 < ke; j0 += p.key_tile) {
        const index_t n = std::min(p.key_tile, ke - j0);
        tile_scores(sc, kgroup + j0 * D(), j0, n, qpack, sbuf);
        finish_t(sc, sbuf, j0, n);
        tile_softmax(sbuf, n, rows, m, l, alpha);
        for (index_t r = 0; r < rows; ++r) {
          if (alpha[r] != 1.0f) scale_row<A>(o + r * ldo(), Dv(), alpha[r]);
        }
        tile_pv(sc, vpack + grp * vpack_group, j0, n, sbuf, o);
      }
    } else {
      const KT* kbase = op.k + bq * op.ks[0] + hkv * op.ks[1];
      for (index_t j0 = kb; j0 < ke; j0 += p.key_tile) {
        const index_t n = std::min(p.key_tile, ke - j0);
        const index_t npad = round_up(n, L);
        row_scores(kbase + j0 * op.ks[2], n, q, rows, sbuf, tilebuf, vbase + j0 * op.vs[2]);
        sc.finish(sbuf, p.key_tile, j0, n, npad);
        for (index_t r = 0; r < rows; ++r) {
          const float a = update_row<A>(sbuf + r * p.key_tile, npad, m[r], l[r]);
          if (a != 1.0f) scale_row<A>(o + r * ldo(), Dv(), a);
        }
        row_pv(vbase + j0 * op.vs[2], n, sbuf, rows, o);
      }
    }

    if (p.splits > 1) {  // the partial state: per row m, l, then Dv outputs
      const index_t w = Dv() + 2;
      for (index_t r = 0; r < rows; ++r) {
        float* dst = partial + r * w;
        dst[0] = m[r];
        dst[1] = l[r];
        std::copy(o + r * ldo(), o + r * ldo() + Dv(), dst + 2);
      }
      return;
    }
    finish_rows(o, l, rows);
    io.store((grow + r0) * Dv(), (grow + r1) * Dv(), o);
  }

  /// The tiled path's score tile is transposed: keys x queries (row length tiled_rows),
  /// so that the softmax runs down columns with the queries across vector lanes and p
  /// feeds the micro-kernel in place as its A operand.
  index_t tile_ld() const noexcept { return round_up(p.rows, std::lcm(MR, NR)); }

  /// The keys below the tile's keys j0 + [0, n) that rows [r0, r1) see, less j0: n
  /// unless causal, where the tile's keys past the last one any of the rows sees (the
  /// diagonal) are masked for all of them; <= 0: none.
  index_t keys_seen(const scorer<A, S>& sc, index_t r0, index_t r1, index_t j0, index_t n) const noexcept {
    if (!op.causal) return n;
    index_t last = -1;
    for (index_t r = r0; r < r1; ++r) last = std::max(last, sc.last_key(r));
    return std::min(n, last + 1 - j0);
  }

  /// Scores of the tiled path: s^T (n x rows) = k[j0 .. j0 + n) (pre-packed MR-key
  /// panels) x q^T (NR-query panels). Causal: a key panel past what a query panel sees
  /// is not computed (finish_t masks those scores whatever they hold).
  void tile_scores(const scorer<A, S>& sc, const float* kpan, index_t j0, index_t n, const float* qpack, float* st) const {
    const index_t ld = tile_ld();
    for (index_t c0 = 0; c0 < sc.rows; c0 += NR) {
      const index_t seen = keys_seen(sc, c0, std::min<index_t>(sc.rows, c0 + NR), j0, n);
      for (index_t kp = 0; kp * MR < seen; ++kp) {
        cpu_gemm::micro<A, true>(D(), kpan + kp * MR * D(), qpack + c0 * D(), NR, st + kp * MR * ld + c0, ld, false);
      }
    }
  }

  /// The cap, the mask and causality on the transposed tile (keys j0 .. j0 + n).
  void finish_t(const scorer<A, S>& sc, float* st, index_t j0, index_t n) const {
    using V = fvec<A>;
    const index_t ld = tile_ld();
    const index_t cols = round_up(sc.rows, L);
    if (op.softcap > 0.0f) {
      const V c(op.softcap), ic(1.0f / op.softcap);
      for (index_t kk = 0; kk < n; ++kk) {
        float* row = st + kk * ld;
        for (index_t j = 0; j < cols; j += L) cpu_gemm::vstore<A>(row + j, c * tanh_approx(cpu_gemm::vload<A>(row + j) * ic));
      }
    }
    if constexpr (S::op_type::has_mask) {
      using MT = std::remove_cvref_t<decltype(std::get<2>(std::declval<S>().params).t.data()[0])>;
      for (index_t r = 0; r < sc.rows; ++r) {
        const MT* mp = static_cast<const MT*>(op.mask) + sc.b * op.ms[0] + sc.head_of(r) * op.ms[1] +
                       sc.query_of(r) * op.ms[2] + j0 * op.ms[3];
        for (index_t kk = 0; kk < n; ++kk) st[kk * ld + r] += static_cast<float>(mp[kk * op.ms[3]]);
      }
    }
    if (!sc.all_see(j0 + n)) {
      for (index_t r = 0; r < sc.rows; ++r) {
        for (index_t kk = std::max<index_t>(0, sc.last_key(r) + 1 - j0); kk < n; ++kk) st[kk * ld + r] = neg_inf;
      }
    }
  }

  /// The online softmax down the transposed tile's columns (queries in vector lanes):
  /// p = exp(s - m') in place, l and m updated, alpha[r] the factor row r's output takes.
  void tile_softmax(float* st, index_t n, index_t rows, float* m, float* l, float* alpha) const {
    using V = fvec<A>;
    const index_t ld = tile_ld();
    const V ninf(neg_inf), zero(0.0f);
    for (index_t c = 0; c < rows; c += L) {
      V mt = ninf;
      for (index_t kk = 0; kk < n; ++kk) mt = max_keep_nan(mt, cpu_gemm::vload<A>(st + kk * ld + c));
      const V mo = cpu_gemm::vload<A>(m + c);
      const V mn = max_keep_nan(mo, mt);
      V ms;
      if constexpr (simd::enabled<A>) ms = xsimd::select(mn == ninf, zero, mn);
      else ms = mn == neg_inf ? 0.0f : mn;
      const V al = cpu_row::exp_nonpositive(mo - ms);  // 0 for a first score, 1 when m is unchanged
      V sum = zero;
      for (index_t kk = 0; kk < n; ++kk) {
        float* pr = st + kk * ld + c;
        const V pv = cpu_row::exp_nonpositive(cpu_gemm::vload<A>(pr) - ms);
        cpu_gemm::vstore<A>(pr, pv);
        sum += pv;
      }
      cpu_gemm::vstore<A>(l + c, cpu_gemm::vload<A>(l + c) * al + sum);
      cpu_gemm::vstore<A>(m + c, mn);
      cpu_gemm::vstore<A>(alpha + c, al);
    }
  }

  /// o += p v[j0 .. j0 + n) on the micro-kernel: p read in place from the transposed
  /// tile (MR queries per k step, ld apart), v from its pre-packed NR-column panels.
  /// Causal: each MR-query panel stops at the last key it sees (the rest of p is 0).
  void tile_pv(const scorer<A, S>& sc, const float* vgroup, index_t j0, index_t n, const float* st, float* o) const {
    const index_t ld = tile_ld();
    const index_t panels = ldo() / NR;
    const index_t keys = vpack_group / std::max<index_t>(ldo(), 1);  // keys per panel (Skv rounded up)
    for (index_t ip = 0; ip * MR < sc.rows; ++ip) {
      const index_t seen = keys_seen(sc, ip * MR, std::min<index_t>(sc.rows, ip * MR + MR), j0, n);
      if (seen <= 0) continue;
      for (index_t jp = 0; jp < panels; ++jp) {
        cpu_gemm::micro<A, true>(seen, st + ip * MR, vgroup + (jp * keys + j0) * NR, NR, o + ip * MR * ldo() + jp * NR,
                                 ldo(), true, ld);
      }
    }
  }

  /// o (rows x ldo) divided by l row by row, compacted to rows x Dv; a row without
  /// weight (every key masked) is zeros, a NaN sum gives NaN.
  void finish_rows(float* o, const float* l, index_t rows) const {
    for (index_t r = 0; r < rows; ++r) {
      const float* src = o + r * ldo();
      float* dst = o + r * Dv();  // dst <= src: forward is safe
      if (l[r] == 0.0f) {
        std::fill(dst, dst + Dv(), 0.0f);
        continue;
      }
      const float inv = 1.0f / l[r];
      for (index_t c = 0; c < Dv(); ++c) dst[c] = src[c] * inv;
    }
  }

  /// Scores of the rows path: dot products of the q rows with k rows read in place
  /// (gathered into contiguous floats first when k's rows are not contiguous).
  void row_scores(const KT* k, index_t n, const float* q, index_t rows, float* sbuf, float* kg, const VT* v) const {
    const index_t lds = p.key_tile;
    // v's rows of this tile are read next (row_pv): ask for them into L2 now, a row per
    // key scored, so that both streams are in flight together
    const index_t vbytes = op.vs[3] == 1 ? Dv() * index_t(sizeof(VT)) : 0;
    for (index_t j = 0; j < std::min<index_t>(n, 8); ++j) prefetch_row(v + j * op.vs[2], vbytes);
    if (op.ks[3] == 1) {
      dots(k, op.ks[2], n, q, rows, sbuf, lds, v, vbytes);
    } else {
      for (index_t j = 0; j < n; ++j) {
        for (index_t c = 0; c < D(); ++c) kg[j * D() + c] = static_cast<float>(k[j * op.ks[2] + c * op.ks[3]]);
      }
      dots(kg, D(), n, q, rows, sbuf, lds, v, vbytes);
    }
  }

  static void prefetch_row(const void* p, index_t bytes) {
    const char* c = static_cast<const char*>(p);
    for (index_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b, 0, 1);
  }

  template <class U>
  void dots(const U* k, index_t kst, index_t n, const float* q, index_t rows, float* sbuf, index_t lds, const VT* v,
            index_t vbytes) const {
    index_t r = 0;
    for (; r + 4 <= rows; r += 4, vbytes = 0) dots_r<4>(k, kst, n, q + r * D(), sbuf + r * lds, lds, v, vbytes);
    switch (rows - r) {
      case 3: dots_r<3>(k, kst, n, q + r * D(), sbuf + r * lds, lds, v, vbytes); break;
      case 2: dots_r<2>(k, kst, n, q + r * D(), sbuf + r * lds, lds, v, vbytes); break;
      case 1: dots_r<1>(k, kst, n, q + r * D(), sbuf + r * lds, lds, v, vbytes); break;
      default: break;
    }
  }
  template <int R, class U>
  void dots_r(const U* k, index_t kst, index_t n, const float* q, float* s, index_t lds, const VT* v,
              index_t vbytes) const {
    // keys per call: R x NB accumulators, R q vectors and one k vector in 16 registers
    constexpr int NB = R <= 2 ? 4 : 2;
    const index_t bytes = D() * index_t(sizeof(U));
    index_t j = 0;
    for (; j + NB <= n; j += NB) {
      for (int t = 0; t < NB; ++t) {  // the keys 8 ahead, and their values
        if (j + 8 + t < n) {
          const char* pk = reinterpret_cast<const char*>(k + (j + 8 + t) * kst);
          for (index_t c = 0; c < bytes; c += 64) __builtin_prefetch(pk + c, 0, 0);
          if (vbytes) prefetch_row(v + (j + 8 + t) * op.vs[2], vbytes);
        }
      }
      cpu_gemm::dot<A, R, NB>(D(), q, k + j * kst, kst, s + j, lds);
    }
    for (; j < n; ++j) cpu_gemm::dot<A, R, 1>(D(), q, k + j * kst, kst, s + j, lds);
  }

  /// o += p v for the rows path: v in sub-tiles of 16 rows, each read once for all the
  /// block's rows, the outputs of up to 4 rows x 2 vectors held in registers across it.
  void row_pv(const VT* v, index_t n, const float* sbuf, index_t rows, float* o) const {
    const index_t lds = p.key_tile;
    for (index_t j0 = 0; j0 < n; j0 += 16) {
      const index_t nj = std::min<index_t>(16, n - j0);
      index_t r = 0;
      for (; r + 4 <= rows; r += 4) pv_rows<4>(v + j0 * op.vs[2], nj, sbuf + r * lds + j0, lds, o + r * ldo());
      switch (rows - r) {
        case 3: pv_rows<3>(v + j0 * op.vs[2], nj, sbuf + r * lds + j0, lds, o + r * ldo()); break;
        case 2: pv_rows<2>(v + j0 * op.vs[2], nj, sbuf + r * lds + j0, lds, o + r * ldo()); break;
        case 1: pv_rows<1>(v + j0 * op.vs[2], nj, sbuf + r * lds + j0, lds, o + r * ldo()); break;
        default: break;
      }
    }
  }

  /// o[R rows] += p[R rows, nj keys] v[nj rows] (v rows vs[2] apart).
  template <int R>
  void pv_rows(const VT* v, index_t nj, const float* pr, index_t lds, float* o) const {
    using V = fvec<A>;
    const index_t dv = Dv(), vr = op.vs[2], vc = op.vs[3];
    index_t c = 0;
    if (vc == 1) {
      for (; c + 2 * L <= dv; c += 2 * L) {
        V acc[R][2];
        for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = V(0.0f);
        for (index_t j = 0; j < nj; ++j) {
          const V x0 = cpu_gemm::vload<A>(v + j * vr + c), x1 = cpu_gemm::vload<A>(v + j * vr + c + L);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const V pj(pr[r * lds + j]);
            acc[r][0] = cpu_gemm::vfma<A>(pj, x0, acc[r][0]);
            acc[r][1] = cpu_gemm::vfma<A>(pj, x1, acc[r][1]);
          }
        }
        for (int r = 0; r < R; ++r) {
          float* orow = o + r * ldo() + c;
          cpu_gemm::vstore<A>(orow, cpu_gemm::vload<A>(orow) + acc[r][0]);
          cpu_gemm::vstore<A>(orow + L, cpu_gemm::vload<A>(orow + L) + acc[r][1]);
        }
      }
    }
    for (; c < dv; ++c) {
      float acc[R] = {};
      for (index_t j = 0; j < nj; ++j) {
        const float x = static_cast<float>(v[j * vr + c * vc]);
        for (int r = 0; r < R; ++r) acc[r] += pr[r * lds + j] * x;
      }
      for (int r = 0; r < R; ++r) o[r * ldo() + c] += acc[r];
    }
  }

  /// Merges the splits' partial states of task (grp, blk) in order and stores the rows.
  void merge(index_t grp, index_t blk, const float* partial, index_t task_stride, index_t split_stride) const {
    const attention_dims& d = op.d;
    const index_t hb = blk / p.qblocks, qb = blk % p.qblocks;
    const index_t r0 = hb * p.heads * d.Sq + qb * p.rows;
    const index_t r1 = std::min(d.Sq >= p.rows ? (hb * d.Sq + std::min(d.Sq, qb * p.rows + p.rows)) : r0 + p.rows,
                                d.group() * d.Sq);
    const index_t rows = r1 - r0;
    if (rows <= 0) return;
    const index_t w = Dv() + 2;
    const index_t grow = grp * op.group_rows();
    float* o = reinterpret_cast<float*>(cpu_scheduler::scratch(floats_bytes(std::size_t(rows * std::max<index_t>(Dv(), 1)))));
    const float* base = partial + (grp * p.blocks() + blk) * task_stride;
    for (index_t r = 0; r < rows; ++r) {
      float M = neg_inf;
      bool nan = false;
      for (index_t t = 0; t < p.splits; ++t) {
        const float* st = base + t * split_stride + r * w;
        nan = nan || st[1] != st[1];
        M = std::max(M, st[0]);
      }
      float* orow = o + r * Dv();
      if (nan) {
        std::fill(orow, orow + Dv(), std::numeric_limits<float>::quiet_NaN());
        continue;
      }
      std::fill(orow, orow + Dv(), 0.0f);
      if (M == neg_inf) continue;  // no key seen by any split: zeros
      float Lsum = 0.0f;
      for (index_t t = 0; t < p.splits; ++t) {
        const float* st = base + t * split_stride + r * w;
        if (st[0] == neg_inf) continue;
        const float f = std::exp(st[0] - M);
        Lsum += st[1] * f;
        for (index_t c = 0; c < Dv(); ++c) orow[c] += st[2 + c] * f;
      }
      const float inv = 1.0f / Lsum;
      for (index_t c = 0; c < Dv(); ++c) orow[c] *= inv;
    }
    io.store((grow + r0) * Dv(), (grow + r1) * Dv(), o);
  }
};

}  // namespace cpu_attn

template <class KT, class VT, class MT>
struct cpu_structural_kernel<attention_op<KT, VT, MT>> {
  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S& s, axis_split) {
    using namespace cpu_attn;
    const operands<S> op(s);
    const attention_dims& d = op.d;
    if (d.B == 0 || d.Hq == 0 || d.Sq == 0 || d.Dv == 0) return;
    const int threads_max = attention_threads(op, state.num_threads);
    const plan p = make_plan<A>(op, threads_max);
    flash<A, Io, S> f{io, s, op, p, s.op.scale};
    const index_t blocks = p.blocks();
    const index_t tasks = d.B * d.Hkv * blocks;
    const int threads = static_cast<int>(std::min<index_t>(threads_max, tasks * p.splits));
    std::unique_ptr<float, aligned_delete> kpack;
    if (p.tiled && d.Skv > 0) {  // k in MR-key panels and v in NR-column panels, once for every block
      constexpr index_t MR = tile<A>::MR;
      const index_t keys = (d.Skv + MR - 1) / MR * MR;
      f.kpack_group = keys * d.D;
      f.vpack_group = keys * f.ldo();
      const index_t voff = (d.B * d.Hkv * f.kpack_group + 15) / 16 * 16;  // v's panels 64-byte aligned
      const auto bytes = static_cast<std::size_t>(voff + d.B * d.Hkv * f.vpack_group) * sizeof(float);
      kpack.reset(static_cast<float*>(::operator new(bytes, std::align_val_t{64}, std::nothrow)));
      if (!kpack) {
        throw out_of_memory("kiln::attention: allocating " + std::to_string(bytes) + " bytes for k and v panels of " +
                                s.describe() + " failed",
                            bytes, 0);
      }
      f.kpack = kpack.get();
      f.vpack = kpack.get() + voff;
      const index_t span = 64 * MR;  // keys per packing task
      const index_t per = (d.Skv + span - 1) / span;
      const int pack_threads = static_cast<int>(std::min<index_t>(
          std::max(1, std::min(threads_max, static_cast<int>(double(d.B * d.Hkv * d.Skv * d.D) / double(1 << 16)))),
          d.B * d.Hkv * per));
      cpu_loop::for_tasks(d.B * d.Hkv * per, pack_threads, [&](index_t t) {
        const index_t grp = t / per, j0 = (t % per) * span;
        f.pack_keys(grp, j0, std::min(d.Skv, j0 + span), kpack.get());
        f.pack_values(grp, j0, std::min(d.Skv, j0 + span), const_cast<float*>(f.vpack));
      });
    }
    // a task index: group by group (neighbouring tasks, on whichever threads, read the
    // same k and v from cache), and in a group the heaviest (last query) blocks first
    const auto decode = [&](index_t t, index_t& grp, index_t& blk) {
      grp = t / blocks;
      const index_t qi = t % blocks;
      const index_t hb = qi % p.hblocks;
      const index_t qb = p.qblocks - 1 - qi / p.hblocks;
      blk = hb * p.qblocks + qb;
    };
    if (p.splits == 1) {
      cpu_loop::for_tasks(tasks, threads, [&](index_t t) {
        index_t grp, blk;
        decode(t, grp, blk);
        f.run_task(grp, blk, 0, nullptr);
      });
      return;
    }
    const index_t w = d.Dv + 2;
    const index_t split_stride = p.rows * w;
    const index_t task_stride = split_stride * p.splits;
    std::unique_ptr<float[]> partial(new (std::nothrow) float[static_cast<std::size_t>(tasks * task_stride)]);
    if (!partial) {
      const auto bytes = static_cast<std::size_t>(tasks * task_stride) * sizeof(float);
      throw out_of_memory("kiln::attention: allocating " + std::to_string(bytes) + " bytes of partial results for " +
                              s.describe() + " failed",
                          bytes, 0);
    }
    cpu_loop::for_tasks(tasks * p.splits, threads, [&](index_t t) {
      const index_t task = t / p.splits, split = t % p.splits;
      index_t grp, blk;
      decode(task, grp, blk);
      f.run_task(grp, blk, split, partial.get() + (grp * blocks + blk) * task_stride + split * split_stride);
    });
    cpu_loop::for_tasks(tasks, threads, [&](index_t t) {
      index_t grp, blk;
      decode(t, grp, blk);
      f.merge(grp, blk, partial.get(), task_stride, split_stride);
    });
  }

  /// The path run() takes for s (kiln::kernel_variant).
  template <class A, class S>
  static std::string variant(const S& s) {
    using namespace cpu_attn;
    const operands<S> op(s);
    const int threads = attention_threads(op, std::get<0>(s.params).t.storage()->ctx->num_threads);
    return plan_name<A>(make_plan<A>(op, threads));
  }
};

}  // namespace kiln::detail
