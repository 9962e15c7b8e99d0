// kiln/vulkan/codegen/emitter.hpp — an expression tree -> the body of a GLSL function:
// each op one statement (repeated sub-expressions computed once), leaves as the
// function's arguments, scalars as parameter-block members. It dispatches on node kind
// (expr/kind.hpp); a structural node is one operand, its value handed in by its kernel.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/convert.hpp"  // int_lo, int_hi
#include "kiln/expr/glsl.hpp"
#include "kiln/expr/kind.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/vulkan/codegen/plan.hpp"
#include "kiln/vulkan/codegen/types.hpp"

namespace kiln::detail::vk {

/// Accumulates the body of kiln_compute while walking the tree.
class emitter {
 public:
  explicit emitter(const kernel_plan& plan);

  std::string body;       // statements of kiln_compute
  std::string expression; // readable form
  std::vector<std::string> scalar_types;  // GLSL type of each push-constant scalar
  std::vector<std::string> functions;  // GLSL helper functions the ops declare, each once
  bool uses_f2i = false, uses_f16 = false, uses_bf16 = false;
  /// Scalars are named p.<scalar_prefix><j>: a kernel with two emitted functions (a
  /// structural op's prologue and epilogue) gives each its own prefix.
  std::string scalar_prefix = "s";
  /// The readable form of a structural operand (its op over its input), when known.
  std::string structural_readable;

  /// Emits node n; returns the GLSL name of its value and sets `readable`.
  template <class N>
  std::string emit(const N& n, std::string& readable) {
    constexpr node_kind k = kind_of_v<N>;
    if constexpr (k == node_kind::leaf) {
      const std::size_t i = next_leaf_++;
      const int same = plan_.operands[1 + i].same_as;
      const std::size_t id = same >= 0 ? std::size_t(same) : i;
      readable = leaf_name(id);
      return "l" + std::to_string(id);
    } else if constexpr (k == node_kind::structural) {
      // one operand: the op's result for this element, handed in by the op's kernel
      const std::size_t i = next_leaf_++;
      readable = structural_readable.empty() ? std::string(N::op_type::name) + "(...)" : structural_readable;
      return "l" + std::to_string(i);
    } else if constexpr (k == node_kind::scalar) {
      using V = typename N::value_type;
      const std::size_t j = scalar_types.size();
      scalar_types.emplace_back(glsl_compute_type<V>());
      readable = scalar_prefix + std::to_string(j);
      return "p." + scalar_prefix + std::to_string(j);
    } else if constexpr (k == node_kind::cast) {
      using To = typename N::value_type;
      using From = typename N::from_type;
      std::string inner_r;
      const std::string a = emit(n.arg, inner_r);
      readable = "cast<" + std::string(dtype_name_v<To>) + ">(" + inner_r + ")";
      return define(std::string(glsl_compute_type<To>()), cast_text<To, From>(a));
    } else if constexpr (k == node_kind::op) {
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
    } else {
      static_assert(unhandled_kind<N>, "kiln: the Vulkan emitter does not know this node kind");
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
                      std::string& readable);

  static std::string leaf_name(std::size_t id);

 private:
  std::string define(const std::string& type, const std::string& text);

  static std::string substitute(std::string_view body, const std::vector<std::string>& args, std::string_view type);

  template <class To, class From>
  std::string cast_text(const std::string& a) {
    if constexpr (std::is_same_v<From, bool>) {
      return "(" + a + " ? " + (is_floating_v<To> ? "1.0" : "1") + " : " + (is_floating_v<To> ? "0.0" : "0") + ")";
    } else if constexpr (std::is_same_v<To, float>) {
      return "float(" + a + ")";
    } else if constexpr (std::is_same_v<To, half>) {
      uses_f16 = true;
      return "kiln_round_f16(float(" + a + "))";
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

  static std::string float_literal(float v);

  const kernel_plan& plan_;
  std::size_t next_leaf_ = 0;
  std::map<std::string, std::string> cse_;
};

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/codegen/impl/emitter.ipp"
#endif
