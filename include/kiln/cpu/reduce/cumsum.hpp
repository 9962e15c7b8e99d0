// kiln/cpu/reduce/cumsum.hpp — kiln::cumsum on the CPU (cpu_structural_kernel<cumsum_op>).
//
// A line along any axis is a row here (cpu/structural.hpp walks a row op's axis
// innermost). Rows up to block_elements long: blocks of whole rows are read into a
// per-thread buffer through the prologue, each row is scanned there, and the block goes
// out through the epilogue; rows split over threads. Longer rows go a buffer at a time,
// the running total carried from one buffer to the next (each element read and written
// once; a line is one thread's). An axis before the last: its lines are columns, read
// with a stride, so neighbouring lines (neighbours in memory) go together, a run of
// `tile_run` elements of each in turn, each with its own running total: the cache lines
// the first line's run brings in serve the other fifteen (line by line, a 4096 x 4096
// column scan took 26x a copy). A run is loaded before any of it is stored, so
// `x = kiln::cumsum(x, a)` in place is safe.
//
// Floats: each vector of W lanes is scanned in registers (log2 W shifted adds) and the
// carry added, so the dependency chain from one vector to the next is one add and one
// broadcast instead of W adds. Integers: scalar, in uint32 (int32 wrap, no overflow UB).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>  // std::index_sequence

#include <xsimd/xsimd.hpp>

#include "kiln/cpu/evaluate.hpp"  // byte_cost
#include "kiln/cpu/scheduler.hpp"
#include "kiln/cpu/simd.hpp"
#include "kiln/cpu/structural.hpp"
#include "kiln/ops/reduce/cumsum.hpp"

namespace kiln::detail {

namespace cpu_scan {

// Lanes moved by the compiler's own shuffle (__builtin_shufflevector, GCC 12+ and Clang,
// over the native register): xsimd 8's swizzle compiles to AVX-512 intrinsics that GCC 12
// warns about (-Wuninitialized in its own header) in every user's build.

/// v's lanes moved up by K, lanes below K zero.
template <unsigned K, class R, std::size_t... I>
R shift_up(R v, std::index_sequence<I...>) {
  const R zero{};
  return __builtin_shufflevector(v, zero, (I >= K ? int(I - K) : int(sizeof...(I) + I))...);
}
/// v's last lane in every lane.
template <class R, std::size_t... I>
R last_everywhere(R v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, int(sizeof...(I) - 1 + 0 * I)...);
}

/// The inclusive prefix sums of v's lanes: log2(W) shifted adds.
template <class A, unsigned K = 1>
xsimd::batch<float, A> scan_lanes(xsimd::batch<float, A> v) {
  using B = xsimd::batch<float, A>;
  if constexpr (K < B::size) {
    using R = typename B::register_type;
    v = v + B(shift_up<K>(static_cast<R>(v), std::make_index_sequence<B::size>()));
    return scan_lanes<A, 2 * K>(v);
  } else {
    return v;
  }
}

/// y[i] = carry + x[0] + ... + x[i] for i < n (y may be x); returns the carry of the next
/// run of the same line. Floats: the carry chain is one add per two vectors (their
/// totals added to each other first), everything else off it.
template <class A, class V>
V scan(const V* x, V* y, index_t n, V carry) {
  index_t i = 0;
  if constexpr (std::is_same_v<V, float>) {
    if constexpr (simd::enabled<A>) {
      using B = xsimd::batch<float, A>;
      using R = typename B::register_type;
      constexpr index_t W = index_t(B::size);
      const auto last = [](const B& v) { return B(last_everywhere(static_cast<R>(v), std::make_index_sequence<B::size>())); };
      if (n >= W) {
        B c(carry);
        for (; i + 2 * W <= n; i += 2 * W) {
          const B s0 = scan_lanes<A>(B::load_unaligned(x + i)), s1 = scan_lanes<A>(B::load_unaligned(x + i + W));
          const B t0 = last(s0);
          (s0 + c).store_unaligned(y + i);
          (s1 + (c + t0)).store_unaligned(y + i + W);
          c = c + (t0 + last(s1));
        }
        for (; i + W <= n; i += W) {
          const B s0 = scan_lanes<A>(B::load_unaligned(x + i));
          (s0 + c).store_unaligned(y + i);
          c = c + last(s0);
        }
        alignas(64) float lanes[W];
        c.store_aligned(lanes);
        carry = lanes[0];
      }
    }
    for (; i < n; ++i) y[i] = carry = carry + x[i];
    return carry;
  } else {
    std::uint32_t c = static_cast<std::uint32_t>(carry);
    for (; i < n; ++i) {
      c += static_cast<std::uint32_t>(x[i]);
      y[i] = static_cast<std::int32_t>(c);
    }
    return static_cast<std::int32_t>(c);
  }
}

}  // namespace cpu_scan

