// kiln/core/impl/error.ipp — definitions of kiln/core/error.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/core/error.hpp"

namespace kiln {

KILN_DECL out_of_memory::out_of_memory(const std::string& what, std::size_t requested, std::size_t available)
    : device_error(what), requested_(requested), available_(available) {}

}  // namespace kiln
