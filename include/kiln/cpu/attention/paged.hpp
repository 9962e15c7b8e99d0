// kiln/cpu/attention/paged.hpp — kiln::paged_attention and kiln::paged_write on the CPU.
//
// paged_attention is flash.hpp's rows path with keys and values found through the block
// tables: a task is a block of up to `max_rows` rows of one (sequence, kv head) group
// (the query heads sharing a kv head together, so a block reads each key once), keys in
// tiles of 256 from position 0. A tile's scores are dot products of the q rows with key
// rows read in place, one run per pool block (a block's rows of a kv head are
// contiguous); the online softmax runs over the whole tile (cpu_attn::update_row); p v
// goes in sub-tiles of 16 keys, each key's v row found through the table. Tile and
// sub-tile boundaries, the dot products, the softmax and the accumulation order are the
// contiguous rows path's, so a statement the contiguous kernel runs on its rows path
// without a key split (decoding on one thread) gives the same bits. When the tasks are
// fewer than the threads can use and the longest sequence has many keys (one sequence,
// few kv heads), the keys are split too, in chunks of whole tiles, and the partial
// softmaxes merged in order (flash.hpp's flash-decoding, the same arithmetic). Not done
// here (yet): the tiled (GEMM micro-kernel) path for long prefill chunks.
//
// The tables and lengths are checked before anything runs (check_paged_host).
// paged_write copies each new row (its prologue evaluated) to its pool row.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <type_traits>

#include "kiln/cpu/attention/flash.hpp"  // cpu_attn: update_row, scale_row, arena, neg_inf
#include "kiln/cpu/gemm/kernel.hpp"
#include "kiln/cpu/scheduler.hpp"
#include "kiln/cpu/structural.hpp"
#include "kiln/ops/attention/paged_attention.hpp"
#include "kiln/ops/attention/paged_write.hpp"
#include "kiln/ops/elementwise/tanh.hpp"

namespace kiln::detail {
namespace cpu_paged {

using cpu_attn::neg_inf;
using cpu_gemm::fvec;
using cpu_gemm::tile;

inline constexpr index_t key_tile = 256;  // flash.hpp's rows path
inline constexpr index_t pv_tile = 16;
inline constexpr index_t max_rows = 16;   // rows per task (a decode group is Hq / Hkv)

template <class A, class Io, class S>
struct kernel {
  using KT = typename std::remove_cvref_t<decltype(std::get<0>(std::declval<S>().params).t)>::value_type;
  using VT = typename std::remove_cvref_t<decltype(std::get<1>(std::declval<S>().params).t)>::value_type;
  static constexpr index_t L = tile<A>::L;

  const Io& io;
  const paged_dims d;
  const KT* k;
  const VT* v;
  index_t ks[3], vs[3];  // block, head, row
  const std::int32_t* tables;
  index_t ts0, ts1;
  const std::int32_t* lens;
  index_t ls0;
  float scale, softcap;
  bool causal;
  index_t blocks_per_group;  // tasks per (sequence, kv head)

  kernel(const Io& io_, const S& s) : io(io_), d(paged_attention_dims_of(s)) {
    const auto& kt = std::get<0>(s.params).t;
    const auto& vt = std::get<1>(s.params).t;
    const auto& tt = std::get<2>(s.params).t;
    const auto& lt = std::get<3>(s.params).t;
    k = kt.data();
    v = vt.data();
    for (int i = 0; i < 3; ++i) {
      ks[i] = kt.strides()[i];
      vs[i] = vt.strides()[i];
    }
    tables = tt.data();
    ts0 = tt.strides()[0];
    ts1 = tt.strides()[1];
    lens = lt.data();
    ls0 = lt.strides()[0];
    scale = s.op.scale;
    softcap = s.op.softcap;
    causal = s.op.causal;
    blocks_per_group = (d.group() * d.Sq + max_rows - 1) / max_rows;
  }

  index_t ldo() const noexcept { return (d.Dv + L - 1) / L * L; }

  std::size_t scratch_bytes() const {
    using cpu_attn::floats_bytes;
    const std::size_t r = std::size_t(max_rows);
    return floats_bytes(r * std::size_t(d.D)) + floats_bytes(r * std::size_t(key_tile)) +
           floats_bytes(r * std::size_t(ldo())) + 2 * floats_bytes(r) + 1024;
  }

