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
#include "kiln/expr/traverse.hpp"
#include "kiln/vulkan/codegen.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/ops/copy.hpp"

namespace kiln::detail::vk {

/// What ctx's device lets a structural kernel use.
inline structural_options structural_options_for(const context_state& ctx) {
  const device_info& d = ctx.info();
  structural_options o;
  o.max_workgroup = std::min({256u, d.max_workgroup_invocations, d.max_workgroup_size[0]});
  const auto has = [&](const char* op) {
    return std::find(d.subgroup_operations.begin(), d.subgroup_operations.end(), op) != d.subgroup_operations.end();
  };
  if (d.subgroups_in_compute && has("basic") && has("shuffle")) o.subgroup_size = d.subgroup_size;
  o.shared_bytes = d.max_shared_memory;
  o.max_push_bytes = std::max<std::uint32_t>(d.max_push_constants, 4);
  // CPU devices: a subgroup a line (see structural_options::lanes); KILN_VULKAN_ROWS=
  // "lanes" or "groups" forces either layout on any device (tests, measurements).
  o.lanes = d.type == device_type::cpu;
  if (const char* v = std::getenv("KILN_VULKAN_ROWS"); v && *v) o.lanes = std::string_view(v) == "lanes";
  o.lanes = o.lanes && o.subgroup_size > 1;
  o.texel_reads = ctx.texel_reads() && d.max_texel_buffer_elements > 0;
  o.max_texel_buffers = std::min(d.max_texel_buffers, max_texel_binding);
  return o;
}

/// Records the dispatch(es) of a planned structural kernel.
inline void record_structural(context_state& ctx, const structural_kernel& kn, const storage& os,
                              std::span<const storage* const> by_binding) {
  const structural_plan& plan = kn.first->plan;
  const std::uint32_t nb = plan.bindings + (kn.second ? 1u : 0u);
  std::vector<context_state::binding> b(nb);
  for (std::uint32_t i = 0; i < plan.bindings; ++i) {
    const storage* st = by_binding[i];
    b[i] = {&st->alloc(), &st->access(), st == &os, i < 32 && (plan.texel_bindings >> i) & 1u};
  }
  std::shared_ptr<storage> partials;
  if (kn.second) {
    partials = std::make_shared<storage>(os.ctx, static_cast<std::size_t>(kn.partials) * 16);
    b[plan.bindings] = {&partials->alloc(), &partials->access(), true};
  }
  const auto bytes = static_cast<std::uint32_t>(kn.push.size() * sizeof(std::uint32_t));
  auto spec = [&](const structural_source& src) {
    return kernel_spec{src.name, src.glsl, {}, nb, plan.params_buffer ? 0 : bytes, src.expression, plan.texel_bindings,
                       plan.params_buffer ? bytes : 0, src.plan.wg};
  };
  const auto push = std::as_bytes(std::span(kn.push));
  ctx.dispatch(spec(*kn.first), b, push, ctx.grid_for(kn.first_tasks));
  if (kn.second) {
    b[plan.bindings].write = false;
    ctx.dispatch(spec(*kn.second), b, push, ctx.grid_for(kn.second_tasks));
  }
  // partials: freed when the last dispatch reading them completes (storage's deferred free)
}

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
