// tests/fuzz/skeletons.hpp — the compiled shapes of the fuzzer's trees.
//
// A skeleton is a type such as un<bi<leaf<float>, scal>>: it fixes which node kinds sit
// where (so that the kiln expression it builds has one C++ type), and leaves the rest to
// run time: the op at each dynamic node (dynamic_ops.hpp), each leaf's shape, view,
// storage and data, each scalar's value, the output's view and whether it aliases an
// input. From one skeleton type come both the run-time tree (make: the generator's
// choices, which the reference interpreter walks) and the kiln expression (build).
#pragma once

#include <kiln/kiln.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "dynamic_ops.hpp"

namespace kiln_fuzz {

enum class node_kind : std::uint8_t { leaf, scalar, unary, binary, compare, where, clamp, cast };

/// One node of a generated tree (what the generator chose).
struct node {
  node_kind kind = node_kind::leaf;
  kiln::dtype type = kiln::dtype::f32;  // the dtype the node yields (scalars: the one they adopt)
  int op = 0;                           // dynamic nodes: index into unary/binary/compare_ops
  int leaf = -1;                        // leaves: index into the tree's leaf list
  double scalar = 0;                    // scalars (integral for integer dtypes)
  std::vector<node> kids;
};

/// The generator's state while a skeleton makes its tree.
struct maker {
  std::mt19937_64& g;
  std::vector<kiln::dtype> leaf_types;  // dtype of each leaf, in build order

  int below(int n) { return std::uniform_int_distribution<int>(0, n - 1)(g); }
  bool chance(double p) { return std::bernoulli_distribution(p)(g); }

  template <class Ops>
  int pick_op(kiln::dtype t) {
    const bool integer = !(t == kiln::dtype::f32 || t == kiln::dtype::f16 || t == kiln::dtype::bf16);
    for (;;) {
      const int k = below(int(std::tuple_size_v<Ops>));
      if (!integer || integer_ok_v<Ops>[std::size_t(k)]) return k;
    }
  }

  double scalar_value(kiln::dtype t) {
    if (t == kiln::dtype::f32 || t == kiln::dtype::f16 || t == kiln::dtype::bf16) {
      switch (below(8)) {
        case 0: return double(below(7) - 3);                 // small integers: ties, pow's integer exponents
        case 1: return std::ldexp(1.0, below(40) - 20);      // powers of two, large and small
        case 2: {
          const float sp[] = {0.5f, -0.5f, 1e-3f, 100.0f, -100.0f, 1e20f, -1e-20f, 0.01f};
          return sp[below(8)];
        }
        default: return static_cast<float>(std::uniform_real_distribution<double>(-4, 4)(g));
      }
    }
    switch (below(4)) {
      case 0: return double(below(5) - 2);
      case 1: return double(std::uniform_int_distribution<std::int32_t>(INT32_MIN, INT32_MAX)(g));
      default: return double(below(21) - 10);
    }
  }
};

template <class T>
constexpr kiln::dtype dtype_of() {
  return kiln::dtype_traits<T>::value;
}

/// The C++ scalar a scalar node passes for hint dtype H: float for floating dtypes, int32_t
/// for integer ones (kiln then adopts H).
template <class H>
using scalar_arg_t = std::conditional_t<kiln::is_floating_v<H>, float, std::int32_t>;

/// Inputs of a tree on backend B: one tensor (a view) per leaf, of the leaf's dtype.
template <class B>
struct leaf_tensors {
  std::tuple<std::vector<kiln::tensor<float, B>>, std::vector<kiln::tensor<kiln::half, B>>,
             std::vector<kiln::tensor<kiln::bfloat16, B>>, std::vector<kiln::tensor<std::int8_t, B>>,
             std::vector<kiln::tensor<std::int32_t, B>>, std::vector<kiln::tensor<std::uint8_t, B>>>
      by_type;
  std::vector<int> slot;  // leaf -> index within its dtype's vector

