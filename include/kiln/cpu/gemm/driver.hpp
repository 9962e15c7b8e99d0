// kiln/cpu/gemm/driver.hpp — kiln::matmul on the CPU: the paths, the blocking, the
// threads.
//
// Rows of the product are (batch, m) pairs; when b has no batch of its own, every batch
// of a is one tall matrix (rows = batches * M) and the product one GEMM. Paths, chosen per
// product by choose_path() (kiln::kernel_variant names them):
//   dot     rows <= dot_max_rows() and b k-contiguous (an nn.Linear weight read as its
//           transpose): each output a dot product, b streamed once at memory speed,
//           nothing packed (past 4 rows, groups of rows take each few columns in turn;
//           16-bit columns converted once for all the groups below AVX-512: dot_blocked,
//           dot_shared on the dot_groups_4x3 cores; the groups' shape follows the core:
//           microarch.hpp).
//   stream  rows <= MR and b row-major: the micro-kernel reads b in place (no packing).
//   rows_dot  N <= 4 (tall and skinny, a matrix times a vector): dot products of a's rows
//           with b's few columns; a is read once and never packed.
//   transposed  up to 128 rows (past dot's; 64 against narrow weights on some cores:
//           microarch.hpp) against a k-contiguous f32 b (a prefill chunk against an
//           nn.Linear weight): y^T = w x^T, w's rows read in place as the micro-kernel's
//           A (micro_t), x's rows packed once as its B, the tile stored transposed; the
//           weight is never packed (see transposed()).
//   packed  everything else: BLIS-style, loops nc (columns) > kc (depth) > row blocks.
//           Per (nc, kc) block, b is packed into NR-column panels (kc x nc floats in a
//           quarter of the L3) and row blocks of a into MR-row panels (kc and the row
//           block from the L2: blocking_for() in pack.hpp), and the micro-kernel runs,
//           accumulating over kc steps in the output (a bare product) or in a buffer of
//           row chunks x nc (at most 16 MiB) whose finished segments the epilogue reads
//           after the last kc step. The threads split the columns, each packing the
//           panels of b its part needs and running every step of its part without a
//           barrier (split by rows, sharing b's panels, when there are too few panels);
//           with one row block against a weight's k-contiguous columns each thread packs
//           its panels a few at a time into its own scratch, not the shared block.
// Every path hands each finished row segment to the epilogue (structural_io::store)
// once; the bare `y = kiln::matmul(a, b)` into a contiguous f32 tensor accumulates in y
// itself. a's prologue is evaluated row segment by row segment as it is packed.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include "kiln/cpu/gemm/kernel.hpp"
#include "kiln/cpu/gemm/microarch.hpp"
#include "kiln/cpu/gemm/pack.hpp"
#include "kiln/cpu/scheduler.hpp"
#include "kiln/cpu/structural.hpp"
#include "kiln/ops/linalg/matmul.hpp"

namespace kiln::detail {
namespace cpu_gemm {

enum class path { zeros, dot, stream, rows_dot, transposed, packed };

/// The most rows the dot path takes for weights of dtype BT on arch A. A few rows against a
/// k-contiguous b (the decode step of a batch of sequences, a short prefill chunk) read b
/// once there; the packed path converts and packs all of b for them and fills a fraction
/// of its MR-row tile. dot_row_groups() keeps GB columns of b in the L1 while every group
/// of rows passes over them, so the bound is how many GB x K columns the L1 holds:
/// 16-bit columns fit at K = 2048 and serve a tall block of rows from the L2 faster than
/// the packed path does. Measured at 2 threads on a Zen 4 (a loaded machine, both paths
/// interleaved in one process), packed over dot time, rows 24 / 32 / 48 / 64 / 96 / 128 /
/// 192 / 256:
///   AVX-512 f16 [11264, 2048]: 1.89 1.81 1.46 1.45 1.17 1.18 0.94 0.97;
///           f16 [2048, 5632]:  1.89 1.87 1.26 1.62 1.22 1.25 0.74 1.07;
///           bf16 [2048, 2048]: 2.04 1.37 1.53 1.42 1.18 1.17 1.08 0.98;
///           f32 [11264, 2048]: 1.28 1.30 0.98 0.96 0.78 0.81 0.65 0.68;
///           f32 [2048, 5632]:  1.51 1.33 1.26 1.14 1.01 1.00 0.84 0.85;
///   AVX2    f16 [11264, 2048]: 1.43 1.31 1.20 1.04 0.93 0.94 0.87 0.81;
///           f16 [2048, 5632]:  1.41 1.48 1.22 1.14 1.08 1.05 0.89 0.82;
///           f32 [11264, 2048]: 1.15 1.05 1.02 0.89 0.71 0.77 0.71 0.71.
/// f32 weights past 32 rows take the transposed path instead of packing; on AVX-512 the dot
/// path still beats it up to 48 rows (process CPU time, both interleaved, transposed over
/// dot time, rows 40 / 48 / 56 / 64): [2048, 2048] 1.39 1.15 0.99 0.93; at 48 rows
/// [2048, 5632] 1.20, [5632, 2048] 1.01.
template <class A, class BT>
constexpr index_t dot_max_rows() {
  if constexpr (sizeof(BT) < sizeof(float)) return simd::is_avx512<A> ? 128 : 48;
  return simd::is_avx512<A> ? 48 : 32;
}

/// Output columns under which 16-bit weights on AVX-512 leave the dot path past 48 rows
/// for the packed one: a short product pays the dot path's fixed costs (the rows gathered,
/// each task's row stores) over little arithmetic. f16 x [M, 2048] @ w^T at 2 threads of a
/// Zen 4 (medians of 9, two rounds, GFLOP/s dot / packed): w [512, 2048] (k and v under
/// GQA 32/8) at 64, 96, 128 rows 106-167 / 171-175, 106-181 / 192-201, 168-185 / 199-201;
/// w [1024, 2048] about even (181-194 / 153-202); w [1536, 2048] 182-197 / 160-198.
inline constexpr index_t dot_narrow_columns = 1024;
/// Output columns from which microarch's dot_rows_f16_wide applies (gate/up and the
/// vocabulary; q/o, k/v and down are under it).
inline constexpr index_t dot_wide_columns = 8192;

/// dot_max_rows() for a product with N output columns, on this core (microarch.hpp).
template <class A, class BT>
index_t dot_max_rows(index_t N) {
  if constexpr (sizeof(BT) < sizeof(float) && simd::is_avx512<A>) {
    if (N < dot_narrow_columns) return 48;
  } else if constexpr (std::is_same_v<BT, half> && simd::enabled<A>) {
    const microarch& t = tuning();
    if (const int rows = N < dot_wide_columns ? t.dot_rows_f16 : t.dot_rows_f16_wide; rows > 0) return rows;
  }
  return dot_max_rows<A, BT>();
}

/// The most rows the transposed path takes (f32 weights read as their transpose). At 128
/// rows the packed path spent 18% of its time packing the weight (an 8 MiB transpose per
/// thread from memory at 7-9 GB/s, about memcpy speed on this machine, for 4.7 ms of
/// arithmetic at q/o), which the transposed path does not do. Measured at x [S, 2048] @
/// w^T, w [2048, 2048], 2 threads of a Zen 4, process CPU time, both paths interleaved in
/// one process, transposed over packed speed: AVX-512 S = 64 1.35x (12 x 32 tile), 128
/// 1.13-1.25x, 160 0.96x, 256 1.0x; AVX2 S = 64 1.27x, 128 1.05x.
template <class A>
constexpr index_t transposed_max_rows() {
  return 128;
}

/// Output columns up to which microarch's transposed_rows_narrow applies (k and v).
inline constexpr index_t transposed_narrow_columns = 1024;

/// transposed_max_rows() for a product with N output columns, on this core (microarch.hpp).
template <class A>
index_t transposed_max_rows(index_t N) {
  if constexpr (simd::enabled<A> && !simd::is_avx512<A>) {
    if (const int rows = tuning().transposed_rows_narrow; rows > 0 && N <= transposed_narrow_columns) return rows;
  }
  return transposed_max_rows<A>();
}

/// The path for a product of `rows` rows with b (dtype BT) of strides brs along k, bcs
/// along n.
template <class A, class BT>
path choose_path(const matmul_dims& d, index_t rows, index_t brs, index_t bcs) {
  if (d.K == 0) return path::zeros;
  if (rows <= dot_max_rows<A, BT>(d.N) && (brs == 1 || d.K == 1)) return path::dot;
  if (rows <= tile<A>::MR && (bcs == 1 || d.N == 1)) return path::stream;
  if (d.N <= 4) return path::rows_dot;
  // (x's rows are packed whole: at most 64 MiB of them)
  if (std::is_same_v<BT, float> && brs == 1 && rows <= transposed_max_rows<A>(d.N) && rows * d.K <= (index_t(1) << 24)) {
    return path::transposed;
  }
  return path::packed;
}

template <class A>
std::string path_name(path p) {
  const std::string t = std::to_string(tile<A>::MR) + "x" + std::to_string(tile<A>::NR);
  switch (p) {
    case path::zeros: return "cpu.gemm.zeros";
    case path::dot: return "cpu.gemm.dot";
    case path::stream: return "cpu.gemm.stream " + t;
    case path::rows_dot: return "cpu.gemm.rows_dot";
    case path::transposed: return "cpu.gemm.transposed " + std::to_string(tile_t<A>::MR) + "x" + std::to_string(tile_t<A>::NR);
    case path::packed: return "cpu.gemm.packed " + t;
  }
  return "cpu.gemm";
}

/// Where the operands of one matmul statement are, per batch.
template <class S>
struct operands {
  using BT = std::remove_cvref_t<decltype(std::get<0>(std::declval<S>().params).t.data()[0])>;
  using Arg = std::remove_cvref_t<decltype(std::declval<S>().arg)>;
  static constexpr bool a_leaf = kind_of_v<Arg> == node_kind::leaf;

