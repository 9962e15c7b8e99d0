// kiln/cpu/structural.hpp — a statement holding one structural node, on the CPU: the
// shared part of every structural kernel.
//
// The op's kernel (cpu/reduce/, later cpu/gemm/ ...) sees its input and output as runs of
// positions: structural_io::load(b, e, buf) evaluates the input expression (the
// prologue, with its broadcasting, strides and casts) at input positions [b, e) into a
// buffer; structural_io::store(b, e, vals) runs the epilogue for output positions [b, e)
// with the op's results taken from vals. Both are the elementwise row loop of
// cpu/evaluate.hpp, so a prologue or epilogue costs what the same elementwise statement
// would, and every op kernel is written once over plain buffers. Positions follow
// expr/structural.hpp's [outer, extent, inner] split; a row op along another axis than
// the last walks its axis innermost (dim_order), so its kernel always sees rows.
//
// To add a CPU structural kernel: specialise cpu_structural_kernel<YourOp> with
// `template <class A, class Io, class S> static void run(const cpu_state&, const Io&, const S&, axis_split)`.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/cpu/backend.hpp"
#include "kiln/cpu/evaluate.hpp"
#include "kiln/cpu/scheduler.hpp"
#include "kiln/expr/layout.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/expr/traverse.hpp"

namespace kiln::detail {

/// The kernel of structural op Op on the CPU; one specialisation per op family.
template <class Op>
struct cpu_structural_kernel {
  static_assert(unhandled_kind<Op>,
                "kiln: this structural op has no CPU kernel (specialise kiln::detail::cpu_structural_kernel, "
                "see kiln/cpu/structural.hpp, and include its header)");
};

/// The type kernels accumulate an input of dtype In in: float for floating dtypes, int32
/// for integers and masks.
template <class In>
using accum_t = std::conditional_t<is_floating_v<In>, float, std::int32_t>;

namespace cpu_loop {

/// A statement's prologue and epilogue as loads and stores of position runs (see top).
template <class A, class T, class N, class S>
struct structural_io {
  using in_type = accum_t<typename S::input_type>;         // what load() writes
  using result_type = compute_t<typename S::value_type>;   // what store() reads
  static constexpr std::size_t LI = leaf_count_v<decltype(std::declval<S>().arg)>;
  static constexpr std::size_t LO = leaf_count_v<N>;

  const S& node;
  const N& tree;
  iteration_layout<LI> in_lay;
  iteration_layout<LO> out_lay;
  T* out = nullptr;
  bool in_contig = true, out_contig = true, stream = false;

