// kiln/vulkan/ops/quant.hpp — a statement holding one quant-family op (kiln::quantize's
// packing, kiln::dequantize, matmul / linear / bitlinear with a qtensor) as ONE dispatch
// of kernels/quant/{pack,dequantize,matvec,tiled}.comp with the statement's prologue and
// epilogue spliced in (codegen/quant.hpp); and the name of the kernel each runs
// (kiln::kernel_variant: "vulkan.quant.pack", ".dequantize", ".matvec", ".tiled": a
// product with more than quant_matvec_rows rows of x). The matvec kernel's segment of x
// held in shared memory comes from maxComputeSharedMemorySize, its columns per
// invocation from the device type (CPU devices: up to 4); the tiled kernel's tile and K
// chunk from maxComputeWorkGroupInvocations and maxComputeSharedMemorySize. Both take
// packed 4x8-bit integer dot products (OpSDot; variant names end in " dot4x8") where the
// device has shaderIntegerDotProduct and reports integerDotProduct4x8BitPackedSigned
// accelerated, plain integer multiply-adds elsewhere (lavapipe reports none accelerated,
// and there the dot path is no faster at M = 1 and 1.2-1.4x slower at M = 64);
// KILN_VULKAN_QUANT=dot / plain forces either. vk_quant_kernel, the family's
// vk_structural_kernel, plans it; ops/structural.hpp records it.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/vulkan/codegen/quant.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/ops/copy.hpp"
#include "kiln/vulkan/ops/structural.hpp"

namespace kiln::detail::vk {

/// The quant family's kernel (vk_structural_kernel, ops/structural.hpp).
struct vk_quant_kernel {
  /// e.g. "vulkan.quant.matvec".
  template <class S>
  static std::string variant(const S& s) {
    return quant_choice_of(s, device_caps_of(*node_context(s))).name();
  }

  template <class T, class B, class N>
  static planned_kernel plan(const tensor<T, B>& out, const N& n) {
    const context_state& ctx = *out.storage()->ctx;
    using V = vk_quant_op<typename std::remove_cvref_t<decltype(find_structural(n))>::op_type>;
    const char* op = V::kind == quant_kind::pack ? "quantize" : V::kind == quant_kind::dequantize ? "dequantize" : "matmul";
    planned_kernel k;
    k.operands = collect_operands(out, n, op);
    const quant_templates tmpl{kernels::quant_pack,  kernels::quant_dequantize, kernels::quant_matvec,
                               kernels::quant_tiled, kernels::quant_common,     kernels::quant_matvec_split};
    const device_caps dev = device_caps_of(ctx);
    quant_kernel kn = make_quant_kernel(out, n, dev, dev.max_push_bytes, tmpl);
    if (kn.empty) return k;
    k.first = {kn.source, kn.choice.wg, kn.choice.constants(), kn.tasks};
    k.push = std::move(kn.push);
    return k;
  }
};

template <class Scheme>
struct vk_structural_kernel<quant_pack_op<Scheme>> : vk_quant_kernel {};
template <class Scheme>
struct vk_structural_kernel<dequantize_op<Scheme>> : vk_quant_kernel {};
template <class Scheme>
struct vk_structural_kernel<qmatmul_op<Scheme>> : vk_quant_kernel {};

}  // namespace kiln::detail::vk
