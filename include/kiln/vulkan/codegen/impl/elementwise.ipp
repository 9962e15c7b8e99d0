// kiln/vulkan/codegen/impl/elementwise.ipp — definitions of kiln/vulkan/codegen/elementwise.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/codegen/elementwise.hpp"

namespace kiln::detail::vk {

KILN_DECL kernel_source assemble(const kernel_plan& plan, const emitter& em, const param_block& params, std::string readable,
                                 const std::string& result, std::string_view result_type) {
  const std::size_t L = plan.operands.size() - 1;

  bool f16 = em.uses_f16, b16 = em.uses_bf16, i8 = false;  // casts inside need them too
  for (const auto& op : plan.operands) {
    f16 = f16 || op.type == dtype::f16;
    b16 = b16 || op.type == dtype::bf16;
    i8 = i8 || op.type == dtype::i8 || op.type == dtype::u8;
  }
  const bool any_strided = [&] {
    for (const auto& op : plan.operands)
      if (op.how == access::strided) return true;
    return false;
  }();

  std::string s;
  s += "#version 450\n";
  s += "// kiln generated kernel: " + readable + "\n";
  s += "// operands: out " + std::string(name(plan.operands[0].type));
  for (std::size_t k = 0; k < L; ++k) {
    s += ", " + emitter::leaf_name(k) + " " + std::string(name(plan.operands[1 + k].type));
  }
  s += "; rank " + std::to_string(plan.rank) + (plan.wide ? "; 8 per step (u64vec4)" : plan.vec4 ? "; vec4" : "") +
       (plan.texel_bindings ? "; texel reads" : "") + (plan.params_buffer ? "; parameter buffer" : "") + "\n";
  if (plan.wide) s += "#extension GL_ARB_gpu_shader_int64 : require\n";
  if (f16 || b16) s += "#extension GL_EXT_shader_16bit_storage : require\n";
  // 16-bit values are only loaded, stored and converted (16-bit storage), never computed
  // with: no Float16/Int16 arithmetic capability is needed from the device.
  if (i8) {
    s += "#extension GL_EXT_shader_8bit_storage : require\n";
    s += "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n";
  }
  s += "layout(local_size_x_id = 0) in;\n\n";

  // Buffers: one per binding; declared with the first operand's dtype using it.
  std::vector<bool> declared(plan.bindings, false);
  for (std::size_t o = 0; o <= L; ++o) {
    const auto& op = plan.operands[o];
    if (declared[op.binding]) continue;
    declared[op.binding] = true;
    const std::string b = std::to_string(op.binding);
    if (texel_binding(plan, op.binding)) {
      s += "layout(set = 0, binding = " + b + ") uniform usamplerBuffer kiln_t" + b + ";\n";
      continue;
    }
    std::string qual = "readonly ";
    if (op.binding == plan.operands[0].binding) {
      qual = "writeonly ";
      for (std::size_t q = 1; q <= L; ++q)
        if (plan.operands[q].binding == op.binding) qual = "";  // read in place too
    }
    const std::string_view st = glsl_storage_type(op.type);
    s += "layout(std430, set = 0, binding = " + b + ") " + qual + "buffer kiln_buf" + b + " { " + std::string(st) +
         " kiln_b" + b + "[]; };\n";
    bool vector_read = false;  // a linear operand on this binding is read or written as vec4
    for (std::size_t q = 0; q <= L; ++q)
      vector_read = vector_read || (plan.operands[q].binding == op.binding && plan.operands[q].how == access::linear);
    if (plan.vec4 && vector_read) {
      const std::string vt = plan.wide ? "u64vec4" : op.type == dtype::f32 ? "vec4" : op.type == dtype::i32 ? "ivec4" : "f16vec4";
      s += "layout(std430, set = 0, binding = " + b + ") " + qual + "buffer kiln_vbuf" + b + " { " + vt + " kiln_v" +
           b + "[]; };\n";
    }
  }
  // Leaves of another dtype on a shared binding need their own (aliased) declaration.
  for (std::size_t o = 1; o <= L; ++o) {
    const auto& op = plan.operands[o];
    for (std::size_t q = 0; q < o; ++q) {
      if (plan.operands[q].binding == op.binding && plan.operands[q].type != op.type) {
        throw shader_error("kiln: one buffer read as two dtypes in one expression is not supported");
      }
    }
  }

  // Parameters (make_params: element count, per-operand offsets, extents and strides of
  // strided operands, the scalars) in push constants, or the same members in a storage
  // buffer after the operands' bindings, when they do not fit (std430 gives scalars the
  // same offsets).
  if (plan.params_buffer) {
    s += "\nlayout(std430, set = 0, binding = " + std::to_string(plan.bindings) + ") readonly buffer kiln_params {\n";
  } else {
    s += "\nlayout(push_constant) uniform kiln_params {\n";
  }
  s += params.glsl();
  s += "} p;\n\n";

  for (const std::string& f : em.functions) s += f;
  if (plan.wide) s += wide_glsl;
  if (plan.texel_bindings) s += texel_glsl;
  if (em.uses_f2i) s += f2i_glsl;
  if (b16) s += bf16_glsl;
  if (em.uses_f16) s += f16_round_glsl;

  // kiln_compute: the expression for one element, from its (unique) leaf values.
  s += std::string(result_type) + " kiln_compute(";
  bool first = true;
  for (std::size_t k = 0; k < L; ++k) {
    if (plan.operands[1 + k].same_as < 0) {
      s += std::string(first ? "" : ", ") + std::string(compute_type_of(plan.operands[1 + k].type)) + " l" + std::to_string(k);
      first = false;
    }
  }
  s += ") {\n" + em.body + "  return " + result + ";\n}\n\n";

  // Index of operand o for output element i (text), and the list of unique leaves.
  auto index_of = [&](std::size_t o, const std::string& i) -> std::string {
    const std::string off = "p.off" + std::to_string(o);
    switch (plan.operands[o].how) {
      case access::linear: return off + " + " + i;
      case access::constant: return off;
      case access::strided: {
        std::string e = "uint(int(" + off + ")";
        for (int d = 0; d < plan.rank; ++d) {
          e += " + int(c" + std::to_string(d) + ") * p.st" + std::to_string(o) + "_" + std::to_string(d);
        }
        return e + ")";
      }
    }
    return off;
  };
  std::vector<std::size_t> unique;
  for (std::size_t q = 1; q <= L; ++q)
    if (plan.operands[q].same_as < 0) unique.push_back(q);
  // One element of leaf q at index `at`, as its compute type.
  auto read_one = [&](std::size_t q, const std::string& at) -> std::string {
    const auto& op = plan.operands[q];
    const std::string b = std::to_string(op.binding);
    if (texel_binding(plan, op.binding)) {
      const std::string u = "kiln_texel(kiln_t" + b + ", " + at + ")";
      return op.type == dtype::i32 ? "int(" + u + ")" : "uintBitsToFloat(" + u + ")";
    }
    return glsl_load(op.type, "kiln_b" + b + "[" + at + "]");
  };

  s += "void main() {\n";
  if (!plan.single_step) s += "  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;\n";
  if (plan.vec4) {
    // W elements per step: one vec4 (W = 4), or one u64vec4 read as two vec4 halves (W = 8)
    const std::string ws = std::to_string(step_width(plan)) + "u";
    const std::vector<std::string> halves = plan.wide ? std::vector<std::string>{"v", "h"} : std::vector<std::string>{"v"};
    auto vec_type = [](dtype t) { return std::string(t == dtype::i32 ? "ivec4" : "vec4"); };
    s += "  uint quads = p.n / " + ws + ";\n";
    // constant leaves (one element for the whole dispatch) are read once
    for (std::size_t q : unique) {
      const auto& op = plan.operands[q];
      if (op.how != access::constant) continue;
      s += "  " + std::string(compute_type_of(op.type)) + " l" + std::to_string(q - 1) + "s = " +
           read_one(q, "p.off" + std::to_string(q)) + ";\n";
    }
    s += plan.single_step ? "  uint q = gl_GlobalInvocationID.x;\n  if (q < quads) {\n"
                          : "  for (uint q = gl_GlobalInvocationID.x; q < quads; q += step) {\n";
    for (std::size_t q : unique) {
      const auto& op = plan.operands[q];
      if (op.how == access::constant) continue;
      const std::string b = std::to_string(op.binding), o = std::to_string(q), l = "l" + std::to_string(q - 1);
      const std::string at = "kiln_v" + b + "[p.off" + o + " / " + ws + " + q]";
      if (texel_binding(plan, op.binding)) {
        // one texel (four elements) a fetch: two for the wide variant's eight
        const std::string cast = op.type == dtype::i32 ? "ivec4" : "uintBitsToFloat";
        auto fetch = [&](const std::string& k) {
          return cast + "(texelFetch(kiln_t" + b + ", int(p.off" + o + " / 4u + " + k + ")))";
        };
        if (plan.wide) {
          s += "    " + vec_type(op.type) + " " + l + "v = " + fetch("2u * q") + ",\n";
          s += "         " + std::string(vec_type(op.type).size() - 4, ' ') + l + "h = " + fetch("2u * q + 1u") + ";\n";
        } else {
          s += "    " + vec_type(op.type) + " " + l + "v = " + fetch("q") + ";\n";
        }
      } else if (plan.wide) {
        const std::string unpack = op.type == dtype::i32 ? "kiln_i32x4" : "kiln_f32x4";
        s += "    u64vec4 " + l + "w = " + at + ";\n";
        s += "    " + vec_type(op.type) + " " + l + "v = " + unpack + "(" + l + "w.xy), " + l + "h = " + unpack + "(" + l +
             "w.zw);\n";
      } else {
        s += "    " + vec_type(op.type) + " " + l + "v = " + vec_type(op.type) + "(" + at + ");\n";
      }
    }
    const std::string out_vt = vec_type(plan.operands[0].type);
    auto result_of = [&](const std::string& half) { return plan.wide ? "r" + half : std::string("r"); };
    s += "    " + out_vt + (plan.wide ? " rv, rh;\n" : " r;\n");
    // Explicit calls per component, not a loop over r[k]: lavapipe keeps such a loop
    // (indexing a vector with a variable), which made the fused gelu chain ~1.4x slower there.
    for (const std::string& half : halves) {
      for (const char* comp : {"x", "y", "z", "w"}) {
        s += "    " + result_of(half) + "." + comp + " = kiln_compute(";
        for (std::size_t u = 0; u < unique.size(); ++u) {
          const std::size_t q = unique[u];
          s += (u ? ", " : "") + ("l" + std::to_string(q - 1)) +
               (plan.operands[q].how == access::constant ? std::string("s") : half + "." + comp);
        }
        s += ");\n";
      }
    }
    const std::string b0 = std::to_string(plan.operands[0].binding);
    const std::string pack = plan.operands[0].type == dtype::i32 ? "kiln_pack_i32x4" : "kiln_pack_f32x4";
    const std::string store = plan.wide ? "u64vec4(" + pack + "(rv), " + pack + "(rh))"
                              : plan.operands[0].type == dtype::f16 ? "f16vec4(r)" : "r";
    s += "    kiln_v" + b0 + "[p.off0 / " + ws + " + q] = " + store + ";\n  }\n";
    // Sizes that are a whole number of steps get no tail code: lavapipe runs an `if` body
    // masked in every invocation, and the tail's made the fused gelu chain ~25% slower.
    if (!plan.tail) {
      s += "}\n";
      return kernel_source{std::move(s), std::move(readable), plan, {}};
    }
    s += "  uint tail = quads * " + ws + " + gl_GlobalInvocationID.x;\n";
    s += "  if (gl_GlobalInvocationID.x < p.n % " + ws + ") {\n    uint i = tail;\n";
  } else {
    s += plan.single_step ? "  uint i = gl_GlobalInvocationID.x;\n  if (i < p.n) {\n"
                          : "  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += step) {\n";
  }
  if (any_strided) {
    s += "    uint rest = i;\n";
    for (int d = plan.rank - 1; d >= 0; --d) {
      const std::string ds = std::to_string(d);
      if (d > 0) s += "    uint c" + ds + " = rest % p.ext" + ds + "; rest /= p.ext" + ds + ";\n";
      else s += "    uint c0 = rest;\n";
    }
  }
  for (std::size_t q : unique) {
    const auto& op = plan.operands[q];
    if (plan.vec4 && op.how == access::constant) continue;  // read before the loop
    s += "    " + std::string(compute_type_of(op.type)) + " l" + std::to_string(q - 1) + " = " + read_one(q, index_of(q, "i")) + ";\n";
  }
  s += "    " + std::string(result_type) + " r = kiln_compute(";
  for (std::size_t u = 0; u < unique.size(); ++u) {
    const bool hoisted = plan.vec4 && plan.operands[unique[u]].how == access::constant;
    s += (u ? ", l" : "l") + std::to_string(unique[u] - 1) + (hoisted ? "s" : "");
  }
  s += ");\n";
  s += "    kiln_b" + std::to_string(plan.operands[0].binding) + "[" + index_of(0, "i") +
       "] = " + glsl_store(plan.operands[0].type, result_type, "r") + ";\n";
  s += "  }\n}\n";

  return kernel_source{std::move(s), std::move(readable), plan, {}};
}

}  // namespace kiln::detail::vk
