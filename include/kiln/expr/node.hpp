// kiln/expr/node.hpp — the expression tree: leaves (tensors), scalars, op nodes, casts.
// Building a node checks broadcasting at once (kiln::shape_error names the op and every
// operand); dtype and backend rules are checked at compile time. Nodes hold their
// children by value and tensors as handles, so a stored expression can never dangle.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/kind.hpp"

namespace kiln {

namespace detail {

template <class T>
struct is_tensor : std::false_type {};
template <class T, class B>
struct is_tensor<tensor<T, B>> : std::true_type {};

template <class E>
concept node = requires { typename std::remove_cvref_t<E>::kiln_expression_tag; };

}  // namespace detail

/// A tensor or an expression node: anything that can appear on the right of `=`.
template <class E>
concept expression = detail::is_tensor<std::remove_cvref_t<E>>::value || detail::node<E>;

/// An expression or a plain arithmetic scalar.
template <class E>
concept operand = expression<E> || std::is_arithmetic_v<std::remove_cvref_t<E>>;

namespace detail {

/// A tensor read by an expression.
template <class T, class B>
struct leaf_node {
  using kiln_expression_tag = void;
  static constexpr node_kind kind = node_kind::leaf;
  using value_type = T;
  using backend_type = B;
  static constexpr bool is_scalar = false;

  tensor<T, B> t;

  const kiln::shape& shape() const noexcept { return t.shape(); }
  std::string describe() const { return t.describe(); }
};

/// A scalar constant; adopts the dtype of the expression it is combined with.
template <class T>
struct scalar_node {
  using kiln_expression_tag = void;
  static constexpr node_kind kind = node_kind::scalar;
  using value_type = T;
  using backend_type = void;
  static constexpr bool is_scalar = true;

  compute_t<T> value;

  kiln::shape shape() const noexcept { return {}; }
  std::string describe() const { return std::string(dtype_name_v<T>) + " scalar"; }
};

template <class... B>
struct common_backend {
  using type = void;
};
template <class B0, class... B>
struct common_backend<B0, B...> {
  using rest = typename common_backend<B...>::type;
  using type = std::conditional_t<std::is_void_v<B0>, rest, B0>;
  static_assert(std::is_void_v<B0> || std::is_void_v<rest> || std::is_same_v<B0, rest>,
                "kiln: operands live on different backends; copy one across first");
};

template <class... V>
struct common_value {
  using type = void;
};
template <class V0, class... V>
struct common_value<V0, V...> {
  using rest = typename common_value<V...>::type;
  using type = std::conditional_t<std::is_void_v<V0>, rest, V0>;
  static_assert(std::is_void_v<V0> || std::is_void_v<rest> || std::is_same_v<V0, rest>,
                "kiln: operands have different dtypes; convert one with kiln::cast<T>(x)");
};

/// False for a leaf over an empty tensor; every other node is checked where it is built.
template <class N>
constexpr bool leaf_defined(const N& n) noexcept {
  if constexpr (kind_of_v<N> == node_kind::leaf) return n.t.defined();
  else return true;
}

/// Value type of a non-scalar operand, void for scalars.
template <class N>
using value_if_tensor_t = std::conditional_t<N::is_scalar, void, typename N::value_type>;

/// The dtype an op node yields:
///   Op::result_type<V...>   when the op says so (e.g. where);
///   bool                    when Op::yields_mask (comparisons);
///   else the common dtype of its operands, which must agree.
template <class Op, class... Args>
struct op_result {
  static auto pick() {
    if constexpr (requires { typename Op::template result_type<typename Args::value_type...>; }) {
      return std::type_identity<typename Op::template result_type<typename Args::value_type...>>{};
    } else {
      using common = typename common_value<value_if_tensor_t<Args>...>::type;
      static_assert(!std::is_void_v<common>, "kiln: an expression needs at least one tensor operand");
      if constexpr (requires { Op::floating_only; }) {
        static_assert(!Op::floating_only || is_floating_v<common>,
                      "kiln: this op needs a floating-point dtype; convert with kiln::cast<float>(x)");
      }
      if constexpr (requires { Op::yields_mask; }) {
        if constexpr (Op::yields_mask) return std::type_identity<bool>{};
        else return std::type_identity<common>{};
      } else {
        return std::type_identity<common>{};
      }
    }
  }
  using type = typename decltype(pick())::type;
};

/// Throws kiln::shape_error for an op node whose operands are not all defined tensors or
/// do not broadcast together, naming the op and each operand (a, b, ...): compiled once
/// (expr/impl/node.ipp), not once per expression type.
[[noreturn]] KILN_DECL void throw_operand_error(std::string_view op, bool defined, const std::string* operands,
                                                std::size_t count);

/// Op applied lane-wise to its children (with NumPy broadcasting).
template <class Op, class... Args>
struct op_node {
  using kiln_expression_tag = void;
  static constexpr node_kind kind = node_kind::op;
  using op_type = Op;
  using value_type = typename op_result<Op, Args...>::type;
  using backend_type = typename common_backend<typename Args::backend_type...>::type;
  static constexpr bool is_scalar = false;

  std::tuple<Args...> args;
  kiln::shape shape_;

  explicit op_node(Args... a) : args(std::move(a)...) {
    // An empty (default-constructed or moved-from) tensor has no storage to read.
    bool defined = true;
    std::apply([&](const auto&... c) { ((defined = defined && leaf_defined(c)), ...); }, args);
    bool ok = defined;
    if (ok) std::apply([&](const auto&... c) { ((ok = ok && broadcast_shapes(shape_, c.shape(), shape_)), ...); }, args);
    if (!ok) fail(defined);
  }

