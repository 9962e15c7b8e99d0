// kiln/expr/traverse.hpp — walking an expression tree's leaves (depth first, left to
// right). Backends bind leaves in this same order.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>

#include "kiln/expr/node.hpp"

namespace kiln::detail {

template <class N>
struct leaf_count : std::integral_constant<std::size_t, 0> {};
template <class T, class B>
struct leaf_count<leaf_node<T, B>> : std::integral_constant<std::size_t, 1> {};
template <class Op, class... A>
struct leaf_count<op_node<Op, A...>> : std::integral_constant<std::size_t, (leaf_count<A>::value + ... + 0)> {};
template <class To, class A>
struct leaf_count<cast_node<To, A>> : leaf_count<A> {};

template <class N>
inline constexpr std::size_t leaf_count_v = leaf_count<std::remove_cvref_t<N>>::value;

/// What one output element of Op costs, in units of one cheap vector op (an add, a
/// multiply) per element: Op::cost where the functor declares it (transcendental bodies
/// do), else 1. Backends weigh a statement's work with it (Eigen Tensor's costPerCoeff).
template <class Op>
inline constexpr int op_cost_v = [] {
  if constexpr (requires { Op::cost; }) return static_cast<int>(Op::cost);
  else return 1;
}();

/// The arithmetic cost of one element of a tree: the sum of its ops' costs (a cast counts
/// as one cheap op; leaves and scalars cost nothing here, their traffic is counted apart).
template <class N>
struct tree_cost : std::integral_constant<int, 0> {};
template <class Op, class... A>
struct tree_cost<op_node<Op, A...>> : std::integral_constant<int, (op_cost_v<Op> + ... + tree_cost<A>::value)> {};
template <class To, class A>
struct tree_cost<cast_node<To, A>> : std::integral_constant<int, 1 + tree_cost<A>::value> {};

template <class N>
inline constexpr int tree_cost_v = tree_cost<std::remove_cvref_t<N>>::value;

/// Bytes the leaves of a tree read per output element (each leaf once, as if contiguous).
template <class N>
struct leaf_bytes : std::integral_constant<std::size_t, 0> {};
template <class T, class B>
struct leaf_bytes<leaf_node<T, B>> : std::integral_constant<std::size_t, sizeof(T)> {};
template <class Op, class... A>
struct leaf_bytes<op_node<Op, A...>> : std::integral_constant<std::size_t, (leaf_bytes<A>::value + ... + 0)> {};
template <class To, class A>
struct leaf_bytes<cast_node<To, A>> : leaf_bytes<A> {};

template <class N>
inline constexpr std::size_t leaf_bytes_v = leaf_bytes<std::remove_cvref_t<N>>::value;

/// Calls f(tensor) for every leaf of n.
template <class N, class F>
void for_each_leaf(const N& n, F&& f) {
  if constexpr (requires { n.t; }) {
    f(n.t);
  } else if constexpr (requires { n.args; }) {
    std::apply([&](const auto&... c) { (for_each_leaf(c, f), ...); }, n.args);
  } else if constexpr (requires { n.arg; }) {
    for_each_leaf(n.arg, f);
  }
}

}  // namespace kiln::detail