  matmul_dims d;
  const BT* b = nullptr;
  index_t brs = 0, bcs = 0;
  index_t b_batch[max_rank] = {};   // b's offset per batch index (0 where broadcast)
  index_t a_batch[max_rank] = {};   // a leaf: its offset per batch index; else = a_pos
  index_t a_pos[max_rank] = {};     // a's own batch index step per batch index (0 where broadcast)
  index_t ars = 0, acs = 0;         // a leaf: row and k strides
  bool b_batched = false;

  explicit operands(const S& s) : d(matmul_dims_of(s)) {
    const auto& bt = std::get<0>(s.params).t;
    b = bt.data();
    const int R = d.batch.rank();
    const int rb = bt.rank();
    if (d.b_vector) {
      brs = bt.strides()[0];
    } else {
      brs = bt.strides()[rb - 2];
      bcs = bt.strides()[rb - 1];
    }
    const int bb = d.b_vector ? 0 : rb - 2;
    for (int i = 0; i < R; ++i) {
      const int j = i - (R - bb);
      b_batch[i] = j >= 0 && bt.shape()[j] > 1 ? bt.strides()[j] : 0;
      b_batched = b_batched || b_batch[i] != 0;
    }
    const shape& as = s.input_shape;
    const int ab = d.a_vector ? 0 : as.rank() - 2;
    index_t step = 1;  // a's batches in its own row-major order
    for (int i = R - 1; i >= 0; --i) {
      const int j = i - (R - ab);
      const index_t e = j >= 0 ? as[j] : 1;
      a_pos[i] = e > 1 ? step : 0;
      step *= e;
    }
    if constexpr (a_leaf) {
      const auto& at = s.arg.t;
      if (d.a_vector) {
        acs = at.strides()[0];
      } else {
        ars = at.strides()[ab];
        acs = at.strides()[ab + 1];
      }
      for (int i = 0; i < R; ++i) {
        const int j = i - (R - ab);
        a_batch[i] = j >= 0 && as[j] > 1 ? at.strides()[j] : 0;
      }
    } else {
      std::copy(a_pos, a_pos + R, a_batch);
    }
  }

  /// a's own batch index (row-major over its batch dimensions) of output batch bo.
  index_t a_position_batch(index_t bo) const noexcept {
    index_t oa = 0;
    for (int i = d.batch.rank() - 1; i >= 0; --i) {
      oa += (bo % d.batch[i]) * a_pos[i];
      bo /= d.batch[i];
    }
    return oa;
  }

  /// Offsets of batch bo: into b, and into a (a leaf: elements; else a's batch index).
  std::pair<index_t, index_t> batch_offsets(index_t bo) const noexcept {
    index_t ob = 0, oa = 0;
    for (int i = d.batch.rank() - 1; i >= 0; --i) {
      const index_t e = d.batch[i], idx = bo % e;
      bo /= e;
      ob += idx * b_batch[i];
      oa += idx * a_batch[i];
    }
    return {ob, oa};
  }
};

/// One product: rows [r0, r1) of the statement's rows (row r = batch r / M, m = r % M)
/// times b at offset boff.
struct problem {
  index_t r0 = 0, r1 = 0;
  index_t boff = 0;
  index_t rows() const noexcept { return r1 - r0; }
};

/// The most parts the packed product's columns are split into (one per thread).
inline constexpr int max_gemm_parts = 64;

inline index_t ceil_div(index_t a, index_t b) { return (a + b - 1) / b; }
inline index_t round_up(index_t a, index_t b) { return ceil_div(a, b) * b; }

/// Threads for `macs` multiply-adds: one per 2^18 (about 10 us of one core's work).
inline int gemm_threads(const cpu_state& st, double macs) {
  return static_cast<int>(std::clamp(macs / double(1 << 18), 1.0, double(std::max(1, st.num_threads))));
}

template <class A, class Io, class S>
struct gemm {
  using ops_t = operands<S>;
  using BT = typename ops_t::BT;
  static constexpr int MR = tile<A>::MR, NR = tile<A>::NR;
  /// 16-bit weights below AVX-512 take dot_blocked() on the dot path from 12 rows, except
  /// on the cores whose 4 x 3 groups are faster (microarch.hpp)
  static constexpr bool dot_converts_blocks = simd::enabled<A> && !simd::is_avx512<A> && sizeof(BT) < sizeof(float);
  static constexpr index_t dot_blocked_min_rows = 12;
  /// On those cores f16 weights take dot_shared() from 8 rows (5 / 6 / 7 rows: 1.02x /
  /// 0.95x / 1.01x of the 4 x 3 and 6 x 2 groups; one Zen 2 core, [11264, 2048]); bf16,
  /// converted with a shift, keeps the 4 x 3 groups (dot_shared() 0.88-0.94x at 8 to 23
  /// rows, 2 threads, [11264, 2048] and [2048, 2048]).
  static constexpr index_t dot_shared_min_rows = 8;
  /// Below AVX-512, whether this core takes the dot path's 4 x 3 groups (microarch.hpp).
  static bool dot_4x3() noexcept {
    if constexpr (simd::enabled<A> && !simd::is_avx512<A>) return tuning().dot_groups_4x3;
    else return false;
  }

  const Io& io;
  const S& s;
  const ops_t& op;
  float* direct = nullptr;  // the output, when the kernel may accumulate in it

  index_t M() const noexcept { return op.d.M; }
  index_t N() const noexcept { return op.d.N; }
  index_t K() const noexcept { return op.d.K; }

  /// Row r's elements [k0, k0 + kc) of a as floats: a pointer into a itself when it is a
  /// contiguous f32 tensor, else written to tmp.
  const float* a_row(index_t r, index_t k0, index_t kc, float* tmp) const {
    const index_t bo = r / M(), m = r % M();
    const index_t oa = op.batch_offsets(bo).second;
    if constexpr (ops_t::a_leaf) {
      using U = typename std::remove_cvref_t<decltype(s.arg)>::value_type;
      const U* p = s.arg.t.data() + oa + m * op.ars + k0 * op.acs;
      if constexpr (std::is_same_v<U, float>) {
        if (op.acs == 1) return p;
      }
      for (index_t k = 0; k < kc; ++k) tmp[k] = static_cast<float>(p[k * op.acs]);
      return tmp;
    } else {
      const index_t pos = (oa * M() + m) * K() + k0;
      io.load(pos, pos + kc, tmp);
      return tmp;
    }
  }

  /// Asks the memory system for row r's elements [k0, k0 + kc) of a (its tensor, or the
  /// prologue's operands) ahead of a_row(): the rows of a row block lie pages apart, and
  /// the hardware prefetcher starts over on each.
  void a_prefetch(index_t r, index_t k0, index_t kc) const {
    const index_t bo = r / M(), m = r % M();
    const index_t p = (op.a_position_batch(bo) * M() + m) * K() + k0;
    io.prefetch(p, p + kc);
  }

