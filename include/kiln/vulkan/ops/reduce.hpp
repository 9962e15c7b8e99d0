// kiln/vulkan/ops/reduce.hpp — a statement holding one structural op of the reduce or row
// family (sum, mean, amax, amin, custom reducers, argmax/argmin, softmax, log_softmax,
// layer_norm, rms_norm) as ONE dispatch of kernels/reduce/*.comp with the statement's
// prologue and epilogue spliced in (codegen/structural.hpp), or as the split pass's two
// dispatches for lines of 64Ki elements and more: partial statistics per chunk of a line
// into a small temporary, then a dispatch that merges them and writes. Either way each
// input element is read at most twice and each output written once.
// ctx.kernels_launched() counts dispatches: a split statement counts 2.
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

namespace kiln::detail::vk {

/// What ctx's device lets a structural kernel use.
KILN_DECL structural_options structural_options_for(const context_state& ctx);

/// Records the dispatch(es) of a planned structural kernel.
KILN_DECL void record_structural(context_state& ctx, const structural_kernel& kn, const storage& os,
                                 std::span<const storage* const> by_binding);

/// out = n for a planned tree whose structural node is of the reduce or row family.
template <class T, class B, class N>
void record_reduce_kernel(const tensor<T, B>& out, const N& n) {
  context_state& ctx = *out.storage()->ctx;
  require_storage_width<T>(ctx);
  const auto& s = find_structural(n);
  std::vector<const storage*> stores;  // in binding order: output, epilogue, prologue, params
  auto add = [&](const storage* st) {
    if (std::find(stores.begin(), stores.end(), st) == stores.end()) stores.push_back(st);
  };
  add(out.storage().get());
  auto tensor_operand = [&](const auto& t) {
    same_context(out, *t.storage(), "evaluate");
    require_storage_width<typename std::remove_cvref_t<decltype(t)>::value_type>(ctx);
    add(t.storage().get());
  };
  for_each_leaf(n, [&](const auto& op) {
    if constexpr (is_tensor<std::remove_cvref_t<decltype(op)>>::value) tensor_operand(op);
  });
  for_each_leaf(s.arg, tensor_operand);
  std::apply([&](const auto&... q) { (tensor_operand(q.t), ...); }, s.params);
  structural_options opt = structural_options_for(ctx);
  auto viewable = [&](const auto& t) { opt.texel_reads = opt.texel_reads && ctx.texel_viewable(t.storage()->alloc()); };
  for_each_leaf(s.arg, viewable);
  std::apply([&](const auto&... q) { (viewable(q.t), ...); }, s.params);
  const structural_kernel kn = make_structural_kernel(out, n, opt, kernels::reduce_ops,
                                                      kernels::reduce_rows, kernels::reduce_columns);
  if (kn.empty) return;
  KILN_ASSERT(stores.size() == kn.first->plan.bindings);
  record_structural(ctx, kn, *out.storage(), stores);
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/ops/impl/reduce.ipp"
#endif