  template <class T>
  const kiln::tensor<T, B>& get(int leaf) const {
    return std::get<std::vector<kiln::tensor<T, B>>>(by_type)[std::size_t(slot[std::size_t(leaf)])];
  }
};

// ---- the node kinds ----

template <class T>
struct leaf {
  using value = T;
  static constexpr int leaves = 1;
  static node make(maker& m, kiln::dtype) {
    node n;
    n.kind = node_kind::leaf;
    n.type = dtype_of<T>();
    n.leaf = int(m.leaf_types.size());
    m.leaf_types.push_back(n.type);
    return n;
  }
  template <class H, class B>
  static const kiln::tensor<T, B>& build(const node& n, const leaf_tensors<B>& in) {
    return in.template get<T>(n.leaf);
  }
};

struct scal {
  using value = void;  // adopts its neighbours' dtype
  static constexpr int leaves = 0;
  static node make(maker& m, kiln::dtype hint) {
    node n;
    n.kind = node_kind::scalar;
    n.type = hint;
    n.scalar = m.scalar_value(hint);
    return n;
  }
  template <class H, class B>
  static scalar_arg_t<H> build(const node& n, const leaf_tensors<B>&) {
    return static_cast<scalar_arg_t<H>>(n.scalar);
  }
};

/// The dtype scalars among X... adopt: the first non-scalar's.
template <class... X>
struct first_value {
  using type = void;
};
template <class X0, class... X>
struct first_value<X0, X...> {
  using type = std::conditional_t<std::is_void_v<typename X0::value>, typename first_value<X...>::type, typename X0::value>;
};
template <class... X>
using first_value_t = typename first_value<X...>::type;

template <class X>
struct un {
  using value = typename X::value;
  static constexpr int leaves = X::leaves;
  static node make(maker& m, kiln::dtype) {
    node n;
    n.kind = node_kind::unary;
    n.kids.push_back(X::make(m, dtype_of<value>()));
    n.type = dtype_of<value>();
    n.op = m.pick_op<unary_ops>(n.type);
    return n;
  }
  template <class H, class B>
  static auto build(const node& n, const leaf_tensors<B>& in) {
    return kiln::map<fuzz_unary_op>(X::template build<value>(n.kids[0], in), scalar_arg_t<value>(n.op));
  }
};

template <class X, class Y>
struct bi {
  using value = first_value_t<X, Y>;
  static constexpr int leaves = X::leaves + Y::leaves;
  static node make(maker& m, kiln::dtype) {
    node n;
    n.kind = node_kind::binary;
    n.type = dtype_of<value>();
    n.kids.push_back(X::make(m, n.type));
    n.kids.push_back(Y::make(m, n.type));
    n.op = m.pick_op<binary_ops>(n.type);
    return n;
  }
  template <class H, class B>
  static auto build(const node& n, const leaf_tensors<B>& in) {
    return kiln::map<fuzz_binary_op>(X::template build<value>(n.kids[0], in), Y::template build<value>(n.kids[1], in),
                                     scalar_arg_t<value>(n.op));
  }
};

template <class X, class Y>
struct cmp {
  using value = bool;
  using operand = first_value_t<X, Y>;
  static constexpr int leaves = X::leaves + Y::leaves;
  static node make(maker& m, kiln::dtype) {
    node n;
    n.kind = node_kind::compare;
    n.type = kiln::dtype::mask;
    n.kids.push_back(X::make(m, dtype_of<operand>()));
    n.kids.push_back(Y::make(m, dtype_of<operand>()));
    n.op = m.pick_op<compare_ops>(dtype_of<operand>());
    return n;
  }
  template <class H, class B>
  static auto build(const node& n, const leaf_tensors<B>& in) {
    return kiln::map<fuzz_compare_op>(X::template build<operand>(n.kids[0], in),
                                      Y::template build<operand>(n.kids[1], in), scalar_arg_t<operand>(n.op));
  }
};

template <class M, class X, class Y>
struct where {
  using value = first_value_t<X, Y>;
  static constexpr int leaves = M::leaves + X::leaves + Y::leaves;
  static node make(maker& m, kiln::dtype) {
    node n;
    n.kind = node_kind::where;
    n.type = dtype_of<value>();
    n.kids.push_back(M::make(m, n.type));
    n.kids.push_back(X::make(m, n.type));
    n.kids.push_back(Y::make(m, n.type));
    return n;
  }
  template <class H, class B>
  static auto build(const node& n, const leaf_tensors<B>& in) {
    return kiln::where(M::template build<value>(n.kids[0], in), X::template build<value>(n.kids[1], in),
                       Y::template build<value>(n.kids[2], in));
  }
};

template <class X, class Lo, class Hi>
struct clamp {
  using value = typename X::value;
  static constexpr int leaves = X::leaves + Lo::leaves + Hi::leaves;
  static node make(maker& m, kiln::dtype) {
    node n;
    n.kind = node_kind::clamp;
    n.type = dtype_of<value>();
    n.kids.push_back(X::make(m, n.type));
    n.kids.push_back(Lo::make(m, n.type));
    n.kids.push_back(Hi::make(m, n.type));
    return n;
  }
  template <class H, class B>
  static auto build(const node& n, const leaf_tensors<B>& in) {
    return kiln::clamp(X::template build<value>(n.kids[0], in), Lo::template build<value>(n.kids[1], in),
                       Hi::template build<value>(n.kids[2], in));
  }
};

template <class To, class X>
struct cast {
  using value = To;
  static constexpr int leaves = X::leaves;
  static node make(maker& m, kiln::dtype) {
    node n;
    n.kind = node_kind::cast;
    n.type = dtype_of<To>();
    n.kids.push_back(X::make(m, dtype_of<typename X::value>()));
    return n;
  }
  template <class H, class B>
  static auto build(const node& n, const leaf_tensors<B>& in) {
    return kiln::cast<To>(X::template build<typename X::value>(n.kids[0], in));
  }
};

/// The dtype a statement over skeleton S stores: its value, masks as uint8_t.
template <class S>
using stored_t = std::conditional_t<std::is_same_v<typename S::value, bool>, std::uint8_t, typename S::value>;

}  // namespace kiln_fuzz
