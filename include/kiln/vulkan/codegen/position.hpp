// kiln/vulkan/codegen/position.hpp — the source of kiln::rope's and kiln::embedding's
// kernels (kernels/position/{rope,embedding}.comp): the structural codegen's prologue,
// epilogue, operand buffers and parameters (codegen/structural.hpp) with this file's
// family text: the parameter block's rows, extent and seq, and the parameter hooks
//   rope:      int kiln_position(uint s), float kiln_inv_freq(uint i)
//   embedding: int kiln_id(uint k), and the check buffer `uint kiln_check[]` bound after
//              the operands (context_state::dispatch_checked: word 0 the first bad
//              position, word 1 + k the id at position k)
// One invocation per pair of a row (rope) or per output element (embedding); the whole
// source is the cache key.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/layout.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/ops/position/embedding.hpp"
#include "kiln/ops/position/rope.hpp"
#include "kiln/vulkan/codegen/structural.hpp"

namespace kiln::detail::vk {

/// A parameter tensor of a position kernel as the kernel reads it: element k at
/// offset + k * stride (rank 1, or a contiguous copy).
struct position_param {
  dtype type = dtype::i32;
  const void* storage = nullptr;
  index_t offset = 0, stride = 1;
};

/// The family text of a position kernel: rope (interleaved or not) or embedding.
KILN_DECL structural_family_text position_family_text(const structural_plan& sp, bool rope, bool interleaved,
                                                      std::string_view result_type);

/// The source of a position kernel under plan from template tmpl (cached_family_source).
template <class T, class N, class S>
const structural_source& position_source(const N& n, const S& s, const structural_plan& plan, const param_block& params,
                                         bool rope, bool interleaved, std::string_view tmpl) {
  std::string key = structural_plan_key(plan);
  key += rope ? (interleaved ? 'I' : 'R') : 'E';
  return cached_family_source<T>(
      n, s, plan, std::move(key), S::op_type::name, params,
      [&](std::string_view result_type) { return position_family_text(plan, rope, interleaved, result_type); }, {tmpl});
}

/// Plans and generates the kernel of `out = n` whose structural node is a rope or an
/// embedding; params: its parameter tensors as the kernel reads them (rope: positions,
/// inv_freq; embedding: the ids, contiguous). Throws kiln::shape_error past the 32-bit
/// indexing of the kernel.
template <class T, class B, class N>
structural_kernel make_position_kernel(const tensor<T, B>& out, const N& n, const device_caps& dev,
                                       std::span<const position_param> params, std::string_view tmpl) {
  using namespace structural_detail;
  const auto& s = find_structural(n);
  using S = std::remove_cvref_t<decltype(s)>;
  constexpr bool rope = std::is_same_v<typename S::op_type, rope_op>;
  constexpr std::size_t LI = leaf_count_v<decltype(s.arg)>, LO = leaf_count_v<N>;

  structural_kernel kn;
  index_t rows = 0, extent = 0, seq = 0, threads = 0;
  if constexpr (rope) {
    extent = s.input_shape[s.input_shape.rank() - 1];
    rows = extent ? s.input_shape.numel() / extent : 0;
    seq = s.op.seq;
    threads = rows * (extent / 2);
  } else {
    extent = s.input_shape[1];
    rows = s.shape().numel() / std::max<index_t>(extent, 1);
    if (extent == 0) rows = 0;
    seq = s.input_shape[0];
    threads = rows * extent;
  }
  if (threads == 0) {
    kn.empty = true;
    return kn;
  }
  if (threads > index_t(UINT32_MAX) || s.input_shape.numel() > index_t(UINT32_MAX)) {
    throw_index_limit("kiln::" + std::string(S::op_type::name) + " on vulkan: " + s.arg.describe(),
                      index_limit::positions, "its kernel", "the tensor");
  }
  const auto in_lay = make_input_layout(s.input_shape, s.arg);
  const auto out_lay = make_layout(out, n);
  const auto ops = gather_operands(out, n, s);

  structural_plan plan;
  plan.row_op = rope;
  plan.acc_float = true;
  binder bind;
  plan_operands(plan, ops, in_lay, out_lay, bind);
  for (const position_param& q : params) plan.params.push_back(operand_plan{q.type, bind(q.storage), access::strided, -1});
  plan.bindings = static_cast<std::uint32_t>(bind.storages.size());
  plan.wg = std::min<std::uint32_t>(pow2_floor(std::max<std::uint32_t>(dev.workgroup_limit(), 1)), 128);

  // parameters: the geometry, the input's, the positions' or ids' (poff0, pst0), inv_freq's (poff1), the output's
  param_block pb("the Vulkan position kernels");
  pb.u32("rows", rows, "row count");
  pb.u32("extent", extent, "extent");
  pb.u32("seq", seq, rope ? "sequence length" : "table rows");
  input_params<LI>(pb, ops.in, in_lay, plan.in);
  pb.u32("poff", params[0].offset, "element offset", 0);
  pb.i32("pst", params[0].stride, "stride", 0);
  if constexpr (rope) pb.u32("poff", params[1].offset, "element offset", 1);
  output_params<LO>(pb, ops.out, out_lay, plan.out, n, s);
  plan.params_buffer = dev.max_push_bytes && pb.bytes() > dev.max_push_bytes;

  bool interleaved = false;
  if constexpr (rope) interleaved = s.op.interleaved;
  kn.first = &position_source<T>(n, s, plan, pb, rope, interleaved, tmpl);
  kn.push = pb.take_words();
  kn.first_tasks = (static_cast<std::uint64_t>(threads) + plan.wg - 1) / plan.wg;
  return kn;
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/codegen/impl/position.ipp"
#endif