  const kiln::shape& shape() const noexcept { return shape_; }
  std::string describe() const {
    return std::string(dtype_name_v<value_type>) + shape_.to_string() + " expression (" + std::string(Op::name) + ")";
  }

  // The error path, out of line: each expression type's constructor stays a few checks.
  [[noreturn, gnu::noinline, gnu::cold]] void fail(bool defined) const {
    std::string described[sizeof...(Args)];
    std::size_t i = 0;
    std::apply([&](const auto&... c) { ((described[i++] = c.describe()), ...); }, args);
    throw_operand_error(Op::name, defined, described, sizeof...(Args));
  }
};

/// Element type conversion: float -> integer truncates toward zero and saturates (NaN -> 0);
/// integer -> narrower integer wraps; mask -> number gives 1 / 0.
template <class To, class Arg>
struct cast_node {
  using kiln_expression_tag = void;
  static constexpr node_kind kind = node_kind::cast;
  using value_type = To;
  using from_type = typename Arg::value_type;
  using backend_type = typename Arg::backend_type;
  static constexpr bool is_scalar = false;

  Arg arg;

  const kiln::shape& shape() const noexcept { return arg.shape(); }
  std::string describe() const {
    return std::string(dtype_name_v<To>) + arg.shape().to_string() + " expression (cast)";
  }
};

/// Operand -> node. Tensors become leaves (a handle copy, or moved in if an rvalue);
/// nodes pass through; arithmetic scalars take the dtype Hint.
template <class Hint, class X>
auto to_node(X&& x) {
  using D = std::remove_cvref_t<X>;
  if constexpr (is_tensor<D>::value) {
    return leaf_node<typename D::value_type, typename D::backend_type>{std::forward<X>(x)};
  } else if constexpr (node<D>) {
    return D(std::forward<X>(x));
  } else {
    static_assert(std::is_arithmetic_v<D> && !std::is_same_v<D, bool>,
                  "kiln: operands must be tensors, expressions or arithmetic scalars");
    if constexpr (std::is_void_v<Hint>) {
      // no tensor operand to adopt a dtype from (e.g. where(m, 1.0f, 0.0f)): float or int32
      using own = std::conditional_t<std::is_floating_point_v<D>, float, std::int32_t>;
      return scalar_node<own>{static_cast<own>(x)};
    } else {
      static_assert(is_floating_v<Hint> || std::is_integral_v<D>,
                    "kiln: a floating-point scalar with an integer tensor; convert the tensor with kiln::cast<float>(x)");
      return scalar_node<Hint>{static_cast<compute_t<Hint>>(x)};
    }
  }
}

/// dtype a scalar operand adopts: that of the first non-mask expression operand.
template <class... X>
struct scalar_hint {
  using type = void;
};
template <class X0, class... X>
struct scalar_hint<X0, X...> {
  static auto pick() {
    using D = std::remove_cvref_t<X0>;
    if constexpr (expression<D>) {
      using V = typename decltype(to_node<float>(std::declval<X0>()))::value_type;
      if constexpr (!std::is_same_v<V, bool>) return std::type_identity<V>{};
      else return std::type_identity<typename scalar_hint<X...>::type>{};
    } else {
      return std::type_identity<typename scalar_hint<X...>::type>{};
    }
  }
  using type = typename decltype(pick())::type;
};

/// scalar_hint after skipping the first N operands (an op's conditions, e.g. where's mask).
template <std::size_t N, class... X>
struct hint_after : scalar_hint<X...> {};
template <std::size_t N, class X0, class... X>
  requires(N > 0)
struct hint_after<N, X0, X...> : hint_after<N - 1, X...> {};

template <class Op>
constexpr std::size_t condition_operands() {
  if constexpr (requires { Op::condition_operands; }) return Op::condition_operands;
  else return 0;
}

template <class X>
using node_t = decltype(to_node<float>(std::declval<X>()));

}  // namespace detail

/// Applies an elementwise op (a struct with `name`, a template `apply` and a `glsl` body)
/// to operands, with broadcasting; the result fuses into any surrounding expression.
/// Throws kiln::shape_error when shapes do not broadcast.
/// Example: `y = kiln::map<softplus_op>(x * 2.0f) - 1.0f;`
template <class Op, class... X>
  requires(sizeof...(X) >= 1 && (operand<X> && ...) && (expression<X> || ...))
auto map(X&&... x) {
  using hint = typename detail::hint_after<detail::condition_operands<Op>(), X...>::type;
  using node = detail::op_node<Op, decltype(detail::to_node<hint>(std::forward<X>(x)))...>;
  return node(detail::to_node<hint>(std::forward<X>(x))...);
}

/// Converts an expression's elements to dtype To (see detail::cast_node for the rules).
/// Example: `y = kiln::cast<float>(int8_tensor) * scale;`
template <class To, expression X>
auto cast(X&& x) {
  static_assert(element<To>, "kiln::cast: the target must be a kiln dtype (float, kiln::half, "
                             "kiln::bfloat16, int8_t, int32_t, uint8_t)");
  using N = decltype(detail::to_node<void>(std::forward<X>(x)));
  detail::cast_node<To, N> n{detail::to_node<void>(std::forward<X>(x))};
  if (!detail::leaf_defined(n.arg)) {
    throw shape_error("kiln::cast: the operand is an empty tensor (default-constructed or moved from)");
  }
  return n;
}

}  // namespace kiln

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/expr/impl/node.ipp"
#endif
