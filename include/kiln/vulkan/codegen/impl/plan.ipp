// kiln/vulkan/codegen/impl/plan.ipp — definitions of kiln/vulkan/codegen/plan.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/codegen/plan.hpp"

namespace kiln::detail::vk {

KILN_DECL unsigned step_width(const kernel_plan& plan) { return plan.wide ? 8u : plan.vec4 ? 4u : 1u; }

KILN_DECL std::uint64_t invocations_needed(const kernel_plan& plan, std::uint64_t elements) {
  const std::uint64_t w = step_width(plan);
  return std::max(elements / w, elements % w);
}

KILN_DECL std::size_t param_words(const kernel_plan& plan, std::size_t scalars) {
  std::size_t strided = 0;
  for (const auto& op : plan.operands) strided += op.how == access::strided;
  const std::size_t r = static_cast<std::size_t>(plan.rank);
  return 1 + plan.operands.size() + (strided ? r + strided * r : 0) + scalars;
}

KILN_DECL bool texel_binding(const kernel_plan& plan, std::uint32_t b) {
  return b < max_texel_binding && (plan.texel_bindings >> b) & 1u;
}

KILN_DECL std::uint32_t storage_buffers(const kernel_plan& plan) {
  return plan.bindings - static_cast<std::uint32_t>(std::popcount(plan.texel_bindings)) + (plan.params_buffer ? 1u : 0u);
}

}  // namespace kiln::detail::vk
