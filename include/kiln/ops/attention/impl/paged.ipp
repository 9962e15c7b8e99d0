// kiln/ops/attention/impl/paged.ipp — definitions of kiln/ops/attention/paged_attention.hpp
// (inline in the header-only mode, compiled once in kiln::runtime otherwise; see
// kiln/detail/config.hpp).
#pragma once

#include "kiln/ops/attention/paged_attention.hpp"

namespace kiln::detail {

KILN_DECL std::string paged_index_message(std::string_view op, const std::string& what, const std::string& operands) {
  return "kiln::" + std::string(op) + ": " + what + " (" + operands + ")";
}

KILN_DECL std::string paged_check_sentence(std::string_view op, std::uint64_t pos, std::int64_t value, index_t B,
                                           index_t M, index_t N, index_t bs, index_t rows) {
  const bool write = rows > 0 || op == "paged_write";
  const auto table = static_cast<std::uint64_t>(B) * static_cast<std::uint64_t>(M);
  if (pos < table) {
    const auto b = static_cast<index_t>(pos / static_cast<std::uint64_t>(M)), j = static_cast<index_t>(pos % static_cast<std::uint64_t>(M));
    return "block table entry [" + std::to_string(b) + ", " + std::to_string(j) + "] is " + std::to_string(value) +
           ", outside the pool's " + std::to_string(N) + " blocks [0, " + std::to_string(N) + ")";
  }
  const auto b = static_cast<index_t>(pos - table);
  const index_t cap = M * bs;
  if (write) {
    return "sequence " + std::to_string(b) + " starts at position " + std::to_string(value) + ", so its " +
           std::to_string(rows) + " rows do not fit 0 .. " + std::to_string(cap) + " (the table's " + std::to_string(M) +
           " blocks of " + std::to_string(bs) + ")";
  }
  return "sequence " + std::to_string(b) + " has length " + std::to_string(value) + ", outside 0 .. " +
         std::to_string(cap) + " (the table's " + std::to_string(M) + " blocks of " + std::to_string(bs) + ")";
}

KILN_DECL void check_paged_host(std::string_view op, const std::int32_t* tables, index_t ts0, index_t ts1,
                                const std::int32_t* lens, index_t ls0, const paged_dims& d, index_t rows,
                                const std::string& operands) {
  const auto fail = [&](std::uint64_t pos, std::int64_t v) {
    throw index_error(paged_index_message(op, paged_check_sentence(op, pos, v, d.B, d.M, d.N, d.bs, rows), operands));
  };
  const index_t cap = d.capacity();
  for (index_t b = 0; b < d.B; ++b) {
    const std::int64_t len = lens[b * ls0];
    if (len < 0 || len + rows > cap) fail(static_cast<std::uint64_t>(d.B * d.M + b), len);
    // the blocks of positions in use: [0, len) to read, [len, len + rows) to write
    const index_t first = rows > 0 ? index_t(len) / d.bs : 0;
    const index_t end = rows > 0 ? (index_t(len) + rows + d.bs - 1) / d.bs : (index_t(len) + d.bs - 1) / d.bs;
    for (index_t j = first; j < end; ++j) {
      const std::int32_t e = tables[b * ts0 + j * ts1];
      if (e < 0 || index_t(e) >= d.N) fail(static_cast<std::uint64_t>(b * d.M + j), e);
    }
  }
}

}  // namespace kiln::detail
