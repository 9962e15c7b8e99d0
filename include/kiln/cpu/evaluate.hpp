// kiln/cpu/evaluate.hpp — an expression tree -> one pass over the output.
//
// The output range, over the collapsed iteration space of expr/layout.hpp (most
// statements are one long row, or rows of a bias/row broadcast), is cut into chunks
// aligned to 64 elements that the caller and the pool's workers claim (cpu/scheduler.hpp);
// how many threads a statement uses follows from its work: elements times the ops' cost
// hints plus the bytes it moves. Each row runs an xsimd
// loop over full batches and a scalar tail. Leaves whose innermost stride is 1 are
// vector loads; stride 0 is a broadcast register; anything else is gathered. Large
// contiguous float/int32 outputs use streaming (non-temporal) stores. No allocation.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/cpu/backend.hpp"
#include "kiln/cpu/scheduler.hpp"
#include "kiln/cpu/simd.hpp"
#include "kiln/expr/assign.hpp"
#include "kiln/expr/convert.hpp"
#include "kiln/expr/layout.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/traverse.hpp"

/// Inlines the whole bound tree (every op body, user-defined ones too) into one row
/// loop: an op body left out of line costs a call and a spill of its vector operands per
/// batch, which is most of the time of a compute-heavy chain.
#if defined(__GNUC__) || defined(__clang__)
#define KILN_CPU_FLATTEN [[gnu::flatten]]
#else
#define KILN_CPU_FLATTEN
#endif

namespace kiln::detail::cpu_loop {

/// The work model, in cost units (one cheap vector op on one element: expr/traverse.hpp's
/// op_cost_v, whose hints were measured in cache, one thread, AVX2 + FMA on a 2.45 GHz
/// EPYC (Zen 3), where a unit is ~0.035 ns): an element costs its tree's op costs plus
/// byte_cost per byte it reads or writes (a copy ~0.1 ns per float, an add ~0.13 ns).
inline constexpr double byte_cost = 0.25;
/// Work that pays for one more thread (~18 us there): posting a job and handing it to a
/// worker cost the caller microseconds, so each thread a statement uses gets at least this
/// much. Measured there: a 65K-float gelu chain (~35 us) ran no faster on two threads than
/// on one, 262K floats ran ~1.4x faster. (Two threads from ~260K elements for an add of
/// two floats, from ~70K for the gelu chain.)
inline constexpr double min_work_per_thread = double(1 << 19);
/// The work of one chunk (~2.3 us there): large enough that claiming it (a compare-and-
/// swap on a line its thread owns, usually) is lost in it, small enough that a thread
/// preempted in the middle of one delays the statement little (the rest of its batch is
/// taken over by the others). Never below min_chunk_bytes of output.
inline constexpr double chunk_work = double(1 << 16);
inline constexpr std::size_t min_chunk_bytes = std::size_t(16) << 10;
/// Outputs at least this large bypass the cache: they will not be read back from it soon.
inline constexpr std::size_t stream_min_bytes = std::size_t(16) << 20;

struct thread_plan {
  int threads;    // 1: run inline
  index_t chunk;  // elements per claimed chunk, a multiple of 64
};

/// How a statement writing `total` elements of T from tree N runs on at most
/// `max_threads` threads: one thread per min_work_per_thread of work, chunks of
/// chunk_work (at least min_chunk_bytes of output, whole cache lines, so that streaming
/// stores and neighbouring chunks never share a line).
template <class T, class N>
thread_plan plan_threads(index_t total, int max_threads) {
  constexpr double per_element = tree_cost_v<N> + byte_cost * double(leaf_bytes_v<N> + sizeof(T));
  const double work = per_element * double(total);
  const int nt = static_cast<int>(std::clamp(work / min_work_per_thread, 1.0, double(std::max(1, max_threads))));
  const auto floor_elems = static_cast<index_t>(min_chunk_bytes / sizeof(T));
  const auto by_work = static_cast<index_t>(chunk_work / per_element);
  return {nt, (std::max(floor_elems, by_work) + 63) / 64 * 64};
}

/// Where a structural kernel puts the results its epilogue reads: compute-type values
/// for the statement positions [origin, origin + count), contiguous.
struct hole_source {
  const void* base = nullptr;
  index_t origin = 0;
};

/// Hands out the operands' strides in for_each_leaf order while a tree is bound (and the
/// structural kernel's results, to the structural operand).
template <std::size_t L>
struct cursor {
  const iteration_layout<L>* lay;
  const hole_source* hole = nullptr;
  std::size_t next = 1;
  const index_t* take() { return lay->stride[next++]; }
};

template <class A, class N>
struct bound;

template <class A, class T, class B>
struct bound<A, leaf_node<T, B>> {
  using C = compute_t<T>;
  const T* base;
  const index_t* st;
  const T* row = nullptr;
  index_t inner = 0;

  template <class Cur>
  bound(const leaf_node<T, B>& n, Cur& c) : base(n.t.data()), st(c.take()) {}

