// kiln/ops/quant/quantize.hpp — kiln::quantize<Scheme>(w), kiln::dequantize(q) and
// kiln::quantization_error(w, q).
//
// quantize runs on the backend that holds w: the per-group max|w| (or mean|w|) is a kiln
// reduction there; the scales are checked on the host (a NaN or infinite weight throws
// kiln::value_error naming the row and columns) and their reciprocals computed exactly
// there; then one packing kernel (quant_pack_op: cpu/quant/, kernels/quant/) writes the
// codes. dequantize(q) is an expression: a structural node of the quant family whose
// elementwise consumers fuse (`y = kiln::dequantize(q) * 2.0f` is one kernel).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/core/views.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/ops/elementwise/abs.hpp"
#include "kiln/ops/elementwise/square.hpp"
#include "kiln/ops/elementwise/sub.hpp"
#include "kiln/ops/quant/qtensor.hpp"
#include "kiln/ops/quant/scheme.hpp"
#include "kiln/ops/reduce/amax.hpp"
#include "kiln/ops/reduce/mean.hpp"

namespace kiln {
namespace detail {

template <class T, class B, class E>
void assign(tensor<T, B>& out, const E& e);

/// Packs float weights [N, K] (the node's input) into codes int32 [N, words] with the
/// reciprocal scales (the parameter, [N, G] or [1, 1]): code = clamp(round_even(w * inv)).
template <class Scheme>
struct quant_pack_op {
  static constexpr std::string_view name = "quantize";
  static constexpr structural_family family = structural_family::quant;
  template <class In>
  using result_type = std::int32_t;
  quant_layout layout;
};

/// The float [N, K] matrix of codes [N, words] (the node's input) and scales (parameter).
template <class Scheme>
struct dequantize_op {
  static constexpr std::string_view name = "dequantize";
  static constexpr structural_family family = structural_family::quant;
  template <class In>
  using result_type = float;
  quant_layout layout;
};

/// The layout of a [N, K] weight under Scheme with options o; throws kiln::shape_error
/// for a group the scheme does not take or that does not divide K.
template <class Scheme>
quant_layout quant_layout_for(index_t N, index_t K, const quant_options& o, const std::string& what) {
  quant_layout l;
  l.N = N;
  l.K = K;
  l.chunks = chunks_for<Scheme>(K);
  l.words = l.chunks * 8;
  const std::string op = "kiln::quantize<" + std::string(Scheme::name) + ">: ";
  if constexpr (std::is_same_v<Scheme, quant::ternary>) {
    l.per_tensor = !o.per_row;
    l.group = K;
    l.groups = 1;
  } else {
    const int g = o.group < 0 ? Scheme::default_group : o.group;
    const bool ok = g == 32 || g == 64 || g == 128 || (g == 0 && std::is_same_v<Scheme, quant::int8>);
    if (!ok) {
      throw shape_error(op + "group " + std::to_string(o.group) + " is not one this scheme takes (" +
                        (std::is_same_v<Scheme, quant::int8> ? "0 for one scale per row, " : "") + "32, 64 or 128)");
    }
    if (g == 0) {
      l.group = K;
      l.groups = 1;
    } else {
      if (K % g != 0) {
        throw shape_error(op + "K = " + std::to_string(K) + " is not a multiple of the group size " + std::to_string(g) +
                          " (" + what + "); pad the weight's columns or use a group that divides K");
      }
      l.group = g;
      l.groups = K / g;
    }
  }
  return l;
}

}  // namespace detail

/// Quantizes w [N, K] (f32, f16 or bf16, the layout of an nn.Linear weight) with Scheme
/// (kiln::quant::int8, int4 or ternary; ops/quant/scheme.hpp gives the formulas and the
/// format) on w's backend. Throws kiln::shape_error for a w of another rank than 2 or a
/// group that does not fit, kiln::value_error for a NaN or infinite weight.
/// Example: `auto q = kiln::quantize<kiln::quant::int4>(w, {.group = 64});`
template <quant_scheme Scheme, class T, class B>
qtensor<Scheme, B> quantize(const tensor<T, B>& w, const quant_options& o = {}) {
  static_assert(is_floating_v<T>, "kiln: quantize needs floating-point weights (f32, f16, bf16)");
  const std::string op = "kiln::quantize<" + std::string(Scheme::name) + ">";
  if (!w.defined()) throw shape_error(op + ": the weight is an empty tensor (default-constructed or moved from)");
  if (w.rank() != 2) throw shape_error(op + ": the weight is " + w.describe() + "; it must be [N, K] (out_features, in_features)");
  const index_t N = w.shape()[0], K = w.shape()[1];
  const detail::quant_layout l = detail::quant_layout_for<Scheme>(N, K, o, w.describe());
  const context<B> ctx = w.context();
  const kiln::shape scale_shape = l.per_tensor ? kiln::shape{1, 1} : kiln::shape{N, l.groups};
  using St = typename Scheme::scale_type;
  std::vector<St> scales(static_cast<std::size_t>(scale_shape.numel()), St(0.0f));
  std::vector<float> inv(scales.size(), 0.0f);
  if (N > 0 && K > 0) {
    const tensor<T, B> wc = w.is_contiguous() ? w : w.clone();
    tensor<float, B> stat;  // max|w| per group, or mean|w|
    if constexpr (std::is_same_v<Scheme, quant::ternary>) {
      if (l.per_tensor) stat = kiln::mean(kiln::abs(kiln::cast<float>(wc)));
      else stat = kiln::mean(kiln::abs(kiln::cast<float>(wc)), -1);
    } else {
      stat = kiln::amax(kiln::abs(kiln::cast<float>(kiln::reshape(wc, {N, l.groups, l.group}))), -1);
    }
    const std::vector<float> a = stat.to_host();
    for (std::size_t i = 0; i < a.size(); ++i) {
      const auto where = [&] {
        const index_t row = l.per_tensor ? -1 : index_t(i) / l.groups, g = l.per_tensor ? 0 : index_t(i) % l.groups;
        return l.per_tensor ? std::string("w")
                            : "w[" + std::to_string(row) + ", " + std::to_string(g * l.group) + ":" + std::to_string((g + 1) * l.group) + "]";
      };
      if (!std::isfinite(a[i])) {
        throw value_error(op + ": " + where() + " holds a NaN or infinite weight (" + w.describe() + ")");
      }
      if constexpr (std::is_same_v<Scheme, quant::ternary>) {
        scales[i] = a[i];
        inv[i] = a[i] + o.eps > 0.0f ? 1.0f / (a[i] + o.eps) : 0.0f;
      } else {
        scales[i] = St(a[i] / float(Scheme::qmax));  // int4: rounded to f16 (the codes keep the float scale's)
        if constexpr (std::is_same_v<St, half>) {
          if (!std::isfinite(float(scales[i]))) {
            throw value_error(op + ": " + where() + " has max|w| = " + std::to_string(a[i]) + ", past what an f16 scale holds (" +
                              std::to_string(65504.0f * float(Scheme::qmax)) + ") (" + w.describe() + ")");
          }
        }
        inv[i] = a[i] > 0.0f ? float(Scheme::qmax) / a[i] : 0.0f;
      }
    }
    tensor<float, B> inv_t = from_host(ctx, scale_shape, inv);
    tensor<std::int32_t, B> codes = empty<std::int32_t>(ctx, {N, l.words});
    auto n = detail::make_structural(detail::quant_pack_op<Scheme>{.layout = l}, wc, {.axis = 0}, inv_t);
    n.shape_ = {N, l.words};
    detail::assign(codes, n);
    return qtensor<Scheme, B>(std::move(codes), from_host(ctx, scale_shape, scales), l);
  }
  // An empty weight, or K = 0: every row holds nothing (scales 0, no code words).
  return qtensor<Scheme, B>(empty<std::int32_t>(ctx, {N, l.words}), from_host(ctx, scale_shape, scales), l);
}

/// The float [N, K] matrix q stands for, as an expression: elementwise ops on it fuse
/// into its kernel (`y = kiln::dequantize(q) * 2.0f` is one kernel).
template <class Scheme, class B>
auto dequantize(const qtensor<Scheme, B>& q) {
  detail::require_defined("dequantize", q);
  auto n = detail::make_structural(detail::dequantize_op<Scheme>{.layout = q.layout()}, q.codes(), {.axis = 0}, q.scales());
  n.shape_ = q.shape();
  return n;
}

/// How far q is from the float weight w it was made from.
struct quant_error_stats {
  double max_abs = 0;  // max |dequantize(q) - w|
  double rms = 0;      // sqrt(mean((dequantize(q) - w)^2))
};

/// The error of q against w (same shape), computed on their backend.
template <class Scheme, class T, class B>
quant_error_stats quantization_error(const tensor<T, B>& w, const qtensor<Scheme, B>& q) {
  detail::require_defined("quantization_error", q);
  if (!w.defined() || w.shape() != q.shape()) {
    throw shape_error("kiln::quantization_error: the weight is " + w.describe() + "; the quantized weight is " + q.describe());
  }
  quant_error_stats st;
  if (w.numel() == 0) return st;
  tensor<float, B> d, mx, ms;
  d = kiln::dequantize(q) - kiln::cast<float>(w);
  mx = kiln::amax(kiln::abs(d));
  ms = kiln::mean(kiln::square(d));
  st.max_abs = mx.to_host()[0];
  st.rms = std::sqrt(double(ms.to_host()[0]));
  return st;
}

}  // namespace kiln
