// kiln/vulkan/ops/gemm.hpp — a statement holding one matmul (contract family) as ONE
// dispatch of kernels/gemm/*.comp with the statement's prologue (a's expression) and
// epilogue spliced in (codegen/gemm.hpp), or split-K's two dispatches (partial sums over
// K chunks, then their merge and the epilogue). ctx.kernels_launched() counts dispatches.
// The variant and its sizes come from the shape, b's layout and the device's limits
// (workgroup size, shared memory, subgroup arithmetic), checked before anything runs.
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

namespace kiln::detail::vk {

/// What ctx's device lets a matmul kernel use.
KILN_DECL gemm_device gemm_device_of(const context_state& ctx);

/// The variant a matmul node runs (kiln::kernel_variant), e.g. "vulkan.gemm.tiled 64x64".
template <class S>
std::string gemm_variant(const S& s) {
  const auto& b = std::get<0>(s.params).t;
  return gemm_choice_of(s, gemm_device_of(*b.storage()->ctx)).name();
}

template <class T, class B, class N>
void record_gemm_kernel(const tensor<T, B>& out, const N& n) {
  context_state& ctx = *out.storage()->ctx;
  require_storage_width<T>(ctx);
  const auto& s = find_structural(n);
  std::vector<const storage*> stores;  // in binding order: output, epilogue, prologue, b
  auto add = [&](const storage* st) {
    if (std::find(stores.begin(), stores.end(), st) == stores.end()) stores.push_back(st);
  };
  add(out.storage().get());
  auto tensor_operand = [&](const auto& t) {
    same_context(out, *t.storage(), "matmul");
    require_storage_width<typename std::remove_cvref_t<decltype(t)>::value_type>(ctx);
    add(t.storage().get());
  };
  for_each_leaf(n, [&](const auto& op) {
    if constexpr (is_tensor<std::remove_cvref_t<decltype(op)>>::value) tensor_operand(op);
  });
  for_each_leaf(s.arg, tensor_operand);
  tensor_operand(std::get<0>(s.params).t);
  const device_info& info = ctx.info();
  const gemm_kernel kn = make_gemm_kernel(out, n, gemm_device_of(ctx), std::max<std::uint32_t>(info.max_push_constants, 4),
                                          kernels::gemm_naive, kernels::gemm_tiled, kernels::gemm_matvec,
                                          kernels::gemm_merge);
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

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/ops/impl/gemm.ipp"
#endif