  /// Keys [j, j + n) of sequence b, kv head h: a run inside one pool block.
  const KT* key_row(index_t b, index_t h, index_t j) const {
    const index_t blk = tables[b * ts0 + (j / d.bs) * ts1];
    return k + blk * ks[0] + h * ks[1] + (j % d.bs) * ks[2];
  }
  const VT* value_row(index_t b, index_t h, index_t j) const {
    const index_t blk = tables[b * ts0 + (j / d.bs) * ts1];
    return v + blk * vs[0] + h * vs[1] + (j % d.bs) * vs[2];
  }

  /// Task t over keys [split * chunk, (split + 1) * chunk) (chunk 0: all keys). With a
  /// partial buffer (a key split) the rows' max, sum and unnormalised output go there
  /// (rows x (Dv + 2) floats) for merge(); without, the result goes out.
  void run_task(index_t t, index_t split = 0, index_t chunk = 0, float* partial = nullptr) const {
    const index_t grp = t / blocks_per_group, blk = t % blocks_per_group;
    const index_t b = grp / d.Hkv, h = grp % d.Hkv;
    const index_t r0 = blk * max_rows, r1 = std::min(d.group() * d.Sq, r0 + max_rows), rows = r1 - r0;
    if (rows <= 0) return;
    const index_t len = lens[b * ls0];
    const index_t grow = (b * d.Hq + h * d.group()) * d.Sq;  // the group's first row of q and of the output
    cpu_attn::arena ar{cpu_scheduler::scratch(scratch_bytes())};
    float* q = ar.take(std::size_t(max_rows * d.D));
    float* sbuf = ar.take(std::size_t(max_rows * key_tile));
    float* o = ar.take(std::size_t(max_rows * ldo()));
    float* m = ar.take(std::size_t(max_rows));
    float* l = ar.take(std::size_t(max_rows));

    io.load((grow + r0) * d.D, (grow + r1) * d.D, q);
    {
      const fvec<A> sv(scale);
      const index_t n = rows * d.D;
      index_t i = 0;
      for (; i + L <= n; i += L) cpu_gemm::vstore<A>(q + i, cpu_gemm::vload<A>(q + i) * sv);
      for (; i < n; ++i) q[i] *= scale;
    }
    for (index_t r = 0; r < rows; ++r) {
      m[r] = neg_inf;
      l[r] = 0.0f;
    }
    std::fill(o, o + rows * ldo(), 0.0f);

    // query index of row r: (r0 + r) % Sq; causal: it sees keys <= i + len - Sq
    const auto query_of = [&](index_t r) { return (r0 + r) % d.Sq; };
    index_t ke = len;
    index_t first_q = 0;
    if (causal) {
      index_t last_q = 0;
      first_q = d.Sq;
      for (index_t r = 0; r < rows; ++r) {
        last_q = std::max(last_q, query_of(r));
        first_q = std::min(first_q, query_of(r));
      }
      ke = std::clamp<index_t>(last_q + len - d.Sq + 1, 0, len);
    }
    const index_t kb = split * chunk;  // a multiple of key_tile: the unsplit tiles
    const index_t kend = chunk > 0 ? std::min(ke, kb + chunk) : ke;
    for (index_t j0 = kb; j0 < kend; j0 += key_tile) {
      const index_t n = std::min(key_tile, kend - j0);
      const index_t npad = (n + L - 1) / L * L;
      for (index_t j = j0; j < j0 + n;) {  // a run of keys inside one pool block
        const index_t run = std::min(d.bs - j % d.bs, j0 + n - j), next = j + run;
        // the next run (maybe in the next tile) for the prefetches that cross into it
        const run_ptrs cur{key_row(b, h, j), value_row(b, h, j), run};
        const run_ptrs nxt = next < ke ? run_ptrs{key_row(b, h, next), value_row(b, h, next),
                                                  std::min(d.bs - next % d.bs, ke - next)}
                                       : run_ptrs{};
        dots(cur, nxt, q, rows, sbuf + (j - j0));
        j = next;
      }
      finish(sbuf, rows, j0, n, npad, len, first_q, query_of);
      for (index_t r = 0; r < rows; ++r) {
        const float a = cpu_attn::update_row<A>(sbuf + r * key_tile, npad, m[r], l[r]);
        if (a != 1.0f) cpu_attn::scale_row<A>(o + r * ldo(), d.Dv, a);
      }
      for (index_t s0 = 0; s0 < n; s0 += pv_tile) {
        const index_t nj = std::min(pv_tile, n - s0);
        const index_t first = j0 + s0;
        if (first % d.bs + nj <= d.bs) {  // one block's rows, vs[2] apart: as the contiguous path reads them
          const VT* v0 = value_row(b, h, first);
          const index_t vst = vs[2];
          pv_block(rows, [v0, vst](index_t j) { return v0 + j * vst; }, nj, sbuf + s0, o);
        } else {
          const VT* vr[pv_tile];
          for (index_t jj = 0; jj < nj;) {  // a block's run at a time
            const index_t key = first + jj, run = std::min(d.bs - key % d.bs, nj - jj);
            const VT* row = value_row(b, h, key);
            for (index_t u = 0; u < run; ++u, ++jj) vr[jj] = row + u * vs[2];
          }
          pv_block(rows, [&vr](index_t j) { return vr[j]; }, nj, sbuf + s0, o);
        }
      }
    }
    if (partial) {  // per row m, l, then Dv outputs
      const index_t w = d.Dv + 2;
      for (index_t r = 0; r < rows; ++r) {
        float* dst = partial + r * w;
        dst[0] = m[r];
        dst[1] = l[r];
        std::copy(o + r * ldo(), o + r * ldo() + d.Dv, dst + 2);
      }
      return;
    }
    // o / l row by row, compacted to rows x Dv (cpu_attn::flash::finish_rows)
    for (index_t r = 0; r < rows; ++r) {
      const float* src = o + r * ldo();
      float* dst = o + r * d.Dv;
      if (l[r] == 0.0f) {
        std::fill(dst, dst + d.Dv, 0.0f);
        continue;
      }
      const float inv = 1.0f / l[r];
      for (index_t c = 0; c < d.Dv; ++c) dst[c] = src[c] * inv;
    }
    io.store((grow + r0) * d.Dv, (grow + r1) * d.Dv, o);
  }

