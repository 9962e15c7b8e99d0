// kiln/vulkan/codegen/elementwise.hpp — the source of an elementwise kernel: declarations,
// kiln_compute (the emitted expression) and one of the main() variants (grid-stride loop
// or single step; one element, vec4 or eight per step; storage or texel reads).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/vulkan/codegen/emitter.hpp"
#include "kiln/vulkan/codegen/params.hpp"
#include "kiln/vulkan/codegen/plan.hpp"
#include "kiln/vulkan/codegen/types.hpp"

namespace kiln::detail::vk {

/// The kernel's source around an emitted expression: declarations, kiln_compute and
/// main(). Not a template: one copy serves every statement, so a new expression type costs
/// the compiler only its emitter walk (this text was most of a statement's compile time).
KILN_DECL kernel_source assemble(const kernel_plan& plan, const emitter& em, const param_block& params, std::string readable,
                                 const std::string& result, std::string_view result_type);

/// The GLSL source of node n under plan, with the parameter block `params` (make_params).
/// Throws kiln::shader_error for a malformed op body.
template <class T, class N>
kernel_source generate(const N& n, const kernel_plan& plan, const param_block& params) {
  emitter em(plan);
  std::string readable;
  const std::string result = em.emit(n, readable);
  return assemble(plan, em, params, std::move(readable), result, glsl_compute_type<typename N::value_type>());
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/codegen/impl/elementwise.ipp"
#endif
