// kiln/ops/quant/qtensor.hpp — kiln::qtensor<Scheme, B>: a quantized weight, packed
// codes plus scales (ops/quant/scheme.hpp gives the format) standing for a float [N, K]
// matrix in the layout of an nn.Linear weight. Not element-addressable: it enters
// expressions through kiln::dequantize(q) and kiln::matmul / linear / bitlinear.
// Made by kiln::quantize<Scheme>(w) (ops/quant/quantize.hpp). Copies share the storage
// as tensors do.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/ops/quant/scheme.hpp"

namespace kiln {

template <class Scheme, class B>
class qtensor {
  static_assert(quant_scheme<Scheme>, "kiln: qtensor's scheme must be kiln::quant::int8, int4 or ternary");

 public:
  using scheme_type = Scheme;
  using backend_type = B;
  /// The scales' element type: float, or kiln::half for int4 (ops/quant/scheme.hpp).
  using scale_type = typename Scheme::scale_type;

  qtensor() = default;
  /// From its parts (kiln::quantize builds them); checks that they agree.
  qtensor(tensor<std::int32_t, B> codes, tensor<scale_type, B> scales, detail::quant_layout layout)
      : codes_(std::move(codes)), scales_(std::move(scales)), layout_(layout) {
    const auto bad = [&](const std::string& why) {
      throw shape_error("kiln::qtensor<" + std::string(Scheme::name) + ">: " + why + " (codes " + codes_.describe() +
                        ", scales " + scales_.describe() + ")");
    };
    if (!codes_.defined() || !scales_.defined()) bad("codes and scales must both be tensors");
    if (codes_.shape() != kiln::shape{layout_.N, layout_.words} || !(codes_.is_contiguous() || codes_.numel() == 0)) {
      bad("codes must be a contiguous [" + std::to_string(layout_.N) + ", " + std::to_string(layout_.words) + "]");
    }
    const kiln::shape ss = layout_.per_tensor ? kiln::shape{1, 1} : kiln::shape{layout_.N, layout_.groups};
    if (scales_.shape() != ss || !(scales_.is_contiguous() || scales_.numel() == 0)) bad("scales must be a contiguous " + ss.to_string());
  }

  bool defined() const noexcept { return codes_.defined(); }
  /// The shape of the float matrix it stands for: [N, K].
  kiln::shape shape() const { return {layout_.N, layout_.K}; }
  index_t rows() const noexcept { return layout_.N; }
  index_t cols() const noexcept { return layout_.K; }
  /// Weights per scale along K (K when one scale covers a row or the tensor).
  index_t group_size() const noexcept { return layout_.group; }
  bool per_tensor() const noexcept { return layout_.per_tensor; }
  const tensor<std::int32_t, B>& codes() const noexcept { return codes_; }
  const tensor<scale_type, B>& scales() const noexcept { return scales_; }
  const detail::quant_layout& layout() const noexcept { return layout_; }
  /// Bytes held (codes and scales).
  std::size_t bytes() const noexcept {
    return std::size_t(codes_.numel()) * 4 + std::size_t(scales_.numel()) * sizeof(scale_type);
  }
  kiln::context<B> context() const { return codes_.context(); }

  /// e.g. "ternary[4096, 4096] (per tensor) on cpu".
  std::string describe() const {
    if (!defined()) return std::string(Scheme::name) + " qtensor (empty)";
    std::string g = layout_.per_tensor ? "per tensor" : layout_.groups == 1 ? "per row" : "group " + std::to_string(layout_.group);
    return std::string(Scheme::name) + shape().to_string() + " (" + g + ") on " + kiln::context<B>(codes_.context()).device_name();
  }

 private:
  tensor<std::int32_t, B> codes_;
  tensor<scale_type, B> scales_;
  detail::quant_layout layout_;
};

namespace detail {
template <class Q>
struct is_qtensor : std::false_type {};
template <class S, class B>
struct is_qtensor<qtensor<S, B>> : std::true_type {};

template <class S, class B>
void require_defined(std::string_view op, const qtensor<S, B>& q) {
  if (!q.defined()) {
    throw shape_error("kiln::" + std::string(op) + ": the quantized weight is empty (default-constructed or moved from)");
  }
}
}  // namespace detail

}  // namespace kiln
