// tests/fuzz/dynamic_ops.hpp — elementwise ops chosen at run time, for the expression fuzzer.
//
// A kiln expression's type fixes its tree, ops included, at compile time; instantiating a
// statement per combination of ops would take hours to compile. So the fuzzer's trees are
// a few compiled skeletons whose op nodes are these "dynamic" ops: custom ops (kiln::map,
// the public way to add one) that take the index of a real kiln op as one more operand, a
// scalar. Each dispatches to the real op's functor:
//   - CPU: apply() switches on the index (one scalar for the whole statement, so the
//     branch is the same for every batch) and calls kiln's own <op>_op::apply on the
//     batch or scalar it got: kiln's SIMD bodies and scalar tails are what runs.
//   - Vulkan: the index is a push constant (kiln's scalars are), and the GLSL body is a
//     chain `s == 0 ? <abs body> : s == 1 ? <exp body> : ...` made of the real ops' glsl
//     (and glsl_int) text, with their helper functions declared once each. The body
//     is a property of the type, as kiln's codegen requires (it caches the source per
//     expression type and plan), and one compiled kernel serves every op choice.
// Each dynamic node costs one push-constant word on Vulkan; the skeletons keep the count
// low (see expr_fuzz_test.cpp).
#pragma once

#include <kiln/kiln.hpp>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln_fuzz {

// The candidates, in selector order. The reference interpreter (reference.hpp) names the
// same ops in the same order.
using unary_ops = std::tuple<kiln::abs_op, kiln::neg_op, kiln::exp_op, kiln::log_op, kiln::sqrt_op, kiln::rsqrt_op,
                             kiln::square_op, kiln::erf_op, kiln::tanh_op, kiln::sigmoid_op, kiln::relu_op,
                             kiln::gelu_op, kiln::gelu_tanh_op, kiln::silu_op, kiln::softplus_op>;
// leaky_relu is binary here: its second operand is alpha (a scalar or an expression).
using binary_ops = std::tuple<kiln::add_op, kiln::sub_op, kiln::mul_op, kiln::div_op, kiln::min_op, kiln::max_op,
                              kiln::pow_op, kiln::leaky_relu_op>;
using compare_ops = std::tuple<kiln::eq_op, kiln::ne_op, kiln::lt_op, kiln::le_op, kiln::gt_op, kiln::ge_op>;

template <class Op>
constexpr bool integer_ok() {
  if constexpr (requires { Op::floating_only; }) return !Op::floating_only;
  else return true;
}

template <class Ops, std::size_t... I>
constexpr std::array<bool, sizeof...(I)> integer_ok_table(std::index_sequence<I...>) {
  return {integer_ok<std::tuple_element_t<I, Ops>>()...};
}
/// Which candidates take integer operands (the others are floating_only in kiln).
template <class Ops>
inline constexpr auto integer_ok_v = integer_ok_table<Ops>(std::make_index_sequence<std::tuple_size_v<Ops>>{});

template <class Ops, std::size_t... I>
std::array<std::string_view, sizeof...(I)> name_table(std::index_sequence<I...>) {
  return {std::tuple_element_t<I, Ops>::name...};
}
template <class Ops>
std::string_view op_name(std::size_t k) {
  static const auto names = name_table<Ops>(std::make_index_sequence<std::tuple_size_v<Ops>>{});
  return names[k];
}

