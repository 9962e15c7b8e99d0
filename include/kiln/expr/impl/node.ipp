// kiln/expr/impl/node.ipp — definitions of kiln/expr/node.hpp
// (inline in the header-only mode, compiled once in kiln::runtime otherwise; see
// kiln/detail/config.hpp).
#pragma once

#include "kiln/expr/node.hpp"

namespace kiln::detail {

KILN_DECL void throw_operand_error(std::string_view op, bool defined, const std::string* operands, std::size_t count) {
  std::string msg = "kiln::" + std::string(op) +
                    (defined ? ": shapes cannot be broadcast together: "
                             : ": an operand is an empty tensor (default-constructed or moved from): ");
  for (std::size_t i = 0; i < count; ++i) {
    if (i) msg += ", ";
    msg += std::string(1, static_cast<char>('a' + i)) + " is " + operands[i];
  }
  throw shape_error(msg);
}

}  // namespace kiln::detail
