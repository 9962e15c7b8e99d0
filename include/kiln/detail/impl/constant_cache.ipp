// kiln/detail/impl/constant_cache.ipp — definitions of kiln/detail/constant_cache.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/detail/constant_cache.hpp"

namespace kiln::detail {

KILN_DECL void constant_cache::clear() noexcept {
  std::unordered_map<std::string, std::shared_ptr<void>> gone;
  {
    std::lock_guard lock(mutex_);
    gone.swap(entries_);
  }
}

KILN_DECL std::size_t constant_cache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace kiln::detail