  void store_row(index_t r, index_t n0, index_t n1, const float* vals) const {
    io.store(r * N() + n0, r * N() + n1, vals);
  }

  /// K = 0: every result is 0 (through the epilogue).
  void zeros(const problem& pr, float* buf) const {
    std::fill(buf, buf + N(), 0.0f);
    for (index_t r = pr.r0; r < pr.r1; ++r) store_row(r, 0, N(), buf);
  }

  /// The problem's rows of a as floats (rows x K, lda apart: K unless given) in this
  /// thread's scratch, with room for `extra` more floats after them.
  float* gather_rows(const problem& pr, index_t extra = 0, index_t lda = 0) const {
    const index_t K_ = K(), rows = pr.rows();
    if (lda == 0) lda = K_;
    float* abuf = reinterpret_cast<float*>(cpu_scheduler::scratch(std::size_t(rows * lda + extra) * sizeof(float)));
    for (index_t r = 0; r < rows; ++r) {
      const float* row = a_row(pr.r0 + r, 0, K_, abuf + r * lda);
      if (row != abuf + r * lda) std::copy(row, row + K_, abuf + r * lda);
    }
    return abuf;
  }

  /// Rows <= 4 against a k-contiguous b.
  /// One row (a matrix times a vector, the decode step): when the row of a takes at most
  /// a quarter of the L1, b's columns are taken one after the other (dot_one), so that
  /// each thread reads its part of b as one sequential stream, the access the hardware
  /// prefetcher serves best, while the row stays in the L1 beside it. A longer row would
  /// be pushed out of the L1 by that stream and fetched again for every column: then NB
  /// columns go side by side, each load of the row serving all of them (12 for 16-bit
  /// weights on AVX-512, whose conversions want the row reused more). Measured on the
  /// Llama decode shapes at 2 threads (Zen 4), as a share of a plain read of the same
  /// bytes: K = 2048, f16 74-76% side by side, 87-89% one after the other; K = 5632, f16
  /// 70-82% with 8 side by side, 80-95% with 12; f32 within noise either way. On the whole
  /// decode step: f16 weights 27.5 -> 35.6 GB/s, f32 39.1 -> 41.0. About 32 tasks a
  /// thread (not 8): the thread that finishes first waits less for the other's last one
  /// (f32 decode a further +5%).
  /// Columns side by side in dot_rows<R>: one row, see above; 2 to 4 rows, as many as
  /// leave registers for the rows (R x NB accumulators, R rows and a column): each load of
  /// a row, from the L2 once K is long, then serves more columns. Measured on f16 weights
  /// at 2 threads (Zen 4), thread CPU time against 4 columns: AVX-512 2 rows x 8 columns
  /// 1.2-1.4x faster, 3 x 8 1.35-1.5x, 4 x 6 1.27-1.46x; AVX2 2 x 6 1.1-1.26x, 3 and 4
  /// rows best at 4 (2 and 3 slower).
  template <int R>
  static constexpr int dot_columns() {
    if constexpr (R == 1) return sizeof(BT) < sizeof(float) && simd::is_avx512<A> ? 12 : 8;
    else if constexpr (simd::is_avx512<A>) return R == 4 ? 6 : 8;
    else return R == 2 ? 6 : 4;
  }

  /// bf16 weights (AVX-512, AVX2) of one row go one after the other up to rows of half
  /// the L1, through dot_one_split (the row arranged once per product): at the BitNet
  /// 2B-4T LM head (K = 2560) 20-25% less time than 12 side by side, at 1 and 2 threads
  /// of a loaded Zen 4 (interleaved runs); at K = 2048 (one after the other before)
  /// 10% less.
  template <int R>
  void dot_rows(const problem& pr, int threads) const {
    if constexpr (R == 4 && dot_converts_blocks) {  // 16-bit weights: 4 x 3 (microarch.hpp)
      if (dot_4x3()) return dot_rows_nb<R, 3>(pr, threads);
    }
    dot_rows_nb<R, dot_columns<R>()>(pr, threads);
  }

  template <int R, int NB>
  void dot_rows_nb(const problem& pr, int threads) const {
    const index_t K_ = K(), N_ = N();
    const index_t l1 = index_t(caches().l1);
    const bool split = R == 1 && has_dot_split<A, BT> && index_t(sizeof(float)) * K_ <= l1 / 2;
    float* const abuf = gather_rows(pr, split ? K_ : 0);
    const float* const as = abuf + R * K_;  // split: the row arranged by split_even_odd
    if (split) split_even_odd<A>(K_, abuf, abuf + R * K_);
    const BT* b = op.b + pr.boff;
    const index_t bcs = op.bcs;
    const bool one_by_one = R == 1 && index_t(sizeof(float)) * K_ <= l1 / 4;
    const index_t per_thread = 32;
    const index_t chunk = std::max<index_t>(NB * 4, round_up(ceil_div(N_, index_t(threads) * per_thread), NB));
    const index_t tasks = ceil_div(N_, chunk);
    cpu_loop::for_tasks(tasks, std::min<int>(threads, int(tasks)), [&](index_t t) {
      const index_t n0 = t * chunk, n1 = std::min(N_, n0 + chunk), w = n1 - n0;
      float* vals = reinterpret_cast<float*>(cpu_scheduler::scratch(std::size_t(R * w) * sizeof(float)));
      index_t n = n0;
      if constexpr (R == 1 && has_dot_split<A, BT>) {
        if (split) {
          for (; n < n1; ++n) vals[n - n0] = dot_one_split<A>(K_, as, abuf, b + n * bcs);
        }
      }
      if (one_by_one) {
        for (; n < n1; ++n) vals[n - n0] = dot_one<A>(K_, abuf, b + n * bcs);
      }
      for (; n + NB <= n1; n += NB)
        dot<A, R, NB>(K_, abuf, b + n * bcs, bcs, vals + (n - n0), w, n + 2 * NB <= n1 ? b + (n + NB) * bcs : nullptr);
      for (; n < n1; ++n) dot<A, R, 1>(K_, abuf, b + n * bcs, bcs, vals + (n - n0), w);
      for (int r = 0; r < R; ++r) store_row(pr.r0 + r, n0, n1, vals + r * w);
    });
  }

  /// 5 to dot_max_rows() rows against a k-contiguous b: groups of RG rows (the last one
  /// shorter) take each GB columns in turn, so that the columns just read serve every
  /// group from the L1 and b streams from memory once; the rows of a stay in the L2.
  /// RG x GB accumulators, RG rows and a column in registers: AVX-512 4 x 6 (29 of 32),
  /// AVX2 2 x 6 (15 of 16). Measured at 2 threads (Zen 4), thread CPU time, 8 to 96 rows
  /// of f16 [11264, 2048] and [2048, 5632]: AVX-512 4 x 6 1.55-1.8x faster than 4 x 4
  /// (bf16 alike, f32 at 8 and 16 rows 1.4-1.9x); AVX2 2 x 6 1.4-1.7x faster than 4 x 2.
  /// On some cores 4 x 3 instead, for every weight dtype (microarch.hpp: each converted
  /// vector of a 16-bit column serves 4 FMAs, not 2).
  void dot_row_groups(const problem& pr, int threads) const {
    if (dot_4x3()) {
      if constexpr (std::is_same_v<BT, half>) {
        if (six_row_groups(pr.rows()) > 0) return row_groups_6x2_4x3(pr, threads);
      }
      return row_groups<4, 3>(pr, threads);
    }
    row_groups<simd::is_avx512<A> ? 4 : 2, 6>(pr, threads);
  }

