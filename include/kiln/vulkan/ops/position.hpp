// kiln/vulkan/ops/position.hpp — a statement holding kiln::rope or kiln::embedding as ONE
// dispatch of kernels/position/{rope,embedding}.comp with the statement's prologue and
// epilogue spliced in (codegen/position.hpp). Recording never waits for the GPU:
// embedding's kernel checks the ids itself (clamping each, so nothing is read out of
// bounds) and records the first bad one in a check buffer; the context throws
// kiln::index_error for it at the next synchronisation that covers the kernel
// (context_state::dispatch_checked). Ids that are not contiguous go to the kernel as a
// contiguous copy made on the device (one more dispatch). rope's frequencies come from
// the context's constant cache (ops/position/rope.hpp).
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/vulkan/codegen/position.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/ops/reduce.hpp"

namespace kiln::detail::vk {

/// Records the dispatch of a planned embedding kernel (binding i = by_binding[i]) with its
/// ids' check buffer after the operands: 1 + ids words (context_state::dispatch_checked).
KILN_DECL void record_checked_structural(context_state& ctx, const structural_kernel& kn, const storage& os,
                                         std::span<const storage* const> by_binding, std::uint64_t ids,
                                         context_state::check_report report);

/// out = n for a planned tree whose structural node is a rope or an embedding.
template <class T, class B, class N>
void record_position_kernel(const tensor<T, B>& out, const N& n) {
  context_state& ctx = *out.storage()->ctx;
  require_storage_width<T>(ctx);
  const auto& s = find_structural(n);
  using S = std::remove_cvref_t<decltype(s)>;
  constexpr bool rope = std::is_same_v<typename S::op_type, rope_op>;
  std::vector<const storage*> stores;  // in binding order: output, epilogue, prologue, parameters
  auto add = [&](const storage* st) {
    if (std::find(stores.begin(), stores.end(), st) == stores.end()) stores.push_back(st);
  };
  add(out.storage().get());
  auto tensor_operand = [&](const auto& t) {
    same_context(out, *t.storage(), rope ? "rope" : "embedding");
    require_storage_width<typename std::remove_cvref_t<decltype(t)>::value_type>(ctx);
    add(t.storage().get());
  };
  for_each_leaf(n, [&](const auto& op) {
    if constexpr (is_tensor<std::remove_cvref_t<decltype(op)>>::value) tensor_operand(op);
  });
  for_each_leaf(s.arg, tensor_operand);

  std::vector<position_param> params;
  if constexpr (rope) {
    const auto& pos = std::get<0>(s.params).t;
    const auto& inv = std::get<1>(s.params).t;
    tensor_operand(pos);
    tensor_operand(inv);
    params.push_back({dtype::i32, pos.storage().get(), pos.offset(), pos.strides()[0]});
    params.push_back({dtype::f32, inv.storage().get(), inv.offset(), 1});
    const structural_kernel kn = make_position_kernel(out, n, structural_options_for(ctx), params, kernels::position_rope);
    if (kn.empty) return;
    KILN_ASSERT(stores.size() == kn.first->plan.bindings);
    record_structural(ctx, kn, *out.storage(), stores);
  } else {
    const auto& ids = std::get<0>(s.params).t;
    same_context(out, *ids.storage(), "embedding");
    const index_t V = s.input_shape[0];
    const std::string operands = "table " + s.arg.describe() + ", ids " + ids.describe();
    // Ids in any other layout: a contiguous copy, made on the device (a copy statement
    // recorded before the kernel), freed once the kernel has read it.
    const tensor<std::int32_t, B> contiguous = ids.is_contiguous() ? tensor<std::int32_t, B>() : ids.clone();
    const tensor<std::int32_t, B>& use = ids.is_contiguous() ? ids : contiguous;
    tensor_operand(use);
    params.push_back({dtype::i32, use.storage().get(), use.offset(), 1});
    const structural_kernel kn = make_position_kernel(out, n, structural_options_for(ctx), params, kernels::position_embedding);
    if (kn.empty) return;
    KILN_ASSERT(stores.size() == kn.first->plan.bindings);
    record_checked_structural(
        ctx, kn, *out.storage(), stores, static_cast<std::uint64_t>(ids.numel()),
        [shape = ids.shape(), V, operands](std::uint64_t at, std::int64_t id) {
          return index_error_message(S::op_type::name, id, static_cast<index_t>(at), shape, V, operands);
        });
  }
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/ops/impl/position.ipp"
#endif
