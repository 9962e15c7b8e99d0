// kiln/cpu/reduce/reduce.hpp — the reduce family on the CPU: any reducer (sum, mean, amax,
// amin, custom) and argmax/argmin, over an axis or all elements.
//
// Rows (inner == 1: the last axis, or all elements): blocks of whole rows are read into
// a buffer with one prologue run and each row is combined with four vector accumulators;
// rows longer than a buffer are read a buffer at a time. When there are fewer rows than
// threads and the rows are long (a reduction of all elements), each row is cut into
// segments that threads combine separately, and the segments' partial results are
// combined in order at the end (the result does not depend on the thread count).
// Columns (inner > 1: an axis before the last): each task owns a block of up to
// column_block outputs and walks the axis, reading one run of the input per step and
// combining it lane-wise into the block's accumulators: no transposing copy, every read
// a contiguous run when the input is.
// Each input element is read once; each output written once, through the epilogue.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "kiln/cpu/reduce/lines.hpp"
#include "kiln/cpu/structural.hpp"
#include "kiln/ops/reduce/argmax.hpp"
#include "kiln/ops/reduce/reducer.hpp"

namespace kiln::detail {

namespace cpu_reduce {

/// Outputs a column task owns (its accumulators stay in L1 with the run it reads).
inline constexpr index_t column_block = 2048;
/// Rows at least this long are cut into segments when there are fewer rows than threads.
inline constexpr index_t segment_elements = index_t(1) << 16;

template <class R, class C>
C finalize(C acc, index_t n) {
  if constexpr (requires { R::finalize(acc, n); }) return R::finalize(acc, n);
  else return acc;
}

/// (value, index) of the extreme so far; `better` decides whether v at a later index replaces it.
template <bool Largest, class C>
bool better(C v, C best) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(best)) return false;  // the first NaN wins
    if (std::isnan(v)) return true;
  }
  return Largest ? v > best : v < best;
}

/// Index of the extreme of x[0, n) (first on ties, first NaN) and its value, offset by base.
template <class A, bool Largest, class C>
void arg_run(const C* x, index_t n, index_t base, C& best, std::int64_t& at) {
  index_t i = 0;
  if constexpr (simd::enabled<A> && sizeof(C) == 4) {
    using V = xsimd::batch<C, A>;
    using I = xsimd::batch<std::int32_t, A>;
    constexpr auto W = static_cast<index_t>(V::size);
    if (n >= W) {
      V bv = V::load_unaligned(x);
      alignas(64) std::int32_t iota[W];
      for (index_t k = 0; k < W; ++k) iota[k] = static_cast<std::int32_t>(k);
      I bi = I::load_aligned(iota), cur = bi;
      for (i = W; i + W <= n; i += W) {
        cur += I(static_cast<std::int32_t>(W));
        const V v = V::load_unaligned(x + i);
        auto take = Largest ? v > bv : v < bv;
        if constexpr (std::is_floating_point_v<C>) take = (take || is_nan(v)) && (bv == bv);  // is_nan, not v != v: xsimd's != is ordered on x86
        bv = xsimd::select(take, v, bv);
        if constexpr (std::is_same_v<C, std::int32_t>) bi = xsimd::select(take, cur, bi);
        else bi = xsimd::select(lane_traits<I>::mask_for(take), cur, bi);
      }
      alignas(64) C lv[W];
      alignas(64) std::int32_t li[W];
      bv.store_aligned(lv);
      bi.store_aligned(li);
      // lanes in index order: each lane's best, ties resolved toward the smaller index
      C cand = lv[0];
      std::int32_t cand_i = li[0];
      for (index_t k = 1; k < W; ++k) {
        const bool nan_k = lv[k] != lv[k], nan_c = cand != cand;
        bool take = false;
        if (nan_c) take = nan_k && li[k] < cand_i;
        else if (nan_k) take = true;
        else take = better<Largest>(lv[k], cand) || (lv[k] == cand && li[k] < cand_i);
        if (take) {
          cand = lv[k];
          cand_i = li[k];
        }
      }
      if (at < 0 || better<Largest>(cand, best)) {
        best = cand;
        at = base + cand_i;
      }
    }
  }
  for (; i < n; ++i) {
    if (at < 0 || better<Largest>(x[i], best)) {
      best = x[i];
      at = base + i;
    }
  }
}

}  // namespace cpu_reduce

