// kiln/expr/layout.hpp — the iteration space of one statement, shared by all backends.
// Every operand's strides are taken over the output's dimensions (0 where broadcast),
// then dimensions that every operand steps over as one are merged, so that most
// statements become one long row (or rows of a row/column broadcast).
#pragma once

#include <cstddef>

#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"
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

/// The layout of `out = n`: the output, then n's leaves with strides broadcast to out.
template <class T, class B, class N>
iteration_layout<leaf_count_v<N>> make_layout(const tensor<T, B>& out, const N& n) {
  constexpr std::size_t L = leaf_count_v<N>;
  const shape& s = out.shape();
  const int r = s.rank();
  index_t st[L + 1][max_rank];  // only [o][0, r) is written and read
  for (int d = 0; d < r; ++d) st[0][d] = out.strides()[d];
  std::size_t k = 1;
  for_each_leaf(n, [&](const auto& in) { broadcast_strides_into(in, s, st[k++]); });
  return collapse_dims<L + 1>(s, st);
}

}  // namespace kiln::detail
