// kiln/vulkan/ops/impl/paged_attention.ipp — definitions of kiln/vulkan/ops/paged_attention.hpp
// (inline in the header-only mode, compiled once in kiln::vulkan_runtime otherwise; see
// kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/ops/paged_attention.hpp"

namespace kiln::detail::vk {

KILN_DECL std::string paged_plan_key(const paged_plan& a) {
  std::string k = structural_plan_key(a.base);
  k += '|';
  k += static_cast<char>(a.write | a.subgroup << 1 | a.rolled << 2);
  k += std::to_string(a.D) + "," + std::to_string(a.Dv) + "," + std::to_string(a.wg) + "," + std::to_string(a.dvl);
  return k;
}

KILN_DECL structural_family_text paged_family_text(const paged_plan& a, std::string_view result_type) {
  using structural_text::load;
  const structural_plan& sp = a.base;
  structural_family_text f;
  f.comment = a.write ? "// paged_write, one invocation an element, " + std::to_string(a.wg) + " invocations" +
                            (sp.params_buffer ? "; parameter buffer" : "") + "\n"
                      : "// paged_attention, D " + std::to_string(a.D) + ", Dv " + std::to_string(a.Dv) +
                            ", one workgroup a query row" + (a.subgroup ? ", subgroup max" : "") +
                            (sp.params_buffer ? "; parameter buffer" : "") + "; the workgroup is a specialisation constant\n";
  auto def = [&](std::string_view name, const std::string& v) { f.defines += "#define " + std::string(name) + " " + v + "\n"; };
  def("KILN_RESULT", std::string(result_type));
  if (a.write) {
    def("KILN_WG", std::to_string(a.wg) + "u");
  } else {
    f.extensions += "#extension GL_EXT_control_flow_attributes : require\n";  // [[unroll]]
    if (a.subgroup) {
      f.extensions += "#extension GL_KHR_shader_subgroup_basic : require\n";
      f.extensions += "#extension GL_KHR_shader_subgroup_arithmetic : require\n";
    }
    def("KILN_D", std::to_string(a.D) + "u");
    def("KILN_DV", std::to_string(a.Dv) + "u");
    def("KILN_D4", std::to_string(std::max<index_t>((a.D + 3) / 4, 1)) + "u");
    def("KILN_DVL", std::to_string(a.dvl) + "u");
    def("KILN_UNROLL_Q", a.rolled ? "[[dont_unroll]]" : "[[unroll]]");
    def("KILN_SUBGROUP", a.subgroup ? "1" : "0");
  }
  // the tables' and lengths' check (context_state::dispatch_checked), after the operands' buffers
  f.buffers = "layout(std430, set = 0, binding = " + std::to_string(sp.bindings) +
              ") buffer kiln_check_buf { uint kiln_check[]; };\n";
  f.extra_bindings = 1;
  const std::size_t t = a.write ? 0 : 2;  // the tables' parameter; the lengths (starts) follow
  if (!a.write) {
    f.hooks += "float kiln_k(uint e) { return " + load(sp.params[0], "e") + "; }\n";
    f.hooks += "float kiln_v(uint e) { return " + load(sp.params[1], "e") + "; }\n";
  }
  f.hooks += "int kiln_table(uint b, uint j) { return " + load(sp.params[t], "p.toff + b * p.ts0 + j * p.ts1") + "; }\n";
  f.hooks += "int kiln_len(uint b) { return " + load(sp.params[t + 1], "p.loff + b * p.ls0") + "; }\n";
  return f;
}

}  // namespace kiln::detail::vk
