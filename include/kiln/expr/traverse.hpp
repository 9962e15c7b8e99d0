// kiln/expr/traverse.hpp — walks over an expression tree, each handling every node kind
// (expr/kind.hpp) in one branch.
//
// The operand table of a statement is defined here, once: its operands are the tree's
// leaves in depth-first, left-to-right order, where a structural node counts as ONE
// operand (its result, read by the epilogue around it; its own inputs belong to its
// kernel). Backends bind operands in this order (for_each_leaf), scalars in the order of
// for_each_scalar; layouts (expr/layout.hpp) give operand k the stride row k + 1.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>

#include "kiln/expr/kind.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/structural.hpp"

namespace kiln::detail {

/// Operands of a statement: leaves, and each structural node as one.
template <class N>
struct leaf_count;
template <class T, class B>
struct leaf_count<leaf_node<T, B>> : std::integral_constant<std::size_t, 1> {};
template <class T>
struct leaf_count<scalar_node<T>> : std::integral_constant<std::size_t, 0> {};
template <class Op, class... A>
struct leaf_count<op_node<Op, A...>> : std::integral_constant<std::size_t, (leaf_count<A>::value + ... + 0)> {};
template <class To, class A>
struct leaf_count<cast_node<To, A>> : leaf_count<A> {};
template <class Op, class A, class... P>
struct leaf_count<structural_node<Op, A, P...>> : std::integral_constant<std::size_t, 1> {};

template <class N>
inline constexpr std::size_t leaf_count_v = leaf_count<std::remove_cvref_t<N>>::value;

/// Whether a tree holds a structural node anywhere (in its prologues too).
template <class N>
struct contains_structural;
template <class T, class B>
struct contains_structural<leaf_node<T, B>> : std::false_type {};
template <class T>
struct contains_structural<scalar_node<T>> : std::false_type {};
template <class Op, class... A>
struct contains_structural<op_node<Op, A...>> : std::bool_constant<(contains_structural<A>::value || ...)> {};
template <class To, class A>
struct contains_structural<cast_node<To, A>> : contains_structural<A> {};
template <class Op, class A, class... P>
struct contains_structural<structural_node<Op, A, P...>> : std::true_type {};

template <class N>
inline constexpr bool contains_structural_v = contains_structural<std::remove_cvref_t<N>>::value;

/// What one output element of Op costs, in units of one cheap vector op (an add, a
/// multiply) per element: Op::cost where the functor declares it (transcendental bodies
/// do), else 1. Backends weigh a statement's work with it (Eigen Tensor's costPerCoeff).
template <class Op>
inline constexpr int op_cost_v = [] {
  if constexpr (requires { Op::cost; }) return static_cast<int>(Op::cost);
  else return 1;
}();

/// The arithmetic cost of one element of a tree: the sum of its ops' costs (a cast counts
/// as one cheap op; leaves, scalars and structural results cost nothing here, their
/// traffic is counted apart).
template <class N>
struct tree_cost : std::integral_constant<int, 0> {};
template <class Op, class... A>
struct tree_cost<op_node<Op, A...>> : std::integral_constant<int, (op_cost_v<Op> + ... + tree_cost<A>::value)> {};
template <class To, class A>
struct tree_cost<cast_node<To, A>> : std::integral_constant<int, 1 + tree_cost<A>::value> {};

template <class N>
inline constexpr int tree_cost_v = tree_cost<std::remove_cvref_t<N>>::value;

/// Bytes the operands of a tree read per output element (each once, as if contiguous).
template <class N>
struct leaf_bytes : std::integral_constant<std::size_t, 0> {};
template <class T, class B>
struct leaf_bytes<leaf_node<T, B>> : std::integral_constant<std::size_t, sizeof(T)> {};
template <class Op, class... A>
struct leaf_bytes<op_node<Op, A...>> : std::integral_constant<std::size_t, (leaf_bytes<A>::value + ... + 0)> {};
template <class To, class A>
struct leaf_bytes<cast_node<To, A>> : leaf_bytes<A> {};
template <class Op, class A, class... P>
struct leaf_bytes<structural_node<Op, A, P...>>
    : std::integral_constant<std::size_t, sizeof(typename structural_node<Op, A, P...>::value_type)> {};

template <class N>
inline constexpr std::size_t leaf_bytes_v = leaf_bytes<std::remove_cvref_t<N>>::value;

/// Calls f(operand) for every operand of n in the operand table's order: f(tensor) for a
/// leaf, f(node) for a structural node (not its inputs).
template <class N, class F>
void for_each_leaf(const N& n, F&& f) {
  constexpr node_kind k = kind_of_v<N>;
  if constexpr (k == node_kind::leaf) f(n.t);
  else if constexpr (k == node_kind::scalar) {}
  else if constexpr (k == node_kind::op) std::apply([&](const auto&... c) { (for_each_leaf(c, f), ...); }, n.args);
  else if constexpr (k == node_kind::cast) for_each_leaf(n.arg, f);
  else if constexpr (k == node_kind::structural) f(n);
  else static_assert(unhandled_kind<N>, "kiln: for_each_leaf does not know this node kind");
}

/// Calls f(scalar_node) for every scalar of n outside structural nodes, in the order
/// generated kernels number them.
template <class N, class F>
void for_each_scalar(const N& n, F&& f) {
  constexpr node_kind k = kind_of_v<N>;
  if constexpr (k == node_kind::scalar) f(n);
  else if constexpr (k == node_kind::leaf || k == node_kind::structural) {}
  else if constexpr (k == node_kind::op) std::apply([&](const auto&... c) { (for_each_scalar(c, f), ...); }, n.args);
  else if constexpr (k == node_kind::cast) for_each_scalar(n.arg, f);
  else static_assert(unhandled_kind<N>, "kiln: for_each_scalar does not know this node kind");
}

/// Calls f(tensor, in_place_ok) for every tensor the statement reads, inside structural
/// nodes too. in_place_ok: reading exactly the output's elements is safe (elementwise
/// operands, and a row op's inputs: a line is read whole before it is written); a
/// reduction's inputs must not overlap its output at all.
template <class N, class F>
void for_each_tensor(const N& n, F&& f, bool in_place_ok = true) {
  constexpr node_kind k = kind_of_v<N>;
  if constexpr (k == node_kind::leaf) f(n.t, in_place_ok);
  else if constexpr (k == node_kind::scalar) {}
  else if constexpr (k == node_kind::op) {
    std::apply([&](const auto&... c) { (for_each_tensor(c, f, in_place_ok), ...); }, n.args);
  } else if constexpr (k == node_kind::cast) {
    for_each_tensor(n.arg, f, in_place_ok);
  } else if constexpr (k == node_kind::structural) {
    const bool ok = in_place_ok && N::family == structural_family::row;
    for_each_tensor(n.arg, f, ok);
    std::apply([&](const auto&... p) { (for_each_tensor(p, f, ok), ...); }, n.params);
  } else {
    static_assert(unhandled_kind<N>, "kiln: for_each_tensor does not know this node kind");
  }
}

}  // namespace kiln::detail
