// kiln/vulkan/codegen/impl/structural.ipp — definitions of kiln/vulkan/codegen/structural.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/codegen/structural.hpp"

namespace kiln::detail::vk {

KILN_DECL std::string structural_plan_key(const structural_plan& sp) {
  std::string k;
  auto word = [&](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) k += static_cast<char>((v >> (8 * i)) & 0xffu);
  };
  k += static_cast<char>(sp.op);
  k += static_cast<char>(sp.row_op | sp.log << 1 | sp.largest << 2 | sp.subgroup << 3 | sp.acc_float << 4 |
                         sp.params_buffer << 5 | sp.lanes << 6 | sp.vec4 << 7);
  k += static_cast<char>(sp.params_vec4);
  k += static_cast<char>(sp.mode);
  k += static_cast<char>(sp.phase);
  word(sp.wg);
  word(sp.cache);
  word(static_cast<std::uint32_t>(sp.value_operand));
  word(sp.bindings);
  word(sp.texel_bindings);
  word(sp.in_rows);
  word(sp.out_rows);
  k += plan_key(sp.in);
  k += '|';
  k += plan_key(sp.out);
  k += '|';
  for (const operand_plan& o : sp.params) {
    k += static_cast<char>(o.type);
    word(o.binding);
  }
  return k;
}

namespace structural_text {

KILN_DECL std::string substitute(std::string_view body, const std::vector<std::string>& args, std::string_view type,
                                 std::string_view what) {
  std::string out;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '{') {
      out += body[i];
      continue;
    }
    const std::size_t close = body.find('}', i);
    if (close == std::string_view::npos) throw shader_error("kiln: unbalanced '{' in " + std::string(what) + ": " + std::string(body));
    const std::string_view tag = body.substr(i + 1, close - i - 1);
    if (tag == "T") {
      out += type;
    } else {
      std::size_t k = args.size();
      if (!tag.empty() && tag.find_first_not_of("0123456789") == std::string_view::npos) k = std::stoul(std::string(tag));
      if (k >= args.size()) {
        throw shader_error("kiln: " + std::string(what) + " refers to {" + std::string(tag) + "} but has " +
                           std::to_string(args.size()) + " operands: " + std::string(body));
      }
      out += args[k];
    }
    i = close;
  }
  return out;
}

KILN_DECL std::string index_of(const kernel_plan& kp, std::size_t o, const std::string& prefix) {
  const std::string off = "p." + prefix + "off" + std::to_string(o);
  switch (kp.operands[o].how) {
    case access::linear: return off + " + pos";
    case access::constant: return off;
    case access::strided: {
      std::string e = "uint(int(" + off + ")";
      for (int d = 0; d < kp.rank; ++d) {
        e += " + int(c" + std::to_string(d) + ") * p." + prefix + "st" + std::to_string(o) + "_" + std::to_string(d);
      }
      return e + ")";
    }
  }
  return off;
}

KILN_DECL bool any_strided(const kernel_plan& kp, std::size_t from) {
  for (std::size_t o = from; o < kp.operands.size(); ++o)
    if (kp.operands[o].how == access::strided) return true;
  return false;
}

KILN_DECL std::string coordinates(const kernel_plan& kp, const std::string& prefix) {
  std::string s = "  uint rest = pos;\n";
  for (int d = kp.rank - 1; d >= 0; --d) {
    const std::string ds = std::to_string(d);
    if (d > 0) s += "  uint c" + ds + " = rest % p." + prefix + "ext" + ds + "; rest /= p." + prefix + "ext" + ds + ";\n";
    else s += "  uint c0 = rest;\n";
  }
  return s;
}

KILN_DECL std::string load(const operand_plan& op, const std::string& at) {
  return glsl_load(op.type, "kiln_b" + std::to_string(op.binding) + "[" + at + "]");
}

}  // namespace structural_text

KILN_DECL std::string four_calls(std::string_view fn, const std::string& args) {
  std::string s = "vec4(";
  for (const char* c : {"x", "y", "z", "w"}) {
    std::string a = args;
    for (std::size_t at = a.find("{c}"); at != std::string::npos; at = a.find("{c}")) a.replace(at, 3, c);
    s += std::string(*c == 'x' ? "" : ", ") + std::string(fn) + "(" + a + ")";
  }
  return s + ")";
}

