// kiln/vulkan/ops/attention.hpp — a statement holding one attention (attend family) as
// ONE dispatch of kernels/attention/flash.comp, flash_lanes.comp, flash_slices.comp or decode.comp with the
// statement's prologue (q's expression) and epilogue spliced in (codegen/attention.hpp), or the
// split-KV variant's two dispatches (partial softmaxes over key chunks, then their merge
// and the epilogue). ctx.kernels_launched() counts dispatches. The variant and its sizes
// come from the shape and the device's limits, checked before anything runs.
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
#include "kiln/vulkan/ops/gemm.hpp"  // gemm_device_of

namespace kiln::detail::vk {

/// The variant an attention node runs (kiln::kernel_variant), e.g.
/// "vulkan.attention.flash 32x32" or "vulkan.attention.split 8 (2 dispatches)".
template <class S>
std::string attention_variant(const S& s) {
  const auto& k = std::get<0>(s.params).t;
  return attention_choice_of(s, gemm_device_of(*k.storage()->ctx)).name();
}

template <class T, class B, class N>
void record_attention_kernel(const tensor<T, B>& out, const N& n) {
  context_state& ctx = *out.storage()->ctx;
  require_storage_width<T>(ctx);
  const auto& s = find_structural(n);
  std::vector<const storage*> stores;  // in binding order: output, epilogue, prologue, k, v, mask
  auto add = [&](const storage* st) {
    if (std::find(stores.begin(), stores.end(), st) == stores.end()) stores.push_back(st);
  };
  add(out.storage().get());
  auto tensor_operand = [&](const auto& t) {
    same_context(out, *t.storage(), "attention");
    require_storage_width<typename std::remove_cvref_t<decltype(t)>::value_type>(ctx);
    add(t.storage().get());
  };
  for_each_leaf(n, [&](const auto& op) {
    if constexpr (is_tensor<std::remove_cvref_t<decltype(op)>>::value) tensor_operand(op);
  });
  for_each_leaf(s.arg, tensor_operand);
  std::apply([&](const auto&... q) { (tensor_operand(q.t), ...); }, s.params);
  const device_info& info = ctx.info();
  const attention_kernel kn =
      make_attention_kernel(out, n, gemm_device_of(ctx), std::max<std::uint32_t>(info.max_push_constants, 4),
                            kernels::attention_block, kernels::attention_flash, kernels::attention_flash_lanes,
                            kernels::attention_flash_slices,
                            kernels::attention_decode, kernels::attention_merge);
  if (kn.empty) return;
  const structural_plan& plan = kn.first->plan;
  KILN_ASSERT(stores.size() == plan.bindings);
  const std::uint32_t nb = plan.bindings + (kn.second ? 1u : 0u);
  std::vector<context_state::binding> b(nb);
  for (std::uint32_t i = 0; i < plan.bindings; ++i) b[i] = {&stores[i]->alloc(), &stores[i]->access(), stores[i] == out.storage().get()};
  std::shared_ptr<storage> partials;
  if (kn.second) {
    partials = std::make_shared<storage>(out.storage()->ctx, static_cast<std::size_t>(kn.partials) * 4);
    b[plan.bindings] = {&partials->alloc(), &partials->access(), true};
  }
  const auto bytes = static_cast<std::uint32_t>(kn.push.size() * sizeof(std::uint32_t));
  auto spec = [&](const structural_source& src, std::uint32_t wg, const std::vector<std::uint32_t>& constants) {
    return kernel_spec{src.name, src.glsl, {}, nb, plan.params_buffer ? 0 : bytes, src.expression, 0,
                       plan.params_buffer ? bytes : 0, wg, constants};
  };
  const auto push = std::as_bytes(std::span(kn.push));
  ctx.dispatch(spec(*kn.first, kn.first_wg, kn.first_constants), b, push, ctx.grid_for(kn.first_tasks));
  if (kn.second) {
    b[plan.bindings].write = false;
    ctx.dispatch(spec(*kn.second, kn.second_wg, kn.second_constants), b, push, ctx.grid_for(kn.second_tasks));
  }
  // partials: freed when the last dispatch reading them completes (storage's deferred free)
}

}  // namespace kiln::detail::vk