  /// Task t's rows from the partial states of its `splits` key chunks (split_stride
  /// floats apart), merged in order as cpu_attn::flash::merge does, then stored.
  void merge(index_t t, const float* partial, index_t splits, index_t split_stride) const {
    const index_t grp = t / blocks_per_group, blk = t % blocks_per_group;
    const index_t b = grp / d.Hkv, h = grp % d.Hkv;
    const index_t r0 = blk * max_rows, r1 = std::min(d.group() * d.Sq, r0 + max_rows), rows = r1 - r0;
    if (rows <= 0) return;
    const index_t grow = (b * d.Hq + h * d.group()) * d.Sq;
    const index_t w = d.Dv + 2;
    float* o = reinterpret_cast<float*>(cpu_scheduler::scratch(cpu_attn::floats_bytes(std::size_t(rows * d.Dv))));
    for (index_t r = 0; r < rows; ++r) {
      float M = neg_inf;
      bool nan = false;
      for (index_t sp = 0; sp < splits; ++sp) {
        const float* st = partial + sp * split_stride + r * w;
        nan = nan || st[1] != st[1];
        M = std::max(M, st[0]);
      }
      float* orow = o + r * d.Dv;
      if (nan) {
        std::fill(orow, orow + d.Dv, std::numeric_limits<float>::quiet_NaN());
        continue;
      }
      std::fill(orow, orow + d.Dv, 0.0f);
      if (M == neg_inf) continue;  // no key seen by any split: zeros
      float Lsum = 0.0f;
      for (index_t sp = 0; sp < splits; ++sp) {
        const float* st = partial + sp * split_stride + r * w;
        if (st[0] == neg_inf) continue;
        const float f = std::exp(st[0] - M);
        Lsum += st[1] * f;
        for (index_t c = 0; c < d.Dv; ++c) orow[c] += st[2 + c] * f;
      }
      const float inv = 1.0f / Lsum;
      for (index_t c = 0; c < d.Dv; ++c) orow[c] *= inv;
    }
    io.store((grow + r0) * d.Dv, (grow + r1) * d.Dv, o);
  }

