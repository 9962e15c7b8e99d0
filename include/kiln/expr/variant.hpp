// kiln/expr/variant.hpp — kiln::kernel_variant: which kernel a statement would run.
//
// A structural op has several kernels per backend, chosen by shape, layout and device
// (matmul: matrix-vector, small-M, packed GEMM on the CPU; tiled, split-K, matrix-vector
// on Vulkan). kernel_variant(e) names the one `y = e` would pick, without running it: for
// tests, debugging and benchmark labels. A backend answers through
// backend_traits<B>::kernel_variant(node) for the structural node the planner keeps;
// a backend or op without variants answers with the op's name.
#pragma once

#include <string>
#include <type_traits>

#include "kiln/core/backend.hpp"
#include "kiln/expr/assign.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/plan.hpp"
#include "kiln/expr/traverse.hpp"

namespace kiln {

/// The kernel `y = e` runs for e's structural node, e.g. "cpu.gemm.packed 6x16" or
/// "vulkan.gemm.tiled 64x64"; "elementwise" for a statement without one.
template <expression E>
std::string kernel_variant(const E& e) {
  using N = detail::node_t<const E&>;
  if constexpr (!detail::contains_structural_v<N>) {
    return "elementwise";
  } else {
    const N& n = detail::as_node(e);
    const auto& s = detail::find_structural(n);  // the one the planner keeps
    using S = std::remove_cvref_t<decltype(s)>;
    using B = typename S::backend_type;
    if constexpr (requires { backend_traits<B>::kernel_variant(s); }) {
      return backend_traits<B>::kernel_variant(s);
    } else {
      return std::string(S::op_type::name);
    }
  }
}

}  // namespace kiln
