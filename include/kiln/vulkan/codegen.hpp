// kiln/vulkan/codegen.hpp — an expression tree -> one GLSL compute shader.
//
// Pure text generation (no Vulkan headers), so it is tested without a device. The
// generated source depends only on what must be compiled in: the expression's types and
// op bodies, the collapsed rank, how each operand is indexed (linear, constant or
// strided), which leaves share a buffer or a whole view, and the vector variant. Everything
// else — element count, offsets, extents, strides and scalar values — goes into push
// constants, so new sizes and scalar values reuse the compiled kernel. The source is the
// cache key.
//
// Shader shape: bindings 0..B-1 are the distinct buffers (the output first); one push
// constant block; `kiln_compute(leaves...)` is the expression for one element (each op one
// statement, repeated sub-expressions computed once); main() runs a grid-stride loop, one
// element per step, or four (vec4 loads/stores) when every operand is linear and aligned,
// or eight when moreover every operand is 32-bit, 8-element aligned and the device has
// 64-bit integers: each step then moves 32 bytes per operand as one u64vec4 (bit-cast to
// two vec4s). A driver that loads and stores lane by lane (lavapipe: one scalar access per
// invocation and component) then does half the accesses: the fused gelu chain runs ~1.4x
// and a copy ~1.6x faster there; on a GPU it is two 16-byte accesses per invocation.
// Texel reads (plan_options::texel_reads, chosen by the context): in the vector variants,
// a binding only read, by 32-bit leaves, becomes a uniform texel buffer (an R32G32B32A32_UINT
// view of the tensor's memory) read with texelFetch, bit-cast to float or int. lavapipe
// serves a texel fetch as one SIMD gather per component, a storage-buffer load lane by
// lane: with the two points below, the fused gelu chain runs ~1.9x faster there.
// Single step (plan_options::max_invocations): when one dispatch can give every step an
// invocation of its own, main() is straight-line code under one `if` instead of the
// grid-stride loop. lavapipe pays for the loop's structure even at one iteration (the
// fused gelu chain: ~1.15x faster without it). Sizes that are a whole number of vector
// steps get no tail code at all (kernel_plan::tail; another ~1.25x there).
// Many operands (plan_options' limits, the device's): parameters that do not fit in push
// constants go to a storage buffer bound after the operands (same members, same std430
// offsets, so make_args serves both); inputs beyond the device's storage-buffer
// descriptors are read through texel views in any variant, where every input has one.
#pragma once

#include <algorithm>
#include <bit>  // std::bit_cast
#include <climits>
#include <cstdio>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/detail/disk_cache.hpp"
#include "kiln/expr/glsl.hpp"
#include "kiln/expr/layout.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/traverse.hpp"

