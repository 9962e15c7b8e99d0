// kiln/vulkan/codegen/impl/source_cache.ipp — definitions of kiln/vulkan/codegen/source_cache.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/codegen/source_cache.hpp"

namespace kiln::detail::vk {

KILN_DECL std::string plan_key(const kernel_plan& plan) {
  std::string k;
  k.reserve(16 + plan.operands.size() * 10);
  auto word = [&](std::uint32_t v) {  // whole words: binding numbers and masks exceed a byte
    for (int i = 0; i < 4; ++i) k += static_cast<char>((v >> (8 * i)) & 0xffu);
  };
  k += static_cast<char>(plan.rank);
  k += static_cast<char>(plan.vec4);
  k += static_cast<char>(plan.wide);
  k += static_cast<char>(plan.single_step);
  k += static_cast<char>(plan.tail);
  k += static_cast<char>(plan.params_buffer);
  word(plan.bindings);
  word(plan.texel_bindings);
  for (const operand_plan& o : plan.operands) {
    k += static_cast<char>(o.type);
    k += static_cast<char>(o.how);
    word(o.binding);
    word(static_cast<std::uint32_t>(o.same_as));
  }
  return k;
}

}  // namespace kiln::detail::vk
