// kiln/ops/linalg/matmul.hpp — kiln::matmul: the matrix product with NumPy/PyTorch
// semantics, a structural op of the contract family.
//
// The node's input (its prologue) is a, any expression: `kiln::matmul(kiln::silu(g) * u, w)`
// evaluates silu(g) * u while packing a, never into a temporary. b is its one parameter,
// a tensor or view read in place with its strides (`kiln::transpose(w)` of a row-major
// [N, K] weight costs nothing); an expression given as b is evaluated first. Elementwise
// ops on the result fuse as the epilogue, applied to each finished tile before its one
// store: `y = kiln::gelu(kiln::matmul(x, w) + bias)` is one kernel.
//
// Kernels: cpu/gemm/ (packed GEMM, matrix-vector and small-M paths), vulkan/ops/gemm.hpp.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/structural.hpp"

namespace kiln {
namespace detail {

template <class T, class B, class E>
void assign(tensor<T, B>& out, const E& e);

/// a @ b with b of dtype BT. The result has a's dtype when both agree; mixed inputs
/// (f32 activations times f16/bf16 weights) give f32. Products accumulate in f32.
template <class BT>
struct matmul_op {
  static constexpr std::string_view name = "matmul";
  static constexpr structural_family family = structural_family::contract;
  template <class In>
  using result_type = std::conditional_t<std::is_same_v<In, BT>, In, float>;
};

/// The shape of a product: batch dimensions (broadcast), then M x K times K x N.
/// A 1-D a is one row (M = 1, no M in the result), a 1-D b one column (N = 1, no N).
struct matmul_dims {
  index_t M = 1, N = 1, K = 1;
  bool a_vector = false, b_vector = false;
  kiln::shape batch;  // the result's batch dimensions
  index_t batches() const noexcept { return batch.numel(); }
  /// Work in multiply-adds.
  double macs() const noexcept { return double(batches()) * double(M) * double(N) * double(K); }
};

/// The product's dims for operands a and b (described by da, db in errors); throws
/// kiln::shape_error naming `op` and both operands otherwise.
inline matmul_dims matmul_dims_of(std::string_view op, const kiln::shape& a, const kiln::shape& b,
                                  const std::string& da, const std::string& db) {
  const auto fail = [&](const std::string& why) {
    throw shape_error("kiln::" + std::string(op) + ": " + why + ": a is " + da + ", b is " + db);
  };
  if (a.rank() == 0 || b.rank() == 0) fail("both operands need at least one dimension");
  matmul_dims d;
  d.a_vector = a.rank() == 1;
  d.b_vector = b.rank() == 1;
  d.M = d.a_vector ? 1 : a[a.rank() - 2];
  d.K = a.back();
  const index_t kb = d.b_vector ? b[0] : b[b.rank() - 2];
  d.N = d.b_vector ? 1 : b.back();
  if (kb != d.K) fail("inner dimensions differ (" + std::to_string(d.K) + " and " + std::to_string(kb) + ")");
  const int ra = d.a_vector ? 0 : a.rank() - 2, rb = d.b_vector ? 0 : b.rank() - 2;
  const int r = std::max(ra, rb);
  for (int i = 0; i < r; ++i) {  // right-aligned broadcast of the batch dimensions
    const int ia = i - (r - ra), ib = i - (r - rb);
    const index_t ea = ia >= 0 ? a[ia] : 1, eb = ib >= 0 ? b[ib] : 1;
    if (ea != eb && ea != 1 && eb != 1) {
      fail("batch dimensions do not broadcast (" + std::to_string(ea) + " and " + std::to_string(eb) + ")");
    }
    d.batch.push_back(ea == 1 ? eb : ea);
  }
  // operands within the element limit can make a product beyond it ([2^32, 1] @ [1, 2^32],
  // or batches broadcast against each other): its element count would wrap
  kiln::shape out = d.batch;
  out.push_back(d.M);
  out.push_back(d.N);
  if (!extents_fit(out)) {
    fail("the result " + out.to_string() + " (batch, M, N) spans more than 2^59 elements");
  }
  return d;
}

/// The result's shape: batch, then M unless a is a vector, then N unless b is one.
inline kiln::shape matmul_shape(const matmul_dims& d) {
  kiln::shape s = d.batch;
  if (!d.a_vector) s.push_back(d.M);
  if (!d.b_vector) s.push_back(d.N);
  return s;
}

/// The dims of a matmul node (from its input's and its parameter's shapes).
template <class N>
matmul_dims matmul_dims_of(const N& n) {
  const auto& b = std::get<0>(n.params).t;
  return matmul_dims_of(N::op_type::name, n.input_shape, b.shape(), n.arg.describe(), b.describe());
}

/// b as a tensor: itself, or an expression evaluated into a new one.
template <class X>
decltype(auto) matmul_operand(X&& b) {
  if constexpr (is_tensor<std::remove_cvref_t<X>>::value) {
    return std::forward<X>(b);
  } else {
    using N = node_t<X>;
    tensor<typename N::value_type, typename N::backend_type> t;
    assign(t, b);
    return t;
  }
}

template <class X, class T, class B>
auto make_matmul(std::string_view op, X&& a, const tensor<T, B>& b) {
  using A = node_t<X>;
  static_assert(is_floating_v<typename A::value_type> && is_floating_v<T>,
                "kiln: matmul needs floating-point operands (f32, f16, bf16); quantized weights have their own "
                "matmul (kiln/ops/quant)");
  if (!b.defined()) {
    throw shape_error("kiln::" + std::string(op) + ": b is an empty tensor (default-constructed or moved from)");
  }
  auto n = make_structural(matmul_op<T>{}, std::forward<X>(a), {}, b);
  n.shape_ = matmul_shape(matmul_dims_of(op, n.input_shape, b.shape(), n.arg.describe(), b.describe()));
  return n;
}

}  // namespace detail

/// The matrix product of a [..., M, K] and b [..., K, N], as torch.matmul / numpy.matmul:
/// batch dimensions broadcast, a 1-D a is a row vector and a 1-D b a column vector
/// (their dimension is dropped from the result). f32, f16 and bf16 operands; products
/// accumulate in f32; the result has the operands' dtype, or f32 when they differ.
/// K = 0 gives zeros. a may be any expression (fused into the kernel as it is read); b
/// is a tensor or view read in place (`kiln::matmul(x, kiln::transpose(w))` copies
/// nothing). Elementwise ops on the result fuse into the same kernel.
template <expression X, expression Y>
auto matmul(X&& a, Y&& b) {
  return detail::make_matmul("matmul", std::forward<X>(a), detail::matmul_operand(std::forward<Y>(b)));
}

}  // namespace kiln
