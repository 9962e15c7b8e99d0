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
// not masked element by element.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
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

/// Threads for the work (the GEMM's rule: at least 2^18 multiply-adds each).
template <class S>
int attention_threads(const operands<S>& op, int num_threads) {
  double work = op.d.macs();
  if (op.causal) work *= 0.5;
  return static_cast<int>(std::clamp(work / double(1 << 18), 1.0, double(std::max(1, num_threads))));
}

template <class A>
inline constexpr index_t tiled_rows = 8 * tile<A>::MR;

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
  p.key_tile = p.tiled ? 64 : 256;
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
  std::string s = p.tiled ? "cpu.attention.tiled " + std::to_string(tiled_rows<A>) + "x64" : "cpu.attention.rows";
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
    auto bad = mv != mv;
    for (index_t j = 0; j < n; j += L) {
      const V x = cpu_gemm::vload<A>(s + j);
      bad = bad || (x != x);
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

  index_t D() const noexcept { return op.d.D; }
  index_t Dv() const noexcept { return op.d.Dv; }
  index_t ldo() const noexcept { return (Dv() + NR - 1) / NR * NR; }
  static index_t round_up(index_t x, index_t m) { return (x + m - 1) / m * m; }

  /// Scratch bytes one task needs.
  std::size_t scratch_bytes() const {
    const std::size_t rp = std::size_t(round_up(std::max<index_t>(p.rows, 1), MR));
    const std::size_t kt = std::size_t(p.key_tile), d = std::size_t(D()), dv = std::size_t(ldo());
    std::size_t b = floats_bytes(rp * d) * 2 + floats_bytes(rp * kt) * 2 + floats_bytes(rp * dv) + floats_bytes(rp) * 2;
    b += floats_bytes(kt * std::max(d, dv));  // a packed k or v tile
    b += floats_bytes(kt * d);                // rows path: a gathered k tile
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
    const index_t rp = round_up(rows, MR);
    float* q = ar.take(std::size_t(rp * D()));
    float* qpack = ar.take(std::size_t(rp * D()));
    float* sbuf = ar.take(std::size_t(rp * p.key_tile));
    float* ppack = ar.take(std::size_t(rp * p.key_tile));
    float* o = ar.take(std::size_t(rp * ldo()));
    float* m = ar.take(std::size_t(rp));
    float* l = ar.take(std::size_t(rp));
    float* tilebuf = ar.take(std::size_t(p.key_tile * std::max(D(), ldo())));
    float* kgather = ar.take(std::size_t(p.key_tile * D()));

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
    if (p.tiled) cpu_gemm::pack_a<A>(cpu_gemm::strided<float>{q, D(), 1}, rows, 0, D(), qpack);

    const index_t kb = split * p.chunk;
    const index_t ke = std::min({d.Skv, kb + p.chunk, sc.key_end()});
    const KT* kbase = op.k + bq * op.ks[0] + hkv * op.ks[1];
    const VT* vbase = op.v + bq * op.vs[0] + hkv * op.vs[1];
    for (index_t j0 = kb; j0 < ke; j0 += p.key_tile) {
      const index_t n = std::min(p.key_tile, ke - j0);
      const index_t npad = round_up(n, p.tiled ? NR : L);
      if (p.tiled) tile_scores(kbase + j0 * op.ks[2], n, qpack, rows, sbuf, tilebuf);
      else row_scores(kbase + j0 * op.ks[2], n, q, rows, sbuf, kgather);
      sc.finish(sbuf, p.key_tile, j0, n, npad);
      for (index_t r = 0; r < rows; ++r) {
        const float alpha = update_row<A>(sbuf + r * p.key_tile, npad, m[r], l[r]);
        if (alpha != 1.0f) scale_row<A>(o + r * ldo(), Dv(), alpha);
      }
      if (p.tiled) tile_pv(vbase + j0 * op.vs[2], n, sbuf, rows, ppack, o, tilebuf);
      else row_pv(vbase + j0 * op.vs[2], n, sbuf, rows, o);
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

  /// o (rows x ldo) divided by l row by row, compacted to rows x Dv; a row without
  /// weight (every key masked) is zeros.
  void finish_rows(float* o, const float* l, index_t rows) const {
    for (index_t r = 0; r < rows; ++r) {
      const float inv = l[r] > 0.0f || l[r] != l[r] ? 1.0f / l[r] : 0.0f;
      float* src = o + r * ldo();
      float* dst = o + r * Dv();
      if (l[r] == 0.0f) {
        std::fill(dst, dst + Dv(), 0.0f);
        continue;
      }
      for (index_t c = 0; c < Dv(); ++c) dst[c] = src[c] * inv;  // dst <= src: forward is safe
    }
  }

  /// Scores of the tiled path: s (rp x key_tile) = qpack x k[j0 .. j0 + n)^T.
  void tile_scores(const KT* k, index_t n, const float* qpack, index_t rows, float* sbuf, float* kpack) const {
    const index_t panels = (n + NR - 1) / NR;
    for (index_t jp = 0; jp < panels; ++jp) {
      float* kp = kpack + jp * D() * NR;
      cpu_gemm::pack_b_panel<A>(cpu_gemm::strided<KT>{k, op.ks[3], op.ks[2]}, D(), jp * NR,
                                std::min<index_t>(NR, n - jp * NR), kp);
    }
    for (index_t jp = 0; jp < panels; ++jp) {
      const float* kp = kpack + jp * D() * NR;
      for (index_t ip = 0; ip * MR < rows; ++ip) {
        cpu_gemm::micro<A, true>(D(), qpack + ip * MR * D(), kp, NR, sbuf + ip * MR * p.key_tile + jp * NR,
                                 p.key_tile, false);
      }
    }
  }

  /// o += p v[j0 .. j0 + n) on the micro-kernel: p (rows x n in sbuf) packed in MR-row
  /// panels; v read in place (whole NR-column panels of contiguous rows) or packed.
  void tile_pv(const VT* v, index_t n, const float* sbuf, index_t rows, float* ppack, float* o, float* vpack) const {
    const index_t rp = round_up(rows, MR);
    cpu_gemm::pack_a<A>(cpu_gemm::strided<float>{sbuf, p.key_tile, 1}, rp, 0, n, ppack);
    const index_t panels = ldo() / NR;
    const bool direct = op.vs[3] == 1;
    for (index_t jp = 0; jp < panels; ++jp) {
      const index_t c0 = jp * NR;
      const bool whole = c0 + NR <= Dv();
      if (direct && whole) {
        for (index_t ip = 0; ip * MR < rows; ++ip) {
          cpu_gemm::micro<A, false>(n, ppack + ip * MR * n, v + c0, op.vs[2], o + ip * MR * ldo() + c0, ldo(), true);
        }
      } else {
        cpu_gemm::pack_b_panel<A>(cpu_gemm::strided<VT>{v, op.vs[2], op.vs[3]}, n, c0, std::min<index_t>(NR, Dv() - c0),
                                  vpack);
        for (index_t ip = 0; ip * MR < rows; ++ip) {
          cpu_gemm::micro<A, true>(n, ppack + ip * MR * n, vpack, NR, o + ip * MR * ldo() + c0, ldo(), true);
        }
      }
    }
  }

  /// Scores of the rows path: dot products of the q rows with k rows read in place
  /// (gathered into contiguous floats first when k's rows are not contiguous).
  void row_scores(const KT* k, index_t n, const float* q, index_t rows, float* sbuf, float* kg) const {
    const index_t lds = p.key_tile;
    if (op.ks[3] == 1) {
      dots(k, op.ks[2], n, q, rows, sbuf, lds);
    } else {
      for (index_t j = 0; j < n; ++j) {
        for (index_t c = 0; c < D(); ++c) kg[j * D() + c] = static_cast<float>(k[j * op.ks[2] + c * op.ks[3]]);
      }
      dots(kg, D(), n, q, rows, sbuf, lds);
    }
  }

  template <class U>
  void dots(const U* k, index_t kst, index_t n, const float* q, index_t rows, float* sbuf, index_t lds) const {
    index_t r = 0;
    for (; r + 4 <= rows; r += 4) dots_r<4>(k, kst, n, q + r * D(), sbuf + r * lds, lds);
    switch (rows - r) {
      case 3: dots_r<3>(k, kst, n, q + r * D(), sbuf + r * lds, lds); break;
      case 2: dots_r<2>(k, kst, n, q + r * D(), sbuf + r * lds, lds); break;
      case 1: dots_r<1>(k, kst, n, q + r * D(), sbuf + r * lds, lds); break;
      default: break;
    }
  }
  template <int R, class U>
  void dots_r(const U* k, index_t kst, index_t n, const float* q, float* s, index_t lds) const {
    index_t j = 0;
    for (; j + 4 <= n; j += 4) {
      if (j + 8 <= n) {
        for (index_t c = 0; c < D() * index_t(sizeof(U)); c += 64) {
          __builtin_prefetch(reinterpret_cast<const char*>(k + (j + 4) * kst) + c, 0, 0);
          __builtin_prefetch(reinterpret_cast<const char*>(k + (j + 7) * kst) + c, 0, 0);
        }
      }
      cpu_gemm::dot<A, R, 4>(D(), q, k + j * kst, kst, s + j, lds);
    }
    for (; j < n; ++j) cpu_gemm::dot<A, R, 1>(D(), q, k + j * kst, kst, s + j, lds);
  }

  /// o += p v for the rows path: each v row read once for all the block's rows.
  void row_pv(const VT* v, index_t n, const float* sbuf, index_t rows, float* o) const {
    using V = fvec<A>;
    const index_t lds = p.key_tile;
    const index_t dv = Dv();
    const bool contig = op.vs[3] == 1;
    for (index_t r0 = 0; r0 < rows; r0 += 4) {
      const index_t rr = std::min<index_t>(4, rows - r0);
      for (index_t j = 0; j < n; ++j) {
        const VT* vj = v + j * op.vs[2];
        if (j + 4 < n) {
          for (index_t c = 0; c < dv * index_t(sizeof(VT)); c += 64) {
            __builtin_prefetch(reinterpret_cast<const char*>(v + (j + 4) * op.vs[2]) + c, 0, 0);
          }
        }
        float pj[4];
        bool any = false;
        for (index_t r = 0; r < rr; ++r) {
          pj[r] = sbuf[(r0 + r) * lds + j];
          any = any || pj[r] != 0.0f;
        }
        if (!any) continue;  // masked keys cost nothing more
        if (contig) {
          index_t c = 0;
          for (; c + L <= dv; c += L) {
            const V x = cpu_gemm::vload<A>(vj + c);
            for (index_t r = 0; r < rr; ++r) {
              float* orow = o + (r0 + r) * ldo() + c;
              cpu_gemm::vstore<A>(orow, cpu_gemm::vfma<A>(V(pj[r]), x, cpu_gemm::vload<A>(orow)));
            }
          }
          for (; c < dv; ++c) {
            const float x = static_cast<float>(vj[c]);
            for (index_t r = 0; r < rr; ++r) o[(r0 + r) * ldo() + c] += pj[r] * x;
          }
        } else {
          for (index_t c = 0; c < dv; ++c) {
            const float x = static_cast<float>(vj[c * op.vs[3]]);
            for (index_t r = 0; r < rr; ++r) o[(r0 + r) * ldo() + c] += pj[r] * x;
          }
        }
      }
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
    const flash<A, Io, S> f{io, s, op, p, s.op.scale};
    const index_t blocks = p.blocks();
    const index_t tasks = d.B * d.Hkv * blocks;
    const int threads = static_cast<int>(std::min<index_t>(threads_max, tasks * p.splits));
    // a task index: the heaviest (last query) blocks first when causal, then groups
    const auto decode = [&](index_t t, index_t& grp, index_t& blk) {
      const index_t per = d.B * d.Hkv;
      index_t qi = t / per;  // the (head block, query block) pair, reversed
      grp = t % per;
      const index_t hb = qi % p.hblocks;
      index_t qb = qi / p.hblocks;
      qb = p.qblocks - 1 - qb;
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
    std::unique_ptr<float[]> partial(new float[static_cast<std::size_t>(tasks * task_stride)]);
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
