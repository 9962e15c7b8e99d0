// kiln/ops/linalg/linear.hpp — kiln::linear: x @ w^T (+ bias), as torch.nn.functional.linear.
#pragma once

#include <string>
#include <utility>

#include "kiln/core/error.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/core/views.hpp"
#include "kiln/ops/elementwise/add.hpp"
#include "kiln/ops/linalg/matmul.hpp"

namespace kiln {
namespace detail {

template <class T, class B>
void check_linear_weight(const tensor<T, B>& w) {
  if (!w.defined()) throw shape_error("kiln::linear: the weight is an empty tensor (default-constructed or moved from)");
  if (w.rank() != 2) {
    throw shape_error("kiln::linear: the weight is " + w.describe() + "; it must be [out_features, in_features]");
  }
}

}  // namespace detail

/// x [..., K] times the transpose of w [N, K] (the layout of an nn.Linear weight, read
/// in place): [..., N]. One matmul kernel; elementwise work around it fuses.
template <expression X, class T, class B>
auto linear(X&& x, const tensor<T, B>& w) {
  detail::check_linear_weight(w);
  return detail::make_matmul("linear", std::forward<X>(x), transpose(w));
}

/// x @ w^T + bias, bias [N] (the result's dtype). The bias add is the matmul's epilogue.
template <expression X, class T, class B, class U>
auto linear(X&& x, const tensor<T, B>& w, const tensor<U, B>& bias) {
  detail::check_linear_weight(w);
  if (!bias.defined() || bias.rank() != 1 || bias.shape()[0] != w.shape()[0]) {
    throw shape_error("kiln::linear: the bias is " + bias.describe() + "; it must be [" +
                      std::to_string(w.shape()[0]) + "], the weight's first dimension (weight " + w.describe() + ")");
  }
  return detail::make_matmul("linear", std::forward<X>(x), transpose(w)) + bias;
}

}  // namespace kiln
