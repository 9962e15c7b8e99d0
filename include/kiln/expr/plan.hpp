// kiln/expr/plan.hpp — the fusion planner: what runs as one kernel.
//
// The rule (STYLE.md): a kernel holds at most ONE structural node. The elementwise work
// on its input fuses in as its prologue and the elementwise work on its result as its
// epilogue. Any other structural node of the statement is evaluated first, into a
// temporary that the kernel then reads as a plain leaf (Eigen Tensor's
// evalSubExprsIfNeeded). The one kept is the first in depth-first, left-to-right order;
// structural nodes inside its input (a softmax of a sum) and any after it go to
// temporaries, innermost first.
//
// plan(n) rewrites the tree so; the result's type says what each kernel is, so a backend
// only ever sees a tree with no structural node (one elementwise kernel) or one whose
// single structural node has elementwise inputs.
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/core/factories.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/expr/kind.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/profile.hpp"  // run_kernel: each kernel, recorded when profiling
#include "kiln/expr/structural.hpp"
#include "kiln/expr/traverse.hpp"

namespace kiln::detail {

template <class T, class B, class E>
void assign(tensor<T, B>& out, const E& e);

/// The backend of a tree (its first tensor's).
template <class N>
using tree_backend_t = typename std::remove_cvref_t<N>::backend_type;

/// Evaluates structural node n (with whatever it holds) into a new tensor: a leaf.
template <class N>
auto materialise(const N& n) {
  using V = typename N::value_type;
  using B = tree_backend_t<N>;
  tensor<V, B> tmp;
  assign(tmp, n);  // an empty target takes n's shape on its first tensor's context
  return leaf_node<V, B>{std::move(tmp)};
}

/// n with its input replaced by arg.
template <class Op, class A, class... P, class Arg>
auto rebuild_structural(const structural_node<Op, A, P...>& n, Arg&& arg) {
  return structural_node<Op, std::remove_cvref_t<Arg>, P...>{
      static_cast<const structural_geometry&>(n), std::forward<Arg>(arg), n.params, n.op};
}

template <bool Keep, class N>
auto plan_node(const N& n);

/// Whether child I of a node holding children A... keeps its structural node: only the
/// first child that holds one, and only when the node itself keeps.
template <bool Keep, class... A>
constexpr std::array<bool, sizeof...(A)> keep_flags() {
  std::array<bool, sizeof...(A)> keep{};
  bool taken = !Keep;
  std::size_t i = 0;
  ((keep[i++] = !taken && contains_structural_v<A>, taken = taken || contains_structural_v<A>), ...);
  return keep;
}

template <bool Keep, class Op, class... A, std::size_t... I>
auto plan_op(const op_node<Op, A...>& n, std::index_sequence<I...>) {
  constexpr auto keep = keep_flags<Keep, A...>();
  using R = op_node<Op, decltype(plan_node<keep[I]>(std::get<I>(n.args)))...>;
  return R(plan_node<keep[I]>(std::get<I>(n.args))...);
}

/// n with every structural node but (when Keep) the first evaluated into a temporary.
template <bool Keep, class N>
auto plan_node(const N& n) {
  constexpr node_kind k = kind_of_v<N>;
  if constexpr (!contains_structural_v<N>) {
    return n;
  } else if constexpr (k == node_kind::op) {
    return plan_op<Keep>(n, std::make_index_sequence<std::tuple_size_v<decltype(n.args)>>{});
  } else if constexpr (k == node_kind::cast) {
    using A = decltype(plan_node<Keep>(n.arg));
    return cast_node<typename N::value_type, A>{plan_node<Keep>(n.arg)};
  } else if constexpr (k == node_kind::structural) {
    if constexpr (Keep) {
      return rebuild_structural(n, plan_node<false>(n.arg));
    } else {
      return materialise(n);
    }
  } else {
    static_assert(unhandled_kind<N>, "kiln: the planner does not know this node kind");
  }
}

template <class Tuple, std::size_t I0, std::size_t... I>
const auto& find_in_args(const Tuple& args, std::index_sequence<I0, I...>);

/// The structural node of a planned tree (the first, depth first; a planned tree holds
/// one). Backends find their kernel's node with it.
template <class N>
const auto& find_structural(const N& n) {
  constexpr node_kind k = kind_of_v<N>;
  if constexpr (k == node_kind::structural) {
    return n;
  } else if constexpr (k == node_kind::cast) {
    return find_structural(n.arg);
  } else if constexpr (k == node_kind::op) {
    return find_in_args(n.args, std::make_index_sequence<std::tuple_size_v<decltype(n.args)>>{});
  } else {
    static_assert(unhandled_kind<N>, "kiln: find_structural needs a tree holding a structural node");
  }
}
template <class Tuple, std::size_t I0, std::size_t... I>
const auto& find_in_args(const Tuple& args, std::index_sequence<I0, I...>) {
  if constexpr (contains_structural_v<std::tuple_element_t<I0, Tuple>>) return find_structural(std::get<I0>(args));
  else return find_in_args(args, std::index_sequence<I...>{});
}

/// Runs `out = n` (checked by assign) as planned: one kernel for n, after the kernels of
/// any structural node it had to evaluate first. A kept structural node whose result is
/// broadcast to the output (`y[4, 8] = kiln::sum(x, -1, true) + z`) is evaluated first
/// too: a fused kernel writes each of its results once.
template <class T, class B, class N>
void evaluate_planned(const tensor<T, B>& out, const N& n) {
  if constexpr (!contains_structural_v<N>) {
    run_kernel(out, n);
  } else {
    auto planned = plan_node<true>(n);
    if (find_structural(planned).shape() == out.shape()) {
      run_kernel(out, planned);
    } else {
      run_kernel(out, plan_node<false>(planned));
    }
  }
}

}  // namespace kiln::detail
