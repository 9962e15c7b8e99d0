// kiln/vulkan/ops/impl/copy.ipp — definitions of kiln/vulkan/ops/copy.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/ops/copy.hpp"

namespace kiln::detail::vk {

KILN_DECL const char* elem_bits(std::size_t bytes) noexcept { return bytes == 1 ? "8" : bytes == 2 ? "16" : "32"; }

}  // namespace kiln::detail::vk
