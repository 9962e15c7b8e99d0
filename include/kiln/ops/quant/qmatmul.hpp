// kiln/ops/quant/qmatmul.hpp — products with quantized weights: kiln::matmul(x, q),
// kiln::linear(x, q[, bias]) and kiln::bitlinear(x, q[, bias]).
//
// q stands for a float [N, K] weight in the layout of an nn.Linear weight, so each of
// these is x [..., K] times q's transpose: [..., N]. The kernel quantizes each row of x
// (after x's prologue) to int8 on the fly, absmax per row as BitNet b1.58 does for its
// activations: x_q = clamp(round_even(x * (127 / max|x|)), -127, 127), multiplies codes
// as integers with int32 accumulation, and rescales once per group of weights:
//   y[m, n] = (max|x_m| / 127) * sum_g scale[n, g] * sum_{k in g} x_q[m, k] * code[n, k]
// then the epilogue (elementwise ops on the result fuse into the same kernel). The
// activations' rounding is an error of up to max|x| / 254 per element on top of the
// weights'. A row of x holding NaN or Inf gives NaN in its outputs.
// Kernels: cpu/quant/ (VNNI, AVX2 and portable paths), vulkan/ops/quant.hpp.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/ops/elementwise/add.hpp"
#include "kiln/ops/quant/qtensor.hpp"
#include "kiln/ops/quant/scheme.hpp"

namespace kiln {
namespace detail {

/// x [..., K] times a quantized [N, K] weight's transpose (the node's input is x, its
/// parameters the codes and the scales).
template <class Scheme>
struct qmatmul_op {
  static constexpr std::string_view name = "matmul";
  static constexpr structural_family family = structural_family::quant;
  template <class In>
  using result_type = In;
  quant_layout layout;
};

template <class X, class Scheme, class B>
auto make_qmatmul(std::string_view op, X&& x, const qtensor<Scheme, B>& q) {
  using A = node_t<X>;
  static_assert(is_floating_v<typename A::value_type>, "kiln: a quantized matmul needs floating-point activations (f32, f16, bf16)");
  require_defined(op, q);
  auto n = make_structural(qmatmul_op<Scheme>{.layout = q.layout()}, std::forward<X>(x), {}, q.codes(), q.scales());
  if (n.input_shape.rank() == 0 || n.input_shape.back() != q.cols()) {
    throw shape_error("kiln::" + std::string(op) + ": x is " + n.arg.describe() + "; its last dimension must be " +
                      std::to_string(q.cols()) + ", the in_features of the quantized weight " + q.describe());
  }
  kiln::shape s = n.input_shape;
  s[s.rank() - 1] = q.rows();
  if (!extents_fit(s)) {  // a broadcast x within the limit can make a result beyond it
    throw shape_error("kiln::" + std::string(op) + ": the result " + s.to_string() + " spans more than 2^59 elements (x " +
                      n.arg.describe() + ", quantized weight " + q.describe() + ")");
  }
  n.shape_ = s;
  return n;
}

template <class Scheme, class B, class U>
void check_qbias(std::string_view op, const qtensor<Scheme, B>& q, const tensor<U, B>& bias) {
  if (!bias.defined() || bias.rank() != 1 || bias.shape()[0] != q.rows()) {
    throw shape_error("kiln::" + std::string(op) + ": the bias is " + bias.describe() + "; it must be [" +
                      std::to_string(q.rows()) + "], the quantized weight's first dimension (" + q.describe() + ")");
  }
}

}  // namespace detail

/// x [..., K] times the transpose of q (a quantized [N, K] nn.Linear weight): [..., N] in
/// x's dtype. Note the transpose: q is always read as the weight of a linear layer.
template <expression X, class Scheme, class B>
auto matmul(X&& x, const qtensor<Scheme, B>& q) {
  return detail::make_qmatmul("matmul", std::forward<X>(x), q);
}

/// x @ q^T, as torch.nn.functional.linear with a quantized weight.
template <expression X, class Scheme, class B>
auto linear(X&& x, const qtensor<Scheme, B>& q) {
  return detail::make_qmatmul("linear", std::forward<X>(x), q);
}

/// x @ q^T + bias, bias [N]; the bias add is the kernel's epilogue.
template <expression X, class Scheme, class B, class U>
auto linear(X&& x, const qtensor<Scheme, B>& q, const tensor<U, B>& bias) {
  detail::check_qbias("linear", q, bias);
  return detail::make_qmatmul("linear", std::forward<X>(x), q) + bias;
}

/// The BitNet b1.58 linear layer: x's rows quantized to int8 by absmax, times the
/// ternary weight q with int32 accumulation, rescaled by gamma * max|x| / 127; one kernel
/// with the statement's prologue and epilogue.
template <expression X, class B>
auto bitlinear(X&& x, const qtensor<quant::ternary, B>& q) {
  return detail::make_qmatmul("bitlinear", std::forward<X>(x), q);
}

/// bitlinear(x, q) + bias.
template <expression X, class B, class U>
auto bitlinear(X&& x, const qtensor<quant::ternary, B>& q, const tensor<U, B>& bias) {
  detail::check_qbias("bitlinear", q, bias);
  return detail::make_qmatmul("bitlinear", std::forward<X>(x), q) + bias;
}

}  // namespace kiln
