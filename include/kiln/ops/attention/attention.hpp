// kiln/ops/attention/attention.hpp — kiln::attention: scaled dot-product attention, a
// structural op of the attend family, computed flash-style (keys in tiles, an online
// softmax; the Sq x Skv scores are never stored).
//
// The node's input (its prologue) is q, any expression: `kiln::attention(q * 2.0f, k, v)`
// evaluates q * 2 as its rows are read. k, v and the optional additive mask are its
// parameters, tensors or views read in place with their strides (a [B, S, H, D] buffer
// seen as [B, H, S, D] through kiln::transpose(t, 1, 2) copies nothing); an expression
// given as one of them is evaluated first. Elementwise ops on the result fuse as the
// epilogue: `y = kiln::attention(q, k, v) * gate` is one kernel.
//
// Kernels: cpu/attention/ (query blocks x key tiles on the GEMM micro-kernel, a few-row
// path for decoding, split over keys when there are fewer tasks than threads),
// vulkan/ops/attention.hpp.
#pragma once

#include <array>
#include <cmath>
#include <optional>
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
#include "kiln/ops/linalg/matmul.hpp"

namespace kiln {

/// Options of kiln::attention.
struct attention_options {
  /// Causal masking aligned to the bottom right: query i of Sq sees keys j <= i + Skv - Sq.
  /// With Sq == Skv that is PyTorch's is_causal; with a KV cache (Sq new queries after
  /// Skv - Sq cached keys) each query sees the whole past and itself. Note that PyTorch's
  /// is_causal aligns to the top left (j <= i) when Sq != Skv; kiln does not.
  bool causal = false;
  /// Multiplies q . k; unset: 1 / sqrt(D).
  std::optional<float> scale;
  /// > 0: scores are capped as softcap * tanh(score / softcap) (Gemma 2), after the scale
  /// and before the mask. 0 (the default) turns capping off and costs nothing.
  float softcap = 0.0f;
};

namespace detail {

/// Attention's sizes: q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv].
struct attention_dims {
  index_t B = 1, Hq = 1, Hkv = 1, Sq = 0, Skv = 0, D = 0, Dv = 0;
  index_t group() const noexcept { return Hkv > 0 ? Hq / Hkv : 1; }  // query heads per kv head
  /// Multiply-adds of q k^T and p v without causal skipping.
  double macs() const noexcept { return double(B) * double(Hq) * double(Sq) * double(Skv) * double(D + Dv); }
};

/// The attend family's op: k of dtype KT, v of VT, an additive mask of MT (void: none).
/// The result has q's dtype; scores and sums are accumulated in f32.
template <class KT, class VT, class MT>
struct attention_op {
  static constexpr std::string_view name = "attention";
  static constexpr structural_family family = structural_family::attend;
  static constexpr bool has_mask = !std::is_void_v<MT>;
  template <class In>
  using result_type = In;

