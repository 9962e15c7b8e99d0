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

KILN_DECL bool texel_binding(const kernel_plan& plan, std::uint32_t b) {
  return b < max_texel_binding && (plan.texel_bindings >> b) & 1u;
}

KILN_DECL bool texel_eligible(const kernel_plan& plan, std::uint32_t b) {
  bool texel = b != plan.operands[0].binding && b < max_texel_binding;
  for (std::size_t o = 1; o < plan.operands.size() && texel; ++o) {
    const auto& op = plan.operands[o];
    texel = op.binding != b || op.type == dtype::f32 || op.type == dtype::i32;
  }
  return texel;
}

KILN_DECL void fit_storage_buffers(kernel_plan& plan, const plan_options& opt) {
  if (!opt.max_storage_buffers || !opt.texel_views) return;
  const std::uint32_t max_texel = opt.max_texel_buffers ? opt.max_texel_buffers : max_texel_binding;
  auto texels = static_cast<std::uint32_t>(std::popcount(plan.texel_bindings));
  for (std::uint32_t b = 0; b < plan.bindings && texels < max_texel; ++b) {
    if (storage_buffers(plan) <= opt.max_storage_buffers) break;
    if (!texel_binding(plan, b) && texel_eligible(plan, b)) {
      plan.texel_bindings |= 1u << b;
      ++texels;
    }
  }
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