  /// A run of keys inside one pool block: its first key's and value's rows, its length.
  struct run_ptrs {
    const KT* k = nullptr;
    const VT* v = nullptr;
    index_t n = 0;
  };

  /// Scores of `rows` q rows against the run's keys (rows ks[2] apart) into s (rows
  /// key_tile apart): the contiguous rows path's dot products. The keys 8 ahead and their
  /// values are prefetched, from the next run past this one's end (the hardware's stream
  /// prefetch stops at a block's end; the contiguous path's rows never end).
  void dots(const run_ptrs& cur, const run_ptrs& nxt, const float* q, index_t rows, float* s) const {
    index_t r = 0;
    bool values = true;  // the values once, with the first rows
    for (; r + 4 <= rows; r += 4, values = false) dots_r<4>(cur, nxt, q + r * d.D, s + r * key_tile, values);
    switch (rows - r) {
      case 3: dots_r<3>(cur, nxt, q + r * d.D, s + r * key_tile, values); break;
      case 2: dots_r<2>(cur, nxt, q + r * d.D, s + r * key_tile, values); break;
      case 1: dots_r<1>(cur, nxt, q + r * d.D, s + r * key_tile, values); break;
      default: break;
    }
  }
  /// Keys are read once, now (non-temporal); values after the tile's scores (into L2).
  template <int Locality>
  static void prefetch_bytes(const void* p, index_t bytes) {
    const char* c = static_cast<const char*>(p);
    for (index_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b, 0, Locality);
  }
  void prefetch_key(const run_ptrs& cur, const run_ptrs& nxt, index_t j, bool values) const {
    const run_ptrs* at = &cur;
    if (j >= cur.n) {
      j -= cur.n;
      at = &nxt;
      if (j >= nxt.n) return;
    }
    prefetch_bytes<0>(at->k + j * ks[2], d.D * index_t(sizeof(KT)));
    if (values) prefetch_bytes<1>(at->v + j * vs[2], d.Dv * index_t(sizeof(VT)));
  }
  template <int R>
  void dots_r(const run_ptrs& cur, const run_ptrs& nxt, const float* q, float* s, bool values) const {
    constexpr int NB = R <= 2 ? 4 : 2;
    const index_t kst = ks[2], n = cur.n;
    const KT* kr = cur.k;
    index_t j = 0;
    for (; j + NB <= n; j += NB) {
      for (int t = 0; t < NB; ++t) prefetch_key(cur, nxt, j + 8 + t, values);
      cpu_gemm::dot<A, R, NB>(d.D, q, kr + j * kst, kst, s + j, key_tile);
    }
    for (; j < n; ++j) {
      prefetch_key(cur, nxt, j + 8, values);
      cpu_gemm::dot<A, R, 1>(d.D, q, kr + j * kst, kst, s + j, key_tile);
    }
  }

  /// The cap, padding and causality of a tile of scores (scorer::finish in flash.hpp).
  template <class Q>
  void finish(float* s, index_t rows, index_t j0, index_t n, index_t npad, index_t len, index_t first_q,
              const Q& query_of) const {
    using V = fvec<A>;
    const bool capped = softcap > 0.0f;
    const bool causal_cut = causal && j0 + n - 1 > first_q + len - d.Sq;
    for (index_t r = 0; r < rows; ++r) {
      float* sr = s + r * key_tile;
      for (index_t j = n; j < npad; ++j) sr[j] = neg_inf;
      if (capped) {
        const V c(softcap), ic(1.0f / softcap);
        for (index_t j = 0; j < npad; j += L) cpu_gemm::vstore<A>(sr + j, c * tanh_approx(cpu_gemm::vload<A>(sr + j) * ic));
        for (index_t j = n; j < npad; ++j) sr[j] = neg_inf;
      }
      if (causal_cut) {
        const index_t last = std::min(len - 1, query_of(r) + len - d.Sq);
        for (index_t j = std::max<index_t>(0, last + 1 - j0); j < n; ++j) sr[j] = neg_inf;
      }
    }
  }

