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
  // cooperative matrices: f16 x f16 + f32 -> f32, the largest shape the driver reports
  if (d.cooperative_matrix && d.cooperative_matrix_nv && d.fp16_arithmetic && g.subgroup && !env_off("KILN_VULKAN_COOPMAT")) {
    for (const auto& c : d.cooperative_matrix_shapes) {
      if (c.a != "f16" || c.b != "f16" || c.c != "f32" || c.d != "f32") continue;
      if (std::uint64_t(c.m) * c.n * c.k > std::uint64_t(g.cm_m) * g.cm_n * g.cm_k) {
        g.cm_m = c.m;
        g.cm_n = c.n;
        g.cm_k = c.k;
      }
    }
  }
  return g;
}

}  // namespace kiln::detail::vk
