// kiln/vulkan/ops/reduce.hpp — a statement holding one structural op of the reduce or row
// family (sum, mean, amax, amin, custom reducers, argmax/argmin, softmax, log_softmax,
// layer_norm, rms_norm) as ONE dispatch of kernels/reduce/*.comp with the statement's
// prologue and epilogue spliced in (codegen/structural.hpp), or as the split pass's two
// dispatches for lines of 64Ki elements and more: partial statistics per chunk of a line
// into a small temporary, then a dispatch that merges them and writes. Either way each
// input element is read at most twice and each output written once.
// ctx.kernels_launched() counts dispatches: a split statement counts 2. vk_reduce_kernel
// is the families' vk_structural_kernel (ops/structural.hpp).
// Variants from the device: workgroup size (a power of two up to 256), subgroup shuffles
// where compute shaders have them (subgroup "shuffle"), and a line cache in shared memory
// for row ops (the line is read from memory once) sized from maxComputeSharedMemorySize.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>  // std::getenv
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/vulkan/codegen.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/ops/copy.hpp"
#include "kiln/vulkan/ops/structural.hpp"

namespace kiln::detail::vk {


/// The kernel of the reduce and row families (vk_structural_kernel, ops/structural.hpp).
struct vk_reduce_kernel {
  /// "vulkan.<op>.rows", ".columns" or ".rows split" (2 dispatches).
  template <class S>
  static std::string variant(const S& s) {
    const context_state* ctx = node_context(s);
    return structural_walk_of(s, ctx ? device_caps_of(*ctx) : device_caps{}).name(S::op_type::name);
  }

  template <class T, class B, class N>
  static planned_kernel plan(const tensor<T, B>& out, const N& n) {
    const context_state& ctx = *out.storage()->ctx;
    const auto& s = find_structural(n);
    std::vector<const storage*> operands = collect_operands(out, n, "evaluate");
    device_caps dev = device_caps_of(ctx);
    auto viewable = [&](const auto& t) { dev.texel_reads = dev.texel_reads && ctx.texel_viewable(t.storage()->alloc()); };
    for_each_leaf(s.arg, viewable);
    std::apply([&](const auto&... q) { (viewable(q.t), ...); }, s.params);
    return planned(std::move(operands), make_structural_kernel(out, n, dev, kernels::reduce_ops, kernels::reduce_rows,
                                                               kernels::reduce_columns));
  }
};

template <class R>
struct vk_structural_kernel<reduce_op<R>> : vk_reduce_kernel {};
template <bool Largest>
struct vk_structural_kernel<arg_extreme_op<Largest>> : vk_reduce_kernel {};
template <bool Log>
struct vk_structural_kernel<softmax_op<Log>> : vk_reduce_kernel {};
template <bool Root>
struct vk_structural_kernel<norm_op<Root>> : vk_reduce_kernel {};

}  // namespace kiln::detail::vk
