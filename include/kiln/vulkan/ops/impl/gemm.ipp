// kiln/vulkan/ops/impl/gemm.ipp — definitions of kiln/vulkan/ops/gemm.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/ops/gemm.hpp"

namespace kiln::detail::vk {

KILN_DECL gemm_device gemm_device_of(const context_state& ctx) {
  const device_info& d = ctx.info();
  gemm_device g;
  g.max_invocations = d.max_workgroup_invocations;
  g.max_wg_x = d.max_workgroup_size[0];
  g.shared_bytes = d.max_shared_memory;
  g.cpu = d.type == device_type::cpu;
  const auto has = [&](const char* op) {
    return std::find(d.subgroup_operations.begin(), d.subgroup_operations.end(), op) != d.subgroup_operations.end();
  };
  if (d.subgroups_in_compute && has("basic") && has("arithmetic")) g.subgroup = d.subgroup_size;
  g.shuffle = g.subgroup != 0 && has("shuffle");
  return g;
}

}  // namespace kiln::detail::vk
