// kiln/vulkan/ops/impl/elementwise.ipp — definitions of kiln/vulkan/ops/elementwise.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/ops/elementwise.hpp"

namespace kiln::detail::vk {

KILN_DECL plan_options plan_options_for(const context_state& ctx) {
  const device_caps& c = ctx.caps();
  const std::uint64_t max_invocations =
      ctx.single_step() ? std::uint64_t(ctx.workgroup_size()) * ctx.info().max_workgroup_count[0] : 0;
  plan_options o{c.int64, c.texel_reads && c.texel_views, max_invocations};
  o.max_push_bytes = c.max_push_bytes;
  o.max_storage_buffers = c.max_storage_buffers;
  o.max_texel_buffers = c.max_texel_buffers;
  o.texel_views = c.texel_views;
  return o;
}

KILN_DECL void record_kernel(context_state& ctx, const kernel& kn, const storage& os, std::span<const storage* const> leaves) {
  const kernel_plan& plan = kn.source.plan;
  // One binding per distinct buffer; the output's is the one written.
  std::vector<context_state::binding> b(plan.bindings);
  b[plan.operands[0].binding] = {&os.alloc(), &os.access(), true};
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    const std::uint32_t slot = plan.operands[k + 1].binding;
    if (slot != plan.operands[0].binding) {
      b[slot] = {&leaves[k]->alloc(), &leaves[k]->access(), false, texel_binding(plan, slot)};
    }
  }

  const auto param_bytes = static_cast<std::uint32_t>(kn.args.push.size() * sizeof(std::uint32_t));
  const kernel_spec spec{kn.source.name, kn.source.glsl, {}, plan.bindings, plan.params_buffer ? 0 : param_bytes,
                         kn.source.expression, plan.texel_bindings, plan.params_buffer ? param_bytes : 0};
  std::uint32_t groups = 0;
  if (plan.single_step) {  // an invocation for every step (and tail element)
    const std::uint64_t wg = ctx.workgroup_size();
    groups = static_cast<std::uint32_t>(std::max<std::uint64_t>((invocations_needed(plan, kn.args.elements) + wg - 1) / wg, 1));
  } else {
    const std::uint64_t per_step = step_width(plan);
    groups = ctx.groups_for((kn.args.elements + per_step - 1) / per_step);
  }
  ctx.dispatch(spec, b, std::as_bytes(std::span(kn.args.push)), groups);
}

}  // namespace kiln::detail::vk