namespace kiln::detail::vk {

/// How generated code indexes an operand, given the output's linear index i.
enum class access : std::uint8_t {
  linear,    // element offset + i
  constant,  // one element for the whole statement (stride 0 everywhere)
  strided,   // offset + sum(index_d * stride_d) over the collapsed dimensions
};

/// One operand (output first, then leaves in for_each_leaf order) as the shader sees it.
struct operand_plan {
  dtype type = dtype::f32;
  std::uint32_t binding = 0;  // buffer binding (operands sharing storage share it)
  access how = access::linear;
  int same_as = -1;           // leaves only: an earlier leaf reading the very same view
};

/// What a kernel is compiled for (everything but the values that go in push constants).
struct kernel_plan {
  int rank = 1;                       // collapsed rank
  bool vec4 = false;                  // four elements per step, vec4 loads and stores
  bool wide = false;                  // (with vec4) eight per step: u64vec4 loads and stores
  std::vector<operand_plan> operands; // [0] output, [1..] leaves
  std::uint32_t bindings = 0;
  std::uint32_t texel_bindings = 0;   // bit b: binding b is read through a uniform texel buffer
  bool single_step = false;           // one step per invocation: no grid-stride loop
  bool tail = true;                   // (vector variants) the element count is not a whole number of steps
  bool params_buffer = false;         // parameters in a storage buffer at binding `bindings`, not push constants
};

/// Bindings a texel_bindings mask can name (kernel_spec carries it as 32 bits).
inline constexpr std::uint32_t max_texel_binding = 32;

/// Elements one step of a kernel of `plan` handles: 8 (wide), 4 (vec4) or 1.
inline unsigned step_width(const kernel_plan& plan) { return plan.wide ? 8u : plan.vec4 ? 4u : 1u; }

/// Invocations a kernel of `plan` needs over `elements` output elements when single_step:
/// one per step, and one per tail element.
inline std::uint64_t invocations_needed(const kernel_plan& plan, std::uint64_t elements) {
  const std::uint64_t w = step_width(plan);
  return std::max(elements / w, elements % w);
}

/// What the device and context allow a plan to use.
struct plan_options {
  bool int64 = false;        // shaderInt64: the wide variant
  bool texel_reads = false;  // every operand's storage has a texel view: read inputs through it
  std::uint64_t max_invocations = 0;  // invocations one dispatch can run (0: always the loop)
  // The device's limits per kernel (0: none, as for codegen tests):
  std::uint32_t max_push_bytes = 0;       // beyond: the parameters go to a storage buffer
  std::uint32_t max_storage_buffers = 0;  // beyond: inputs are read through texel views (texel_views)
  std::uint32_t max_texel_buffers = 0;    // uniform texel buffers
  bool texel_views = false;  // every input can be read through a texel view, should the storage buffers run out
};

/// Words (32-bit) of a kernel's parameters: the element count, an offset per operand, for
/// strided plans the extents and each strided operand's strides, then the scalars.
inline std::size_t param_words(const kernel_plan& plan, std::size_t scalars) {
  std::size_t strided = 0;
  for (const auto& op : plan.operands) strided += op.how == access::strided;
  const std::size_t r = static_cast<std::size_t>(plan.rank);
  return 1 + plan.operands.size() + (strided ? r + strided * r : 0) + scalars;
}

/// Whether plan reads binding b through a uniform texel buffer.
inline bool texel_binding(const kernel_plan& plan, std::uint32_t b) {
  return b < max_texel_binding && (plan.texel_bindings >> b) & 1u;
}

/// Storage-buffer descriptors a kernel of plan binds (its parameter buffer included).
inline std::uint32_t storage_buffers(const kernel_plan& plan) {
  return plan.bindings - static_cast<std::uint32_t>(std::popcount(plan.texel_bindings)) + (plan.params_buffer ? 1u : 0u);
}

/// Everything but the source: the runtime values for one dispatch.
struct kernel_args {
  std::vector<std::uint32_t> push;  // the push-constant block, word by word
  std::uint64_t elements = 0;       // output elements
};

/// A generated kernel.
struct kernel_source {
  std::string glsl;        // the cache key
  std::string expression;  // e.g. "gelu(add(mul(a, b), c))"
  kernel_plan plan;
  std::string name;        // "fused_<hash of glsl>", the kernel's name in errors and on disk
};

inline std::string_view glsl_storage_type(dtype t) {
  switch (t) {
    case dtype::f32: return "float";
    case dtype::f16: return "float16_t";
    case dtype::bf16: return "uint16_t";
    case dtype::i8: return "int8_t";
    case dtype::i32: return "int";
    case dtype::u8: return "uint8_t";
    case dtype::mask: break;
  }
  return "uint8_t";
}

/// GLSL type a stored dtype computes in.
constexpr std::string_view compute_type_of(dtype t) {
  return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16 ? "float" : "int";
}

template <class T>
constexpr std::string_view glsl_compute_type() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (is_floating_v<T>) return "float";
  else return "int";
}

/// GLSL expression converting a stored value (text `x`) of dtype t to its compute type.
inline std::string glsl_load(dtype t, const std::string& x) {
  switch (t) {
    case dtype::f32:
    case dtype::i32: return x;
    case dtype::f16: return "float(" + x + ")";
    case dtype::bf16: return "uintBitsToFloat(uint(" + x + ") << 16)";
    case dtype::i8:
    case dtype::u8: return "int(" + x + ")";
    case dtype::mask: break;
  }
  return x;
}

