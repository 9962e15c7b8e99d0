// kiln/vulkan/ops/quant.hpp — a statement holding one quant-family op (kiln::quantize's
// packing, kiln::dequantize, matmul / linear / bitlinear with a qtensor) as ONE dispatch
// of kernels/quant/{pack,dequantize,matvec,tiled}.comp with the statement's prologue and
// epilogue spliced in (codegen/quant.hpp); and the name of the kernel each runs
// (kiln::kernel_variant: "vulkan.quant.pack", ".dequantize", ".matvec", ".tiled": a
// product with more than quant_matvec_rows rows of x). The matvec kernel's segment of x
// held in shared memory comes from maxComputeSharedMemorySize, its columns per
// invocation from the device type (CPU devices: up to 4); the tiled kernel's tile and K
// chunk from maxComputeWorkGroupInvocations and maxComputeSharedMemorySize. Both take
// packed 4x8-bit integer dot products (OpSDot; variant names end in " dot4x8") where the
// device has shaderIntegerDotProduct and reports integerDotProduct4x8BitPackedSigned
// accelerated, plain integer multiply-adds elsewhere (lavapipe reports none accelerated,
// and there the dot path is no faster at M = 1 and 1.2-1.4x slower at M = 64);
// KILN_VULKAN_QUANT=dot / plain forces either.
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
#include "kiln/vulkan/codegen/quant.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/ops/copy.hpp"

namespace kiln::detail::vk {

/// What ctx's device lets a quant kernel use.
KILN_DECL quant_device quant_device_of(const context_state& ctx);

/// The variant a quant node runs (kiln::kernel_variant), e.g. "vulkan.quant.matvec".
template <class S>
std::string quant_variant(const S& s) {
  const context_state* ctx = nullptr;
  for_each_leaf(s.arg, [&](const auto& t) {
    if (!ctx) ctx = t.storage()->ctx.get();
  });
  if (!ctx) ctx = std::get<0>(s.params).t.storage()->ctx.get();
  return quant_choice_of(s, quant_device_of(*ctx)).name();
}

/// out = n for a planned tree whose structural node is a quant op.
template <class T, class B, class N>
void record_quant_kernel(const tensor<T, B>& out, const N& n) {
  context_state& ctx = *out.storage()->ctx;
  require_storage_width<T>(ctx);
  const auto& s = find_structural(n);
  using S = std::remove_cvref_t<decltype(s)>;
  using V = vk_quant_op<typename S::op_type>;
  const char* op = V::kind == quant_kind::pack ? "quantize" : V::kind == quant_kind::dequantize ? "dequantize" : "matmul";
  std::vector<const storage*> stores;  // in binding order: output, epilogue, prologue, parameters
  auto add = [&](const storage* st) {
    if (std::find(stores.begin(), stores.end(), st) == stores.end()) stores.push_back(st);
  };
  add(out.storage().get());
  auto tensor_operand = [&](const auto& t) {
    same_context(out, *t.storage(), op);
    require_storage_width<typename std::remove_cvref_t<decltype(t)>::value_type>(ctx);
    add(t.storage().get());
  };
  for_each_leaf(n, [&](const auto& o) {
    if constexpr (is_tensor<std::remove_cvref_t<decltype(o)>>::value) tensor_operand(o);
  });
  for_each_leaf(s.arg, tensor_operand);
  std::apply([&](const auto&... q) { (tensor_operand(q.t), ...); }, s.params);

  const quant_templates tmpl{kernels::quant_pack, kernels::quant_dequantize, kernels::quant_matvec, kernels::quant_tiled,
                             kernels::quant_common};
  const device_info& info = ctx.info();
  const quant_kernel kn = make_quant_kernel(out, n, quant_device_of(ctx), std::max<std::uint32_t>(info.max_push_constants, 4), tmpl);
  if (kn.empty) return;
  const structural_source& src = *kn.source;
  const structural_plan& plan = src.plan;
  KILN_ASSERT(stores.size() == plan.bindings);
  std::vector<context_state::binding> b(plan.bindings);
  for (std::uint32_t i = 0; i < plan.bindings; ++i) b[i] = {&stores[i]->alloc(), &stores[i]->access(), stores[i] == out.storage().get()};
  const auto bytes = static_cast<std::uint32_t>(kn.push.size() * sizeof(std::uint32_t));
  const std::vector<std::uint32_t> constants = kn.choice.constants();
  const kernel_spec spec{src.name, src.glsl, {}, plan.bindings, plan.params_buffer ? 0 : bytes, src.expression, 0,
                         plan.params_buffer ? bytes : 0, kn.choice.wg, constants};
  ctx.dispatch(spec, b, std::as_bytes(std::span(kn.push)), ctx.grid_for(kn.tasks));
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/ops/impl/quant.ipp"
#endif
