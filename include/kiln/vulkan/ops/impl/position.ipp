// kiln/vulkan/ops/impl/position.ipp — definitions of kiln/vulkan/ops/position.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/ops/position.hpp"

namespace kiln::detail::vk {

KILN_DECL void record_checked_structural(context_state& ctx, const structural_kernel& kn, const storage& os,
                                         std::span<const storage* const> by_binding, std::uint64_t ids,
                                         context_state::check_report report) {
  const structural_plan& plan = kn.first->plan;
  std::vector<context_state::binding> b(plan.bindings);
  for (std::uint32_t i = 0; i < plan.bindings; ++i) {
    const storage* st = by_binding[i];
    b[i] = {&st->alloc(), &st->access(), st == &os, i < 32 && (plan.texel_bindings >> i) & 1u};
  }
  const std::uint32_t nb = plan.bindings + 1;  // the check buffer, bound by dispatch_checked
  const auto bytes = static_cast<std::uint32_t>(kn.push.size() * sizeof(std::uint32_t));
  const kernel_spec spec{kn.first->name, kn.first->glsl, {}, nb, plan.params_buffer ? 0 : bytes, kn.first->expression,
                         plan.texel_bindings, plan.params_buffer ? bytes : 0, plan.wg};
  ctx.dispatch_checked(spec, b, std::as_bytes(std::span(kn.push)), ctx.grid_for(kn.first_tasks), 1 + ids,
                       std::move(report));
}

}  // namespace kiln::detail::vk