/// GLSL expression converting compute value `v` (of GLSL type `from`) to dtype t's storage.
inline std::string glsl_store(dtype t, std::string_view from, const std::string& v) {
  const std::string x = from == "bool" ? "(" + v + " ? 1 : 0)" : v;
  switch (t) {
    case dtype::f32:
    case dtype::i32: return x;
    case dtype::f16: return "float16_t(" + x + ")";
    case dtype::bf16: return "uint16_t(kiln_to_bf16(" + x + "))";
    case dtype::i8: return "int8_t(" + x + ")";
    case dtype::u8: return "uint8_t(" + x + ")";
    case dtype::mask: break;
  }
  return x;
}

inline constexpr std::string_view bf16_glsl = R"(uint kiln_to_bf16(float v) {
  uint x = floatBitsToUint(v);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}
)";

/// The wide variant's bit casts: a u64vec2 (from a u64vec4 load) <-> four 32-bit lanes.
inline constexpr std::string_view wide_glsl = R"(vec4 kiln_f32x4(u64vec2 w) { return uintBitsToFloat(uvec4(unpackUint2x32(w.x), unpackUint2x32(w.y))); }
ivec4 kiln_i32x4(u64vec2 w) { return ivec4(uvec4(unpackUint2x32(w.x), unpackUint2x32(w.y))); }
u64vec2 kiln_pack_f32x4(vec4 v) { uvec4 u = floatBitsToUint(v); return u64vec2(packUint2x32(u.xy), packUint2x32(u.zw)); }
u64vec2 kiln_pack_i32x4(ivec4 v) { uvec4 u = uvec4(v); return u64vec2(packUint2x32(u.xy), packUint2x32(u.zw)); }
)";

/// Texel reads: element e of a texel-read binding (four 32-bit elements a texel).
inline constexpr std::string_view texel_glsl = R"(uint kiln_texel(usamplerBuffer t, uint e) { return texelFetch(t, int(e >> 2u))[e & 3u]; }
)";

/// Saturating float -> integer (truncate toward zero; NaN -> 0), as detail::convert_value.
inline constexpr std::string_view f2i_glsl = R"(int kiln_f2i(float v, float lo, float hi) {
  if (isnan(v)) return 0;
  if (hi > 2147483000.0 && v >= 2147483648.0) return 2147483647;  // int32: its max is not a float
  return int(clamp(v, lo, hi));
}
)";

/// Accumulates the body of kiln_compute while walking the tree.
class emitter {
 public:
  explicit emitter(const kernel_plan& plan) : plan_(plan) {}

  std::string body;       // statements of kiln_compute
  std::string expression; // readable form
  std::vector<std::string> scalar_types;  // GLSL type of each push-constant scalar
  std::vector<std::string> functions;  // GLSL helper functions the ops declare, each once
  bool uses_f2i = false, uses_f16 = false, uses_bf16 = false;

  template <class N>
  std::string emit(const N& n, std::string& readable) {
    if constexpr (requires { n.t; }) {
      const std::size_t k = next_leaf_++;
      const int same = plan_.operands[1 + k].same_as;
      const std::size_t id = same >= 0 ? std::size_t(same) : k;
      readable = leaf_name(id);
      return "l" + std::to_string(id);
    } else if constexpr (requires { n.value; }) {
      using V = typename N::value_type;
      const std::size_t j = scalar_types.size();
      scalar_types.emplace_back(glsl_compute_type<V>());
      readable = "s" + std::to_string(j);
      return "p.s" + std::to_string(j);
    } else if constexpr (requires { n.arg; }) {
      using To = typename N::value_type;
      using From = typename N::from_type;
      std::string inner_r;
      const std::string a = emit(n.arg, inner_r);
      readable = "cast<" + std::string(dtype_name_v<To>) + ">(" + inner_r + ")";
      return define(std::string(glsl_compute_type<To>()), cast_text<To, From>(a));
    } else {
      // Only the walk over the children is per expression type; the text work is emit_op's.
      using Op = typename N::op_type;
      constexpr std::size_t arity = std::tuple_size_v<decltype(n.args)>;
      std::vector<std::string> args(arity), names(arity);
      std::string_view arg_types[arity];
      std::size_t i = 0;
      std::apply(
          [&](const auto&... c) {
            ((args[i] = emit(c, names[i]),
              arg_types[i] = glsl_compute_type<typename std::remove_cvref_t<decltype(c)>::value_type>(), ++i),
             ...);
          },
          n.args);
      return emit_op(op_text_of<Op>(), glsl_compute_type<typename N::value_type>(), args, names,
                     std::span<const std::string_view>(arg_types, arity), readable);
    }
  }