KILN_DECL structural_family_text reduce_family_text(const structural_plan& sp, const reducer_text* red,
                                                    std::string_view result_type) {
  using namespace structural_text;
  const std::string_view acc = sp.acc_float ? "float" : "int";
  structural_family_text f;
  f.comment = "// " + std::string(sp.mode == structural_mode::rows ? "rows" : "columns") + ", phase " +
              std::to_string(sp.phase) + ", " + std::to_string(sp.wg) + " invocations" +
              (sp.subgroup ? ", subgroup shuffles" : "") + (sp.cache ? ", line cache " + std::to_string(sp.cache) : "") +
              (sp.lanes ? ", a subgroup a line" : "") + (sp.vec4 ? ", vec4 steps" : "") +
              (sp.texel_bindings ? ", texel reads" : "") +
              (sp.params_buffer ? "; parameter buffer" : "") + "\n";
  if (sp.subgroup) {
    f.extensions += "#extension GL_KHR_shader_subgroup_basic : require\n";
    f.extensions += "#extension GL_KHR_shader_subgroup_shuffle : require\n";
  }
  auto def = [&](std::string_view name, const std::string& v) { f.defines += "#define " + std::string(name) + " " + v + "\n"; };
  for (const auto& o : structural_op_defines) def(o.define, std::to_string(static_cast<int>(o.op)));
  def("KILN_OP", std::to_string(static_cast<int>(sp.op)));
  def("KILN_ROW_OP", sp.row_op ? "1" : "0");
  def("KILN_LOG", sp.log ? "1" : "0");
  def("KILN_LARGEST", sp.largest ? "1" : "0");
  def("KILN_PHASE", std::to_string(sp.phase));
  def("KILN_WG", std::to_string(sp.wg) + "u");
  def("KILN_CACHE", std::to_string(sp.cache));
  def("KILN_SUBGROUP", sp.subgroup ? "1" : "0");
  def("KILN_LANES", sp.lanes ? "1" : "0");
  def("KILN_VEC4", sp.vec4 ? "1" : "0");
  def("KILN_PARAMS_VEC4", sp.params_vec4 || sp.params.empty() ? "1" : "0");
  def("KILN_ACC", std::string(acc));
  def("KILN_ACC_FLOAT", sp.acc_float ? "1" : "0");
  def("KILN_RESULT", std::string(result_type));
  def("KILN_WEIGHT", sp.params.size() > 0 ? "1" : "0");
  def("KILN_BIAS", sp.params.size() > 1 ? "1" : "0");
  if (sp.phase) {
    f.buffers = "layout(std430, set = 0, binding = " + std::to_string(sp.bindings) + ") " +
                (sp.phase == 1 ? "writeonly " : "readonly ") + "buffer kiln_partial_buf { vec4 kiln_partial[]; };\n";
    f.extra_bindings = 1;
  }
  if (red) {
    f.functions = red->functions;
    f.hooks += std::string(acc) + " kiln_identity() { return " + substitute(red->identity, {}, acc, "a reducer's glsl_identity") + "; }\n";
    f.hooks += std::string(acc) + " kiln_combine(" + std::string(acc) + " a, " + std::string(acc) + " b) { return " +
               substitute(red->combine, {"a", "b"}, acc, "a reducer's glsl") + "; }\n";
    f.hooks += "KILN_RESULT kiln_finalize(" + std::string(acc) + " v, float count) { return KILN_RESULT(" +
               (red->finalize.empty() ? std::string("v") : substitute(red->finalize, {"v", "count"}, acc, "a reducer's glsl_finalize")) +
               "); }\n";
  }
  const char* pname[2] = {"kiln_weight", "kiln_bias"};
  for (std::size_t q = 0; q < sp.params.size() && q < 2; ++q) {
    const std::string qs = std::to_string(q), b = std::to_string(sp.params[q].binding);
    const bool texel = sp.params[q].binding < 32 && (sp.texel_bindings >> sp.params[q].binding) & 1u;
    const std::string at = "uint(int(p.poff" + qs + ") + int(j) * p.pst" + qs + ")";
    f.hooks += std::string("float ") + pname[q] + "(uint j) { return " +
               (texel ? "uintBitsToFloat(kiln_texel(kiln_t" + b + ", " + at + "))" : load(sp.params[q], at)) + "; }\n";
    if (sp.params_vec4) {  // stride 1: the four from j on (j % 4 == 0)
      f.hooks += std::string("vec4 ") + pname[q] + "4(uint j) { return " +
                 (texel ? "uintBitsToFloat(texelFetch(kiln_t" + b + ", int((p.poff" + qs + " + j) >> 2)))"
                        : "kiln_v" + b + "[(p.poff" + qs + " + j) >> 2]") +
                 "; }\n";
    }
  }
  return f;
}

