// kiln/ops/attention/paged_write.hpp — kiln::paged_write: new key or value rows into a
// paged pool (kiln/ops/attention/paged_attention.hpp's layout) through block tables.
//
// A structural op of the gather family whose input is the new rows (any expression, the
// prologue: `kiln::paged_write(pool, kiln::rope(k, pos), tables, starts)` evaluates rope
// first, a second structural op, and writes its result) and whose output is the pool:
// only the rows addressed are written, everything else in the pool stays. So it is a
// function that writes, not an expression to assign. Kernels: cpu/attention/paged.hpp,
// vulkan/ops/paged_attention.hpp; one kernel (after the prologue's own, if any).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/expr/assign.hpp"  // byte_extent
#include "kiln/expr/node.hpp"
#include "kiln/expr/plan.hpp"    // evaluate_planned
#include "kiln/expr/structural.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/ops/attention/paged_attention.hpp"

namespace kiln {
namespace detail {

/// Rows [B, Hkv, S, D] written at pool[tables[b, t / bs], h, t % bs, :] for
/// t = starts[b] + s. The node's shape is the pool's; its result has the rows' dtype.
struct paged_write_op {
  static constexpr std::string_view name = "paged_write";
  static constexpr structural_family family = structural_family::gather;
  template <class In>
  using result_type = In;
};

/// The dims of a paged_write node (Hq = Hkv, Sq: rows per sequence, D = Dv).
template <class S>
paged_dims paged_write_dims_of(const S& s) {
  const shape& x = s.input_shape;
  const shape& p = s.shape();
  const auto& tb = std::get<0>(s.params).t;
  return {x[0], x[1], x[1], x[2], x[3], x[3], p[0], p[0] > 0 ? p[2] : 1, tb.shape()[1]};
}

template <class S>
std::string paged_write_operands(const S& s) {
  return "rows are " + s.arg.describe() + ", pool " + s.shape().to_string() + ", block tables " +
         std::get<0>(s.params).t.describe() + ", starts " + std::get<1>(s.params).t.describe();
}

}  // namespace detail

/// Writes rows [B, Hkv, S, D] (an expression of pool's dtype) into pool [N, Hkv, bs, D]:
/// row s of sequence b goes to position t = starts[b] + s, that is
/// pool[block_tables[b, t / bs], :, t % bs, :]. block_tables int32 [B, M], starts int32 [B].
/// Throws kiln::shape_error for mismatched shapes or rows that overlap the pool, and
/// kiln::index_error for a start outside 0 .. M * bs - S or a table entry of a written
/// position outside [0, N) (CPU: before anything is written; Vulkan: at the next
/// synchronisation, nothing written out of bounds). Two sequences must not write the same
/// block (the paged cache never gives them one).
///   kiln::paged_write(cache.k(l), kiln::rope(k, pos), batch.tables, batch.starts);
template <class T, class B, expression X, class I>
void paged_write(tensor<T, B>& pool, X&& rows, const tensor<I, B>& block_tables, const tensor<I, B>& starts) {
  using N = detail::node_t<X>;
  static_assert(std::is_same_v<typename N::value_type, T>,
                "kiln: paged_write's rows must have the pool's dtype; convert them with kiln::cast<T>(rows)");
  static_assert(std::is_same_v<I, std::int32_t>,
                "kiln: paged_write's block tables and starts must be int32 tensors; convert with "
                "kiln::cast<std::int32_t>(t)");
  constexpr std::string_view op = "paged_write";
  detail::check_paged_defined(op, pool, "the pool");
  detail::check_paged_defined(op, block_tables, "the block tables");
  detail::check_paged_defined(op, starts, "the starts");
  auto n = detail::make_structural(detail::paged_write_op{}, std::forward<X>(rows), {}, block_tables, starts);
  n.shape_ = pool.shape();
  const auto fail = [&](const std::string& why) {
    throw shape_error("kiln::paged_write: " + why + ": rows are " + n.arg.describe() + ", pool " + pool.describe() +
                      ", block tables " + block_tables.describe() + ", starts " + starts.describe());
  };
  const shape& xs = n.input_shape;
  if (xs.rank() != 4) fail("the rows must be rank 4: [B, kv heads, rows, head dim]");
  detail::check_paged_operands(pool, pool, block_tables, starts, xs[0], fail);
  if (xs[1] != pool.shape()[1] || xs[3] != pool.shape()[3]) fail("the rows differ from the pool in kv heads or head dim");
  for (int d = 0; d < 4; ++d) {
    if (pool.shape()[d] > 1 && pool.strides()[d] == 0) fail("the pool is a broadcast view");
  }
  // the kernel writes the pool in place: rows read from the pool itself would be read
  // while written (assign would go through a temporary and rewrite the whole pool)
  bool overlap = false;
  detail::for_each_tensor(n.arg, [&](const auto& t, bool) {
    if (t.storage() != pool.storage()) return;
    const auto a = detail::byte_extent(t), b = detail::byte_extent(pool);
    overlap = overlap || (a.first <= b.second && b.first <= a.second);
  });
  if (overlap) fail("the rows overlap the pool; copy them first");
  if (pool.numel() == 0 || xs.numel() == 0) return;
  detail::evaluate_planned(pool, n);
}

}  // namespace kiln
