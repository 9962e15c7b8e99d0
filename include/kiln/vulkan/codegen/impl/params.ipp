// kiln/vulkan/codegen/impl/params.ipp — definitions of kiln/vulkan/codegen/params.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/codegen/params.hpp"

namespace kiln::detail::vk {

KILN_DECL void param_block::name_of(std::string& s, const member& m) {
  s += m.name;
  if (m.i >= 0) s += std::to_string(m.i);
  if (m.j >= 0) s += "_" + std::to_string(m.j);
}

KILN_DECL std::string param_block::glsl() const {
  std::string s;
  s.reserve(members_.size() * 14);
  for (const member& m : members_) {
    s += "  ";
    s += m.type;
    s += ' ';
    name_of(s, m);
    s += ";\n";
  }
  return s;
}

KILN_DECL std::string param_block::names(std::string_view prefix) const {
  std::string s;
  for (std::size_t k = 0; k < members_.size(); ++k) {
    if (k) s += ", ";
    s += prefix;
    name_of(s, members_[k]);
  }
  return s;
}

KILN_DECL void param_block::out_of_range(const char* what, index_t v) const {
  throw_index_limit(std::string("kiln::vulkan: ") + what + " " + std::to_string(v), index_limit::value, kernels_);
}

}  // namespace kiln::detail::vk
