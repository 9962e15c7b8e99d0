// kiln/vulkan/codegen/impl/position.ipp — definitions of kiln/vulkan/codegen/position.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/codegen/position.hpp"

namespace kiln::detail::vk {

KILN_DECL structural_family_text position_family_text(const structural_plan& sp, bool rope, bool interleaved,
                                                      std::string_view result_type) {
  using structural_text::load;
  structural_family_text f;
  f.comment = rope ? std::string("// rope, ") + (interleaved ? "interleaved pairs" : "half-split pairs") +
                         ", one invocation a pair, " + std::to_string(sp.wg) + " invocations" +
                         (sp.params_buffer ? "; parameter buffer" : "") + "\n"
                   : "// embedding, one invocation an element, " + std::to_string(sp.wg) + " invocations" +
                         (sp.params_buffer ? "; parameter buffer" : "") + "\n";
  auto def = [&](std::string_view name, const std::string& v) { f.defines += "#define " + std::string(name) + " " + v + "\n"; };
  def("KILN_WG", std::to_string(sp.wg) + "u");
  def("KILN_RESULT", std::string(result_type));
  def("KILN_INTERLEAVED", interleaved ? "1" : "0");
  if (!rope) {
    // the ids' check (context_state::dispatch_checked), after the operands' buffers
    f.buffers = "layout(std430, set = 0, binding = " + std::to_string(sp.bindings) +
                ") buffer kiln_check_buf { uint kiln_check[]; };\n";
    f.extra_bindings = 1;
  }
  f.hooks += std::string(rope ? "int kiln_position(uint k)" : "int kiln_id(uint k)") + " { return " +
             load(sp.params[0], "uint(int(p.poff0) + int(k) * p.pst0)") + "; }\n";
  if (rope) {
    f.hooks += "float kiln_inv_freq(uint i) { return " + load(sp.params[1], "p.poff1 + i") + "; }\n";
  }
  return f;
}

}  // namespace kiln::detail::vk
