// kiln/expr/structural.hpp — the structural node: an op whose output elements each depend
// on many input elements (reductions, softmax, norms; later matmul, attention).
//
// A structural node holds its input as an expression (the prologue: elementwise work on
// its input fuses into its kernel), small parameter tensors (a norm's weight and bias)
// and where it works: one axis of its input, or all elements. The op type (Op) says what
// it computes; each backend has one kernel per op family (cpu/reduce, vulkan/ops/reduce).
// Elementwise ops applied to a structural node's result form its epilogue, fused into the
// same kernel (expr/plan.hpp decides what fuses).
//
// The input seen as [outer, extent, inner] (axis_split): `extent` elements along the axis,
// `outer` blocks before it, `inner` elements after it. All elements: [1, numel, 1].
//   reduce family: output [outer, inner] (keepdims: the axis kept as 1; all elements: rank 0)
//   row family:    output = input shape, each line along the axis normalised as a whole
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/kind.hpp"
#include "kiln/expr/node.hpp"

namespace kiln::detail {

enum class structural_family {
  reduce,  // the axis is reduced away: sum, mean, max, min, argmax, custom reducers
  row,     // each line along the axis maps to a line of the same length: softmax, norms
  contract,  // a product summed over a shared axis: matmul (input [..., M, K] times a
             // parameter [..., K, N]; the node's own shape rules, ops/linalg/matmul.hpp)
  attend,    // scaled dot-product attention: input q [B, Hq, Sq, D], parameters k, v (and
             // a mask); output [B, Hq, Sq, Dv] (ops/attention/attention.hpp)
  gather,    // rows picked by index: input a table [V, D], parameter int32 ids of any
             // shape; output [..ids.., D] (ops/position/embedding.hpp)
  quant,     // packed quantized weights (ops/quant/): quantize's packing, dequantize, and
             // matmul with a qtensor; each op sets its own shape (its `layout`)
};

/// The input's elements as [outer, extent, inner] around the op's axis.
struct axis_split {
  index_t outer = 1, extent = 1, inner = 1;
};

/// Where a structural op works, what every structural node records whatever its op: the
/// axis (or all elements), keepdims, the input's and the output's shapes. Op-specific
/// parameters (a norm's eps, attention's scale) live in the op descriptor instead.
struct structural_geometry {
  int axis = 0;       // normalised to [0, rank); for all elements, 0 over a rank-1 view
  bool all = false;   // over all elements
  bool keepdims = false;
  kiln::shape input_shape;
  kiln::shape shape_;  // the output's

  const kiln::shape& shape() const noexcept { return shape_; }

  /// The input around the axis.
  axis_split split() const noexcept {
    axis_split s;
    if (all) {
      s.extent = input_shape.numel();
      return s;
    }
    for (int d = 0; d < input_shape.rank(); ++d) {
      if (d < axis) s.outer *= input_shape[d];
      else if (d == axis) s.extent = input_shape[d];
      else s.inner *= input_shape[d];
    }
    return s;
  }
};

/// Op: a structural op descriptor (name, family, result_type, and its own options as
/// members); Arg: the input expression; Params: leaf nodes of parameter tensors (a norm's
/// weight and bias of shape [extent], attention's k and v, ...).
template <class Op, class Arg, class... Params>
struct structural_node : structural_geometry {
  using kiln_expression_tag = void;
  static constexpr node_kind kind = node_kind::structural;
  using op_type = Op;
  using input_type = typename Arg::value_type;
  using value_type = typename Op::template result_type<input_type>;
  using backend_type = typename common_backend<typename Arg::backend_type, typename Params::backend_type...>::type;
  static constexpr bool is_scalar = false;
  static constexpr structural_family family = Op::family;

  Arg arg;
  std::tuple<Params...> params;
  [[no_unique_address]] Op op{};  // the op's own options (a norm's eps; attention: causal, scale, softcap)

  std::string describe() const {
    return std::string(dtype_name_v<value_type>) + shape_.to_string() + " expression (" + std::string(Op::name) + ")";
  }
};

/// `axis` of a rank-r input as [0, r), negative counting from the end; throws
/// kiln::shape_error naming the op and the input otherwise.
KILN_DECL int normalize_axis(std::string_view op, int axis, const kiln::shape& s, const std::string& input);

/// The output shape of a reduce-family node over `axis` (or all elements).
KILN_DECL kiln::shape reduced_shape(const kiln::shape& in, int axis, bool all, bool keepdims);

/// Where a structural node's op works: make_structural's named arguments
/// (`{.axis = a, .keepdims = true}`); the axis counts from the end when negative.
struct structural_where {
  int axis = -1;
  bool all = false;  // over all elements (axis ignored)
  bool keepdims = false;
};

/// Builds a structural node of op `op` (its descriptor, options set) over x (any
/// expression; tensors become leaves), with parameter tensors `params`:
/// `make_structural(norm_op<true>{.eps = 1e-6f}, x, {}, weight)`.
template <class Op, class X, class... P>
auto make_structural(Op op, X&& x, structural_where where, P&&... params) {
  using Arg = decltype(to_node<void>(std::forward<X>(x)));
  using N = structural_node<Op, Arg, decltype(to_node<void>(std::forward<P>(params)))...>;
  N n{{}, to_node<void>(std::forward<X>(x)), {to_node<void>(std::forward<P>(params))...}, op};
  const auto input = [&] { return n.arg.describe(); };
  if (!leaf_defined(n.arg)) {
    throw shape_error("kiln::" + std::string(Op::name) +
                      ": the input is an empty tensor (default-constructed or moved from)");
  }
  n.input_shape = n.arg.shape();
  n.all = where.all;
  n.keepdims = where.keepdims;
  n.axis = where.all ? 0 : normalize_axis(Op::name, where.axis, n.input_shape, input());
  if constexpr (Op::family == structural_family::reduce) {
    n.shape_ = reduced_shape(n.input_shape, n.axis, where.all, where.keepdims);
  } else {  // row: the input's shape; contract, attend, gather: set by the op's front end
    n.shape_ = n.input_shape;
  }
  return n;
}

}  // namespace kiln::detail

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/expr/impl/structural.ipp"
#endif