KILN_DECL structural_source assemble_structural(const structural_plan& sp, const emitter& pro, const std::string& pro_result,
                                                const emitter& epi, const std::string& epi_result,
                                                std::string_view epi_type, std::string_view result_type,
                                                const structural_family_text& fam, const param_block& params,
                                                std::string readable, std::initializer_list<std::string_view> templates) {
  using namespace structural_text;
  const std::string_view acc = sp.acc_float ? "float" : "int";
  const std::size_t LI = sp.in.operands.size() - 1, LO = sp.out.operands.size() - 1;

  // every buffer operand: (binding, dtype, written)
  struct use {
    std::uint32_t binding;
    dtype type;
  };
  std::vector<use> uses;
  uses.push_back({sp.out.operands[0].binding, sp.out.operands[0].type});
  for (std::size_t o = 1; o <= LO; ++o)
    if (o != sp.value_operand) uses.push_back({sp.out.operands[o].binding, sp.out.operands[o].type});
  for (std::size_t o = 1; o <= LI; ++o) uses.push_back({sp.in.operands[o].binding, sp.in.operands[o].type});
  for (const auto& q : sp.params) uses.push_back({q.binding, q.type});
  bool f16 = pro.uses_f16 || epi.uses_f16, b16 = pro.uses_bf16 || epi.uses_bf16, i8 = false;
  for (const use& u : uses) {
    f16 = f16 || u.type == dtype::f16;
    b16 = b16 || u.type == dtype::bf16;
    i8 = i8 || u.type == dtype::i8 || u.type == dtype::u8;
  }

  // vec4 steps (sp.vec4: every operand f32, linear and 4-aligned, or constant): bindings
  // read or written four elements at a time, through a texel buffer or a vec4 alias.
  auto texel = [&](std::uint32_t b) { return b < 32 && (sp.texel_bindings >> b) & 1u; };
  auto vec_binding = [&](std::uint32_t b) {
    if (!sp.vec4 || texel(b)) return false;
    if (sp.row_op && b == sp.out.operands[0].binding) return true;
    for (std::size_t o = 1; o <= LO; ++o)
      if (o != sp.value_operand && sp.out.operands[o].binding == b &&
          (sp.out.operands[o].how == access::linear || (o < 32 && (sp.out_rows >> o) & 1u)))
        return true;
    for (std::size_t o = 1; o <= LI; ++o)
      if (sp.in.operands[o].binding == b && (sp.in.operands[o].how == access::linear || (o < 32 && (sp.in_rows >> o) & 1u)))
        return true;
    for (const operand_plan& q : sp.params)
      if (sp.params_vec4 && q.binding == b) return true;
    return false;
  };
  // One element (scalar) or the four from element `at` on (vec4; at % 4 == 0) of operand op.
  auto load_one = [&](const operand_plan& op, const std::string& at) {
    if (!texel(op.binding)) return load(op, at);
    const std::string e = "kiln_texel(kiln_t" + std::to_string(op.binding) + ", " + at + ")";
    return op.type == dtype::i32 ? "int(" + e + ")" : "uintBitsToFloat(" + e + ")";
  };
  auto load_four = [&](const operand_plan& op, const std::string& at) {
    const std::string b = std::to_string(op.binding);
    if (texel(op.binding)) return "uintBitsToFloat(texelFetch(kiln_t" + b + ", int((" + at + ") >> 2)))";
    return "kiln_v" + b + "[(" + at + ") >> 2]";
  };

  std::string s;
  s += "#version 450\n";
  s += "// kiln generated kernel: " + readable + "\n";
  s += fam.comment;
  if (f16 || b16) s += "#extension GL_EXT_shader_16bit_storage : require\n";
  if (i8) {
    s += "#extension GL_EXT_shader_8bit_storage : require\n";
    s += "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n";
  }
  s += fam.extensions;
  s += fam.defines;
  s += "\n";

  // Buffers: one per binding, with the dtype of its first use.
  std::vector<int> declared(sp.bindings, -1);
  const std::uint32_t out_binding = sp.out.operands[0].binding;
  bool out_read = false;
  for (std::size_t u = 1; u < uses.size(); ++u) out_read = out_read || uses[u].binding == out_binding;
  for (const use& u : uses) {
    if (declared[u.binding] >= 0) {
      if (dtype(declared[u.binding]) != u.type) {
        throw shader_error("kiln: one buffer read as two dtypes in one expression is not supported");
      }
      continue;
    }
    declared[u.binding] = static_cast<int>(u.type);
    const std::string b = std::to_string(u.binding);
    if (texel(u.binding)) {
      s += "layout(set = 0, binding = " + b + ") uniform usamplerBuffer kiln_t" + b + ";\n";
      continue;
    }
    const std::string qual = u.binding == out_binding ? (out_read ? "" : "writeonly ") : "readonly ";
    s += "layout(std430, set = 0, binding = " + b + ") " + qual + "buffer kiln_buf" + b + " { " +
         std::string(glsl_storage_type(u.type)) + " kiln_b" + b + "[]; };\n";
    if (vec_binding(u.binding)) {
      s += "layout(std430, set = 0, binding = " + b + ") " + qual + "buffer kiln_vbuf" + b + " { vec4 kiln_v" + b +
           "[]; };\n";
    }
  }
  s += fam.buffers;

  // Parameters: the family's block as its recording declared it (codegen/params.hpp).
  if (sp.params_buffer) {
    s += "\nlayout(std430, set = 0, binding = " + std::to_string(sp.bindings + fam.extra_bindings) +
         ") readonly buffer kiln_params {\n";
  } else {
    s += "\nlayout(push_constant) uniform kiln_params {\n";
  }
  const std::string members = params.glsl();
  s += members;
  if (!sp.lanes) {
    s += "} p;\n\n";
  } else {
    // lanes: `p` is a private copy of the block, made by kiln_copy_params() first thing.
    // lavapipe reloads a block member after every store to a buffer (they might alias),
    // once per element in the loops; a private copy stays in registers (softmax ~15%).
    s += "} kiln_pc;\n\nstruct kiln_param_copy {\n" + members + "};\nkiln_param_copy p;\n";
    s += "void kiln_copy_params() {\n  p = kiln_param_copy(" + params.names("kiln_pc.") + ");\n}\n\n";
  }

  std::vector<std::string> functions = pro.functions;
  for (const std::string& f : epi.functions)
    if (std::find(functions.begin(), functions.end(), f) == functions.end()) functions.push_back(f);
  for (const std::string& f : fam.functions)
    if (std::find(functions.begin(), functions.end(), f) == functions.end()) functions.push_back(f);
  for (const std::string& f : functions) s += f;
  if (pro.uses_f2i || epi.uses_f2i) s += f2i_glsl;
  if (b16) s += bf16_glsl;
  if (pro.uses_f16 || epi.uses_f16) s += f16_round_glsl;
  if (sp.texel_bindings) s += texel_glsl;
  auto row_bit = [](std::uint32_t mask, std::size_t o) { return o < 32 && (mask >> o) & 1u; };
  if (sp.lanes) {
    // The line's first position, and there the index of each operand read from its line's base.
    s += "uint kiln_row_pos;\n";
    for (std::size_t o = 1; o <= LI; ++o)
      if (row_bit(sp.in_rows, o)) s += "uint kiln_ib" + std::to_string(o) + ";\n";
    for (std::size_t o = 1; o <= LO; ++o)
      if (row_bit(sp.out_rows, o)) s += "uint kiln_ob" + std::to_string(o) + ";\n";
    s += "void kiln_row_begin(uint pos) {\n  kiln_row_pos = pos;\n";
    if (sp.in_rows) {
      s += "  {\n" + coordinates(sp.in, "i");
      for (std::size_t o = 1; o <= LI; ++o)
        if (row_bit(sp.in_rows, o)) s += "  kiln_ib" + std::to_string(o) + " = " + index_of(sp.in, o, "i") + ";\n";
      s += "  }\n";
    }
    if (sp.out_rows) {
      s += "  {\n" + coordinates(sp.out, "");
      for (std::size_t o = 1; o <= LO; ++o)
        if (row_bit(sp.out_rows, o)) s += "  kiln_ob" + std::to_string(o) + " = " + index_of(sp.out, o, "") + ";\n";
      s += "  }\n";
    }
    s += "}\n\n";
  }

  // The prologue: the input expression at input position pos.
  s += std::string(acc) + " kiln_prologue_compute(";
  bool first = true;
  for (std::size_t k = 0; k < LI; ++k) {
    if (sp.in.operands[1 + k].same_as >= 0) continue;
    s += std::string(first ? "" : ", ") + std::string(compute_type_of(sp.in.operands[1 + k].type)) + " l" + std::to_string(k);
    first = false;
  }
  s += ") {\n" + pro.body + "  return " + pro_result + ";\n}\n\n";
  s += std::string(acc) + " kiln_prologue(uint pos) {\n";
  if (any_strided(sp.in, 1)) s += coordinates(sp.in, "i");
  std::string call = "  return kiln_prologue_compute(";
  first = true;
  for (std::size_t q = 1; q <= LI; ++q) {
    if (sp.in.operands[q].same_as >= 0) continue;
    const std::string l = "l" + std::to_string(q - 1);
    s += "  " + std::string(compute_type_of(sp.in.operands[q].type)) + " " + l + " = " +
         load_one(sp.in.operands[q], index_of(sp.in, q, "i")) + ";\n";
    call += (first ? "" : ", ") + l;
    first = false;
  }
  s += call + ");\n}\n\n";
  // The prologue at the four input positions from pos on (pos % 4 == 0).
  if (sp.vec4) {
    s += "vec4 kiln_prologue4(uint pos) {\n";
    std::string args;
    first = true;
    for (std::size_t q = 1; q <= LI; ++q) {
      const operand_plan& op = sp.in.operands[q];
      if (op.same_as >= 0) continue;
      const std::string l = "l" + std::to_string(q - 1);
      const bool rows = row_bit(sp.in_rows, q), four = op.how == access::linear || rows;
      const std::string at = rows ? "kiln_ib" + std::to_string(q) + " + (pos - kiln_row_pos)" : index_of(sp.in, q, "i");
      s += std::string(four ? "  vec4 " : "  float ") + l + " = " + (four ? load_four(op, at) : load_one(op, at)) + ";\n";
      args += (first ? "" : ", ") + l + (four ? ".{c}" : "");
      first = false;
    }
    s += "  return " + four_calls("kiln_prologue_compute", args) + ";\n}\n\n";
  }

  // The epilogue: the output expression at output position pos, given the op's result.
  s += std::string(epi_type) + " kiln_epilogue_compute(";
  first = true;
  for (std::size_t k = 0; k < LO; ++k) {
    const auto& op = sp.out.operands[1 + k];
    if (op.same_as >= 0) continue;
    const std::string_view t = 1 + k == sp.value_operand ? result_type : compute_type_of(op.type);
    s += std::string(first ? "" : ", ") + std::string(t) + " l" + std::to_string(k);
    first = false;
  }
  s += ") {\n" + epi.body + "  return " + epi_result + ";\n}\n\n";
  s += "void kiln_epilogue(KILN_RESULT value, uint pos) {\n";
  if (any_strided(sp.out, 0)) s += coordinates(sp.out, "");
  call = "  " + std::string(epi_type) + " r = kiln_epilogue_compute(";
  first = true;
  for (std::size_t q = 1; q <= LO; ++q) {
    if (sp.out.operands[q].same_as >= 0) continue;
    if (q == sp.value_operand) {
      call += (first ? "value" : ", value");
    } else {
      const std::string l = "l" + std::to_string(q - 1);
      s += "  " + std::string(compute_type_of(sp.out.operands[q].type)) + " " + l + " = " +
           load(sp.out.operands[q], index_of(sp.out, q, "")) + ";\n";
      call += (first ? "" : ", ") + l;
    }
    first = false;
  }
  s += call + ");\n";
  s += "  kiln_b" + std::to_string(out_binding) + "[" + index_of(sp.out, 0, "") +
       "] = " + glsl_store(sp.out.operands[0].type, epi_type, "r") + ";\n}\n\n";
  // The epilogue at the four output positions from pos on (pos % 4 == 0), f32 output.
  if (sp.vec4 && sp.row_op) {
    s += "void kiln_epilogue4(vec4 value, uint pos) {\n";
    std::string args;
    first = true;
    for (std::size_t q = 1; q <= LO; ++q) {
      const operand_plan& op = sp.out.operands[q];
      if (op.same_as >= 0) continue;
      if (q == sp.value_operand) {
        args += first ? "value.{c}" : ", value.{c}";
      } else {
        const std::string l = "l" + std::to_string(q - 1);
        const bool rows = row_bit(sp.out_rows, q), four = op.how == access::linear || rows;
        const std::string at = rows ? "kiln_ob" + std::to_string(q) + " + (pos - kiln_row_pos)" : index_of(sp.out, q, "");
        s += std::string(four ? "  vec4 " : "  float ") + l + " = " + (four ? load_four(op, at) : load_one(op, at)) + ";\n";
        args += (first ? "" : ", ") + l + (four ? ".{c}" : "");
      }
      first = false;
    }
    s += "  kiln_v" + std::to_string(out_binding) + "[(" + index_of(sp.out, 0, "") +
         ") >> 2] = " + four_calls("kiln_epilogue_compute", args) + ";\n}\n\n";
  }

  // Op hooks.
  s += fam.hooks;
  s += "\n";
  for (std::string_view t : templates) s += t;
  return structural_source{std::move(s), std::move(readable), sp, {}};
}

