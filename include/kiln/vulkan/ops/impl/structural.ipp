// kiln/vulkan/ops/impl/structural.ipp — definitions of kiln/vulkan/ops/structural.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/ops/structural.hpp"

namespace kiln::detail::vk {

KILN_DECL device_caps device_caps_of(const context_state& ctx) {
  device_caps c = ctx.caps();
  if (const char* v = std::getenv("KILN_VULKAN_ROWS"); v && *v) c.lanes = std::string_view(v) == "lanes";
  c.lanes = c.lanes && c.shuffle_subgroup() > 1;  // a subgroup a line: its lanes merge by shuffles
  return c;
}

KILN_DECL planned_kernel planned(std::vector<const storage*> operands, const structural_kernel& kn) {
  planned_kernel k;
  k.operands = std::move(operands);
  if (kn.empty) return k;
  k.first = {kn.first, kn.first->plan.wg, {}, kn.first_tasks};
  if (kn.second) k.second = {kn.second, kn.second->plan.wg, {}, kn.second_tasks};
  k.push = kn.push;
  k.partials_bytes = kn.partials * 16;  // vec4s
  return k;
}

KILN_DECL void record_planned(context_state& ctx, const planned_kernel& k, const storage& out) {
  const structural_plan& plan = k.first.source->plan;
  KILN_ASSERT(k.operands.size() == plan.bindings);
  KILN_ASSERT(!(k.check_words && k.second.source));
  // the partials, or the check buffer (dispatch_checked binds that one)
  const std::uint32_t nb = plan.bindings + (k.second.source || k.check_words ? 1u : 0u);
  std::vector<context_state::binding> b(plan.bindings + (k.second.source ? 1u : 0u));
  for (std::uint32_t i = 0; i < plan.bindings; ++i) {
    const storage* st = k.operands[i];
    b[i] = {&st->alloc(), &st->access(), st == &out, i < 32 && (plan.texel_bindings >> i) & 1u};
  }
  std::shared_ptr<storage> partials;
  if (k.second.source) {
    partials = std::make_shared<storage>(out.ctx, static_cast<std::size_t>(k.partials_bytes));
    b[plan.bindings] = {&partials->alloc(), &partials->access(), true};
  }
  const auto bytes = static_cast<std::uint32_t>(k.push.size() * sizeof(std::uint32_t));
  auto spec = [&](const planned_dispatch& d) {
    const structural_source& src = *d.source;
    return kernel_spec{src.name, src.glsl, {}, nb, plan.params_buffer ? 0 : bytes, src.expression, plan.texel_bindings,
                       plan.params_buffer ? bytes : 0, d.wg, d.constants};
  };
  const auto push = std::as_bytes(std::span(k.push));
  if (k.check_words) {
    ctx.dispatch_checked(spec(k.first), b, push, ctx.grid_for(k.first.tasks), k.check_words, k.check);
    return;
  }
  ctx.dispatch(spec(k.first), b, push, ctx.grid_for(k.first.tasks));
  if (k.second.source) {
    b[plan.bindings].write = false;
    ctx.dispatch(spec(k.second), b, push, ctx.grid_for(k.second.tasks));
  }
  // partials: freed when the last dispatch reading them completes (storage's deferred free)
}

}  // namespace kiln::detail::vk