/// Shared driver of the reduce family: Acc holds one output's running state.
///   Acc start()                          an empty state
///   void add(Acc&, const C* x, n, base)  folds in x[0, n), at axis positions base..
///   void merge(Acc&, const Acc&)         folds in a later segment's state
///   R result(const Acc&, extent)         the output value
///   void add_lanes(Acc* acc, const C* x, n, r)  column mode: acc[j] folds in x[j] at axis position r
template <class Family>
struct cpu_reduce_driver {
  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S&, axis_split sp) {
    using namespace cpu_loop;
    using namespace cpu_reduce;
    using C = typename Io::in_type;
    using Res = typename Io::result_type;
    using Acc = typename Family::template acc<C>;
    const index_t outputs = sp.outer * sp.inner;
    if (outputs == 0) return;
    const double elements = double(sp.outer) * double(sp.extent) * double(sp.inner);
    const double per_element = 2.0 + byte_cost * double(leaf_bytes_v<decltype(io.node.arg)>);
    const index_t R = sp.extent;

    if (sp.inner == 1) {
      // rows: blocks of whole rows, or one row a task in buffer-sized runs
      const int max_threads = structural_threads(state, elements, per_element, std::numeric_limits<index_t>::max());
      const bool split = sp.outer < max_threads && R >= 2 * segment_elements;
      if (!split) {
        // rows a task: as many as fill a buffer (an empty axis: any number; a long row:
        // one); a plain tensor read in place needs no buffer: tasks 16 buffers long, so
        // that claiming a task and storing its results cost nothing next to its reads
        const index_t task_elements = io.direct(0) ? 16 * block_elements : block_elements;
        const index_t rows = R == 0 ? block_elements : std::max<index_t>(1, task_elements / R);
        const index_t tasks = (sp.outer + rows - 1) / rows;
        for_tasks(tasks, structural_threads(state, elements, per_element, tasks), [&](index_t t) {
          const index_t o0 = t * rows, o1 = std::min(sp.outer, o0 + rows);
          std::byte* mem = cpu_scheduler::scratch((block_elements + 16) * sizeof(C) + (rows + 16) * sizeof(Res));
          C* x = reinterpret_cast<C*>(mem);
          Res* res = reinterpret_cast<Res*>(mem + (block_elements + 16) * sizeof(C));
          if (const C* in = io.direct(o0 * R)) {  // a plain tensor: read in place
            for (index_t o = o0; o < o1; ++o) {
              Acc acc = Family::template start<C>();
              Family::template add<A>(acc, in + (o - o0) * R, R, 0);
              res[o - o0] = Family::template result<Res>(acc, R);
            }
          } else if (R <= block_elements) {
            io.load(o0 * R, o1 * R, x);
            if (t + 1 < tasks) io.prefetch(o1 * R, std::min(sp.outer, o1 + rows) * R);
            for (index_t o = o0; o < o1; ++o) {
              Acc acc = Family::template start<C>();
              Family::template add<A>(acc, x + (o - o0) * R, R, 0);
              res[o - o0] = Family::template result<Res>(acc, R);
            }
          } else {
            for (index_t o = o0; o < o1; ++o) {
              Acc acc = Family::template start<C>();
              for (index_t c = 0; c < R; c += block_elements) {
                const index_t len = std::min(block_elements, R - c);
                io.load(o * R + c, o * R + c + len, x);
                Family::template add<A>(acc, x, len, c);
              }
              res[o - o0] = Family::template result<Res>(acc, R);
            }
          }
          io.store(o0, o1, res);
        });
        return;
      }
      // few long rows: segments combined in order
      const index_t seg = std::max(segment_elements, (R / (8 * max_threads) + block_elements - 1) / block_elements * block_elements);
      const index_t nseg = (R + seg - 1) / seg;
      std::vector<Acc> partial(static_cast<std::size_t>(sp.outer * nseg));
      for_tasks(sp.outer * nseg, max_threads, [&](index_t t) {
        const index_t o = t / nseg, g = t % nseg;
        const index_t b = g * seg, e = std::min(R, b + seg);
        C* x = reinterpret_cast<C*>(cpu_scheduler::scratch((block_elements + 16) * sizeof(C)));
        Acc acc = Family::template start<C>();
        if (const C* in = io.direct(o * R + b)) {
          Family::template add<A>(acc, in, e - b, b);
        } else {
          for (index_t c = b; c < e; c += block_elements) {
            const index_t len = std::min(block_elements, e - c);
            io.load(o * R + c, o * R + c + len, x);
            Family::template add<A>(acc, x, len, c);
          }
        }
        partial[static_cast<std::size_t>(t)] = acc;
      });
      std::vector<Res> res(static_cast<std::size_t>(sp.outer));
      for (index_t o = 0; o < sp.outer; ++o) {
        Acc acc = partial[static_cast<std::size_t>(o * nseg)];
        for (index_t g = 1; g < nseg; ++g) Family::merge(acc, partial[static_cast<std::size_t>(o * nseg + g)]);
        res[static_cast<std::size_t>(o)] = Family::template result<Res>(acc, R);
      }
      io.store(0, sp.outer, res.data());
      return;
    }

    // columns: a block of outputs, the axis walked one run at a time
    const index_t jb = std::min(sp.inner, column_block);
    const index_t per_outer = (sp.inner + jb - 1) / jb;
    const index_t tasks = sp.outer * per_outer;
    for_tasks(tasks, structural_threads(state, elements, per_element, tasks), [&](index_t t) {
      const index_t o = t / per_outer, j0 = (t % per_outer) * jb, len = std::min(jb, sp.inner - j0);
      // three arrays of jb (+ slack for full-vector loads), each starting on a cache line
      auto line = [](std::size_t bytes) { return (bytes + 63) / 64 * 64; };
      const std::size_t xs = line(std::size_t(jb + 16) * sizeof(C)), as = line(std::size_t(jb + 16) * sizeof(Acc));
      std::byte* mem = cpu_scheduler::scratch(xs + as + std::size_t(jb + 16) * sizeof(Res));
      C* x = reinterpret_cast<C*>(mem);
      Acc* acc = reinterpret_cast<Acc*>(mem + xs);
      Res* res = reinterpret_cast<Res*>(mem + xs + as);
      for (index_t j = 0; j < len; ++j) acc[j] = Family::template start<C>();
      for (index_t r = 0; r < R; ++r) {
        const index_t at = (o * R + r) * sp.inner + j0;
        io.load(at, at + len, x);
        Family::template add_lanes<A>(acc, x, len, r);
      }
      for (index_t j = 0; j < len; ++j) res[j] = Family::template result<Res>(acc[j], R);
      io.store(o * sp.inner + j0, o * sp.inner + j0 + len, res);
    });
  }
};