  void seek(const index_t* idx, int rank) noexcept {
    const T* p = base;
    for (int d = 0; d < rank; ++d) p += idx[d] * st[d];
    row = p;
    inner = st[rank - 1];
  }
  template <bool Contig>
  auto vec(index_t i) const {
    if constexpr (Contig) {
      return simd::load<A>(row + i);
    } else {
      if (inner == 1) return simd::load<A>(row + i);
      if (inner == 0) return simd::cbatch<T, A>(static_cast<C>(row[0]));
      return simd::gather<A>(row + i * inner, inner);
    }
  }
  template <bool Contig>
  auto part(index_t i, index_t n) const { return simd::load_part<A>(row + i * inner, inner, n); }
  C one(index_t i) const { return static_cast<C>(row[i * inner]); }
};

template <class A, class T>
struct bound<A, scalar_node<T>> {
  using C = compute_t<T>;
  using V = std::conditional_t<simd::enabled<A>, simd::cbatch<T, A>, C>;
  C s;
  V b;

  template <class Cur>
  bound(const scalar_node<T>& n, Cur&) : s(n.value), b(n.value) {}
  void seek(const index_t*, int) noexcept {}
  template <bool Contig>
  const V& vec(index_t) const { return b; }
  template <bool Contig>
  const V& part(index_t, index_t) const { return b; }
  C one(index_t) const { return s; }
};

/// A structural node inside an epilogue: reads the results its kernel computed.
template <class A, class Op, class Arg, class... P>
struct bound<A, structural_node<Op, Arg, P...>> {
  using C = compute_t<typename structural_node<Op, Arg, P...>::value_type>;
  const hole_source* src;
  const index_t* st;
  const C* row = nullptr;
  index_t inner = 0;

  template <class Cur>
  bound(const structural_node<Op, Arg, P...>&, Cur& c) : src(c.hole), st(c.take()) {}

  void seek(const index_t* idx, int rank) noexcept {
    index_t off = -src->origin;
    for (int d = 0; d < rank; ++d) off += idx[d] * st[d];
    row = static_cast<const C*>(src->base) + off;
    inner = st[rank - 1];
  }
  template <bool Contig>
  auto vec(index_t i) const {
    if constexpr (!Contig) {
      if (inner != 1) return simd::gather<A>(row + i * inner, inner);
    }
    return simd::load<A>(row + i);
  }
  template <bool Contig>
  auto part(index_t i, index_t n) const { return simd::load_part<A>(row + i * inner, inner, n); }
  C one(index_t i) const { return row[i * inner]; }
};

template <class A, class Op, class... Args>
struct bound<A, op_node<Op, Args...>> {
  std::tuple<bound<A, Args>...> ch;

  template <class Cur>
  bound(const op_node<Op, Args...>& n, Cur& c) : bound(n, c, std::index_sequence_for<Args...>{}) {}
  template <class Cur, std::size_t... I>
  bound(const op_node<Op, Args...>& n, Cur& c, std::index_sequence<I...>)
      : ch{bound<A, Args>(std::get<I>(n.args), c)...} {}  // braced: binds leaves left to right

  void seek(const index_t* idx, int rank) noexcept {
    std::apply([&](auto&... c) { (c.seek(idx, rank), ...); }, ch);
  }
  template <bool Contig>
  auto vec(index_t i) const {
    return std::apply([&](const auto&... c) { return Op::apply(c.template vec<Contig>(i)...); }, ch);
  }
  template <bool Contig>
  auto part(index_t i, index_t n) const {
    return std::apply([&](const auto&... c) { return Op::apply(c.template part<Contig>(i, n)...); }, ch);
  }
  auto one(index_t i) const {
    return std::apply([&](const auto&... c) { return Op::apply(c.one(i)...); }, ch);
  }
};

template <class A, class To, class Arg>
struct bound<A, cast_node<To, Arg>> {
  using From = typename Arg::value_type;
  bound<A, Arg> ch;