  /// What the emitter needs of an op type, as values.
  struct op_text {
    std::string_view name, glsl, glsl_int;  // glsl_int empty: glsl serves ints too
    std::size_t conditions;                 // leading operands read as bool (where's mask)
    std::vector<std::string> (*functions)();
  };
  template <class Op>
  static op_text op_text_of() {
    std::string_view int_body;
    if constexpr (requires { Op::glsl_int; }) int_body = Op::glsl_int;
    return {Op::name, Op::glsl, int_body, condition_operands<Op>(), &glsl_functions_of<Op>};
  }

  std::string emit_op(const op_text& op, std::string_view type, std::vector<std::string>& args,
                      const std::vector<std::string>& names, std::span<const std::string_view> arg_types,
                      std::string& readable) {
    readable = std::string(op.name) + "(";
    for (std::size_t i = 0; i < names.size(); ++i) readable += (i ? ", " : "") + names[i];
    readable += ")";
    for (std::size_t i = 0; i < op.conditions && i < args.size(); ++i) {
      if (arg_types[i] != "bool") args[i] = "(" + args[i] + " != 0)";
    }
    // the operand type decides int vs float spelling (comparisons yield bool)
    const std::string_view operand_type = arg_types.empty() ? "float" : arg_types.back();
    const std::string_view body_text = operand_type == "int" && !op.glsl_int.empty() ? op.glsl_int : op.glsl;
    const std::string text = substitute(body_text, args, operand_type);
    for (std::string& f : op.functions()) {
      if (std::find(functions.begin(), functions.end(), f) == functions.end()) functions.push_back(std::move(f));
    }
    return define(std::string(type), text);
  }

  static std::string leaf_name(std::size_t id) {
    std::string s;
    do {
      s.insert(s.begin(), char('a' + id % 26));
      id /= 26;
    } while (id-- > 0);
    return s;
  }

 private:
  std::string define(const std::string& type, const std::string& text) {
    const std::string key = type + " " + text;
    if (auto it = cse_.find(key); it != cse_.end()) return it->second;  // computed once
    const std::string name = "v" + std::to_string(cse_.size());
    body += "  " + type + " " + name + " = " + text + ";\n";
    cse_.emplace(key, name);
    return name;
  }

  static std::string substitute(std::string_view body, const std::vector<std::string>& args, std::string_view type) {
    std::string out;
    for (std::size_t i = 0; i < body.size(); ++i) {
      if (body[i] == '{') {
        const std::size_t close = body.find('}', i);
        if (close == std::string_view::npos) throw shader_error("kiln: unbalanced '{' in an op's glsl body: " + std::string(body));
        const std::string_view tag = body.substr(i + 1, close - i - 1);
        if (tag == "T") {
          out += type;
        } else {
          const std::size_t k = static_cast<std::size_t>(std::stoul(std::string(tag)));
          if (k >= args.size()) {
            throw shader_error("kiln: op glsl body refers to {" + std::string(tag) + "} but has " +
                               std::to_string(args.size()) + " operands: " + std::string(body));
          }
          out += args[k];
        }
        i = close;
      } else {
        out += body[i];
      }
    }
    return out;
  }

  template <class To, class From>
  std::string cast_text(const std::string& a) {
    if constexpr (std::is_same_v<From, bool>) {
      return "(" + a + " ? " + (is_floating_v<To> ? "1.0" : "1") + " : " + (is_floating_v<To> ? "0.0" : "0") + ")";
    } else if constexpr (std::is_same_v<To, float>) {
      return "float(" + a + ")";
    } else if constexpr (std::is_same_v<To, half>) {
      uses_f16 = true;
      return "unpackHalf2x16(packHalf2x16(vec2(float(" + a + "), 0.0))).x";
    } else if constexpr (std::is_same_v<To, bfloat16>) {
      uses_bf16 = true;
      return "uintBitsToFloat(kiln_to_bf16(float(" + a + ")) << 16)";
    } else if constexpr (is_floating_v<From>) {
      uses_f2i = true;
      return "kiln_f2i(" + a + ", " + float_literal(int_lo<To>()) + ", " + float_literal(int_hi<To>()) + ")";
    } else if constexpr (std::is_same_v<To, std::int8_t>) {
      return "int(int8_t(" + a + "))";
    } else if constexpr (std::is_same_v<To, std::uint8_t>) {
      return "int(uint8_t(" + a + "))";
    } else {
      return a;
    }
  }

