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

}  // namespace kiln::detail::vk