  template <class Cur>
  bound(const cast_node<To, Arg>& n, Cur& c) : ch(n.arg, c) {}
  void seek(const index_t* idx, int rank) noexcept { ch.seek(idx, rank); }
  template <bool Contig>
  auto vec(index_t i) const { return simd::convert<To, From, A>(ch.template vec<Contig>(i)); }
  template <bool Contig>
  auto part(index_t i, index_t n) const { return simd::convert<To, From, A>(ch.template part<Contig>(i, n)); }
  compute_t<To> one(index_t i) const { return convert_value<To, From>(ch.one(i)); }
};

/// A scalar result -> the output's storage dtype (masks are stored as 0/1).
template <class T, class V>
T to_out(const V& v) {
  if constexpr (std::is_same_v<V, bool>) return static_cast<T>(v ? 1 : 0);
  else return to_storage<T>(v);
}

/// One row: full batches, then a partial batch for the tail. Each loop body is the whole
/// fused tree inlined, so there is ONE loop over full batches (streaming, plain or
/// scattered stores are a predictable branch on the store alone) and ONE partial-batch
/// step (the head that aligns streaming stores and the tail run through it in two
/// passes): every extra copy of the tree cost compile time per statement, and none of
/// them was measurably faster. Head and tail take the vector code too (not the ops'
/// scalar bodies, whose exp/log/tanh round differently): an element's bits depend on its
/// operands alone, never on the row length, the alignment or the thread count.
template <class A, bool Contig, class T, class Ev>
KILN_CPU_FLATTEN void run_row(Ev& ev, T* orow, index_t oin, index_t len, bool stream) {
  constexpr bool vector = simd::enabled<A>;
  index_t i = 0;
  index_t stop = vector ? 0 : len;  // end of the current scalar pass
  if constexpr (vector && Contig && simd::can_stream<A, T>) {
    if (stream) {  // scalars up to the first aligned address
      const auto misaligned = reinterpret_cast<std::uintptr_t>(orow) % A::alignment();
      const index_t head = misaligned ? static_cast<index_t>((A::alignment() - misaligned) / sizeof(T)) : 0;
      stop = std::min(len, head);
    }
  }
  for (int pass = vector ? 0 : 1; pass < 2; ++pass) {
    if constexpr (vector) {
      constexpr auto W = static_cast<index_t>(simd::lanes<A>);
      for (index_t n; i < stop; i += n) {
        n = std::min(W, stop - i);
        simd::store_part<A>(orow + i * oin, oin, n, ev.template part<Contig>(i, n));
      }
    } else {
      for (; i < stop; ++i) orow[i * oin] = to_out<T>(ev.one(i));
    }
    if (pass == 1) break;
    if constexpr (vector) {
      constexpr auto W = static_cast<index_t>(simd::lanes<A>);
      for (; i + W <= len; i += W) {
        const auto v = ev.template vec<Contig>(i);
        if constexpr (Contig && simd::can_stream<A, T>) {
          if (stream) simd::stream<A>(orow + i, v);
          else simd::store<A>(orow + i, v);
        } else if constexpr (Contig) {
          simd::store<A>(orow + i, v);
        } else {
          if (oin == 1) simd::store<A>(orow + i, v);
          else simd::scatter<A>(orow + i * oin, oin, v);
        }
      }
    }
    stop = len;
  }
}

/// Writes n's values at positions [begin, end) of lay's walk to out (at lay's output
/// strides, less `origin` elements: a buffer holding just those positions passes origin =
/// begin). `hole`: the results a structural operand of n reads.
template <class A, bool Contig, std::size_t L, class T, class N>
void run_range(const iteration_layout<L>& lay, T* out, const N& n, index_t begin, index_t end, bool stream,
               index_t origin = 0, const hole_source* hole = nullptr) {
  cursor<L> cur{&lay, hole};
  bound<A, N> ev(n, cur);
  const int r = lay.rank;
  index_t idx[max_rank] = {};
  if (r == 1) {
    idx[0] = begin;  // most statements collapse to one row: no division
  } else {
    for (index_t rem = begin, d = r - 1; d >= 0; --d) {
      idx[d] = rem % lay.extent[d];
      rem /= lay.extent[d];
    }
  }
  const index_t* ost = lay.stride[0];
  for (index_t pos = begin; pos < end;) {
    const index_t len = std::min(lay.extent[r - 1] - idx[r - 1], end - pos);
    ev.seek(idx, r);
    index_t oat = -origin;
    for (int d = 0; d < r; ++d) oat += idx[d] * ost[d];
    T* orow = out + oat;
    run_row<A, Contig>(ev, orow, ost[r - 1], len, stream);
    pos += len;
    idx[r - 1] += len;
    for (int d = r - 1; d > 0 && idx[d] >= lay.extent[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
  if (stream) simd::stream_fence();
}

}  // namespace kiln::detail::cpu_loop

namespace kiln::detail {

/// The CPU kernel of a statement holding one structural node (cpu/structural.hpp).
template <class Arch, class T, class N>
void cpu_structural_evaluate(const cpu_state& state, const tensor<T, cpu<Arch>>& out, const N& n);

template <class Arch, class T, class N>
void cpu_evaluate(const cpu_state& state, const tensor<T, cpu<Arch>>& out, const N& n) {
  using namespace cpu_loop;
  if constexpr (contains_structural_v<N>) {
    cpu_structural_evaluate<Arch>(state, out, n);
    return;
  } else {
  constexpr std::size_t L = leaf_count_v<N>;
  const auto lay = make_layout(out, n);

  bool contig = true;
  for (std::size_t o = 0; o <= L; ++o) contig = contig && lay.unit_inner(o);
  const index_t total = out.numel();
  const bool stream = contig && simd::enabled<Arch> && simd::can_stream<Arch, T> &&
                      std::size_t(total) * sizeof(T) >= stream_min_bytes;
  T* base = out.data();

  auto run = [&](index_t b, index_t e) {
    if (contig) run_range<Arch, true>(lay, base, n, b, e, stream);
    else run_range<Arch, false>(lay, base, n, b, e, stream);
  };

  const auto p = plan_threads<T, N>(total, state.num_threads);
  if (p.threads <= 1) run(0, total);
  else cpu_scheduler::instance().parallel_for(total, p.chunk, p.threads, run);
  state.kernels_launched.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace kiln::detail