  /// The input at positions b.. as it lies in memory, when there is nothing to evaluate:
  /// the input is one tensor of the accumulate type, walked contiguously. Else null
  /// (then load() it). A reduction of a plain tensor then reads it in place.
  const in_type* direct(index_t b) const {
    using Arg = std::remove_cvref_t<decltype(node.arg)>;
    if constexpr (kind_of_v<Arg> == node_kind::leaf) {
      if constexpr (std::is_same_v<typename Arg::value_type, in_type>) {
        if (in_lay.rank == 1 && in_lay.stride[1][0] == 1) return node.arg.t.data() + b;
      }
    }
    return nullptr;
  }
  /// The output's memory when the statement is the bare op writing a contiguous tensor of
  /// its result type: a kernel may then build its results in place (matmul accumulates
  /// there) and skip store(). Else null.
  result_type* direct_out() const {
    if constexpr (kind_of_v<N> == node_kind::structural && std::is_same_v<T, result_type>) {
      if (out_lay.rank == 1 && out_lay.stride[0][0] == 1) return out;
    }
    return nullptr;
  }
  void load(index_t b, index_t e, in_type* dst) const {
    if (b >= e) return;  // (an empty input has extents of 0: no position to decompose)
    if (in_contig) run_range<A, true>(in_lay, dst, node.arg, b, e, false, b);
    else run_range<A, false>(in_lay, dst, node.arg, b, e, false, b);
  }
  /// Asks the memory system for the input at positions [b, e) ahead of its load: a
  /// kernel calls it for its next buffer while it works on the current one, so the
  /// reads of one buffer overlap the arithmetic and the stores of the last (a row op
  /// otherwise waits for each buffer's reads, then computes, then stores, in turn).
  void prefetch(index_t b, index_t e) const {
    if (b >= e) return;
    const int r = in_lay.rank;
    index_t idx[max_rank] = {};
    index_of(b, idx);
    std::size_t k = 1;
    for_each_leaf(node.arg, [&](const auto& t) {
      using U = typename std::remove_cvref_t<decltype(t)>::value_type;
      const index_t* st = in_lay.stride[k++];
      if (st[r - 1] != 1) return;  // broadcast or gathered: small, or not worth a guess
      index_t at[max_rank];
      for (int d = 0; d < r; ++d) at[d] = idx[d];
      for (index_t pos = b; pos < e;) {
        const index_t len = std::min(in_lay.extent[r - 1] - at[r - 1], e - pos);
        const U* p = t.data();
        for (int d = 0; d < r; ++d) p += at[d] * st[d];
        const char* c = reinterpret_cast<const char*>(p);
        for (index_t off = 0; off < len * index_t(sizeof(U)); off += 64) __builtin_prefetch(c + off, 0, 2);
        pos += len;
        at[r - 1] += len;
        for (int d = r - 1; d > 0 && at[d] >= in_lay.extent[d]; --d) {
          at[d] = 0;
          ++at[d - 1];
        }
      }
    });
  }
  /// Where the input's tensors hold positions [b, b + n): for each tensor walked
  /// contiguously there, the address of position b and its element size, so that a
  /// kernel can request those lines a few at a time, spread over a pass (a burst of
  /// requests stalls the core once the cache's miss slots are full). `ok` is false when
  /// the positions cross an innermost run: then prefetch() them.
  struct input_runs {
    const char* p[LI > 0 ? LI : 1] = {};
    index_t size[LI > 0 ? LI : 1] = {};
    int count = 0;
    bool ok = false;
  };
  input_runs runs(index_t b, index_t n) const {
    input_runs out;
    const int r = in_lay.rank;
    if (r < 1) return out;
    index_t idx[max_rank] = {};
    index_of(b, idx);
    if (idx[r - 1] + n > in_lay.extent[r - 1]) return out;
    out.ok = true;
    std::size_t k = 1;
    for_each_leaf(node.arg, [&](const auto& t) {
      using U = typename std::remove_cvref_t<decltype(t)>::value_type;
      const index_t* st = in_lay.stride[k++];
      if (st[r - 1] != 1) return;  // broadcast or gathered: as prefetch()
      const U* p = t.data();
      for (int d = 0; d < r; ++d) p += idx[d] * st[d];
      out.p[out.count] = reinterpret_cast<const char*>(p);
      out.size[out.count++] = index_t(sizeof(U));
    });
    return out;
  }
  /// The multi-index of input position b (row-major over the input layout's extents).
  void index_of(index_t b, index_t* idx) const {
    for (index_t rem = b, d = in_lay.rank - 1; d >= 0; --d) {
      idx[d] = rem % in_lay.extent[d];
      rem /= in_lay.extent[d];
    }
  }
  void store(index_t b, index_t e, const result_type* vals) const {
    if (b >= e) return;
    const hole_source h{vals, b};
    if (out_contig) run_range<A, true>(out_lay, out, tree, b, e, stream, 0, &h);
    else run_range<A, false>(out_lay, out, tree, b, e, stream, 0, &h);
  }
};

/// Threads for a structural kernel of `tasks` independent tasks over `elements` input
/// elements costing `per_element` units each (cpu/evaluate.hpp's work model).
inline int structural_threads(const cpu_state& state, double elements, double per_element, index_t tasks) {
  const double work = elements * per_element;
  const double by_work = std::clamp(work / min_work_per_thread, 1.0, double(std::max(1, state.num_threads)));
  return static_cast<int>(std::min<double>(by_work, double(std::max<index_t>(tasks, 1))));
}

/// Runs body(task) for task in [0, tasks) on up to `threads` threads (tasks claimed one by
/// one: each is at least a few microseconds of work). Bodies run one nesting level below
/// the caller, on any thread count.
template <class F>
void for_tasks(index_t tasks, int threads, F&& body) {
  auto run = [&](index_t b, index_t e) {
    for (index_t t = b; t < e; ++t) body(t);
  };
  // (one thread too: the body then runs a nesting level deeper, so its scratch buffers
  // never overwrite the caller's)
  cpu_scheduler::instance().parallel_for(tasks, 1, threads, run);
}

/// Elements a kernel handles in one buffer: 4096 floats (16 KiB) stay in L1 while a row
/// is read several times.
inline constexpr index_t block_elements = 4096;

}  // namespace cpu_loop

template <class Arch, class T, class N>
void cpu_structural_evaluate(const cpu_state& state, const tensor<T, cpu<Arch>>& out, const N& n) {
  using namespace cpu_loop;
  const auto& s = find_structural(n);
  using S = std::remove_cvref_t<decltype(s)>;
  axis_split sp = s.split();
  dim_order perm;
  if constexpr (S::family == structural_family::row) {
    if (sp.inner > 1) {  // walk the axis innermost: rows again
      perm = dim_order::axis_last(s.input_shape.rank(), s.axis);
      sp = {sp.outer * sp.inner, sp.extent, 1};
    }
  }
  structural_io<Arch, T, N, S> io{s, n, make_input_layout(s.input_shape, s.arg, perm), make_layout(out, n, perm)};
  io.out = out.data();
  for (std::size_t o = 0; o <= io.LI; ++o) io.in_contig = io.in_contig && io.in_lay.unit_inner(o);
  for (std::size_t o = 0; o <= io.LO; ++o) io.out_contig = io.out_contig && io.out_lay.unit_inner(o);
  io.stream = io.out_contig && simd::enabled<Arch> && simd::can_stream<Arch, T> &&
              std::size_t(out.numel()) * sizeof(T) >= stream_min_bytes;
  cpu_structural_kernel<typename S::op_type>::template run<Arch>(state, io, s, sp);
  state.kernels_launched.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace kiln::detail
