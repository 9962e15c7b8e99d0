// kiln/vulkan/codegen/impl/plan.ipp — definitions of kiln/vulkan/codegen/plan.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/codegen/plan.hpp"

#include "kiln/core/error.hpp"

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

KILN_DECL std::string index_limit_message(std::string_view subject, index_limit limit, std::string_view kernels,
                                          std::string_view split) {
  std::string m(subject);
  switch (limit) {
    case index_limit::value: m += " does not fit the 32-bit indexing of "; break;
    case index_limit::elements: m += ": more than 2^32 - 1 elements, past the 32-bit indexing of "; break;
    case index_limit::positions: m += ": more than 2^32 - 1 positions, past the 32-bit indexing of "; break;
    case index_limit::workgroups: m += ": more workgroups than 32-bit task numbers name"; break;
  }
  if (limit != index_limit::workgroups) m += kernels;
  if (!split.empty()) m += "; split " + std::string(split);
  return m;
}

KILN_DECL void throw_index_limit(std::string_view subject, index_limit limit, std::string_view kernels,
                                 std::string_view split) {
  throw shape_error(index_limit_message(subject, limit, kernels, split));
}

}  // namespace kiln::detail::vk
