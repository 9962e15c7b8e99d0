// kiln/ops/position/embedding.hpp — kiln::embedding: rows of a table picked by int32 ids
// (a token embedding), the gather structural family: input the table [V, D] (its
// expression is the prologue), parameter the ids of any shape, output [..ids.., D].
// Every id is checked against [0, V) when the statement runs, before anything is
// written: a bad one throws kiln::index_error naming the op, the id, its position in ids
// and V (the Vulkan backend reads the ids back for it; its kernel clamps too, so nothing
// is ever read out of bounds). Elementwise ops on the result fuse:
// `h = kiln::embedding(table, ids) * scale` is one kernel.
// Ids are int32 (kiln has no int64 dtype; ids past 2^31 - 1 rows do not arise).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/expr/structural.hpp"

namespace kiln {
namespace detail {

/// The structural op descriptor of kiln::embedding (gather family).
struct embedding_op {
  static constexpr std::string_view name = "embedding";
  static constexpr structural_family family = structural_family::gather;
  template <class In>
  using result_type = In;
};

/// Throws kiln::index_error for the first of `ids` (row-major over `shape`) outside
/// [0, vocab); operands: the table's and the ids' descriptions, for the message.
inline void check_ids(std::string_view op, const std::vector<std::int32_t>& ids, const kiln::shape& s, index_t vocab,
                      const std::string& operands) {
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::int32_t id = ids[k];
    if (id >= 0 && index_t(id) < vocab) continue;
    std::string at = "[";
    index_t rest = static_cast<index_t>(k);
    std::vector<index_t> c(static_cast<std::size_t>(s.rank()));
    for (int d = s.rank() - 1; d >= 0; --d) {
      c[static_cast<std::size_t>(d)] = s[d] ? rest % s[d] : 0;
      rest = s[d] ? rest / s[d] : 0;
    }
    for (std::size_t d = 0; d < c.size(); ++d) at += (d ? ", " : "") + std::to_string(c[d]);
    at += "]";
    throw index_error("kiln::" + std::string(op) + ": id " + std::to_string(id) + " at ids" + at + " is outside [0, " +
                      std::to_string(vocab) + "), the table's rows (" + operands + ")");
  }
}

}  // namespace detail

/// Rows of table [V, D] (f32, f16 or bf16, or an expression of them) at ids (an int32
/// tensor of any shape, rank 0 included): out[..k.., :] = table[ids[..k..], :], shape
/// [..ids.., D]. Throws kiln::shape_error for a table of another rank than 2 and
/// kiln::index_error (when it runs) for an id outside [0, V).
/// Example: `auto h = kiln::embedding(embed_tokens, ids);`
template <expression Tb, class I>
  requires detail::is_tensor<std::remove_cvref_t<I>>::value
auto embedding(Tb&& table, I&& ids) {
  using In = typename detail::node_t<Tb>::value_type;
  using Id = typename std::remove_cvref_t<I>::value_type;
  static_assert(is_floating_v<In>, "kiln: embedding needs a floating-point table; convert with kiln::cast<float>(t)");
  static_assert(std::is_same_v<Id, std::int32_t>,
                "kiln: embedding's ids must be an int32 tensor; convert with kiln::cast<std::int32_t>(ids)");
  if (!ids.storage()) throw shape_error("kiln::embedding: the ids are an empty tensor (default-constructed or moved from)");
  const kiln::shape is = ids.shape();
  auto n = detail::make_structural<detail::embedding_op>(std::forward<Tb>(table), 0, false, false, 0.0f, std::forward<I>(ids));
  if (n.input_shape.rank() != 2) {
    throw shape_error("kiln::embedding: the table must be [V, D]; got " + n.arg.describe());
  }
  if (is.rank() >= max_rank) {  // the result adds D after the ids' dimensions
    throw shape_error("kiln::embedding: the ids " + std::get<0>(n.params).describe() + " have rank " + std::to_string(is.rank()) +
                      "; the result [..ids.., D] would pass the maximum rank of " + std::to_string(max_rank) +
                      " (table " + n.arg.describe() + ")");
  }
  kiln::shape out = is;
  out.push_back(n.input_shape[1]);
  if (!detail::extents_fit(out)) {  // ids and table within the limit can make a result beyond it
    throw shape_error("kiln::embedding: the result " + out.to_string() + " spans more than 2^59 elements (table " +
                      n.arg.describe() + ", ids " + std::get<0>(n.params).describe() + ")");
  }
  n.shape_ = out;
  return n;
}

}  // namespace kiln
