// kiln/vulkan/ops/impl/reduce.ipp — definitions of kiln/vulkan/ops/reduce.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/ops/reduce.hpp"

namespace kiln::detail::vk {

KILN_DECL structural_options structural_options_for(const context_state& ctx) {
  const device_caps c = device_caps_of(ctx);
  structural_options o;
  o.max_workgroup = std::min(256u, c.workgroup_limit());
  o.subgroup_size = c.shuffle_subgroup();
  o.shared_bytes = c.shared_bytes;
  o.max_push_bytes = c.max_push_bytes;
  o.split_from = c.split_from;
  o.lanes = c.lanes;
  o.texel_reads = c.texel_reads;
  o.max_texel_buffers = c.max_texel_buffers;
  return o;
}

}  // namespace kiln::detail::vk
