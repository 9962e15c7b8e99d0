// kiln/vulkan/ops/attention.hpp — a statement holding one attention (attend family) as
// ONE dispatch of kernels/attention/flash.comp, flash_lanes.comp, flash_slices.comp or decode.comp with the
// statement's prologue (q's expression) and epilogue spliced in (codegen/attention.hpp), or the
// split-KV variant's two dispatches (partial softmaxes over key chunks, then their merge
// and the epilogue). ctx.kernels_launched() counts dispatches. The variant and its sizes
// come from the shape and the device's limits, checked before anything runs.
// vk_structural_kernel<attention_op> plans it; ops/structural.hpp records it.
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
#include "kiln/expr/traverse.hpp"
#include "kiln/vulkan/codegen.hpp"
#include "kiln/vulkan/codegen/attention.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/ops/copy.hpp"
#include "kiln/vulkan/ops/structural.hpp"

namespace kiln::detail::vk {

/// The attend family's kernel (vk_structural_kernel, ops/structural.hpp).
template <class KT, class VT, class MT>
struct vk_structural_kernel<attention_op<KT, VT, MT>> {
  /// e.g. "vulkan.attention.flash 32x32" or "vulkan.attention.split 8 (2 dispatches)".
  template <class S>
  static std::string variant(const S& s) {
    return attention_choice_of(s, device_caps_of(*node_context(s))).name();
  }

  template <class T, class B, class N>
  static planned_kernel plan(const tensor<T, B>& out, const N& n) {
    const context_state& ctx = *out.storage()->ctx;
    std::vector<const storage*> operands = collect_operands(out, n, "attention");
    const device_caps dev = device_caps_of(ctx);
    return planned(std::move(operands),
                   make_attention_kernel(out, n, dev, dev.max_push_bytes, kernels::attention_block,
                                         kernels::attention_flash, kernels::attention_flash_lanes,
                                         kernels::attention_flash_slices, kernels::attention_decode,
                                         kernels::attention_merge));
  }
};

}  // namespace kiln::detail::vk
