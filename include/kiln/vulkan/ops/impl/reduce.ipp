// kiln/vulkan/ops/impl/reduce.ipp — definitions of kiln/vulkan/ops/reduce.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/ops/reduce.hpp"

namespace kiln::detail::vk {

KILN_DECL structural_options structural_options_for(const context_state& ctx) {
  const device_info& d = ctx.info();
  structural_options o;
  o.max_workgroup = std::min({256u, d.max_workgroup_invocations, d.max_workgroup_size[0]});
  const auto has = [&](const char* op) {
    return std::find(d.subgroup_operations.begin(), d.subgroup_operations.end(), op) != d.subgroup_operations.end();
  };
  if (d.subgroups_in_compute && has("basic") && has("shuffle")) o.subgroup_size = d.subgroup_size;
  o.shared_bytes = d.max_shared_memory;
  o.max_push_bytes = std::max<std::uint32_t>(d.max_push_constants, 4);
  // CPU devices: a subgroup a line (see structural_options::lanes); KILN_VULKAN_ROWS=
  // "lanes" or "groups" forces either layout on any device (tests, measurements).
  o.lanes = d.type == device_type::cpu;
  if (const char* v = std::getenv("KILN_VULKAN_ROWS"); v && *v) o.lanes = std::string_view(v) == "lanes";
  o.lanes = o.lanes && o.subgroup_size > 1;
  o.texel_reads = ctx.texel_reads() && d.max_texel_buffer_elements > 0;
  o.max_texel_buffers = std::min(d.max_texel_buffers, max_texel_binding);
  return o;
}

KILN_DECL void record_structural(context_state& ctx, const structural_kernel& kn, const storage& os,
                                 std::span<const storage* const> by_binding) {
  const structural_plan& plan = kn.first->plan;
  const std::uint32_t nb = plan.bindings + (kn.second ? 1u : 0u);
  std::vector<context_state::binding> b(nb);
  for (std::uint32_t i = 0; i < plan.bindings; ++i) {
    const storage* st = by_binding[i];
    b[i] = {&st->alloc(), &st->access(), st == &os, i < 32 && (plan.texel_bindings >> i) & 1u};
  }
  std::shared_ptr<storage> partials;
  if (kn.second) {
    partials = std::make_shared<storage>(os.ctx, static_cast<std::size_t>(kn.partials) * 16);
    b[plan.bindings] = {&partials->alloc(), &partials->access(), true};
  }
  const auto bytes = static_cast<std::uint32_t>(kn.push.size() * sizeof(std::uint32_t));
  auto spec = [&](const structural_source& src) {
    return kernel_spec{src.name, src.glsl, {}, nb, plan.params_buffer ? 0 : bytes, src.expression, plan.texel_bindings,
                       plan.params_buffer ? bytes : 0, src.plan.wg};
  };
  const auto push = std::as_bytes(std::span(kn.push));
  ctx.dispatch(spec(*kn.first), b, push, ctx.grid_for(kn.first_tasks));
  if (kn.second) {
    b[plan.bindings].write = false;
    ctx.dispatch(spec(*kn.second), b, push, ctx.grid_for(kn.second_tasks));
  }
  // partials: freed when the last dispatch reading them completes (storage's deferred free)
}

}  // namespace kiln::detail::vk