  /// dot_row_groups() for f16 weights on the dot_groups_4x3 cores: groups of 6 rows x 2
  /// columns (12 accumulators, 2 columns and a row: a conversion per 6 FMAs) while the
  /// rows allow, the rest in groups of up to 4 rows x 3 columns (7 and 8 rows as 4 + 3 and
  /// 4 + 4: 6 + 2 measured slower); each block of 6 columns serves every group from the L1
  /// and L2, the first group of 6 on each pair of them fetching the next block's. One
  /// Zen 2 core, f16 [11264, 2048], two rounds, GFLOP/s 4 x 3 groups / these: 6 / 7 / 8 /
  /// 10 / 12 / 16 / 24 / 48 rows 58 / 64-65 / 63 / 61-62 / 65 / 66 / 66-67 / 68 -> 64-65 /
  /// 64-65 / 64 / 66 / 71-72 / 70 / 75 / 73-73.5. bf16 (its conversion a shift) and f32 keep
  /// 4 x 3: 6 x 2 0.85-0.95x there from 12 rows.
  static index_t six_row_groups(index_t rows) noexcept {
    index_t n = 0;
    for (index_t left = rows; left >= 6 && left != 7 && left != 8; left -= 6) ++n;
    return n;
  }
  void row_groups_6x2_4x3(const problem& pr, int threads) const {
    constexpr index_t GB = 6;
    const index_t K_ = K(), rows = pr.rows();
    const index_t sixes = six_row_groups(rows);  // at least one (dot_row_groups)
    const index_t r4 = sixes * 6;  // the first row of the groups of 4
    const float* abuf = gather_rows(pr);
    const index_t bcs = op.bcs;
    column_blocks(
        pr, threads, GB,
        [&](const BT* bn, const BT* next, float* out, index_t w) {
          for (index_t j = 0; j < GB; j += 2) {
            for (index_t s6 = 0; s6 < sixes; ++s6)
              dot<A, 6, 2>(K_, abuf + s6 * 6 * K_, bn + j * bcs, bcs, out + s6 * 6 * w + j, w,
                           next && s6 == 0 ? next + j * bcs : nullptr);
          }
          for (index_t j = 0; j < GB; j += 3) {
            for (index_t g = r4; g < rows; g += 4)
              dot_group<4, 3>(rows - g, K_, abuf + g * K_, bn + j * bcs, bcs, out + g * w + j, w);
          }
        },
        [&](const BT* bn, float* out, index_t w) {
          for (index_t s6 = 0; s6 < sixes; ++s6) dot<A, 6, 1>(K_, abuf + s6 * 6 * K_, bn, bcs, out + s6 * 6 * w, w);
          for (index_t g = r4; g < rows; g += 4) dot_group<4, 1>(rows - g, K_, abuf + g * K_, bn, bcs, out + g * w, w);
        });
  }

  template <int RG, int GB>
  void row_groups(const problem& pr, int threads) const {
    const index_t K_ = K(), rows = pr.rows();
    const float* abuf = gather_rows(pr);
    const index_t bcs = op.bcs;
    column_blocks(
        pr, threads, GB,
        [&](const BT* bn, const BT* next, float* out, index_t w) {  // the first group fetches the next GB columns
          for (index_t g = 0; g < rows; g += RG)
            dot_group<RG, GB>(rows - g, K_, abuf + g * K_, bn, bcs, out + g * w, w, g == 0 ? next : nullptr);
        },
        [&](const BT* bn, float* out, index_t w) {
          for (index_t g = 0; g < rows; g += RG) dot_group<RG, 1>(rows - g, K_, abuf + g * K_, bn, bcs, out + g * w, w);
        });
  }

  /// The row groups' loop over b's columns: tasks of whole blocks of GB columns (about 32
  /// a thread), block(columns, the next block's columns or null, out, w) on each whole
  /// block and column(column, out, w) on each column past them, out the task's rows x w
  /// results (row r at out + r * w) from the block's first column; then the rows stored.
  template <class Block, class Column>
  void column_blocks(const problem& pr, int threads, index_t GB, Block&& block, Column&& column) const {
    const index_t N_ = N(), rows = pr.rows();
    const BT* b = op.b + pr.boff;
    const index_t bcs = op.bcs;
    const index_t chunk = std::max<index_t>(GB * 4, round_up(ceil_div(N_, index_t(threads) * 32), GB));
    const index_t tasks = ceil_div(N_, chunk);
    cpu_loop::for_tasks(tasks, std::min<int>(threads, int(tasks)), [&](index_t t) {
      const index_t n0 = t * chunk, n1 = std::min(N_, n0 + chunk), w = n1 - n0;
      float* vals = reinterpret_cast<float*>(cpu_scheduler::scratch(std::size_t(rows * w) * sizeof(float)));
      index_t n = n0;
      for (; n + GB <= n1; n += GB) block(b + n * bcs, n + 2 * GB <= n1 ? b + (n + GB) * bcs : nullptr, vals + (n - n0), w);
      for (; n < n1; ++n) column(b + n * bcs, vals + (n - n0), w);
      for (index_t r = 0; r < rows; ++r) store_row(pr.r0 + r, n0, n1, vals + r * w);
    });
  }

  /// dot_row_groups() for 16-bit weights below AVX-512, from dot_blocked_min_rows rows:
  /// each group of GB columns is converted to f32 kb values of k at a time into a buffer
  /// in the L1, and every group of rows runs over that block (dot_block, the lane
  /// accumulators kept in memory between blocks) before the next one is converted. In
  /// dot_row_groups() each group of 2 rows converts the columns again (a conversion per
  /// 2 FMAs): it runs at one speed at any number of rows, 45-47 GFLOP/s on one Zen 2 core
  /// (about 46% of its FMA loop) at 6 to 48 rows. Here the conversion (and the weight's
  /// stream from memory) is paid once per column, whatever the rows: slower below 10-12
  /// rows, faster past them. One Zen 2 core, process CPU time, interleaved runs,
  /// GFLOP/s dot_row_groups / dot_blocked: f16 [11264, 2048] at 8 / 12 / 16 / 24 / 32 /
  /// 48 rows 44-47 / 46-47 / 47-48 / 48-49 / 49 / 49-50 against 39-46 / 51-53 / 57-62 /
  /// 63-67 / 63-70 / 67-71; f16 [2048, 5632] at 8 / 12 / 16 / 32 / 48 rows 45-46 / 46-47 /
  /// 47 / 46-49 / 48-50 against 41-45 / 42-48 / 53 / 62 / 67. The sums are dot()'s, bit
  /// for bit. The conversion of a block fetches the next group's columns into the L2.
  void dot_blocked(const problem& pr, int threads) const {
    constexpr int L = tile<A>::L, RG = 2, GB = 6;
    constexpr index_t kb = 256;  // a block of GB columns: 6 KiB of f32
    const index_t K_ = K(), rows = pr.rows();
    const index_t ldc = round_up(K_ / L * L, 16) + 16;  // a converted column
    const float* abuf = gather_rows(pr);
    const index_t bcs = op.bcs;
    k_blocks<RG, GB>(pr, threads, kb, abuf, K_, GB * ldc,
                     [&](const BT* bn, const BT* next, index_t k0, index_t kc, float* cols, float* accs) {
      for (int j = 0; j < GB; ++j) {
        const BT* src = bn + j * bcs + k0;
        float* dst = cols + j * ldc + k0;
        // a line of the column a step (a prefetch of the next group's, whole vectors):
        // a vector a step with a test for the line ran 4-6% slower at 12-16 rows (Zen 2)
        constexpr index_t line = 64 / index_t(sizeof(BT));
        index_t k = 0;
        for (; k + line <= kc; k += line) {
          if (next) prefetch_l2(next + j * bcs + k0 + k);
#pragma GCC unroll 8
          for (index_t i = 0; i < line; i += L) vstore<A>(dst + k + i, vload<A>(src + k + i));
        }
        for (; k < kc; k += L) vstore<A>(dst + k, vload<A>(src + k));
      }
      for (index_t g = 0; g * RG < rows; ++g) {
        block_rows<RG, GB>(rows - g * RG, kc, abuf + g * RG * K_ + k0, K_, cols + k0, ldc, accs + g * RG * GB * L, k0 == 0);
      }
    });
  }