/// A reducer's running state is its combined value.
template <class Rd>
struct reducer_family {
  template <class C>
  using acc = C;
  template <class C>
  static C start() { return Rd::template identity<C>(); }
  template <class A, class C>
  static void add(C& acc, const C* x, index_t n, index_t) { acc = cpu_lines::combine_run<A, Rd>(x, n, acc); }
  template <class C>
  static void merge(C& acc, const C& later) { acc = Rd::combine(acc, later); }
  template <class Res, class C>
  static Res result(const C& acc, index_t n) { return static_cast<Res>(cpu_reduce::finalize<Rd>(acc, n)); }
  template <class A, class C>
  static void add_lanes(C* acc, const C* x, index_t n, index_t) {
    index_t j = 0;
    if constexpr (simd::enabled<A>) {
      using V = xsimd::batch<C, A>;
      constexpr auto W = static_cast<index_t>(V::size);
      for (; j + W <= n; j += W) Rd::combine(V::load_unaligned(acc + j), V::load_unaligned(x + j)).store_unaligned(acc + j);
    }
    for (; j < n; ++j) acc[j] = Rd::combine(acc[j], x[j]);
  }
};

/// argmax / argmin: the best value and its index.
template <bool Largest>
struct arg_family {
  template <class C>
  struct acc {
    C value{};
    std::int64_t index = -1;
  };
  template <class C>
  static acc<C> start() { return {}; }
  template <class A, class C>
  static void add(acc<C>& a, const C* x, index_t n, index_t base) {
    cpu_reduce::arg_run<A, Largest>(x, n, base, a.value, a.index);
  }
  template <class C>
  static void merge(acc<C>& a, const acc<C>& later) {
    if (later.index >= 0 && (a.index < 0 || cpu_reduce::better<Largest>(later.value, a.value))) a = later;
  }
  template <class Res, class C>
  static Res result(const acc<C>& a, index_t) { return static_cast<Res>(a.index); }
  template <class A, class C>
  static void add_lanes(acc<C>* a, const C* x, index_t n, index_t r) {
    for (index_t j = 0; j < n; ++j) {
      if (a[j].index < 0 || cpu_reduce::better<Largest>(x[j], a[j].value)) a[j] = {x[j], r};
    }
  }
};

template <class Rd>
struct cpu_structural_kernel<reduce_op<Rd>> : cpu_reduce_driver<reducer_family<Rd>> {};

template <bool Largest>
struct cpu_structural_kernel<arg_extreme_op<Largest>> : cpu_reduce_driver<arg_family<Largest>> {};

}  // namespace kiln::detail
