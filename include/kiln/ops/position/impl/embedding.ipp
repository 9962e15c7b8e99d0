// kiln/ops/position/impl/embedding.ipp — definitions of kiln/ops/position/embedding.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/ops/position/embedding.hpp"

namespace kiln::detail {

KILN_DECL std::string index_error_message(std::string_view op, std::int64_t id, index_t position, const kiln::shape& s,
                                          index_t vocab, const std::string& operands) {
  std::string at = "[";
  index_t rest = position;
  std::vector<index_t> c(static_cast<std::size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    c[static_cast<std::size_t>(d)] = s[d] ? rest % s[d] : 0;
    rest = s[d] ? rest / s[d] : 0;
  }
  for (std::size_t d = 0; d < c.size(); ++d) at += (d ? ", " : "") + std::to_string(c[d]);
  at += "]";
  return "kiln::" + std::string(op) + ": id " + std::to_string(id) + " at ids" + at + " is outside [0, " +
         std::to_string(vocab) + "), the table's rows (" + operands + ")";
}

KILN_DECL void check_ids(std::string_view op, const std::vector<std::int32_t>& ids, const kiln::shape& s, index_t vocab,
                         const std::string& operands) {
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::int32_t id = ids[k];
    if (id >= 0 && index_t(id) < vocab) continue;
    throw index_error(index_error_message(op, id, static_cast<index_t>(k), s, vocab, operands));
  }
}

}  // namespace kiln::detail