  /// dot_row_groups() for f16 weights on the dot_groups_4x3 cores from
  /// dot_shared_min_rows rows: groups of 4 rows x 3 columns, the first group converting
  /// the columns kb values of k at a time as it runs and leaving them as f32 in a buffer in
  /// the L1 (dot_block_converting), the other groups running over that buffer (dot_block),
  /// the lane accumulators kept in memory between blocks; so a vector of the weight is
  /// converted once for all the rows, not once per group of 4 or 6 (a 256-bit conversion
  /// takes about an FMA's issue slot there). The converting kernel is its own function:
  /// inlined here, two of its three columns went to the stack (8 rows at 61 GFLOP/s a core
  /// against 72). The sums are dot()'s, bit for bit. GFLOP/s groups of 4 x 3 and 6 x 2 /
  /// these, f16, process CPU time: one Zen 2 core, [11264, 2048] at 8 / 12 / 16 / 20 / 23
  /// rows 64.0 / 71.3 / 70.6 / 70.4 / 68.5 -> 71.8 / 77.2 / 79.5 / 75.3 / 79.8; 2 threads
  /// at 8 / 16 / 23 rows: [3072, 2048] (q, k, v) 135 / 141 / 138 -> 146 / 161 / 155, [2048,
  /// 2048] 134 / 139 / 135 -> 143 / 157 / 154, [2048, 5632] 131 / 140 / 132 -> 147 / 155 /
  /// 145, [11264, 2048] 125 / 137 / 135 -> 136 / 157 / 157.
  void dot_shared(const problem& pr, int threads) const {
    constexpr int L = tile<A>::L, RG = 4, GB = 3;
    constexpr index_t kb = 256;  // a block of GB converted columns: 3 KiB
    const index_t K_ = K(), rows = pr.rows();
    // the rows a cache line more than K apart: at K = 2048 the 4 rows of a group fell
    // into one L1 set beside the columns (one Zen 2 core, 8 rows: 64 -> 71 GFLOP/s)
    const index_t lda = K_ + 16;
    const float* abuf = gather_rows(pr, 0, lda);
    const index_t bcs = op.bcs;
    k_blocks<RG, GB>(pr, threads, kb, abuf, lda, GB * kb,
                     [&](const BT* bn, const BT* next, index_t k0, index_t kc, float* cols, float* accs) {
      dot_block_converting<A, RG, GB>(kc, abuf + k0, lda, bn + k0, bcs, cols, kb, accs, k0 == 0, next ? next + k0 : nullptr);
      for (index_t g = 1; g * RG < rows; ++g) {
        block_rows<RG, GB>(rows - g * RG, kc, abuf + g * RG * lda + k0, lda, cols, kb, accs + g * RG * GB * L, k0 == 0);
      }
    });
  }

  /// The loop of the dot paths that cut k into blocks (dot_blocked, dot_shared): tasks of
  /// whole groups of GB columns of b (about 32 a thread), each with its results (rows x
  /// its columns), cols_size floats of converted columns and the lane accumulators of
  /// every group of RG rows in the thread's scratch. For each group of columns,
  /// block(columns, the next group's columns or null, k0, kc, cols, accumulators) runs
  /// every group of rows over values [k0, k0 + kc) of k, kb at a time over the whole
  /// vectors of k (one block at least: with K shorter than a vector it sets the
  /// accumulators to zero); then dot_finish() adds the rest of k and the lane sums go to
  /// the results. Columns past the whole groups go one row at a time through dot() (the
  /// same sums), and the task's rows to the epilogue. a: the rows gathered, lda apart.
  template <int RG, int GB, class Block>
  void k_blocks(const problem& pr, int threads, index_t kb, const float* abuf, index_t lda, index_t cols_size,
                Block&& block) const {
    constexpr int L = tile<A>::L;
    const index_t K_ = K(), N_ = N(), rows = pr.rows();
    const index_t kfull = K_ / L * L;
    const BT* b = op.b + pr.boff;
    const index_t bcs = op.bcs;
    const index_t groups = ceil_div(rows, RG);
    const index_t chunk = std::max<index_t>(GB * 4, round_up(ceil_div(N_, index_t(threads) * 32), GB));
    const index_t tasks = ceil_div(N_, chunk);
    cpu_loop::for_tasks(tasks, std::min<int>(threads, int(tasks)), [&](index_t t) {
      const index_t n0 = t * chunk, n1 = std::min(N_, n0 + chunk), w = n1 - n0;
      const index_t vals_size = round_up(rows * w, 16), acc_size = groups * RG * GB * L;
      float* vals = reinterpret_cast<float*>(
          cpu_scheduler::scratch(std::size_t(vals_size + round_up(cols_size, 16) + acc_size) * sizeof(float)));
      float* cols = vals + vals_size;
      float* accs = cols + round_up(cols_size, 16);
      index_t n = n0;
      for (; n + GB <= n1; n += GB) {
        const BT* bn = b + n * bcs;
        const BT* next = n + 2 * GB <= n1 ? bn + GB * bcs : nullptr;
        for (index_t k0 = 0; k0 == 0 || k0 < kfull; k0 += kb) block(bn, next, k0, std::min(kb, kfull - k0), cols, accs);
        for (index_t g = 0; g < groups; ++g) {
          finish_rows<RG, GB>(rows - g * RG, K_, kfull, accs + g * RG * GB * L, abuf + g * RG * lda, lda, bn, bcs,
                              vals + g * RG * w + (n - n0), w);
        }
      }
      for (; n < n1; ++n) {
        for (index_t r = 0; r < rows; ++r) dot<A, 1, 1>(K_, abuf + r * lda, b + n * bcs, bcs, vals + r * w + (n - n0), w);
      }
      for (index_t r = 0; r < rows; ++r) store_row(pr.r0 + r, n0, n1, vals + r * w);
    });
  }

  /// dot_block() of min(left, R) rows.
  template <int R, int GB>
  static void block_rows(index_t left, index_t kc, const float* a, index_t lda, const float* cols, index_t ldc,
                         float* acc, bool first) {
    if constexpr (R > 1) {
      if (left < R) return block_rows<R - 1, GB>(left, kc, a, lda, cols, ldc, acc, first);
    }
    dot_block<A, R, GB>(kc, a, lda, cols, ldc, acc, first);
  }

  /// dot_finish() of min(left, R) rows.
  template <int R, int GB>
  static void finish_rows(index_t left, index_t K_, index_t kfull, const float* acc, const float* a, index_t lda,
                          const BT* b, index_t bcs, float* out, index_t ldo) {
    if constexpr (R > 1) {
      if (left < R) return finish_rows<R - 1, GB>(left, K_, kfull, acc, a, lda, b, bcs, out, ldo);
    }
    dot_finish<A, R, GB>(K_, kfull, acc, a, lda, b, bcs, out, ldo);
  }

  /// dot() of min(left, RG) rows against NB columns.
  template <int RG, int NB>
  static void dot_group(index_t left, index_t K_, const float* a, const BT* b, index_t bcs, float* out, index_t ldo,
                        const BT* next = nullptr) {
    if constexpr (RG == 2) {
      if (left == 1) dot<A, 1, NB>(K_, a, b, bcs, out, ldo, next);
      else dot<A, 2, NB>(K_, a, b, bcs, out, ldo, next);
    } else {
      switch (left) {
        case 1: dot<A, 1, NB>(K_, a, b, bcs, out, ldo, next); break;
        case 2: dot<A, 2, NB>(K_, a, b, bcs, out, ldo, next); break;
        case 3: dot<A, 3, NB>(K_, a, b, bcs, out, ldo, next); break;
        default: dot<A, 4, NB>(K_, a, b, bcs, out, ldo, next); break;
      }
    }
  }

  /// Rows <= MR against a row-major b read in place.
  void stream(const problem& pr, int threads) const {
    const index_t K_ = K(), N_ = N(), rows = pr.rows();
    float* apan = reinterpret_cast<float*>(cpu_scheduler::scratch(std::size_t(MR * K_ + K_) * sizeof(float)));
    float* tmp = apan + MR * K_;
    for (index_t i = 0; i < rows; ++i) pack_a_row<A>(a_row(pr.r0 + i, 0, K_, tmp), int(i), K_, apan);
    pad_a_panel<A>(int(rows), K_, apan);
    const BT* b = op.b + pr.boff;
    const strided<BT> bm{b, op.brs, op.bcs};
    const index_t panels = ceil_div(N_, NR);
    const index_t per = std::max<index_t>(1, ceil_div(panels, index_t(threads) * 4));
    const index_t tasks = ceil_div(panels, per);
    cpu_loop::for_tasks(tasks, std::min<int>(threads, int(tasks)), [&](index_t t) {
      const index_t p0 = t * per, p1 = std::min(panels, p0 + per);
      const index_t n0 = p0 * NR, n1 = std::min(N_, p1 * NR), w = p1 * NR - n0;
      const bool tail = n1 - n0 < w;
      float* buf = reinterpret_cast<float*>(
          cpu_scheduler::scratch(std::size_t(MR * w + (tail ? K_ * NR : 0)) * sizeof(float) + 64));
      float* bpan = buf + MR * w;
      for (index_t p = p0; p < p1; ++p) {
        const index_t n = p * NR, nr = std::min<index_t>(NR, N_ - n);
        float* c = buf + (n - n0);
        if (nr == NR) {
          micro<A, false>(K_, apan, b + n * op.bcs, op.brs, c, w, false);
        } else {
          pack_b_panel<A>(bm, K_, n, nr, bpan);
          micro<A, true>(K_, apan, bpan, NR, c, w, false);
        }
      }
      for (index_t i = 0; i < rows; ++i) store_row(pr.r0 + i, n0, n1, buf + i * w);
    });
  }