  /// o[rows] += p[rows, nj keys] v[nj rows], rows 4 at a time (flash.hpp's row_pv).
  template <class Row>
  void pv_block(index_t rows, const Row& vrow, index_t nj, const float* p, float* o) const {
    index_t r = 0;
    for (; r + 4 <= rows; r += 4) pv_rows<4>(vrow, nj, p + r * key_tile, o + r * ldo());
    switch (rows - r) {
      case 3: pv_rows<3>(vrow, nj, p + r * key_tile, o + r * ldo()); break;
      case 2: pv_rows<2>(vrow, nj, p + r * key_tile, o + r * ldo()); break;
      case 1: pv_rows<1>(vrow, nj, p + r * key_tile, o + r * ldo()); break;
      default: break;
    }
  }

  /// o[R rows] += p[R rows, nj keys] v[nj rows] (flash.hpp's pv_rows; vr(j): key j's row).
  template <int R, class Row>
  void pv_rows(const Row& vr, index_t nj, const float* pr, float* o) const {
    using V = fvec<A>;
    const index_t dv = d.Dv;
    index_t c = 0;
    for (; c + 2 * L <= dv; c += 2 * L) {
      V acc[R][2];
      for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = V(0.0f);
      for (index_t j = 0; j < nj; ++j) {
        const VT* row = vr(j);
        const V x0 = cpu_gemm::vload<A>(row + c), x1 = cpu_gemm::vload<A>(row + c + L);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const V pj(pr[r * key_tile + j]);
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
    for (; c < dv; ++c) {
      float acc[R] = {};
      for (index_t j = 0; j < nj; ++j) {
        const float x = static_cast<float>(vr(j)[c]);
        for (int r = 0; r < R; ++r) acc[r] += pr[r * key_tile + j] * x;
      }
      for (int r = 0; r < R; ++r) o[r * ldo() + c] += acc[r];
    }
  }
};

/// How run() cuts the work: tasks of rows, key chunks, threads.
struct split_plan {
  index_t tasks = 0, splits = 1, chunk = 0;
  int threads = 1;
};

}  // namespace cpu_paged

template <class KT, class VT>
struct cpu_structural_kernel<paged_attention_op<KT, VT>> {
  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S& s, axis_split) {
    const paged_dims d = paged_attention_dims_of(s);
    const auto& tt = std::get<2>(s.params).t;
    const auto& lt = std::get<3>(s.params).t;
    check_paged_host(paged_attention_op<KT, VT>::name, tt.data(), tt.strides()[0], tt.strides()[1], lt.data(),
                     lt.strides()[0], d, 0, paged_attention_operands(s));
    if (d.B == 0 || d.Hq == 0 || d.Sq == 0 || d.Dv == 0) return;
    const cpu_paged::kernel<A, Io, S> kn(io, s);
    const cpu_paged::split_plan p = plan(state.num_threads, d, kn.blocks_per_group, lt.data(), lt.strides()[0]);
    if (p.splits == 1) {
      cpu_loop::for_tasks(p.tasks, p.threads, [&](index_t t) { kn.run_task(t); });
      return;
    }
    // flash-decoding (flash.hpp's key split): each chunk's partial softmax, then a merge in order
    const index_t split_stride = cpu_paged::max_rows * (d.Dv + 2), task_stride = split_stride * p.splits;
    const auto floats = static_cast<std::size_t>(p.tasks * task_stride);
    std::unique_ptr<float[]> partial(new (std::nothrow) float[floats]);
    if (!partial) {
      throw out_of_memory("kiln::paged_attention: allocating " + std::to_string(floats * sizeof(float)) +
                              " bytes of partial results for " + s.describe() + " failed",
                          floats * sizeof(float), 0);
    }
    cpu_loop::for_tasks(p.tasks * p.splits, p.threads, [&](index_t t) {
      const index_t task = t / p.splits, split = t % p.splits;
      kn.run_task(task, split, p.chunk, partial.get() + task * task_stride + split * split_stride);
    });
    cpu_loop::for_tasks(p.tasks, p.threads, [&](index_t t) { kn.merge(t, partial.get() + t * task_stride, p.splits, split_stride); });
  }

