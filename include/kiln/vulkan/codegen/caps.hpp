// kiln/vulkan/codegen/caps.hpp — device_caps: what a device lets kiln's generated kernels
// use, the one description every kernel family's codegen reads (elementwise, reduce and
// row, contract, attend, quant, position). A context builds it once from its device
// (context_state::caps(), vulkan/context.hpp); codegen tests build one by hand. Zero
// where a limit does not apply. No Vulkan here.
#pragma once

#include <cstdint>

#include "kiln/core/shape.hpp"  // index_t

namespace kiln::detail::vk {

/// What the device (and the context's choices) let a generated kernel use.
struct device_caps {
  // workgroups
  std::uint32_t max_invocations = 256;  // maxComputeWorkGroupInvocations
  std::uint32_t max_wg_x = 256;         // maxComputeWorkGroupSize[0]
  std::uint32_t shared_bytes = 16384;   // maxComputeSharedMemorySize
  std::uint32_t max_push_bytes = 0;     // push-constant bytes; beyond, parameters go to a storage buffer (0: no limit)
  std::uint32_t max_storage_buffers = 0;  // beyond: elementwise inputs are read through texel views (0: no limit)
  // subgroups in compute shaders
  std::uint32_t subgroup = 0;     // size, where compute shaders have the basic subgroup operations (0: none)
  bool subgroup_arithmetic = true;  // ... and the arithmetic ones (subgroupAdd, subgroupMax)
  bool subgroup_shuffle = true;     // ... and shuffles
  bool cpu = false;               // a CPU device (lavapipe): each family's CPU-device variants
  /// Reduce and row families on CPU devices: lines of the rows mode one subgroup each
  /// (structural_plan::lanes), given subgroup shuffles; KILN_VULKAN_ROWS forces either
  /// layout (device_caps_of, ops/structural.hpp).
  bool lanes = false;
  index_t split_from = index_t(1) << 16;  // reduce / row lines at least this long take the split pass
  bool int64 = false;                     // shaderInt64: the elementwise wide variant
  // texel buffers
  bool texel_reads = false;             // the context reads contiguous 32-bit inputs through texel views
  bool texel_views = false;             // every input can be read through a uniform texel view
  std::uint32_t max_texel_buffers = 0;  // uniform texel buffers a kernel may bind
  // products
  bool dot = false;       // shaderIntegerDotProduct (enabled on the device)
  bool dot_fast = false;  // ... and 4x8-bit packed signed dot products accelerated
  /// Nonzero: a cooperative-matrix product f16 x f16 + f32 -> f32 of this m x n x k that
  /// the driver reports and kiln may use (see vulkan/device.hpp), with subgroups of
  /// `subgroup` (KILN_VULKAN_COOPMAT=0 turns it off).
  std::uint32_t cm_m = 0, cm_n = 0, cm_k = 0;

  /// Invocations a workgroup along x may have.
  constexpr std::uint32_t workgroup_limit() const { return max_invocations < max_wg_x ? max_invocations : max_wg_x; }
  /// The subgroup size for kernels that shuffle (0: none).
  constexpr std::uint32_t shuffle_subgroup() const { return subgroup_shuffle ? subgroup : 0; }
  /// The subgroup size for kernels that use subgroup arithmetic (0: none).
  constexpr std::uint32_t arithmetic_subgroup() const { return subgroup_arithmetic ? subgroup : 0; }
};

}  // namespace kiln::detail::vk
