// kiln/vulkan/ops/structural.hpp — a statement holding one structural op, routed by the
// op's family: reduce and row families to ops/reduce.hpp, contract (matmul) to
// ops/gemm.hpp, attend (attention) to ops/attention.hpp, rope (row family) and the
// gather family (embedding) to ops/position.hpp, the quant family (quantize's packing,
// dequantize, matmul with a qtensor) to ops/quant.hpp; and the name of the kernel each
// would run (kiln::kernel_variant).
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <string>
#include <type_traits>

#include "kiln/expr/plan.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/vulkan/ops/attention.hpp"
#include "kiln/vulkan/ops/gemm.hpp"
#include "kiln/vulkan/ops/position.hpp"
#include "kiln/vulkan/ops/quant.hpp"
#include "kiln/vulkan/ops/reduce.hpp"

namespace kiln::detail::vk {

template <class T, class B, class N>
void record_structural_kernel(const tensor<T, B>& out, const N& n) {
  using S = std::remove_cvref_t<decltype(find_structural(n))>;
  if constexpr (S::family == structural_family::contract) record_gemm_kernel(out, n);
  else if constexpr (S::family == structural_family::attend) record_attention_kernel(out, n);
  else if constexpr (S::family == structural_family::quant) record_quant_kernel(out, n);
  else if constexpr (S::family == structural_family::gather || std::is_same_v<typename S::op_type, rope_op>)
    record_position_kernel(out, n);
  else record_reduce_kernel(out, n);
}

template <class S>
std::string structural_variant(const S& s) {
  if constexpr (S::family == structural_family::contract) {
    return gemm_variant(s);
  } else if constexpr (S::family == structural_family::attend) {
    return attention_variant(s);
  } else if constexpr (S::family == structural_family::quant) {
    return quant_variant(s);
  } else if constexpr (S::family == structural_family::gather || std::is_same_v<typename S::op_type, rope_op>) {
    if constexpr (std::is_same_v<typename S::op_type, rope_op>) {
      return s.op.interleaved ? "vulkan.rope interleaved" : "vulkan.rope half-split";
    } else {
      return "vulkan." + std::string(S::op_type::name);
    }
  } else {
    const context_state* ctx = nullptr;
    for_each_leaf(s.arg, [&](const auto& t) {
      if (!ctx) ctx = t.storage()->ctx.get();
    });
    return structural_walk_of(s, ctx ? structural_options_for(*ctx) : structural_options{}).name(S::op_type::name);
  }
}

}  // namespace kiln::detail::vk
