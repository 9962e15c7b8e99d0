// kiln/expr/layout.hpp — the iteration space of one statement, shared by all backends.
// Every operand's strides are taken over the output's dimensions (0 where broadcast),
// then dimensions that every operand steps over as one are merged, so that most
// statements become one long row (or rows of a row/column broadcast).
// Structural ops: the epilogue's layout is the statement's, with the structural result
// as one operand; the input's layout (make_input_layout) walks the op's input shape as a
// contiguous tensor, so a kernel addresses its input by position. Both may walk the
// dimensions in another order (dim_order): a row op along axis k walks k innermost, so
// that every op family's kernel sees rows. Merging never mixes up positions: it only
// merges dimensions that every operand, the walk's own contiguous order included, steps
// over as one.
#pragma once

#include <cstddef>

#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/assign.hpp"
#include "kiln/expr/traverse.hpp"

namespace kiln::detail {

/// Collapsed iteration space: extents, and the strides of the output (operand 0) and of
/// each leaf (1..L, in for_each_leaf order). rank >= 1.
template <std::size_t L>
struct iteration_layout {
  int rank = 0;
  index_t extent[max_rank] = {};
  index_t stride[L + 1][max_rank] = {};

  /// True when operand o's innermost stride is 1 (a vector load / store per row).
  bool unit_inner(std::size_t o) const noexcept { return stride[o][rank - 1] == 1; }
  /// True when operand o reads one element for the whole statement.
  bool constant(std::size_t o) const noexcept {
    for (int d = 0; d < rank; ++d)
      if (stride[o][d] != 0) return false;
    return true;
  }
};

/// Collapses the iteration space of shape s walked by K operands with strides st[o] (taken
/// over s's dimensions): drops extent-1 dimensions and merges a dimension into the
/// previous kept one when every operand steps over both as one. Rank 0 becomes rank 1.
template <std::size_t K>
iteration_layout<K - 1> collapse_dims(const shape& s, const index_t (&st)[K][max_rank]) {
  iteration_layout<K - 1> lay;
  for (int d = 0; d < s.rank(); ++d) {
    if (s[d] == 1) continue;
    bool merge = lay.rank > 0;
    for (std::size_t o = 0; merge && o < K; ++o) merge = lay.stride[o][lay.rank - 1] == st[o][d] * s[d];
    if (merge) {
      lay.extent[lay.rank - 1] *= s[d];
      for (std::size_t o = 0; o < K; ++o) lay.stride[o][lay.rank - 1] = st[o][d];
    } else {
      lay.extent[lay.rank] = s[d];
      for (std::size_t o = 0; o < K; ++o) lay.stride[o][lay.rank] = st[o][d];
      ++lay.rank;
    }
  }
  if (lay.rank == 0) {
    lay.rank = 1;
    lay.extent[0] = 1;
  }
  return lay;
}

/// A permutation of up to max_rank dimensions (identity when rank is 0): the layout walks
/// dimension order[0] outermost ... order[rank - 1] innermost.
struct dim_order {
  int rank = 0;
  int order[max_rank] = {};

  /// Dimension `axis` of a rank-r shape moved innermost, the others in their order.
  static dim_order axis_last(int r, int axis);
};

/// Writes the strides of operand op of a statement over shape s into dst[0, s.rank()):
/// a tensor's broadcast strides; a structural node's result is contiguous over s (its
/// kernel hands out results in the iteration order).
template <class Op>
void operand_strides_into(const Op& op, const shape& s, index_t* dst) {
  if constexpr (is_tensor<std::remove_cvref_t<Op>>::value) {
    broadcast_strides_into(op, s, dst);
  } else {
    const strides c = contiguous_strides(s);
    for (int d = 0; d < s.rank(); ++d) dst[d] = c[d];
  }
}

/// The layout of `out = n` over out's elements, walked in out's row-major order, or in
/// the order `perm` gives (a row op along another axis than the last walks its axis
/// innermost): the output, then n's operands (expr/traverse.hpp's table) with strides
/// broadcast to out. A structural operand is contiguous in the walk's order.
template <class T, class B, class N>
iteration_layout<leaf_count_v<N>> make_layout(const tensor<T, B>& out, const N& n, const dim_order& perm = {}) {
  constexpr std::size_t L = leaf_count_v<N>;
  const shape& s = out.shape();
  const int r = s.rank();
  index_t st[L + 1][max_rank];  // only [o][0, r) is written and read
  for (int d = 0; d < r; ++d) st[0][d] = out.strides()[d];
  if (perm.rank == 0) {
    std::size_t k = 1;
    for_each_leaf(n, [&](const auto& op) { operand_strides_into(op, s, st[k++]); });
    return collapse_dims<L + 1>(s, st);
  }
  shape ps;  // s in walk order
  for (int d = 0; d < r; ++d) ps.push_back(s[perm.order[d]]);
  index_t tmp[max_rank];
  auto permute = [&](index_t* row) {
    for (int d = 0; d < r; ++d) tmp[d] = row[perm.order[d]];
    for (int d = 0; d < r; ++d) row[d] = tmp[d];
  };
  permute(st[0]);
  std::size_t k = 1;
  for_each_leaf(n, [&](const auto& op) {
    if constexpr (is_tensor<std::remove_cvref_t<decltype(op)>>::value) {
      broadcast_strides_into(op, s, st[k]);
      permute(st[k]);
    } else {
      operand_strides_into(op, ps, st[k]);  // contiguous in walk order
    }
    ++k;
  });
  return collapse_dims<L + 1>(ps, st);
}

/// The layout of a structural node's input expression `arg` over its shape s, walked in
/// row-major order (or perm's), as if written to a contiguous tensor of that shape: the
/// kernel reads any run of consecutive input positions into a buffer with run_range.
template <class N>
iteration_layout<leaf_count_v<N>> make_input_layout(const shape& s, const N& arg, const dim_order& perm = {}) {
  constexpr std::size_t L = leaf_count_v<N>;
  const int r = s.rank();
  shape ps;
  for (int d = 0; d < r; ++d) ps.push_back(s[perm.rank ? perm.order[d] : d]);
  index_t st[L + 1][max_rank];
  const strides c = contiguous_strides(ps);
  for (int d = 0; d < r; ++d) st[0][d] = c[d];
  index_t tmp[max_rank];
  std::size_t k = 1;
  for_each_leaf(arg, [&](const auto& op) {
    static_assert(is_tensor<std::remove_cvref_t<decltype(op)>>::value,
                  "kiln: a structural node's input holds no structural node (expr/plan.hpp)");
    broadcast_strides_into(op, s, st[k]);
    if (perm.rank) {
      for (int d = 0; d < r; ++d) tmp[d] = st[k][perm.order[d]];
      for (int d = 0; d < r; ++d) st[k][d] = tmp[d];
    }
    ++k;
  });
  return collapse_dims<L + 1>(ps, st);
}

}  // namespace kiln::detail

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/expr/impl/layout.ipp"
#endif