  /// N <= 4 columns (a tall, skinny product, or a matrix times a vector): each output a
  /// dot product of a row of a with a column of b, a read once, nothing of it packed.
  template <int NN>
  void rows_dot(const problem& pr, int threads) const {
    const index_t K_ = K(), rows = pr.rows();
    float* bcols = reinterpret_cast<float*>(cpu_scheduler::scratch(std::size_t(NN * K_) * sizeof(float)));
    const BT* b = op.b + pr.boff;
    for (int n = 0; n < NN; ++n) {
      for (index_t k = 0; k < K_; ++k) bcols[n * K_ + k] = static_cast<float>(b[k * op.brs + n * op.bcs]);
    }
    constexpr int NB = 4;  // rows of a per dot() call
    const index_t chunk = std::max<index_t>(NB * 4, round_up(ceil_div(rows, index_t(threads) * 8), NB));
    const index_t tasks = ceil_div(rows, chunk);
    cpu_loop::for_tasks(tasks, std::min<int>(threads, int(tasks)), [&](index_t t) {
      const index_t r0 = pr.r0 + t * chunk, r1 = std::min(pr.r1, r0 + chunk), h = r1 - r0;
      float* arows = reinterpret_cast<float*>(
          cpu_scheduler::scratch(std::size_t(NB * K_ + K_ + 2 * NN * chunk) * sizeof(float)));
      float* tmp = arows + NB * K_;
      float* cols = tmp + K_;      // [NN][chunk]
      float* vals = cols + NN * chunk;  // [chunk][NN]: the output's order
      for (index_t r = r0; r < r1; r += NB) {
        const int nb = int(std::min<index_t>(NB, r1 - r));
        for (int i = 0; i < nb; ++i) {
          const float* row = a_row(r + i, 0, K_, tmp);
          std::copy(row, row + K_, arows + i * K_);
        }
        if (nb == NB) dot<A, NN, NB>(K_, bcols, arows, K_, cols + (r - r0), chunk);
        else {
          for (int i = 0; i < nb; ++i) dot<A, NN, 1>(K_, bcols, arows + i * K_, K_, cols + (r - r0) + i, chunk);
        }
      }
      for (index_t i = 0; i < h; ++i) {
        for (int n = 0; n < NN; ++n) vals[i * NN + n] = cols[n * chunk + i];
      }
      io.store(r0 * NN, r1 * NN, vals);  // rows r0 .. r1 are contiguous output positions
    });
  }

  /// Up to transposed_max_rows() rows against a k-contiguous f32 b (x @ w^T, w an
  /// nn.Linear weight): y^T = w x^T, w's rows read in place as the micro-kernel's A
  /// (micro_t: MR rows of w broadcast per k, each a sequential stream the hardware
  /// prefetcher follows, reused from the L2 by every NR-row panel of x), x's rows packed
  /// once (all of K, the threads a panel each) into NR-wide panels as its B. The threads
  /// then split w's rows into four parts each (claimed in turn, so that a thread slowed
  /// by other work holds up one part); a part runs its kc steps in order, a step's
  /// panels of x (rows x kc floats) in half of the L2, and the tile of y is added to
  /// (transposed) once per step. Measured at x [128, 2048] @ w^T, w [2048, 2048], 2
  /// threads of a Zen 4 (process CPU time, loaded machine, the 12 x 32 tile): kc 256 /
  /// 512 / 1024 / 2048 at 66-68% / 74-77% / 80% / 79-83% of the FMA loop.
  void transposed(const problem& pr, int threads) const {
    constexpr int MT = tile_t<A>::MR, NT = tile_t<A>::NR;
    const index_t K_ = K(), N_ = N(), rows = pr.rows();
    const index_t xpanels = ceil_div(rows, NT);
    // a step's packed rows of x (rows x kc floats) in half of the L2
    const index_t kc_max = std::clamp<index_t>(index_t(caches().l2 / 2 / sizeof(float)) / (xpanels * NT) / 16 * 16, 64, 2048);
    const index_t steps = ceil_div(K_, kc_max), kc = ceil_div(K_, steps);
    float* xpack = reinterpret_cast<float*>(cpu_scheduler::scratch(std::size_t(xpanels * NT * K_) * sizeof(float)));
    cpu_loop::for_tasks(xpanels, std::min<int>(threads, int(xpanels)), [&](index_t q) {
      const int nr = int(std::min<index_t>(NT, rows - q * NT));
      float* tmp = reinterpret_cast<float*>(cpu_scheduler::scratch(std::size_t(nr * K_) * sizeof(float)));
      const float* rp[NT];
      for (int i = 0; i < nr; ++i) rp[i] = a_row(pr.r0 + q * NT + i, 0, K_, tmp + i * K_);
      pack_rows_panel<A>(rp, nr, K_, xpack + q * NT * K_);
    });
    const float* b = op.b + pr.boff;
    const index_t ldb = op.bcs;
    const index_t wpanels = ceil_div(N_, MT);
    const index_t parts = std::min<index_t>(wpanels, index_t(threads) * 4);
    cpu_loop::for_tasks(parts, std::min<int>(threads, int(parts)), [&](index_t t) {
      const index_t p0 = t * wpanels / parts, p1 = (t + 1) * wpanels / parts;
      const index_t n0 = p0 * MT, n1 = std::min(N_, p1 * MT), w = n1 - n0;
      float* c = direct ? direct + pr.r0 * N_ + n0
                        : reinterpret_cast<float*>(cpu_scheduler::scratch(std::size_t(rows * w) * sizeof(float)));
      const index_t ldc = direct ? N_ : w;
      for (index_t s = 0; s < steps; ++s) {
        const index_t k0 = s * kc, kcb = std::min(kc, K_ - k0);
        for (index_t p = p0; p < p1; ++p) {
          const index_t n = p * MT;
          const int mr = int(std::min<index_t>(MT, N_ - n));
          for (index_t q = 0; q < xpanels; ++q) {
            const int nr = int(std::min<index_t>(NT, rows - q * NT));
            micro_t<A>(kcb, b + n * ldb + k0, ldb, xpack + q * NT * K_ + k0 * NT, c + q * NT * ldc + (n - n0), ldc, s > 0, mr, nr);
          }
        }
      }
      if (!direct) {
        for (index_t r = 0; r < rows; ++r) store_row(pr.r0 + r, n0, n1, c + r * ldc);
      }
    });
  }

  /// The most columns of one block of b in packed(). The quarter-of-the-L3 bound alone
  /// grows nc as kc shrinks: with kc = 256 (AVX2) and a 16 MiB L3 it gave 4096 columns (a
  /// Zen 4's kc = 1024 and 32 MiB, 2048), and each step's row block then writes its output
  /// tiles across rows x 4096 floats (16 KiB of each output row, 1-2 MiB at 128 rows,
  /// past the L2) beside a 4 MiB block of b. Measured on a Zen 2 (AVX2, 512 KiB L2, 16 MiB
  /// L3), x [S, 2048] @ w^T, w f16 [11264, 2048], process CPU time, two interleaved rounds,
  /// GFLOP/s at nc = 4096 (the L3 bound) / 2048 / 1024: 2 threads S = 128 145-150 / 161-170
  /// / 168-169, S = 512 168-176 / 188-192 / 186-188; one thread S = 128 80 / 88 / 88.
  static constexpr index_t nc_limit = 2048;

