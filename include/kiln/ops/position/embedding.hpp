// kiln/ops/position/embedding.hpp — kiln::embedding: rows of a table picked by int32 ids
// (a token embedding), the gather structural family: input the table [V, D] (its
// expression is the prologue), parameter the ids of any shape, output [..ids.., D].
// Every id is checked against [0, V): a bad one throws kiln::index_error naming the op,
// the id, its position in ids, V and the operands (one message, index_error_message, on
// every backend). The CPU checks when the statement runs, before anything is written.
// The Vulkan kernel checks on the device, so recording never waits for the ids: it clamps
// each id (nothing is read out of bounds, and the output holds clamped rows), records the
// first bad one, and the next synchronisation that covers it (synchronize, reading a
// tensor, waiting on a read_async) throws. Elementwise ops on the result fuse:
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
#include "kiln/detail/config.hpp"
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

/// The message of kiln::index_error for id `id` at flattened position `position` of ids
/// of shape `s` (row-major), outside [0, vocab); operands: the table's and the ids'
/// descriptions. Every backend reports a bad id with this text.
KILN_DECL std::string index_error_message(std::string_view op, std::int64_t id, index_t position, const kiln::shape& s,
                                          index_t vocab, const std::string& operands);

/// Throws kiln::index_error for the first of `ids` (row-major over `shape`) outside
/// [0, vocab); operands: the table's and the ids' descriptions, for the message.
KILN_DECL void check_ids(std::string_view op, const std::vector<std::int32_t>& ids, const kiln::shape& s, index_t vocab,
                         const std::string& operands);

}  // namespace detail

/// Rows of table [V, D] (f32, f16 or bf16, or an expression of them) at ids (an int32
/// tensor of any shape, rank 0 included): out[..k.., :] = table[ids[..k..], :], shape
/// [..ids.., D]. Throws kiln::shape_error for a table of another rank than 2 and
/// kiln::index_error for an id outside [0, V): on the CPU when it runs, on Vulkan at the
/// next synchronisation after it (see the top of this file).
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
  auto n = detail::make_structural(detail::embedding_op{}, std::forward<Tb>(table), {.axis = 0}, std::forward<I>(ids));
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

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/ops/position/impl/embedding.ipp"
#endif
