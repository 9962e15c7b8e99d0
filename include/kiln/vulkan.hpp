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
#include "kiln/vulkan/ops/structural.hpp"  // vk_structural_kernel; the op families' kernels:
#include "kiln/vulkan/ops/reduce.hpp"
#include "kiln/vulkan/ops/cumsum.hpp"
#include "kiln/vulkan/ops/gemm.hpp"
#include "kiln/vulkan/ops/attention.hpp"
#include "kiln/vulkan/ops/quant.hpp"
#include "kiln/vulkan/ops/position.hpp"
#include "kiln/vulkan/ops/paged_attention.hpp"