namespace detail {

/// The selector of a statement: the scalar operand, the same in every lane.
template <class V>
int selector(const V& s) {
  if constexpr (std::is_arithmetic_v<V>) return static_cast<int>(s);
  else return static_cast<int>(s.get(0));
}

/// Op k of Ops applied to args, for the k the generator chose; R is the result type.
template <class Ops, class R, class V, class... A, std::size_t... I>
R dispatch(int k, std::index_sequence<I...>, const A&... args) {
  constexpr bool floating = std::is_floating_point_v<kiln::scalar_of_t<V>>;
  R r{};
  const bool found = ((k == int(I) ? ([&] {
    using Op = std::tuple_element_t<I, Ops>;
    if constexpr (floating || integer_ok<Op>()) r = Op::apply(args...);
  }(), true) : false) || ...);
  (void)found;  // the generator only picks valid indices; r stays value-initialised otherwise
  return r;
}

/// `s == k` in the operand type ({T} is float or int, as kiln substitutes it).
inline std::string is_choice(std::string_view sel, std::size_t k) {
  return std::string(sel) + " == {T}(" + std::to_string(k) + ")";
}

template <class Op>
std::string_view body_of(bool integer) {
  if constexpr (requires { Op::glsl_int; }) {
    if (integer) return Op::glsl_int;
  }
  return Op::glsl;
}

/// The GLSL chain over Ops' bodies, selecting on operand `sel` (e.g. "{1}"); integer: only
/// the ops that take integers, in their integer spelling.
template <class Ops, std::size_t... I>
std::string chain(std::string_view sel, bool integer, std::index_sequence<I...>) {
  std::vector<std::pair<std::size_t, std::string>> bodies;
  ((integer && !integer_ok<std::tuple_element_t<I, Ops>>()
        ? void()
        : void(bodies.emplace_back(I, std::string(body_of<std::tuple_element_t<I, Ops>>(integer))))),
   ...);
  std::string s = bodies.back().second;
  for (std::size_t j = bodies.size() - 1; j-- > 0;) {
    s = "(" + is_choice(sel, bodies[j].first) + " ? " + bodies[j].second + " : " + s + ")";
  }
  return s;
}

template <class Ops, std::size_t... I>
std::vector<std::string> functions(std::index_sequence<I...>) {
  std::vector<std::string> all;
  auto add = [&](std::vector<std::string> fs) {
    for (auto& f : fs)
      if (std::find(all.begin(), all.end(), f) == all.end()) all.push_back(std::move(f));
  };
  (add(kiln::detail::glsl_functions_of<std::tuple_element_t<I, Ops>>()), ...);
  return all;
}

template <class Ops>
using indices = std::make_index_sequence<std::tuple_size_v<Ops>>;

}  // namespace detail

/// fuzz_unary(x, s): unary_ops[s](x).
struct fuzz_unary_op {
  static constexpr std::string_view name = "fuzz_unary";
  template <class V>
  static V apply(const V& x, const V& s) {
    return detail::dispatch<unary_ops, V, V>(detail::selector(s), detail::indices<unary_ops>{}, x);
  }
  static inline const std::string glsl = detail::chain<unary_ops>("{1}", false, detail::indices<unary_ops>{});
  static inline const std::string glsl_int = detail::chain<unary_ops>("{1}", true, detail::indices<unary_ops>{});
  static std::vector<std::string> glsl_functions() { return detail::functions<unary_ops>(detail::indices<unary_ops>{}); }
};

/// fuzz_binary(a, b, s): binary_ops[s](a, b).
struct fuzz_binary_op {
  static constexpr std::string_view name = "fuzz_binary";
  template <class V>
  static V apply(const V& a, const V& b, const V& s) {
    return detail::dispatch<binary_ops, V, V>(detail::selector(s), detail::indices<binary_ops>{}, a, b);
  }
  static inline const std::string glsl = detail::chain<binary_ops>("{2}", false, detail::indices<binary_ops>{});
  static inline const std::string glsl_int = detail::chain<binary_ops>("{2}", true, detail::indices<binary_ops>{});
  static std::vector<std::string> glsl_functions() { return detail::functions<binary_ops>(detail::indices<binary_ops>{}); }
};

/// fuzz_compare(a, b, s): compare_ops[s](a, b), a mask.
struct fuzz_compare_op {
  static constexpr std::string_view name = "fuzz_compare";
  static constexpr bool yields_mask = true;
  template <class V>
  static auto apply(const V& a, const V& b, const V& s) {
    using M = decltype(kiln::eq_op::apply(a, b));
    return detail::dispatch<compare_ops, M, V>(detail::selector(s), detail::indices<compare_ops>{}, a, b);
  }
  static inline const std::string glsl = detail::chain<compare_ops>("{2}", false, detail::indices<compare_ops>{});
};

}  // namespace kiln_fuzz