namespace structural_detail {

KILN_DECL std::uint32_t binder::operator()(const void* st) {
  for (std::size_t b = 0; b < storages.size(); ++b)
    if (storages[b] == st) return static_cast<std::uint32_t>(b);
  storages.push_back(st);
  return static_cast<std::uint32_t>(storages.size() - 1);
}

}  // namespace structural_detail

KILN_DECL std::string structural_kernel_name(std::string_view op, const std::string& glsl) {
  char name[48];
  std::snprintf(name, sizeof name, "%.24s_%016llx", std::string(op).c_str(), static_cast<unsigned long long>(fnv1a(glsl)));
  return name;
}

KILN_DECL std::string structural_walk::name(std::string_view op) const {
  return "vulkan." + std::string(op) + (mode == structural_mode::columns ? ".columns" : split_pass ? ".rows split" : ".rows");
}

KILN_DECL void plan_lane_steps(structural_plan& plan, const structural_detail::operand_fact* fin,
                               const structural_detail::operand_fact* fout, index_t extent, const device_caps& dev,
                               bool params_four, std::uint32_t in_rows, std::uint32_t out_rows) {
  auto four = [](const operand_plan& op, const structural_detail::operand_fact& f, bool rows) {
    return op.type == dtype::f32 &&
           (op.how == access::constant || (op.how == access::linear && f.offset % 4 == 0) || (op.how == access::strided && rows));
  };
  bool v = extent % 4 == 0 && plan.acc_float;
  for (std::size_t o = 1; o < plan.in.operands.size() && v; ++o) v = four(plan.in.operands[o], fin[o], (in_rows >> o) & 1u);
  if (plan.row_op) {
    v = v && plan.out.operands[0].how == access::linear && plan.out.operands[0].type == dtype::f32 && fout[0].offset % 4 == 0;
    for (std::size_t o = 1; o < plan.out.operands.size() && v; ++o)
      v = o == plan.value_operand || four(plan.out.operands[o], fout[o], (out_rows >> o) & 1u);
  }
  if (v) {
    for (std::size_t o = 1; o < plan.in.operands.size(); ++o)
      if (plan.in.operands[o].how == access::strided) plan.in_rows |= 1u << o;
    for (std::size_t o = 1; o < plan.out.operands.size() && plan.row_op; ++o)
      if (plan.out.operands[o].how == access::strided) plan.out_rows |= 1u << o;
  }
  plan.vec4 = v;
  plan.params_vec4 = v && params_four && !plan.params.empty();
  if (!v || !dev.texel_reads) return;
  std::uint32_t count = 0;
  for (std::uint32_t b = 0; b < plan.bindings && b < 32; ++b) {
    bool only_in = b != plan.out.operands[0].binding, used = false;
    for (std::size_t o = 1; o < plan.out.operands.size(); ++o)
      only_in = only_in && (o == plan.value_operand || plan.out.operands[o].binding != b);
    for (const operand_plan& q : plan.params) {
      only_in = only_in && (q.binding != b || (plan.params_vec4 && q.type == dtype::f32));
      used = used || q.binding == b;
    }
    for (std::size_t o = 1; o < plan.in.operands.size(); ++o) used = used || plan.in.operands[o].binding == b;
    if (only_in && used && (dev.max_texel_buffers == 0 || count < dev.max_texel_buffers)) {
      plan.texel_bindings |= 1u << b;
      ++count;
    }
  }
}

}  // namespace kiln::detail::vk
