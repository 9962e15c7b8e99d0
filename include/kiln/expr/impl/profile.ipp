// kiln/expr/impl/profile.ipp — definitions of kiln/expr/profile.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/expr/profile.hpp"

namespace kiln::detail {

KILN_DECL std::string chain_namer::letter(std::size_t id) {
  std::string s;
  do {
    s.insert(s.begin(), char('a' + id % 26));
    id /= 26;
  } while (id-- > 0);
  return s;
}

}  // namespace kiln::detail
