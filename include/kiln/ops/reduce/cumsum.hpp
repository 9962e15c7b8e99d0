// kiln/ops/reduce/cumsum.hpp — kiln::cumsum: the inclusive prefix sum along an axis (a
// row-family structural op: each line along the axis maps to a line of the same length).
// Kernels: cpu/reduce/cumsum.hpp, vulkan/ops/cumsum.hpp (kernels/reduce/cumsum.comp).
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include "kiln/core/dtype.hpp"
#include "kiln/expr/kind.hpp"
#include "kiln/expr/node.hpp"  // kiln::cast
#include "kiln/expr/structural.hpp"

namespace kiln {
namespace detail {

/// y[i] = x[0] + ... + x[i] along the axis. Floating inputs keep their dtype (summed in
/// float); integer inputs and masks give int32 (summed in int32, wrapping).
struct cumsum_op {
  static constexpr std::string_view name = "cumsum";
  static constexpr structural_family family = structural_family::row;
  template <class In>
  using result_type = std::conditional_t<is_floating_v<In>, In, std::int32_t>;
};

}  // namespace detail

/// The inclusive prefix sum along `axis` (negative counts from the end), as
/// torch.cumsum(x, dim): the result has x's shape. f32, f16 and bf16 sum in float and give
/// x's dtype; int8, int32 and uint8 (masks) sum in int32 and give int32, wrapping like
/// int32 arithmetic (torch gives int64, which kiln does not have). NaN and infinities
/// propagate along the line from where they occur (inf + -inf is NaN). An empty x gives
/// an empty result; a rank-0 x (axis 0 or -1) gives itself. Throws kiln::shape_error
/// naming the op, x and the valid range for an axis out of range. The input expression
/// and elementwise ops on the result fuse into its kernel:
/// `y = kiln::exp(kiln::cumsum(x * 2.0f + 1.0f, -1)) * 3.0f` is one kernel.
template <expression X>
auto cumsum(X&& x, int axis) {
  using N = detail::node_t<X>;
  if constexpr (!is_floating_v<typename N::value_type> && detail::kind_of_v<N> != detail::node_kind::leaf) {
    // An integer expression is summed as int32 explicitly: Vulkan's generated prologue
    // returns its value as is, and a comparison's is a GLSL bool, not an int.
    return detail::make_structural(detail::cumsum_op{}, kiln::cast<std::int32_t>(std::forward<X>(x)), {.axis = axis});
  } else {
    return detail::make_structural(detail::cumsum_op{}, std::forward<X>(x), {.axis = axis});
  }
}

}  // namespace kiln
