// kiln/ops/attention/paged_attention.hpp — kiln::paged_attention: scaled dot-product
// attention whose keys and values live in fixed-size blocks of a shared pool, found
// through a block table per sequence (vLLM's paged attention), for a batch of unrelated
// sequences of different lengths.
//
// Pools per layer: k [N, Hkv, bs, D] and v [N, Hkv, bs, Dv] (N blocks of bs positions; a
// block holds every kv head of its positions, so one table entry serves all heads and
// the rows of one head in a block are contiguous: the kernels read runs of up to bs keys
// in place, as the contiguous kernels read theirs). Sequence b's key j lies in block
// tables[b, j / bs] at row j % bs; it has lens[b] keys.
//
// The op is a structural op of the gather family (its work depends on lens, device data,
// so the profiler counts no flops for it): q is its input (any expression, the
// prologue), the pools, the tables and the lengths its parameters; elementwise ops on the
// result fuse as its epilogue. Numerics are the contiguous kernels' (cpu/attention/
// flash.hpp's rows path, kernels/attention/decode.comp): scores and sums in f32, the
// same online softmax in tiles of the same keys.
//
// Bad tables (an entry outside [0, N) among the blocks a sequence uses, a length outside
// 0 .. M * bs) throw kiln::index_error naming the op, the entry and every operand: on
// the CPU before anything runs; on Vulkan the kernel clamps what it reads, records the
// first bad entry and the next synchronisation throws (as kiln::embedding's ids).
// Kernels: cpu/attention/paged.hpp, vulkan/ops/paged_attention.hpp.
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
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/ops/attention/attention.hpp"  // attention_options
#include "kiln/ops/linalg/matmul.hpp"        // matmul_operand

namespace kiln {
namespace detail {

/// Sizes of a paged op: q [B, Hq, Sq, D] (paged_write: the new rows [B, Hkv, Sq, D]),
/// pools [N, Hkv, bs, D | Dv], tables [B, M].
struct paged_dims {
  index_t B = 0, Hq = 0, Hkv = 0, Sq = 0, D = 0, Dv = 0, N = 0, bs = 1, M = 0;
  index_t group() const noexcept { return Hkv > 0 ? Hq / Hkv : 1; }
  /// Positions a table row can address.
  index_t capacity() const noexcept { return M * bs; }
};

/// The attention op over paged pools of dtypes KT and VT. The result has q's dtype.
template <class KT, class VT>
struct paged_attention_op {
  static constexpr std::string_view name = "paged_attention";
  static constexpr structural_family family = structural_family::gather;
  template <class In>
  using result_type = In;

