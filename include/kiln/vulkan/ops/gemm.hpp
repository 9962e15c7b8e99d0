// kiln/vulkan/ops/gemm.hpp — a statement holding one matmul (contract family) as ONE
// dispatch of kernels/gemm/*.comp with the statement's prologue (a's expression) and
// epilogue spliced in (codegen/gemm.hpp), or split-K's two dispatches (partial sums over
// K chunks, then their merge and the epilogue). ctx.kernels_launched() counts dispatches.
// The variant and its sizes come from the shape, b's layout and the device's limits
// (workgroup size, shared memory, subgroup arithmetic), checked before anything runs.
// vk_structural_kernel<matmul_op> plans it; ops/structural.hpp records it.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/vulkan/codegen.hpp"
#include "kiln/vulkan/codegen/gemm.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/ops/copy.hpp"
#include "kiln/vulkan/ops/structural.hpp"

namespace kiln::detail::vk {

/// The contract family's kernel (vk_structural_kernel, ops/structural.hpp).
template <class BT>
struct vk_structural_kernel<matmul_op<BT>> {
  /// e.g. "vulkan.gemm.tiled 64x64".
  template <class S>
  static std::string variant(const S& s) {
    return gemm_choice_of(s, device_caps_of(*node_context(s))).name();
  }

  template <class T, class B, class N>
  static planned_kernel plan(const tensor<T, B>& out, const N& n) {
    const context_state& ctx = *out.storage()->ctx;
    std::vector<const storage*> operands = collect_operands(out, n, "matmul");
    const device_caps dev = device_caps_of(ctx);
    return planned(std::move(operands), make_gemm_kernel(out, n, dev, dev.max_push_bytes, kernels::gemm_naive,
                                                         kernels::gemm_tiled, kernels::gemm_matvec, kernels::gemm_merge,
                                                         kernels::gemm_coopmat));
  }
};

}  // namespace kiln::detail::vk
