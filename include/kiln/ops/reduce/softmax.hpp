// kiln/ops/reduce/softmax.hpp — kiln::softmax along an axis.
#pragma once

#include <string_view>
#include <utility>

#include "kiln/core/dtype.hpp"
#include "kiln/expr/structural.hpp"

namespace kiln {
namespace detail {

/// exp(x - max) / sum(exp(x - max)) along the axis (log_softmax: x - max - log(sum)).
template <bool Log>
struct softmax_op {
  static constexpr std::string_view name = Log ? "log_softmax" : "softmax";
  static constexpr structural_family family = structural_family::row;
  static constexpr bool log = Log;
  template <class In>
  using result_type = In;
};

template <bool Log, class X>
auto make_softmax(X&& x, int axis) {
  static_assert(is_floating_v<typename node_t<X>::value_type>,
                "kiln: softmax needs a floating-point dtype; convert with kiln::cast<float>(x)");
  return make_structural(softmax_op<Log>{}, std::forward<X>(x), {.axis = axis});
}

}  // namespace detail

/// Softmax along `axis` (default: the last), as torch.softmax: each line is
/// exp(x - max) / sum(exp(x - max)). Numerics: a NaN in a line makes the line NaN; a line
/// holding +inf is NaN (inf - inf), and so is a line whose entries are all -inf (0 / 0),
/// as in PyTorch. f16/bf16 compute in float. The input expression and elementwise ops on
/// the result fuse: `p = kiln::softmax(s * 0.125f + mask)` is one kernel.
template <expression X>
auto softmax(X&& x, int axis = -1) {
  return detail::make_softmax<false>(std::forward<X>(x), axis);
}

}  // namespace kiln
