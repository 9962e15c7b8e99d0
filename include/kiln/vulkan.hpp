// kiln/vulkan.hpp — umbrella for the Vulkan backend (link kiln::vulkan).
// The only kiln header that includes <vulkan/vulkan.h> and shaderc. Include it next to
// <kiln/kiln.hpp> to get kiln::vulkan: `kiln::context<kiln::vulkan> gpu;`
#pragma once

#include <vulkan/vulkan.h>
#include <shaderc/shaderc.h>

#define KILN_VULKAN_UMBRELLA 1

#include "kiln/fwd.hpp"

#include "kiln/core/backend.hpp"
#include "kiln/core/context.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/core/views.hpp"
#include "kiln/expr/assign.hpp"

#include "kiln/vulkan/device.hpp"
#include "kiln/vulkan/memory.hpp"
#include "kiln/vulkan/sequence.hpp"
#include "kiln/vulkan/shader_cache.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/ops/copy.hpp"
#include "kiln/vulkan/backend.hpp"
#include "kiln/vulkan/ops/reduce.hpp"
#include "kiln/vulkan/ops/gemm.hpp"
#include "kiln/vulkan/ops/attention.hpp"
#include "kiln/vulkan/ops/quant.hpp"
#include "kiln/vulkan/ops/position.hpp"

// rope and embedding: ops/position.hpp records them itself (record_position_kernel), so
// their plan() records and hands back no dispatch.
namespace kiln::detail::vk {
template <>
struct vk_structural_kernel<rope_op> {
  template <class S>
  static std::string variant(const S& s) {
    return s.op.interleaved ? "vulkan.rope interleaved" : "vulkan.rope half-split";
  }
  template <class T, class B, class N>
  static planned_kernel plan(const tensor<T, B>& out, const N& n) {
    record_position_kernel(out, n);
    return {};
  }
};
template <>
struct vk_structural_kernel<embedding_op> {
  template <class S>
  static std::string variant(const S&) {
    return "vulkan.embedding";
  }
  template <class T, class B, class N>
  static planned_kernel plan(const tensor<T, B>& out, const N& n) {
    record_position_kernel(out, n);
    return {};
  }
};
}  // namespace kiln::detail::vk