template <>
struct cpu_structural_kernel<cumsum_op> {
  /// Lines scanned together when the axis is not the last (a cache line of floats), and
  /// the elements of each loaded at a time.
  static constexpr index_t tile_lines = 16, tile_run = cpu_loop::block_elements / tile_lines;

  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S& s, axis_split sp) {
    using namespace cpu_loop;
    using V = typename Io::in_type;  // float or int32: also what store() takes
    static_assert(std::is_same_v<V, typename Io::result_type>);
    const index_t R = sp.extent, outer = sp.outer;
    if (R == 0 || outer == 0) return;
    const double elements = double(outer) * double(R);
    const double work = 2.0 + byte_cost * double(leaf_bytes_v<decltype(io.node.arg)> + 4);
    if (const index_t inner = s.split().inner; inner > 1) {
      // lines o * inner + j, j < inner, are neighbours in memory: tiles of tile_lines of
      // them (never across o), tile_run elements of each at a time
      const index_t per_o = (inner + tile_lines - 1) / tile_lines, tasks = (outer / inner) * per_o;
      for_tasks(tasks, structural_threads(state, elements, work, tasks), [&](index_t t) {
        const index_t o = t / per_o, j0 = (t % per_o) * tile_lines, lines = std::min(tile_lines, inner - j0);
        V* const x = reinterpret_cast<V*>(cpu_scheduler::scratch((block_elements + 16) * sizeof(V)));
        V carry[tile_lines] = {};
        for (index_t k = 0; k < R; k += tile_run) {
          const index_t len = std::min(tile_run, R - k);
          for (index_t g = 0; g < lines; ++g) {
            const index_t at = (o * inner + j0 + g) * R + k;
            V* const buf = x + g * tile_run;
            io.load(at, at + len, buf);
            carry[g] = cpu_scan::scan<A>(buf, buf, len, carry[g]);
            io.store(at, at + len, buf);
          }
        }
      });
      return;
    }
    // A plain contiguous input is read where it lies (io.direct) and the bare op's
    // contiguous output written in place (io.direct_out): then no buffer copy either way.
    V* const dout = io.direct_out();
    const index_t rows = R <= block_elements ? std::max<index_t>(1, block_elements / R) : 1;
    const index_t tasks = (outer + rows - 1) / rows;
    for_tasks(tasks, structural_threads(state, elements, work, tasks), [&](index_t t) {
      const index_t o0 = t * rows, o1 = std::min(outer, o0 + rows);
      V* const x = reinterpret_cast<V*>(cpu_scheduler::scratch((block_elements + 16) * sizeof(V)));
      // positions [b, e): whole rows of R (their sums from 0), or a run of one long row
      // (its sums from carry)
      auto scan_range = [&](index_t b, index_t e, bool whole_rows, V carry) {
        const V* in = io.direct(b);
        if (!in) {
          io.load(b, e, x);
          in = x;
        }
        V* const out = dout ? dout + b : x;
        if (whole_rows) {
          for (index_t at = 0; at < e - b; at += R) cpu_scan::scan<A>(in + at, out + at, R, V(0));
        } else {
          carry = cpu_scan::scan<A>(in, out, e - b, carry);
        }
        if (!dout) io.store(b, e, x);
        return carry;
      };
      if (R <= block_elements) {
        scan_range(o0 * R, o1 * R, true, V(0));
        return;
      }
      V carry = V(0);
      for (index_t c = 0; c < R; c += block_elements) {
        const index_t len = std::min(block_elements, R - c);
        carry = scan_range(o0 * R + c, o0 * R + c + len, false, carry);
      }
    });
  }
};

}  // namespace kiln::detail