  static std::string float_literal(float v) { return std::to_string(static_cast<double>(v)); }

  const kernel_plan& plan_;
  std::size_t next_leaf_ = 0;
  std::map<std::string, std::string> cse_;
};

/// Chooses how each operand is indexed, which leaves share bindings and views, and
/// whether the vec4 variant applies. Operand o (0 = output) lives in storage[o] and reads
/// views[o]: operands with one storage share a buffer, and those that also have one
/// dtype, offset and view read the very same elements; `scalars` is the expression's
/// number of scalars (parameters too). A template over the operand count only (no
/// per-expression callbacks), so statements share its code.
template <std::size_t L>
kernel_plan make_plan(const iteration_layout<L>& lay, const dtype (&types)[L + 1], const index_t (&offsets)[L + 1],
                      const void* const (&storage)[L + 1], const strides (&views)[L + 1], plan_options opt = {},
                      std::size_t scalars = 0) {
  auto same_storage = [&](std::size_t a, std::size_t b) { return storage[a] == storage[b]; };
  auto same_view = [&](std::size_t a, std::size_t b) {
    return storage[a] == storage[b] && types[a] == types[b] && offsets[a] == offsets[b] && views[a] == views[b];
  };
  kernel_plan plan;
  plan.rank = lay.rank;
  plan.operands.resize(L + 1);
  for (std::size_t o = 0; o <= L; ++o) {
    auto& op = plan.operands[o];
    op.type = types[o];
    if (lay.constant(o) && o > 0) {
      op.how = access::constant;
    } else {
      bool linear = true;
      index_t expect = 1;
      for (int d = lay.rank - 1; d >= 0 && linear; --d) {
        linear = lay.extent[d] == 1 || lay.stride[o][d] == expect;
        expect *= lay.extent[d];
      }
      op.how = linear ? access::linear : access::strided;
    }
    op.binding = plan.bindings;
    for (std::size_t q = 0; q < o; ++q) {
      if (same_storage(q, o)) {
        op.binding = plan.operands[q].binding;
        break;
      }
    }
    if (op.binding == plan.bindings) ++plan.bindings;
    if (o > 0) {
      for (std::size_t q = 1; q < o; ++q) {
        if (plan.operands[q].same_as < 0 && same_view(q, o)) {
          op.same_as = static_cast<int>(q - 1);
          break;
        }
      }
    }
  }
  // vec4: every operand linear or constant, 4-element aligned, of a dtype with a vec4 form
  bool v4 = true;
  for (std::size_t o = 0; o <= L && v4; ++o) {
    const auto& op = plan.operands[o];
    const bool vec_type = op.type == dtype::f32 || op.type == dtype::i32 || op.type == dtype::f16;
    v4 = op.how == access::constant || (op.how == access::linear && vec_type && offsets[o] % 4 == 0);
  }
  plan.vec4 = v4 && types[0] != dtype::u8;
  // wide: moreover 32-bit and 8-element aligned (u64vec4 = 32 bytes), on a device with int64
  bool w = plan.vec4 && opt.int64;
  for (std::size_t o = 0; o <= L && w; ++o) {
    const auto& op = plan.operands[o];
    w = op.how == access::constant || ((op.type == dtype::f32 || op.type == dtype::i32) && offsets[o] % 8 == 0);
  }
  plan.wide = w;
  plan.params_buffer = opt.max_push_bytes && param_words(plan, scalars) * 4 > opt.max_push_bytes;
  // texel reads: bindings other than the output's whose operands are all 32-bit, as many
  // as the device allows and the mask can name
  auto texel_eligible = [&](std::uint32_t b) {
    bool texel = b != plan.operands[0].binding && b < max_texel_binding;
    for (std::size_t o = 1; o <= L && texel; ++o) {
      const auto& op = plan.operands[o];
      texel = op.binding != b || op.type == dtype::f32 || op.type == dtype::i32;
    }
    return texel;
  };
  const std::uint32_t max_texel = opt.max_texel_buffers ? opt.max_texel_buffers : max_texel_binding;
  std::uint32_t texels = 0;
  if (plan.vec4 && opt.texel_reads) {
    for (std::uint32_t b = 0; b < plan.bindings && texels < max_texel; ++b) {
      if (texel_eligible(b)) {
        plan.texel_bindings |= 1u << b;
        ++texels;
      }
    }
  }
  // More buffers than the device's storage-buffer descriptors: read inputs through texel
  // views (any variant; strided reads fetch the texel holding the element) until they fit.
  if (opt.max_storage_buffers && opt.texel_views) {
    for (std::uint32_t b = 0; b < plan.bindings && texels < max_texel; ++b) {
      if (storage_buffers(plan) <= opt.max_storage_buffers) break;
      if (!texel_binding(plan, b) && texel_eligible(b)) {
        plan.texel_bindings |= 1u << b;
        ++texels;
      }
    }
  }
  std::uint64_t elements = 1;
  for (int d = 0; d < lay.rank; ++d) elements *= static_cast<std::uint64_t>(lay.extent[d]);
  plan.single_step = opt.max_invocations > 0 && invocations_needed(plan, elements) <= opt.max_invocations;
  plan.tail = plan.vec4 && elements % step_width(plan) != 0;
  return plan;
}

