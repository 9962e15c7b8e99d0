// kiln/expr/traverse.hpp — walking an expression tree's leaves (depth first, left to
// right). Backends bind leaves in this same order.
#pragma once

#include <cstddef>
#include <tuple>

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