  /// BLIS-style blocked product (see the top of this file).
  void packed(const problem& pr, int threads) const {
    const index_t K_ = K(), N_ = N();
    const blocking bl = blocking_for<A>(K_, caches());
    const index_t kc = bl.kc, mc_max = bl.mc;
    // a block of b (kc x nc) in a quarter of the L3, and at most nc_limit columns
    const index_t nc_max =
        std::max<index_t>(NR, std::min(nc_limit, index_t(caches().l3 / 4 / (kc * sizeof(float)))) / NR * NR);
    const index_t njc = ceil_div(N_, nc_max);
    const index_t nc = round_up(ceil_div(N_, njc), NR);
    // rows go in chunks whose accumulators (chunk x nc floats) stay within 16 MiB
    const index_t chunk_max = direct ? pr.rows() : std::max<index_t>(MR * 16, (index_t(4) << 20) / nc / MR * MR);
    const index_t nchunks = ceil_div(pr.rows(), chunk_max);
    // the accumulator rows (not the output's: its stride is the caller's) are padded by a
    // cache line, so that the MR rows of a tile do not fall into the same L1 set when nc
    // is a multiple of 1024 floats
    const index_t acc_ld = nc + 16;

    const BT* b = op.b + pr.boff;
    const strided<BT> bm{b, op.brs, op.bcs};
    // b's panels lie a cache line more than kc x NR floats apart, so that the group of
    // panels pack_b_rows() writes side by side does not map to one L1 set (kc x NR floats
    // is 64 KiB at kc = 512 on AVX-512)
    const auto panel_stride = [](index_t kcb) { return kcb * NR + 16; };
    const index_t bpack_size = ceil_div(nc, NR) * panel_stride(kc);
    float* bpack = reinterpret_cast<float*>(cpu_scheduler::scratch(
        std::size_t(bpack_size + (direct ? 0 : std::min(chunk_max, pr.rows()) * acc_ld)) * sizeof(float)));
    float* accbuf = bpack + bpack_size;
    const auto packed_state = std::make_unique<std::atomic<std::uint8_t>[]>(std::size_t(ceil_div(nc, NR)));
    for (index_t ch = 0; ch < nchunks; ++ch) {
      const index_t c0 = pr.r0 + ch * pr.rows() / nchunks, c1 = pr.r0 + (ch + 1) * pr.rows() / nchunks;
      const index_t rows = c1 - c0;
      const index_t rpanels = ceil_div(rows, MR);
      for (index_t jc = 0; jc < N_; jc += nc) {
        const index_t ncb = std::min(nc, N_ - jc);
        const index_t panels = ceil_div(ncb, NR);
        float* cbase = direct ? direct + c0 * N_ + jc : accbuf;
        const index_t ldc = direct ? N_ : acc_ld;
        // The threads split the columns: thread w packs the panels of b in its own part
        // and computes (and, at the last step, hands to the epilogue) every row block of
        // that part, so that what one thread writes (packed b, the output or accumulators)
        // is seldom read or written by another. Two cores need not share a cache (the
        // 2-core Zen 4 machine: one-way core-to-core latency 160-170 ns, another CCD):
        // with packed b shared, packing took 15% of the product's time at n = 512 on two
        // threads against 2.4% on one. Each thread packs a's row blocks itself (a's
        // packing is done once per thread). A thread done with its own part takes row
        // blocks from another part still running. With too few panels for that, the
        // threads split the rows instead and share b's packed panels.
        const index_t nsplit = threads > 1 && panels >= 2 * threads ? std::min(threads, max_gemm_parts) : 1;
        // row blocks of whole MR-row panels, as even as panels allow (split by rows: at
        // least one a thread)
        index_t mblocks = std::min(ceil_div(rows, mc_max), rpanels);
        if (nsplit == 1 && threads > 1) mblocks = std::min(round_up(mblocks, threads), rpanels);
        const auto block_rows = [&](index_t mb) {  // [first, last) row of block mb, from c0
          return std::pair<index_t, index_t>{std::min(rows, mb * rpanels / mblocks * MR),
                                             std::min(rows, (mb + 1) * rpanels / mblocks * MR)};
        };
        // b's block is packed on first use, in groups of panels (a row-major b is then
        // read in runs of group * NR floats per k, not NR): the first task to need a group
        // packs it; a task needing a group another is packing waits for it. Parts are
        // whole groups (groups small enough to split the panels evenly).
        const index_t group = nsplit > 1 ? std::clamp<index_t>(panels / (2 * nsplit), 1, 8) : 8;
        const index_t groups = ceil_div(panels, group);
        const auto part_panels = [&](index_t ns) {  // [first, last) panel of part ns
          return std::pair<index_t, index_t>{std::min(panels, ns * groups / nsplit * group),
                                             std::min(panels, (ns + 1) * groups / nsplit * group)};
        };
        const index_t steps = ceil_div(K_, kc);
        const index_t bps = panel_stride(kc);  // the same for every step (parts may be at different steps)
        std::atomic<index_t> next_block[max_gemm_parts];  // per part: the next row block to claim
        std::atomic<index_t> part_step[max_gemm_parts];   // per part: the step its blocks are claimed for
        for (index_t ns = 0; ns < nsplit; ++ns) part_step[ns].store(-1, std::memory_order_relaxed);
        // panels [q0, q1) at step k0, panel q at dst + (q - q0) * bps
        const auto pack_panels = [&](index_t q0, index_t q1, index_t k0, float* dst) {
          const index_t kcb = std::min(kc, K_ - k0);
          const strided<BT> part{bm.at(k0, 0), bm.rs, bm.cs};
          const index_t full = std::min(q1, (N_ - jc) / NR);  // panels without an edge
          if (bm.cs == 1 && q0 < full) pack_b_rows<A>(part, kcb, jc + q0 * NR, full - q0, dst, bps);
          for (index_t q = bm.cs == 1 ? std::max(q0, full) : q0; q < q1; ++q) {
            const index_t n = jc + q * NR;
            pack_b_panel<A>(part, kcb, n, std::min<index_t>(NR, N_ - n), dst + (q - q0) * bps);
          }
        };
        const auto ensure_packed = [&](index_t gi, index_t k0) {
          std::atomic<std::uint8_t>& st = packed_state[gi];
          if (st.load(std::memory_order_acquire) == 2) return;
          std::uint8_t expect = 0;
          if (st.compare_exchange_strong(expect, 1, std::memory_order_acq_rel)) {
            pack_panels(gi * group, std::min(panels, gi * group + group), k0, bpack + gi * group * bps);
            st.store(2, std::memory_order_release);
            return;
          }
          while (st.load(std::memory_order_acquire) != 2) cpu_relax();
        };
        // One row block (rows <= mc) against k-contiguous columns (a weight, x @ w^T): each
        // packed panel serves that block alone, so its thread packs a few panels at a time
        // into its own scratch, which stays in the L2 (the block of b shared by the
        // threads, 2 MiB at nc = 2048 and kc = 256 on AVX2, went out to the L3, and packing
        // read each line back to write it). A row-major b keeps the shared groups, which
        // it reads in runs of group x NR floats a row. One Zen 2 core, f16
        // [11264, 2048] at S = 128: packing 12% -> 6% of the product's time (perf), with
        // pack_columns() holding its column pointers; 2 threads, process CPU time, two
        // rounds, GFLOP/s S = 64 / 128 149-152 / 162-167 -> 161-163 / 174; kv [512, 2048]
        // at 128 166-168 -> 171-173, down [2048, 5632] 174-175 -> 179-181. Fetching the
        // next group's columns into the L2 meanwhile (a part per micro-panel of a) made
        // it 2% slower again.
        const bool own = mblocks == 1 && bm.rs == 1;
        // own: the panels packed at a time, about an eighth of the L2 (AVX2 kc = 256 with
        // 512 KiB: 3 panels of 16 KiB; AVX-512 kc = 1024 with 1 MiB: one of 128 KiB). On the
        // Zen 2, 2 panels at a time and 8 measured the same (2 threads, x [128, 2048] @ w^T,
        // f16 w [11264, 2048] and [512, 2048]: 171-175 GFLOP/s each).
        const index_t own_group =
            std::clamp<index_t>(index_t(caches().l2 / 8 / sizeof(float)) / bps, 1, group);
        // row block mb of part ns at step s: pack a's block, run the micro-kernel over
        // the part's panels, and at the last step hand the finished segments to the
        // epilogue. start: the panel (from the part's first) to begin with.
        const auto block = [&](index_t mb, index_t ns, index_t s, index_t start) {
          const index_t k0 = s * kc, kcb = std::min(kc, K_ - k0);
          const bool add = s > 0, last = s + 1 == steps;
          const auto [b0, b1] = block_rows(mb);
          const auto [p0, p1] = part_panels(ns);
          const index_t mr_rows = b1 - b0;
          const index_t apanels = ceil_div(mr_rows, MR);
          const index_t apack_size = round_up((apanels + 1) * MR * kcb, 16);
          float* apack = reinterpret_cast<float*>(
              cpu_scheduler::scratch(std::size_t(apack_size + (own ? own_group * bps : 0)) * sizeof(float)));
          float* tmp = apack + apanels * MR * kcb;  // MR rows of kcb floats (a's converted rows)
          float* gpack = apack + apack_size;       // own: the panels in use
          for (index_t ip = 0; ip < apanels; ++ip) {
            float* panel = apack + ip * MR * kcb;
            const int prow = int(std::min<index_t>(MR, mr_rows - ip * MR));
            for (index_t i = (ip + 1) * MR; i < std::min<index_t>((ip + 2) * MR, mr_rows); ++i) {
              a_prefetch(c0 + b0 + i, k0, kcb);  // the next panel's rows while this one packs
            }
            const float* rp[MR];
            for (int i = 0; i < prow; ++i) rp[i] = a_row(c0 + b0 + ip * MR + i, k0, kcb, tmp + i * kcb);
            pack_a_rows<A>(rp, prow, kcb, panel);
          }
          const index_t span = p1 - p0;
          for (index_t i = 0; i < span; ++i) {
            const index_t p = p0 + (start + i) % span;
            const float* bpan;
            if (own) {
              // start is 0 here: the part's panels in order, own_group at a time
              const index_t q0 = p - (p - p0) % own_group;
              if (p == q0) pack_panels(q0, std::min(p1, q0 + own_group), k0, gpack);
              bpan = gpack + (p - q0) * bps;
            } else {
              ensure_packed(p / group, k0);
              bpan = bpack + p * bps;
            }
            const int nr = int(std::min<index_t>(NR, ncb - p * NR));
            for (index_t ip = 0; ip < apanels; ++ip) {
              const float* apan = apack + ip * MR * kcb;
              const int mr = int(std::min<index_t>(MR, mr_rows - ip * MR));
              float* c = cbase + (b0 + ip * MR) * ldc + p * NR;
              if (mr == MR && nr == NR) micro<A, true>(kcb, apan, bpan, NR, c, ldc, add);
              else micro_edge<A, true>(kcb, apan, bpan, NR, c, ldc, add, mr, nr);
            }
          }
          if (!direct && last) {  // the epilogue, once per finished row segment
            const index_t n0 = p0 * NR, n1 = std::min(ncb, p1 * NR);
            for (index_t i = b0; i < b1; ++i) store_row(c0 + i, jc + n0, jc + n1, accbuf + i * acc_ld + n0);
          }
        };
        if (nsplit > 1) {
          // Split by columns: no barrier between steps. The thread of part ns runs every
          // step of it; a part's packed panels and blocks are only its own until its last
          // step, when a thread done with its own part takes row blocks of it too (their
          // earlier steps are done by then: a part runs its steps in order). Measured at
          // 512 x 4096 x 4096 on two threads, a barrier per step left the threads idle
          // ~6% of the time.
          cpu_loop::for_tasks(nsplit, int(nsplit), [&](index_t home) {
            const auto [p0, p1] = part_panels(home);
            for (index_t s = 0; s < steps; ++s) {
              for (index_t gi = p0 / group; gi < ceil_div(p1, group); ++gi) packed_state[gi].store(0, std::memory_order_relaxed);
              next_block[home].store(0, std::memory_order_relaxed);
              part_step[home].store(s, std::memory_order_release);
              for (index_t mb; (mb = next_block[home].fetch_add(1, std::memory_order_acq_rel)) < mblocks;) block(mb, home, s, 0);
            }
            for (index_t d = 1; d < nsplit; ++d) {
              // a part no thread has started is left to the thread that will (with fewer
              // threads than parts, or run inline, parts run one after another)
              const index_t ns = (home + d) % nsplit;
              index_t at;
              while ((at = part_step[ns].load(std::memory_order_acquire)) >= 0 && at != steps - 1) cpu_relax();
              if (at < 0) continue;
              for (index_t mb; (mb = next_block[ns].fetch_add(1, std::memory_order_acq_rel)) < mblocks;) {
                block(mb, ns, steps - 1, 0);
              }
            }
          });
        } else {
          // Split by rows: b's panels are shared, so the steps are taken together. The
          // threads start at different panels, so that at the start of a step they pack
          // different groups side by side.
          const index_t workers = std::min<index_t>(threads, mblocks);
          for (index_t s = 0; s < steps; ++s) {
            for (index_t gi = 0; gi < groups; ++gi) packed_state[gi].store(0, std::memory_order_relaxed);
            next_block[0].store(0, std::memory_order_relaxed);
            cpu_loop::for_tasks(workers, int(workers), [&](index_t w) {
              for (index_t mb; (mb = next_block[0].fetch_add(1, std::memory_order_relaxed)) < mblocks;) {
                block(mb, 0, s, w * panels / workers);
              }
            });
          }
        }
      }
    }
  }

