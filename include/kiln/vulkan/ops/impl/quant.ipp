// kiln/vulkan/ops/impl/quant.ipp — definitions of kiln/vulkan/ops/quant.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/ops/quant.hpp"

namespace kiln::detail::vk {

KILN_DECL quant_device quant_device_of(const context_state& ctx) {
  const device_info& d = ctx.info();
  quant_device q;
  q.max_invocations = std::min(d.max_workgroup_invocations, d.max_workgroup_size[0]);
  q.shared_bytes = d.max_shared_memory;
  q.cpu = d.type == device_type::cpu;
  q.dot = d.integer_dot_product;
  q.dot_fast = d.dot4x8_signed_accelerated;
  return q;
}

}  // namespace kiln::detail::vk