  bool causal = false;
  float scale = 1.0f;    // resolved (never unset)
  float softcap = 0.0f;  // 0: off
};

/// The dims for q, k, v shapes (and the mask's, when there is one); throws
/// kiln::shape_error naming the op and every operand otherwise.
inline attention_dims attention_dims_of(const kiln::shape& q, const kiln::shape& k, const kiln::shape& v,
                                        const kiln::shape* mask, const std::string& dq, const std::string& dk,
                                        const std::string& dv, const std::string& dm) {
  const auto fail = [&](const std::string& why) {
    std::string s = "kiln::attention: " + why + ": q is " + dq + ", k is " + dk + ", v is " + dv;
    if (mask) s += ", mask is " + dm;
    throw shape_error(s);
  };
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4) {
    fail("q, k and v must be rank 4: q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv]");
  }
  attention_dims d{q[0], q[1], k[1], q[2], k[2], q[3], v[3]};
  if (k[0] != d.B || v[0] != d.B) fail("the batch sizes differ");
  if (v[1] != d.Hkv || v[2] != d.Skv) fail("k and v differ in heads or length");
  if (k[3] != d.D) fail("q and k differ in head dimension (" + std::to_string(d.D) + " and " + std::to_string(k[3]) + ")");
  if (d.Hkv == 0 ? d.Hq != 0 : d.Hq % d.Hkv != 0) {
    fail("the query heads (" + std::to_string(d.Hq) + ") are not a multiple of the key/value heads (" +
         std::to_string(d.Hkv) + ")");
  }
  {  // operands within the element limit (broadcast views) can make a result beyond it
    dims out;
    for (index_t e : {d.B, d.Hq, d.Sq, d.Dv}) out.push_back(e);
    if (!extents_fit(out)) fail("the result " + out.to_string() + " (B, Hq, Sq, Dv) spans more than 2^59 elements");
  }
  if (mask) {
    const kiln::shape& m = *mask;
    const index_t full[4] = {d.B, d.Hq, d.Sq, d.Skv};
    if (m.rank() > 4) fail("the mask has more than 4 dimensions");
    for (int i = 0; i < m.rank(); ++i) {
      const index_t e = m[i], want = full[4 - m.rank() + i];
      if (e != want && e != 1) fail("the mask does not broadcast to [B, Hq, Sq, Skv] = " +
                                    kiln::shape{d.B, d.Hq, d.Sq, d.Skv}.to_string());
    }
  }
  return d;
}

/// The dims of an attention node (from its input's and its parameters' shapes).
template <class N>
attention_dims attention_dims_of(const N& n) {
  const auto& k = std::get<0>(n.params).t;
  const auto& v = std::get<1>(n.params).t;
  if constexpr (N::op_type::has_mask) {
    const auto& m = std::get<2>(n.params).t;
    return attention_dims_of(n.input_shape, k.shape(), v.shape(), &m.shape(), n.arg.describe(), k.describe(),
                             v.describe(), m.describe());
  } else {
    return attention_dims_of(n.input_shape, k.shape(), v.shape(), nullptr, n.arg.describe(), k.describe(),
                             v.describe(), {});
  }
}

/// The mask's strides as [B, Hq, Sq, Skv] (0 along broadcast dimensions).
template <class M>
std::array<index_t, 4> attention_mask_strides(const M& m) {
  std::array<index_t, 4> st{0, 0, 0, 0};
  const int r = m.rank();
  for (int i = 0; i < r; ++i) st[4 - r + i] = m.shape()[i] == 1 ? 0 : m.strides()[i];
  return st;
}

template <class T, class B>
void check_attention_operand(const tensor<T, B>& t, const char* what) {
  if (!t.defined()) {
    throw shape_error(std::string("kiln::attention: ") + what + " is an empty tensor (default-constructed or moved from)");
  }
}

template <class X, class KT, class VT, class MT, class B, class... M>
auto make_attention(X&& q, const tensor<KT, B>& k, const tensor<VT, B>& v, const attention_options& o,
                    const M&... mask) {
  using Q = node_t<X>;
  static_assert(is_floating_v<typename Q::value_type> && is_floating_v<KT> && is_floating_v<VT> &&
                    (is_floating_v<typename M::value_type> && ...),
                "kiln: attention needs floating-point q, k, v and mask (f32, f16, bf16)");
  check_attention_operand(k, "k");
  check_attention_operand(v, "v");
  (check_attention_operand(mask, "the mask"), ...);
  auto n = make_structural(attention_op<KT, VT, MT>{.causal = o.causal, .softcap = o.softcap}, std::forward<X>(q), {}, k, v, mask...);
  const attention_dims d = attention_dims_of(n);
  if (o.scale && !std::isfinite(*o.scale)) {
    throw shape_error("kiln::attention: the scale must be finite (got " + std::to_string(*o.scale) + ")");
  }
  if (!(o.softcap >= 0.0f) || !std::isfinite(o.softcap)) {
    throw shape_error("kiln::attention: softcap must be finite and >= 0, 0 for off (got " + std::to_string(o.softcap) + ")");
  }
  n.op.scale = o.scale ? *o.scale : (d.D > 0 ? 1.0f / std::sqrt(static_cast<float>(d.D)) : 1.0f);
  n.shape_ = kiln::shape{d.B, d.Hq, d.Sq, d.Dv};
  return n;
}

}  // namespace detail

/// Scaled dot-product attention, softmax(q k^T * scale [capped] + mask [causal]) v, per
/// batch and head: q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv] ->
/// [B, Hq, Sq, Dv]. Hq a multiple of Hkv (grouped-query attention: query head h reads kv
/// head h / (Hq / Hkv); Hkv = 1 is multi-query). f32, f16 and bf16 storage, accumulated
/// in f32; the result has q's dtype. Strided views are read in place. A query that sees
/// no key (every score masked to -inf, or causal with Sq > Skv) gives zeros, as
/// FlashAttention does (PyTorch gives NaN). Options: see kiln::attention_options (causal
/// masking aligns bottom-right). One kernel, fused with elementwise work on q and on the
/// result; the Sq x Skv scores are never materialised.
template <expression X, expression K, expression V>
auto attention(X&& q, K&& k, V&& v, const attention_options& opts = {}) {
  decltype(auto) kt = detail::matmul_operand(std::forward<K>(k));
  decltype(auto) vt = detail::matmul_operand(std::forward<V>(v));
  return detail::make_attention<X, typename std::remove_cvref_t<decltype(kt)>::value_type,
                                typename std::remove_cvref_t<decltype(vt)>::value_type, void>(std::forward<X>(q), kt,
                                                                                              vt, opts);
}

/// attention(q, k, v, opts) with an additive mask broadcastable to [B, Hq, Sq, Skv]
/// (padding masks as 0 / -inf, ALiBi-style biases), added after the scale (and cap).
template <expression X, expression K, expression V, expression M>
auto attention(X&& q, K&& k, V&& v, M&& mask, const attention_options& opts = {}) {
  decltype(auto) kt = detail::matmul_operand(std::forward<K>(k));
  decltype(auto) vt = detail::matmul_operand(std::forward<V>(v));
  decltype(auto) mt = detail::matmul_operand(std::forward<M>(mask));
  using MT = typename std::remove_cvref_t<decltype(mt)>::value_type;
  return detail::make_attention<X, typename std::remove_cvref_t<decltype(kt)>::value_type,
                                typename std::remove_cvref_t<decltype(vt)>::value_type, MT>(std::forward<X>(q), kt, vt,
                                                                                            opts, mt);
}

}  // namespace kiln