  bool causal = false;
  float scale = 1.0f;    // resolved
  float softcap = 0.0f;  // 0: off
};

/// The message of kiln::index_error for a bad table entry or length of a paged op:
/// `what` says which ("block table entry [1, 3] is 9, outside the pool's 8 blocks");
/// operands: every operand's description.
KILN_DECL std::string paged_index_message(std::string_view op, const std::string& what, const std::string& operands);

/// Where a check buffer position of a paged op points (the Vulkan kernels' report): a
/// table entry [b, j] (pos < B * M) or sequence b's length or start (pos - B * M).
/// Returns the sentence paged_index_message takes.
KILN_DECL std::string paged_check_sentence(std::string_view op, std::uint64_t pos, std::int64_t value, index_t B,
                                           index_t M, index_t N, index_t bs, index_t rows);

/// Checks a paged op's tables and lengths on the host (CPU tensors; strides honoured):
/// for paged_attention `rows` is 0 and lens[b] the keys of sequence b; for paged_write
/// lens[b] is the first position written and `rows` the rows written after it. Every
/// table entry of a position in use must be in [0, N). Throws kiln::index_error.
KILN_DECL void check_paged_host(std::string_view op, const std::int32_t* tables, index_t ts0, index_t ts1,
                                const std::int32_t* lens, index_t ls0, const paged_dims& d, index_t rows,
                                const std::string& operands);

/// Shape checks shared by the paged ops: pools [N, Hkv, bs, *] alike, contiguous along
/// their last dimension; tables [B, M], lens [B]. `fail` throws with the reason.
template <class K, class V, class T, class L, class F>
void check_paged_operands(const K& k, const V& v, const T& tables, const L& lens, index_t B, F&& fail) {
  if (k.rank() != 4 || v.rank() != 4) fail("the pools must be rank 4: [blocks, kv heads, block size, head dim]");
  if (k.shape()[0] != v.shape()[0] || k.shape()[1] != v.shape()[1] || k.shape()[2] != v.shape()[2]) {
    fail("the k and v pools differ in blocks, kv heads or block size");
  }
  if (k.shape()[0] > 0 && k.shape()[2] < 1) fail("the block size must be at least 1");
  if ((k.shape()[3] > 1 && k.strides()[3] != 1) || (v.shape()[3] > 1 && v.strides()[3] != 1)) {
    fail("the pools must be contiguous along the head dimension");
  }
  if (tables.rank() != 2 || tables.shape()[0] != B) fail("the block tables must be [B, blocks per sequence]");
  if (lens.rank() != 1 || lens.shape()[0] != B) fail("the lengths must be [B]");
}

template <class T, class B>
void check_paged_defined(std::string_view op, const tensor<T, B>& t, const char* what) {
  if (!t.defined()) {
    throw shape_error("kiln::" + std::string(op) + ": " + what + " is an empty tensor (default-constructed or moved from)");
  }
}

/// The dims of a paged_attention node.
template <class S>
paged_dims paged_attention_dims_of(const S& s) {
  const auto& k = std::get<0>(s.params).t;
  const auto& v = std::get<1>(s.params).t;
  const auto& tb = std::get<2>(s.params).t;
  const shape& q = s.input_shape;
  return {q[0], q[1], k.shape()[1], q[2], q[3], v.shape()[3], k.shape()[0], k.shape()[0] > 0 ? k.shape()[2] : 1, tb.shape()[1]};
}

/// Every operand of a paged_attention node, for messages.
template <class S>
std::string paged_attention_operands(const S& s) {
  return "q is " + s.arg.describe() + ", k pool " + std::get<0>(s.params).t.describe() + ", v pool " +
         std::get<1>(s.params).t.describe() + ", block tables " + std::get<2>(s.params).t.describe() + ", lengths " +
         std::get<3>(s.params).t.describe();
}

}  // namespace detail

/// Attention of a batch of sequences over a paged KV cache: q [B, Hq, Sq, D] (an
/// expression), k_pool [N, Hkv, bs, D] and v_pool [N, Hkv, bs, Dv] (f32, f16 or bf16),
/// block_tables int32 [B, M] and context_lens int32 [B] -> [B, Hq, Sq, Dv] in q's dtype.
/// Sequence b attends to its first context_lens[b] positions, position j at
/// pool[block_tables[b, j / bs], :, j % bs]; entries past the blocks a sequence uses are
/// never read. Options as kiln::attention's: causal aligns bottom-right per sequence
/// (query i of Sq sees keys j <= i + context_lens[b] - Sq: decoding Sq = 1, or a chunk of
/// prefill whose keys are already written), scale (default 1/sqrt(D)), softcap. GQA:
/// query head h reads kv head h / (Hq / Hkv). A query that sees no key gives zeros.
/// Throws kiln::shape_error for mismatched shapes (naming every operand) and
/// kiln::index_error for a bad table entry or length (see the top of this file).
///   y = kiln::paged_attention(q, cache.k(l), cache.v(l), batch.tables, batch.lens, {.causal = true});
template <expression X, class KT, class VT, class B, class I>
auto paged_attention(X&& q, const tensor<KT, B>& k_pool, const tensor<VT, B>& v_pool, const tensor<I, B>& block_tables,
                     const tensor<I, B>& context_lens, const attention_options& opts = {}) {
  using Q = detail::node_t<X>;
  static_assert(is_floating_v<typename Q::value_type> && is_floating_v<KT> && is_floating_v<VT>,
                "kiln: paged_attention needs floating-point q and pools (f32, f16, bf16)");
  static_assert(std::is_same_v<I, std::int32_t>,
                "kiln: paged_attention's block tables and lengths must be int32 tensors; convert with "
                "kiln::cast<std::int32_t>(t)");
  constexpr std::string_view op = "paged_attention";
  detail::check_paged_defined(op, k_pool, "the k pool");
  detail::check_paged_defined(op, v_pool, "the v pool");
  detail::check_paged_defined(op, block_tables, "the block tables");
  detail::check_paged_defined(op, context_lens, "the lengths");
  auto n = detail::make_structural(detail::paged_attention_op<KT, VT>{.causal = opts.causal, .softcap = opts.softcap},
                                   std::forward<X>(q), {}, k_pool, v_pool, block_tables, context_lens);
  const auto fail = [&](const std::string& why) {
    throw shape_error("kiln::paged_attention: " + why + ": " + detail::paged_attention_operands(n));
  };
  const shape& qs = n.input_shape;
  if (qs.rank() != 4) fail("q must be rank 4: [B, Hq, Sq, D]");
  detail::check_paged_operands(k_pool, v_pool, block_tables, context_lens, qs[0], fail);
  if (k_pool.shape()[3] != qs[3]) fail("q and the k pool differ in head dimension");
  const index_t Hkv = k_pool.shape()[1];
  if (Hkv == 0 ? qs[1] != 0 : qs[1] % Hkv != 0) fail("the query heads are not a multiple of the kv heads");
  if (opts.scale && !std::isfinite(*opts.scale)) fail("the scale must be finite");
  if (!(opts.softcap >= 0.0f) || !std::isfinite(opts.softcap)) fail("softcap must be finite and >= 0, 0 for off");
  n.op.scale = opts.scale ? *opts.scale : (qs[3] > 0 ? 1.0f / std::sqrt(static_cast<float>(qs[3])) : 1.0f);
  n.shape_ = shape{qs[0], qs[1], qs[2], v_pool.shape()[3]};
  return n;
}

}  // namespace kiln

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/ops/attention/impl/paged.ipp"
#endif
