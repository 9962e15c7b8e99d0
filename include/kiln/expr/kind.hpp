// kiln/expr/kind.hpp — the kinds of expression node, as an explicit protocol.
//
// Every node type states its kind (`static constexpr node_kind kind`), and every walk
// over a tree (expr/traverse.hpp, the CPU binder, the Vulkan emitter) handles each kind in
// one branch and ends in `static_assert(unhandled_kind<N>)`: a node type or kind a walk
// does not know fails to compile there, instead of being told apart by which members it
// happens to have.
//
//   leaf        a tensor read (leaf_node)
//   scalar      a constant (scalar_node)
//   op          an elementwise functor over its children (op_node)
//   cast        a dtype conversion (cast_node)
//   structural  an op whose output elements depend on many input elements (reductions,
//               softmax, norms; later matmul, attention): structural_node. Its input
//               expression is fused in as a prologue, the elementwise ops around it as an
//               epilogue; expr/plan.hpp keeps one per kernel and evaluates any other first.
#pragma once

#include <type_traits>

namespace kiln::detail {

enum class node_kind { leaf, scalar, op, cast, structural };

/// The kind of node type N (a compile error for a type that is not a node).
template <class N>
inline constexpr node_kind kind_of_v = std::remove_cvref_t<N>::kind;

/// False for every N: the last branch of a walk over node kinds, as
/// `else static_assert(unhandled_kind<N>, "...")`.
template <class N>
inline constexpr bool unhandled_kind = false;

template <class N>
inline constexpr bool is_structural_v = kind_of_v<N> == node_kind::structural;

}  // namespace kiln::detail
