// kiln/expr/profile.hpp — the one place statements meet the profiler: run_kernel wraps
// every backend_traits<B>::evaluate call the planner and assign make (one kernel each).
// Profiling off, that is one relaxed load and a branch per statement; on, the kernel is
// described (op chain, variant, shape, bytes, flops) and timed (core/profiler.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/backend.hpp"
#include "kiln/core/profiler.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/kind.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/expr/traverse.hpp"

namespace kiln::detail {

template <class N>
const auto& find_structural(const N& n);  // expr/plan.hpp

/// Names a tree's operands and writes its op chain: leaves are lettered in order (a view
/// of exactly the same elements as an earlier leaf gets its letter), scalars s0, s1, ...
struct chain_namer {
  struct seen {
    const void* storage;
    index_t offset;
    kiln::shape shape;
    kiln::strides strides;
  };
  std::vector<seen> leaves;
  int scalars = 0;

  static std::string letter(std::size_t id);

  template <class N>
  void write(std::string& s, const N& n) {
    constexpr node_kind k = kind_of_v<N>;
    if constexpr (k == node_kind::leaf) {
      const auto& t = n.t;
      std::size_t id = 0;
      for (; id < leaves.size(); ++id) {
        const auto& l = leaves[id];
        if (l.storage == t.storage().get() && l.offset == t.offset() && l.shape == t.shape() && l.strides == t.strides()) break;
      }
      if (id == leaves.size()) leaves.push_back({t.storage().get(), t.offset(), t.shape(), t.strides()});
      s += letter(id);
    } else if constexpr (k == node_kind::scalar) {
      s += "s" + std::to_string(scalars++);
    } else if constexpr (k == node_kind::cast) {
      s += "cast<";
      s += dtype_name_v<typename N::value_type>;
      s += ">(";
      write(s, n.arg);
      s += ')';
    } else if constexpr (k == node_kind::op) {
      s += N::op_type::name;
      s += '(';
      bool first = true;
      std::apply([&](const auto&... c) { ((s += first ? "" : ",", first = false, write(s, c)), ...); }, n.args);
      s += ')';
    } else if constexpr (k == node_kind::structural) {
      s += N::op_type::name;
      s += '(';
      write(s, n.arg);
      std::apply([&](const auto&... p) { ((s += ",", write(s, p)), ...); }, n.params);
      s += ')';
    } else {
      static_assert(unhandled_kind<N>, "kiln: the profiler does not know this node kind");
    }
  }
};

/// The op chain of a statement's kernel: `gelu(add(mul(a,b),c))`; a lone leaf is a copy,
/// a lone scalar a fill.
template <class N>
std::string op_chain(const N& n) {
  std::string s;
  chain_namer namer;
  if constexpr (kind_of_v<N> == node_kind::leaf) {
    s = "copy(";
    namer.write(s, n);
    s += ')';
  } else if constexpr (kind_of_v<N> == node_kind::scalar) {
    s = "fill(";
    namer.write(s, n);
    s += ')';
  } else {
    namer.write(s, n);
  }
  return s;
}

/// Elements a view reads once: its extents along the axes it does not broadcast.
template <class T, class B>
std::uint64_t distinct_elements(const tensor<T, B>& t) {
  std::uint64_t n = 1;
  for (int d = 0; d < t.rank(); ++d) {
    if (t.shape()[d] == 0) return 0;
    if (t.strides()[d] != 0) n *= static_cast<std::uint64_t>(t.shape()[d]);
  }
  return n;
}

/// Whether tree_flops knows a tree's arithmetic: not when it holds a structural op
/// whose own work it does not count (row ops, gathers, quantized products).
template <class N>
struct flops_known : std::true_type {};
template <class Op, class... A>
struct flops_known<op_node<Op, A...>> : std::bool_constant<(flops_known<A>::value && ...)> {};
template <class To, class A>
struct flops_known<cast_node<To, A>> : flops_known<A> {};
template <class Op, class A, class... P>
struct flops_known<structural_node<Op, A, P...>>
    : std::bool_constant<flops_known<A>::value && (Op::family == structural_family::contract ||
                                                   Op::family == structural_family::attend ||
                                                   Op::family == structural_family::reduce)> {};

/// Arithmetic of a tree of `elems` elements where known: an elementwise op one per
/// element; a matmul 2*M*N*K; attention 2*Sq*Skv*(D + Dv) per head; a reduction one per
/// input element (each with its prologue). Other structural ops add nothing (unknown).
template <class N>
std::uint64_t tree_flops(const N& n, std::uint64_t elems) {
  constexpr node_kind k = kind_of_v<N>;
  if constexpr (k == node_kind::op) {
    std::uint64_t f = elems;
    std::apply([&](const auto&... c) { ((f += tree_flops(c, elems)), ...); }, n.args);
    return f;
  } else if constexpr (k == node_kind::cast) {
    return tree_flops(n.arg, elems);
  } else if constexpr (k == node_kind::structural) {
    const auto in = static_cast<std::uint64_t>(n.input_shape.numel());
    const auto out = static_cast<std::uint64_t>(n.shape().numel());
    std::uint64_t f = tree_flops(n.arg, in);
    const auto& q = n.input_shape;
    if constexpr (N::family == structural_family::contract) {
      f += 2 * out * (q.rank() ? static_cast<std::uint64_t>(q[q.rank() - 1]) : 1);
    } else if constexpr (N::family == structural_family::attend) {
      const auto& kv = std::get<0>(n.params).shape();
      if (q.rank() >= 2 && kv.rank() >= 2 && q[q.rank() - 1] > 0) {
        const auto D = static_cast<std::uint64_t>(q[q.rank() - 1]);
        const std::uint64_t rows = in / D;  // B * Hq * Sq
        const auto Skv = static_cast<std::uint64_t>(kv[kv.rank() - 2]);
        const std::uint64_t Dv = rows ? out / rows : 0;
        f += 2 * rows * Skv * (D + Dv);
      }
    } else if constexpr (N::family == structural_family::reduce) {
      f += in;
    }
    return f;
  } else {
    return 0;
  }
}

/// Describes the kernel `out = n` runs, and opens its record.
template <class T, class B, class N>
profile_record describe_kernel(const tensor<T, B>& out, const N& n) {
  profile_record r;
  r.name = op_chain(n);
  if constexpr (contains_structural_v<N>) {
    const auto& s = find_structural(n);
    using S = std::remove_cvref_t<decltype(s)>;
    if constexpr (requires { backend_traits<B>::kernel_variant(s); }) r.variant = backend_traits<B>::kernel_variant(s);
    else r.variant = std::string(S::op_type::name);
  } else {
    r.variant = "elementwise";
  }
  r.shape = out.shape();
  r.type = dtype_traits<T>::value;
  std::uint64_t bytes = static_cast<std::uint64_t>(out.numel()) * sizeof(T);
  for_each_tensor(n, [&](const auto& t, bool) {
    bytes += distinct_elements(t) * sizeof(typename std::remove_cvref_t<decltype(t)>::value_type);
  });
  r.bytes = bytes;
  if constexpr (flops_known<N>::value) r.flops = tree_flops(n, static_cast<std::uint64_t>(out.numel()));
  return r;
}

/// The profiled path of run_kernel (kept out of line: the unprofiled path stays small).
template <class T, class B, class N>
[[gnu::noinline]] void run_profiled_kernel(profiler& p, const tensor<T, B>& out, const N& n) {
  profile_record r = describe_kernel(out, n);
  r.start_us = p.now_us();
  const auto t0 = std::chrono::steady_clock::now();
  const auto h = p.begin(std::move(r));
  // Dispatches recorded on this thread until the statement ends belong to it; a nested
  // statement (a temporary evaluated inside a backend call) takes over and hands back.
  const profile_statement outer = current_profile_statement;
  current_profile_statement = {&p, h};
  profile_kernel_threads = 1;
  struct restore {
    profiler& p;
    profiler::handle h;
    profile_statement outer;
    std::chrono::steady_clock::time_point t0;
    ~restore() {
      const double wall = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      p.end(h, wall, backend_threads());
      current_profile_statement = outer;
    }
    static int backend_threads() noexcept {
      if constexpr (backend_traits<B>::asynchronous) return 0;
      else return profile_kernel_threads;
    }
  } guard{p, h, outer, t0};
  backend_traits<B>::evaluate(out, n);
}

/// out = n as one kernel: backend_traits<B>::evaluate, recorded when the output's
/// context is profiling.
template <class T, class B, class N>
void run_kernel(const tensor<T, B>& out, const N& n) {
  const auto* st = out.storage()->ctx.get();
  if (st && st->profile.on.load(std::memory_order_relaxed)) [[unlikely]] {
    if (profiler* p = st->profile.get()) return run_profiled_kernel(*p, out, n);
  }
  backend_traits<B>::evaluate(out, n);
}

}  // namespace kiln::detail

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/expr/impl/profile.ipp"
#endif