  void run(const problem& pr, path p, int threads) const {
    switch (p) {
      case path::zeros: {
        float* buf = reinterpret_cast<float*>(cpu_scheduler::scratch(std::size_t(N()) * sizeof(float)));
        zeros(pr, buf);
        break;
      }
      case path::dot:
        switch (pr.rows()) {
          case 1: dot_rows<1>(pr, threads); break;
          case 2: dot_rows<2>(pr, threads); break;
          case 3: dot_rows<3>(pr, threads); break;
          case 4: dot_rows<4>(pr, threads); break;
          default:
            if constexpr (dot_converts_blocks) {
              if (!dot_4x3() && pr.rows() >= dot_blocked_min_rows) {
                dot_blocked(pr, threads);
                break;
              }
              if constexpr (std::is_same_v<BT, half>) {
                if (dot_4x3() && pr.rows() >= dot_shared_min_rows) {
                  dot_shared(pr, threads);
                  break;
                }
              }
            }
            dot_row_groups(pr, threads);
            break;
        }
        break;
      case path::stream: stream(pr, threads); break;
      case path::rows_dot:
        switch (N()) {
          case 1: rows_dot<1>(pr, threads); break;
          case 2: rows_dot<2>(pr, threads); break;
          case 3: rows_dot<3>(pr, threads); break;
          default: rows_dot<4>(pr, threads); break;
        }
        break;
      case path::transposed:
        if constexpr (std::is_same_v<BT, float>) transposed(pr, threads);
        break;
      case path::packed: packed(pr, threads); break;
    }
  }
};

/// Rows of one product: all batches at once when b has no batch of its own.
template <class S>
index_t product_rows(const operands<S>& op) {
  return op.b_batched ? op.d.M : op.d.batches() * op.d.M;
}

}  // namespace cpu_gemm

/// The CPU kernel of kiln::matmul (ops/linalg/matmul.hpp).
template <class BT>
struct cpu_structural_kernel<matmul_op<BT>> {
  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S& s, axis_split) {
    using namespace cpu_gemm;
    const operands<S> op(s);
    const matmul_dims& d = op.d;
    if (d.batches() == 0 || d.M == 0 || d.N == 0) return;
    const gemm<A, Io, S> g{io, s, op, io.direct_out()};
    const index_t rows = product_rows(op);
    const path p = choose_path<A, BT>(d, rows, op.brs, op.bcs);
    const int threads = gemm_threads(state, d.macs() + double(d.batches() * d.M * d.N));
    if (!op.b_batched) {
      g.run(problem{0, rows, 0}, p, threads);
      return;
    }
    const index_t batches = d.batches();
    const auto one = [&](index_t bo, int t) { g.run(problem{bo * d.M, bo * d.M + d.M, op.batch_offsets(bo).first}, p, t); };
    if (batches >= threads && d.macs() / double(batches) < double(1 << 22)) {
      cpu_loop::for_tasks(batches, threads, [&](index_t bo) { one(bo, 1); });  // small products side by side
    } else {
      for (index_t bo = 0; bo < batches; ++bo) one(bo, threads);
    }
  }

  /// The path run() takes for s (kiln::kernel_variant).
  template <class A, class S>
  static std::string variant(const S& s) {
    using namespace cpu_gemm;
    const operands<S> op(s);
    return path_name<A>(choose_path<A, BT>(op.d, product_rows(op), op.brs, op.bcs));
  }
};

}  // namespace kiln::detail
