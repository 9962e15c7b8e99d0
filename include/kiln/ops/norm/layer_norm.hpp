// kiln/ops/norm/layer_norm.hpp — kiln::layer_norm over the last axis.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "kiln/core/dtype.hpp"
#include "kiln/expr/structural.hpp"

namespace kiln {
namespace detail {

/// (x - mean) / sqrt(var + eps) * weight + bias over the last axis; var is the biased
/// variance (divided by N), as torch.nn.functional.layer_norm. Root: RMSNorm instead,
/// x / sqrt(mean(x^2) + eps) * weight (Llama's).
template <bool Root>
struct norm_op {
  static constexpr std::string_view name = Root ? "rms_norm" : "layer_norm";
  static constexpr structural_family family = structural_family::row;
  static constexpr bool rms = Root;
  template <class In>
  using result_type = In;
  float eps = 0.0f;  // added to the variance (inside the square root)
};

/// Checks that each parameter is a rank-1 tensor as long as x's last axis.
template <class N>
void check_norm_params(const N& n) {
  const index_t len = n.input_shape.rank() ? n.input_shape.back() : 1;
  const char* names[] = {"weight", "bias"};
  int k = 0;
  std::apply(
      [&](const auto&... p) {
        auto one = [&](const auto& leaf) {
          if (leaf.t.rank() != 1 || leaf.t.shape()[0] != len) {
            throw shape_error("kiln::" + std::string(N::op_type::name) + ": " + names[k] + " is " + leaf.describe() +
                              "; it must be [" + std::to_string(len) + "], the last axis of " + n.arg.describe());
          }
          ++k;
        };
        (void)one;  // (no parameters: never called)
        (one(p), ...);
      },
      n.params);
}

template <bool Root, class X, class... P>
auto make_norm(X&& x, float eps, P&&... params) {
  static_assert(is_floating_v<typename node_t<X>::value_type>,
                "kiln: norms need a floating-point dtype; convert with kiln::cast<float>(x)");
  static_assert((is_floating_v<typename std::remove_cvref_t<P>::value_type> && ...),
                "kiln: a norm's weight and bias must be floating-point tensors");
  auto n = make_structural(norm_op<Root>{.eps = eps}, std::forward<X>(x), {}, std::forward<P>(params)...);
  check_norm_params(n);
  if (!(eps >= 0.0f)) {
    throw shape_error("kiln::" + std::string(norm_op<Root>::name) + ": eps " + std::to_string(eps) +
                      " must be a non-negative number");
  }
  return n;
}

template <class P>
concept norm_param = detail::is_tensor<std::remove_cvref_t<P>>::value;

}  // namespace detail

/// Layer normalisation over the last axis, as torch.nn.functional.layer_norm with
/// normalized_shape = [N]: (x - mean) / sqrt(var + eps) * weight + bias, var biased (over
/// N). weight and bias: tensors of shape [N] (any floating dtype). The mean is taken
/// first and the variance from x - mean (exact for rows with a large mean). The input
/// expression and elementwise ops on the result fuse:
/// `y = kiln::gelu(kiln::layer_norm(x + residual, w, b)) * 2.0f` is one kernel.
template <expression X, detail::norm_param W, detail::norm_param B>
auto layer_norm(X&& x, W&& weight, B&& bias, float eps = 1e-5f) {
  return detail::make_norm<false>(std::forward<X>(x), eps, std::forward<W>(weight), std::forward<B>(bias));
}

/// Layer normalisation over the last axis without weight and bias.
template <expression X>
auto layer_norm(X&& x, float eps = 1e-5f) {
  return detail::make_norm<false>(std::forward<X>(x), eps);
}

}  // namespace kiln