  /// Threads, and the key split when the tasks are fewer than the threads can use and
  /// the keys many (flash.hpp's rule, over the longest sequence): chunks of whole tiles.
  static cpu_paged::split_plan plan(int num_threads, const paged_dims& d, index_t blocks_per_group, const std::int32_t* lens,
                                    index_t ls0) {
    cpu_paged::split_plan p;
    double keys = 0.0;
    index_t longest = 0;
    for (index_t b = 0; b < d.B; ++b) {
      keys += double(lens[b * ls0]);
      longest = std::max<index_t>(longest, lens[b * ls0]);
    }
    const double work = keys * double(d.Hq) * double(d.Sq) * double(d.D + d.Dv);
    p.tasks = d.B * d.Hkv * blocks_per_group;
    const int threads = static_cast<int>(std::clamp(work / double(1 << 18), 1.0, double(std::max(1, num_threads))));
    constexpr index_t tile = cpu_paged::key_tile;
    if (threads > 1 && p.tasks < 4 * threads && longest >= 4 * tile) {
      const index_t want = std::min<index_t>((4 * threads + p.tasks - 1) / p.tasks, longest / (2 * tile));
      if (want > 1) {
        p.chunk = ((longest + want - 1) / want + tile - 1) / tile * tile;
        p.splits = (longest + p.chunk - 1) / p.chunk;
      }
    }
    p.threads = static_cast<int>(std::min<index_t>(threads, p.tasks * p.splits));
    return p;
  }

  /// "cpu.paged_attention.rows", with " split N" when the keys are split (kiln::kernel_variant).
  template <class A, class S>
  static std::string variant(const S& s) {
    const paged_dims d = paged_attention_dims_of(s);
    const auto& lt = std::get<3>(s.params).t;
    const index_t per = (d.group() * d.Sq + cpu_paged::max_rows - 1) / cpu_paged::max_rows;
    const cpu_paged::split_plan p = plan(lt.storage()->ctx->num_threads, d, per, lt.data(), lt.strides()[0]);
    return std::string("cpu.paged_attention.rows") + (p.splits > 1 ? " split " + std::to_string(p.splits) : "");
  }
};

template <>
struct cpu_structural_kernel<paged_write_op> {
  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S& s, axis_split) {
    const paged_dims d = paged_write_dims_of(s);
    const auto& tt = std::get<0>(s.params).t;
    const auto& st = std::get<1>(s.params).t;
    const std::int32_t* tables = tt.data();
    const std::int32_t* starts = st.data();
    const index_t ts0 = tt.strides()[0], ts1 = tt.strides()[1], ss0 = st.strides()[0];
    check_paged_host(paged_write_op::name, tables, ts0, ts1, starts, ss0, d, d.Sq, paged_write_operands(s));
    const index_t rows = d.B * d.Hkv * d.Sq;
    if (rows == 0 || d.D == 0) return;
    // tasks of whole rows, about a buffer (cpu_loop::block_elements) each
    const index_t per = std::max<index_t>(1, cpu_loop::block_elements / d.D);
    const index_t tasks = (rows + per - 1) / per;
    const double elements = double(rows) * double(d.D);
    const int threads = cpu_loop::structural_threads(state, elements, 2.0, tasks);
    using V = typename Io::in_type;
    cpu_loop::for_tasks(tasks, threads, [&](index_t t) {
      V* const buf = reinterpret_cast<V*>(cpu_scheduler::scratch(std::size_t(d.D + 16) * sizeof(V)));
      for (index_t r = t * per; r < std::min(rows, (t + 1) * per); ++r) {
        const index_t b = r / (d.Hkv * d.Sq), h = (r / d.Sq) % d.Hkv;
        const index_t pos = starts[b * ss0] + r % d.Sq;
        const index_t blk = tables[b * ts0 + (pos / d.bs) * ts1];
        io.load(r * d.D, (r + 1) * d.D, buf);
        const index_t at = ((blk * d.Hkv + h) * d.bs + pos % d.bs) * d.D;
        io.store(at, at + d.D, buf);
      }
    });
  }

  template <class A, class S>
  static std::string variant(const S&) {
    return "cpu.paged_write";
  }
};

}  // namespace kiln::detail
