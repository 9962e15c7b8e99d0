// kiln/expr/assign.hpp — `tensor = expression`: the checks, the aliasing rule, and the
// hand-off to the backend's evaluate (one kernel per statement).
//
// Aliasing: an input that views exactly the output's elements is read in place
// (`x = x * 2.0f`). An input that overlaps the output any other way (`x = transpose(x)`)
// would read elements already overwritten, so the expression goes to a temporary first.
// Every kernel goes through run_kernel (expr/profile.hpp), where a profiling context
// records it.
#pragma once

#include <algorithm>
#include <string>
#include <utility>

#include "kiln/core/factories.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/plan.hpp"
#include "kiln/expr/traverse.hpp"

namespace kiln::detail {

/// Writes the strides of t read as an operand of shape out (0 where t is broadcast) to
/// dst[0 .. out.rank()).
template <class T, class B>
void broadcast_strides_into(const tensor<T, B>& t, const shape& out, index_t* dst) noexcept {
  const int lead = out.rank() - t.rank();
  for (int i = 0; i < out.rank(); ++i) {
    const int j = i - lead;
    dst[i] = j < 0 || t.shape()[j] == 1 ? 0 : t.strides()[j];
  }
}

/// Strides of t when read as an operand of shape out (0 where t is broadcast).
template <class T, class B>
strides broadcast_strides(const tensor<T, B>& t, const shape& out) {
  strides st;
  for (int i = 0; i < out.rank(); ++i) st.push_back(0);
  broadcast_strides_into(t, out, st.begin());
  return st;
}

/// [first, last] byte range a view touches within its storage.
template <class T, class B>
std::pair<index_t, index_t> byte_extent(const tensor<T, B>& t) {
  index_t lo = t.offset(), hi = t.offset();
  for (int i = 0; i < t.rank(); ++i) {
    const index_t span = t.strides()[i] * (t.shape()[i] - 1);
    (span < 0 ? lo : hi) += span;
  }
  return {lo * index_t(sizeof(T)), (hi + 1) * index_t(sizeof(T)) - 1};
}

/// True when some input overlaps out in a way the kernel cannot read in place (see
/// for_each_tensor: exactly the output's elements is fine except for a reduction's inputs).
template <class T, class B, class N>
bool needs_temporary(const tensor<T, B>& out, const N& n) {
  bool hazard = false;
  for_each_tensor(n, [&](const auto& in, bool in_place_ok) {
    if (hazard || in.storage() != out.storage()) return;
    using U = typename std::remove_cvref_t<decltype(in)>::value_type;
    if constexpr (sizeof(U) == sizeof(T)) {
      if (in_place_ok && in.offset() == out.offset() && in.rank() <= out.rank()) {
        const strides bst = broadcast_strides(in, out.shape());
        bool same = true;
        for (int i = 0; i < out.rank(); ++i) same = same && (out.shape()[i] == 1 || bst[i] == out.strides()[i]);
        if (same) return;  // reads exactly the element it writes: safe in place
      }
    }
    const auto a = byte_extent(in), b = byte_extent(out);
    hazard = a.first <= b.second && b.first <= a.second;
  });
  return hazard;
}

/// e as a node: an expression is used where it is (no copy of its tree, so no reference
/// count touched per leaf); a tensor becomes a leaf.
template <class E>
decltype(auto) as_node(const E& e) {
  if constexpr (node<E>) return (e);
  else return to_node<float>(e);
}

template <class T, class B, class E>
void assign(tensor<T, B>& out, const E& e) {
  using N = node_t<const E&>;
  using V = typename N::value_type;
  static_assert(std::is_same_v<V, T> || (std::is_same_v<V, bool> && std::is_same_v<T, std::uint8_t>),
                "kiln: the expression's dtype differs from the tensor's; convert it with kiln::cast<T>(expr) "
                "(masks are stored in uint8_t tensors)");
  static_assert(std::is_void_v<typename N::backend_type> || std::is_same_v<typename N::backend_type, B>,
                "kiln: the expression lives on another backend than the tensor assigned to");
  const N& n = as_node(e);  // a temporary leaf lives as long as the reference
  if (!leaf_defined(n)) {  // `y = t` with t empty; ops and casts check their operands when built
    throw shape_error("kiln::assign: the source tensor is empty (default-constructed or moved from); target is " +
                      out.describe());
  }

  if (!out.defined()) {
    // An empty target takes the expression's shape, on the context of its first tensor.
    bool found = false;
    for_each_tensor(n, [&](const auto& in, bool) {
      if (!found && in.defined()) {
        tensor<T, B> fresh(backend_traits<B>::allocate(in.storage()->ctx, std::size_t(n.shape().numel()) * sizeof(T)),
                           n.shape(), contiguous_strides(n.shape()), 0);
        swap(out, fresh);
        found = true;
      }
    });
    if (!found) {
      throw shape_error("kiln::assign: the target tensor is empty and the expression holds no tensor to take a "
                        "context from; create the target with kiln::empty");
    }
  }

  if (!broadcasts_to(n.shape(), out.shape())) {
    throw shape_error("kiln::assign: cannot write " + n.describe() + " into " + out.describe());
  }
  for (int i = 0; i < out.rank(); ++i) {
    if (out.shape()[i] > 1 && out.strides()[i] == 0) {
      throw shape_error("kiln::assign: the target " + out.describe() +
                        " is a broadcast view (several elements share one address); write to a real tensor");
    }
  }
  if (out.numel() == 0) return;

  if (needs_temporary(out, n)) {
    auto tmp = empty<T>(out.context(), out.shape());
    evaluate_planned(tmp, n);
    run_kernel(out, leaf_node<T, B>{std::move(tmp)});
  } else {
    evaluate_planned(out, n);
  }
}

template <class T, class B, class S>
void fill(tensor<T, B>& out, S value) {
  if (!out.defined()) throw shape_error("kiln::fill: the target tensor is empty; create it with kiln::empty");
  for (int i = 0; i < out.rank(); ++i) {
    if (out.shape()[i] > 1 && out.strides()[i] == 0) {
      throw shape_error("kiln::fill: the target " + out.describe() + " is a broadcast view");
    }
  }
  if (out.numel() == 0) return;
  run_kernel(out, scalar_node<T>{static_cast<compute_t<T>>(value)});
}

}  // namespace kiln::detail

namespace kiln {

template <class T, class B>
template <class E>
tensor<T, B>& tensor<T, B>::operator+=(E&& e) { return *this = *this + std::forward<E>(e); }
template <class T, class B>
template <class E>
tensor<T, B>& tensor<T, B>::operator-=(E&& e) { return *this = *this - std::forward<E>(e); }
template <class T, class B>
template <class E>
tensor<T, B>& tensor<T, B>::operator*=(E&& e) { return *this = *this * std::forward<E>(e); }
template <class T, class B>
template <class E>
tensor<T, B>& tensor<T, B>::operator/=(E&& e) { return *this = *this / std::forward<E>(e); }

}  // namespace kiln
