// kiln/vulkan/ops/position.hpp — a statement holding kiln::rope or kiln::embedding as ONE
// dispatch of kernels/position/{rope,embedding}.comp with the statement's prologue and
// epilogue spliced in (codegen/position.hpp). Recording never waits for the GPU:
// embedding's kernel checks the ids itself (clamping each, so nothing is read out of
// bounds) and records the first bad one in a check buffer; the context throws
// kiln::index_error for it at the next synchronisation that covers the kernel
// (context_state::dispatch_checked). Ids that are not contiguous go to the kernel as a
// contiguous copy made on the device (one more dispatch). rope's frequencies come from
// the context's constant cache (ops/position/rope.hpp). vk_structural_kernel<rope_op>
// and <embedding_op> plan them; ops/structural.hpp records them.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/core/tensor.hpp"
#include "kiln/vulkan/codegen/position.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/ops/structural.hpp"

namespace kiln::detail::vk {

/// kiln::rope's kernel (vk_structural_kernel, ops/structural.hpp).
template <>
struct vk_structural_kernel<rope_op> {
  /// "vulkan.rope interleaved" or "vulkan.rope half-split".
  template <class S>
  static std::string variant(const S& s) {
    return s.op.interleaved ? "vulkan.rope interleaved" : "vulkan.rope half-split";
  }

  template <class T, class B, class N>
  static planned_kernel plan(const tensor<T, B>& out, const N& n) {
    const auto& s = find_structural(n);
    const auto& pos = std::get<0>(s.params).t;
    const auto& inv = std::get<1>(s.params).t;
    std::vector<const storage*> operands = collect_operands(out, n, "rope");
    const position_param params[] = {{dtype::i32, pos.storage().get(), pos.offset(), pos.strides()[0]},
                                     {dtype::f32, inv.storage().get(), inv.offset(), 1}};
    return planned(std::move(operands),
                   make_position_kernel(out, n, device_caps_of(*out.storage()->ctx), params, kernels::position_rope));
  }
};

/// kiln::embedding's kernel (vk_structural_kernel, ops/structural.hpp), checking its
/// ids into a check buffer of 1 + ids words.
template <>
struct vk_structural_kernel<embedding_op> {
  template <class S>
  static std::string variant(const S&) {
    return "vulkan.embedding";
  }

  template <class T, class B, class N>
  static planned_kernel plan(const tensor<T, B>& out, const N& n) {
    const auto& s = find_structural(n);
    const auto& ids = std::get<0>(s.params).t;
    same_context(out, *ids.storage(), "embedding");
    // Ids in any other layout: a contiguous copy, made on the device (a copy statement
    // recorded before the kernel), freed once the kernel has read it.
    const tensor<std::int32_t, B> contiguous = ids.is_contiguous() ? tensor<std::int32_t, B>() : ids.clone();
    const tensor<std::int32_t, B>& use = ids.is_contiguous() ? ids : contiguous;
    std::vector<const storage*> operands = collect_operands(out, n, "embedding", use);
    const position_param params[] = {{dtype::i32, use.storage().get(), use.offset(), 1}};
    planned_kernel k = planned(std::move(operands), make_position_kernel(out, n, device_caps_of(*out.storage()->ctx),
                                                                         params, kernels::position_embedding));
    if (k.empty()) return k;
    k.keep = contiguous.storage();
    k.check_words = 1 + static_cast<std::uint64_t>(ids.numel());
    k.check = [shape = ids.shape(), V = s.input_shape[0], operands = "table " + s.arg.describe() + ", ids " + ids.describe()](
                  std::uint64_t at, std::int64_t id) {
      return index_error_message(embedding_op::name, id, static_cast<index_t>(at), shape, V, operands);
    };
    return k;
  }
};

}  // namespace kiln::detail::vk