/// The kernel's source around an emitted expression: declarations, kiln_compute and
/// main(). Not a template: one copy serves every statement, so a new expression type costs
/// the compiler only its emitter walk (this text was most of a statement's compile time).
inline kernel_source assemble(const kernel_plan& plan, const emitter& em, std::string readable,
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

  // Push constants: element count, per-operand offsets, extents and strides (strided
  // operands only), then the scalars. Or the same members in a storage buffer after the
  // operands' bindings, when they do not fit (std430 gives scalars the same offsets).
  if (plan.params_buffer) {
    s += "\nlayout(std430, set = 0, binding = " + std::to_string(plan.bindings) +
         ") readonly buffer kiln_params {\n  uint n;\n";
  } else {
    s += "\nlayout(push_constant) uniform kiln_params {\n  uint n;\n";
  }
  for (std::size_t o = 0; o <= L; ++o) s += "  uint off" + std::to_string(o) + ";\n";
  if (any_strided) {
    for (int d = 0; d < plan.rank; ++d) s += "  uint ext" + std::to_string(d) + ";\n";
    for (std::size_t o = 0; o <= L; ++o) {
      if (plan.operands[o].how != access::strided) continue;
      for (int d = 0; d < plan.rank; ++d) s += "  int st" + std::to_string(o) + "_" + std::to_string(d) + ";\n";
    }
  }
  for (std::size_t j = 0; j < em.scalar_types.size(); ++j) {
    s += "  " + em.scalar_types[j] + " s" + std::to_string(j) + ";\n";
  }
  s += "} p;\n\n";

  for (const std::string& f : em.functions) s += f;
  if (plan.wide) s += wide_glsl;
  if (plan.texel_bindings) s += texel_glsl;
  if (em.uses_f2i) s += f2i_glsl;
  if (b16) s += bf16_glsl;

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

/// The GLSL source of node n under plan. Throws kiln::shader_error for a malformed op body.
template <class T, class N>
kernel_source generate(const N& n, const kernel_plan& plan) {
  emitter em(plan);
  std::string readable;
  const std::string result = em.emit(n, readable);
  return assemble(plan, em, std::move(readable), result, glsl_compute_type<typename N::value_type>());
}

/// The push-constant words for one dispatch of a kernel generated for (n, plan).
/// Throws kiln::shape_error when a count or offset does not fit the shader's 32 bits.
template <std::size_t L, class N>
kernel_args make_args(const iteration_layout<L>& lay, const index_t (&offsets)[L + 1], const kernel_plan& plan,
                      const N& n) {
  kernel_args a;
  index_t total = 1;
  for (int d = 0; d < lay.rank; ++d) total *= lay.extent[d];
  a.elements = static_cast<std::uint64_t>(total);
  auto word = [&](index_t v, const char* what) {
    if (v < INT32_MIN || v > index_t(UINT32_MAX)) {
      throw shape_error(std::string("kiln::vulkan: ") + what + " " + std::to_string(v) +
                        " does not fit the 32-bit indexing of generated kernels");
    }
    a.push.push_back(static_cast<std::uint32_t>(v));
  };
  word(total, "element count");
  for (std::size_t o = 0; o <= L; ++o) word(offsets[o], "element offset");
  bool any_strided = false;
  for (const auto& op : plan.operands) any_strided = any_strided || op.how == access::strided;
  if (any_strided) {
    for (int d = 0; d < lay.rank; ++d) word(lay.extent[d], "extent");
    for (std::size_t o = 0; o <= L; ++o) {
      if (plan.operands[o].how != access::strided) continue;
      for (int d = 0; d < lay.rank; ++d) {
        if (lay.stride[o][d] < INT32_MIN || lay.stride[o][d] > INT32_MAX) word(index_t(UINT32_MAX) + 1, "stride");
        a.push.push_back(static_cast<std::uint32_t>(static_cast<std::int32_t>(lay.stride[o][d])));
      }
    }
  }
  for_each_scalar(n, [&](const auto& sc) {
    using C = std::remove_cvref_t<decltype(sc.value)>;
    if constexpr (std::is_same_v<C, float>) a.push.push_back(std::bit_cast<std::uint32_t>(sc.value));
    else a.push.push_back(static_cast<std::uint32_t>(static_cast<std::int32_t>(sc.value)));
  });
  return a;
}

/// A statement's kernel: its source (the cache key; generated once per process for each
/// expression type and plan, see cached_source) and this dispatch's arguments.
struct kernel {
  const kernel_source& source;
  kernel_args args;
};

/// The plan as a compact byte string (a map key).
inline std::string plan_key(const kernel_plan& plan) {
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

/// generate<T>(n, plan), once per process for each (T, N, plan): the text depends on
/// nothing else (see the top of this file; an op's GLSL is a property of its type), so a
/// statement seen before skips all text work. Thread-safe; entries live until exit.
template <class T, class N>
const kernel_source& cached_source(const N& n, const kernel_plan& plan) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::unique_ptr<const kernel_source>> sources;
  const std::string key = plan_key(plan);
  std::lock_guard lock(mutex);
  if (auto it = sources.find(key); it != sources.end()) return *it->second;
  auto src = std::make_unique<kernel_source>(generate<T>(n, plan));  // may throw shader_error
  char name[24];
  std::snprintf(name, sizeof name, "fused_%016llx", static_cast<unsigned long long>(fnv1a(src->glsl)));
  src->name = name;
  return *sources.emplace(key, std::move(src)).first->second;
}

/// Plans and generates the kernel for `out = n` (shapes and aliasing already checked);
/// opt: what the device and context allow (the wide variant, texel reads).
template <class T, class B, class N>
kernel make_kernel(const tensor<T, B>& out, const N& n, plan_options opt = {}) {
  constexpr std::size_t L = leaf_count_v<N>;
  const auto lay = make_layout(out, n);
  dtype types[L + 1];
  index_t offsets[L + 1];
  const void* storage[L + 1];
  strides views[L + 1];
  types[0] = dtype_traits<T>::value;
  offsets[0] = out.offset();
  storage[0] = out.storage().get();
  views[0] = out.strides();
  std::size_t k = 1;
  for_each_leaf(n, [&](const auto& t) {
    using U = typename std::remove_cvref_t<decltype(t)>::value_type;
    types[k] = dtype_traits<U>::value;
    offsets[k] = t.offset();
    storage[k] = t.storage().get();
    views[k] = broadcast_strides(t, out.shape());
    ++k;
  });
  std::size_t scalars = 0;
  for_each_scalar(n, [&](const auto&) { ++scalars; });
  const kernel_plan plan = make_plan<L>(lay, types, offsets, storage, views, opt, scalars);
  const kernel_source& src = cached_source<T>(n, plan);
  return kernel{src, make_args<L>(lay, offsets, src.plan, n)};
}

}  // namespace kiln::detail::vk
