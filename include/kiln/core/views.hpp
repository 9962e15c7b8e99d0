// kiln/core/views.hpp — views that never copy: slice, transpose, permute, reshape,
// broadcast_to, squeeze, unsqueeze. Each returns a tensor sharing the input's storage;
// bad arguments throw kiln::shape_error naming the op and the tensor.
#pragma once

#include <algorithm>
#include <concepts>
#include <initializer_list>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>

#include "kiln/core/tensor.hpp"

namespace kiln {

/// Elements start, start+step, ... < stop of dimension dim (negative dim counts from the
/// end; start/stop are clamped like Python slices; step >= 1).
/// Example: `kiln::slice(x, 1, 0, 4)` is x[:, 0:4]
template <class T, class B>
tensor<T, B> slice(const tensor<T, B>& t, int dim, index_t start, index_t stop, index_t step = 1) {
  const int d = t.normalize_dim(dim);
  if (step < 1) {
    throw shape_error("kiln::slice: step " + std::to_string(step) + " must be >= 1 (tensor " + t.describe() + ")");
  }
  const index_t n = t.shape()[d];
  auto clampi = [n](index_t v) { return std::clamp<index_t>(v < 0 ? v + n : v, 0, n); };
  start = clampi(start);
  stop = std::max(clampi(stop), start);
  shape s = t.shape();
  strides st = t.strides();
  s[d] = stop > start ? (stop - start - 1) / step + 1 : 0;  // no overflow for any step
  st[d] = s[d] > 1 ? t.strides()[d] * step : t.strides()[d];   // then step < n: inside the view's span
  return tensor<T, B>(t.storage(), s, st, t.offset() + (s[d] ? start * t.strides()[d] : 0));
}

/// Reorders dimensions: result dim i is input dim order[i].
template <class T, class B>
tensor<T, B> permute(const tensor<T, B>& t, std::initializer_list<int> order) {
  if (static_cast<int>(order.size()) != t.rank()) {
    throw shape_error("kiln::permute: " + std::to_string(order.size()) + " dimensions given for " + t.describe());
  }
  shape s;
  strides st;
  bool seen[max_rank] = {};
  for (int o : order) {
    const int d = t.normalize_dim(o);
    if (seen[d]) throw shape_error("kiln::permute: dimension " + std::to_string(o) + " repeated for " + t.describe());
    seen[d] = true;
    s.push_back(t.shape()[d]);
    st.push_back(t.strides()[d]);
  }
  return tensor<T, B>(t.storage(), s, st, t.offset());
}

/// Reverses the dimensions (the matrix transpose for rank 2).
template <class T, class B>
tensor<T, B> transpose(const tensor<T, B>& t) {
  shape s;
  strides st;
  for (int i = t.rank() - 1; i >= 0; --i) {
    s.push_back(t.shape()[i]);
    st.push_back(t.strides()[i]);
  }
  return tensor<T, B>(t.storage(), s, st, t.offset());
}

/// Swaps two dimensions.
template <class T, class B>
tensor<T, B> transpose(const tensor<T, B>& t, int dim0, int dim1) {
  const int a = t.normalize_dim(dim0), b = t.normalize_dim(dim1);
  shape s = t.shape();
  strides st = t.strides();
  std::swap(s[a], s[b]);
  std::swap(st[a], st[b]);
  return tensor<T, B>(t.storage(), s, st, t.offset());
}

/// Same elements, new shape: a braced list, a kiln::shape, or any range of integer
/// extents (std::vector, std::array, std::span); one extent may be -1 (inferred). Needs
/// strides that allow it without copying; otherwise throws kiln::shape_error (materialise
/// first with t.clone()), as it does for a shape whose element count differs or overflows.
/// Example: `kiln::reshape(x, {64, -1})`, `kiln::reshape(x, y.shape())`
template <class T, class B, std::ranges::input_range R>
  requires std::integral<std::ranges::range_value_t<R>>
tensor<T, B> reshape(const tensor<T, B>& t, R&& extents) {
  index_t e[max_rank] = {};
  int rank = 0;
  index_t span = 1;  // product of the given extents, each counted as at least 1
  bool zero = false;
  int infer = -1;
  for (auto v : extents) {
    if (rank == max_rank) {
      throw shape_error("kiln::reshape: more than " + std::to_string(max_rank) + " extents for " + t.describe());
    }
    const auto x = static_cast<index_t>(v);
    if constexpr (std::is_unsigned_v<std::ranges::range_value_t<R>>) {
      if (v > static_cast<std::make_unsigned_t<index_t>>(max_numel)) {
        throw shape_error("kiln::reshape: extent " + std::to_string(v) + " is above 2^59 for " + t.describe());
      }
    }
    if (x == -1) {
      if (infer >= 0) throw shape_error("kiln::reshape: more than one -1 extent for " + t.describe());
      infer = rank;
    } else if (x < 0) {
      throw shape_error("kiln::reshape: negative extent " + std::to_string(x) + " for " + t.describe());
    } else if (!detail::mul_extent(span, x > 1 ? x : 1, span)) {
      throw shape_error("kiln::reshape: the extents given for " + t.describe() + " span more than 2^59 elements");
    }
    zero = zero || x == 0;
    e[rank++] = x;
  }
  if (infer >= 0) e[infer] = zero ? 0 : t.numel() / span;
  const shape ns{std::span<const index_t>(e, static_cast<std::size_t>(rank))};
  if (ns.numel() != t.numel()) {
    throw shape_error("kiln::reshape: cannot view " + t.describe() + " as " + ns.to_string() +
                      " (element counts differ)");
  }
  // Walk both shapes in row-major chunks: each chunk of the old shape that is contiguous
  // in itself maps onto a run of new extents (the numpy "attempt_nocopy_reshape" rule).
  strides nst;
  for (int i = 0; i < ns.rank(); ++i) nst.push_back(0);
  const shape& os = t.shape();
  const strides& ost = t.strides();
  if (t.numel() != 0) {
    int oi = 0, ni = 0;
    while (oi < os.rank() && ni < ns.rank()) {
      index_t op = os[oi], np = ns[ni];
      int oj = oi + 1, nj = ni + 1;
      while (op != np) {
        if (np < op) np *= ns[nj++];
        else op *= os[oj++];
      }
      // each non-unit extent must step exactly over the next non-unit one (unit extents
      // in between carry arbitrary strides and say nothing about the gap)
      for (int k = oi, prev = -1; k < oj; ++k) {
        if (os[k] == 1) continue;
        if (prev >= 0 && ost[prev] != ost[k] * os[k]) {
          throw shape_error("kiln::reshape: " + t.describe() + " cannot be viewed as " + ns.to_string() +
                            " without a copy; use kiln::reshape(x.clone(), ...)");
        }
        prev = k;
      }
      // innermost stride of this chunk, skipping unit extents
      index_t inner = 1;
      for (int k = oj - 1; k >= oi; --k) {
        if (os[k] != 1) { inner = ost[k]; break; }
      }
      for (int k = nj - 1; k >= ni; --k) {
        nst[k] = inner;
        inner *= ns[k];
      }
      oi = oj;
      ni = nj;
    }
    for (; ni < ns.rank(); ++ni) nst[ni] = 1;  // trailing unit extents
  } else {
    nst = contiguous_strides(ns);
  }
  return tensor<T, B>(t.storage(), ns, nst, t.offset());
}

template <class T, class B>
tensor<T, B> reshape(const tensor<T, B>& t, std::initializer_list<index_t> extents) {
  return reshape(t, std::span<const index_t>(extents.begin(), extents.size()));
}

/// Broadcasts to shape s (NumPy rules) with stride 0; a read-only view in effect
/// (writing to it throws, since several elements alias one).
template <class T, class B>
tensor<T, B> broadcast_to(const tensor<T, B>& t, const shape& s) {
  if (!broadcasts_to(t.shape(), s)) {
    throw shape_error("kiln::broadcast_to: " + t.describe() + " cannot be broadcast to " + s.to_string());
  }
  strides st;
  const int lead = s.rank() - t.rank();
  for (int i = 0; i < s.rank(); ++i) {
    const int j = i - lead;
    st.push_back(j < 0 || (t.shape()[j] == 1 && s[i] != 1) ? 0 : t.strides()[j]);
  }
  return tensor<T, B>(t.storage(), s, st, t.offset());
}

/// Removes dimension dim, which must have extent 1.
template <class T, class B>
tensor<T, B> squeeze(const tensor<T, B>& t, int dim) {
  const int d = t.normalize_dim(dim);
  if (t.shape()[d] != 1) {
    throw shape_error("kiln::squeeze: dimension " + std::to_string(dim) + " of " + t.describe() + " is not 1");
  }
  shape s = t.shape();
  strides st = t.strides();
  s.erase(d);
  st.erase(d);
  return tensor<T, B>(t.storage(), s, st, t.offset());
}

/// Removes every dimension of extent 1.
template <class T, class B>
tensor<T, B> squeeze(const tensor<T, B>& t) {
  shape s;
  strides st;
  for (int i = 0; i < t.rank(); ++i) {
    if (t.shape()[i] != 1) {
      s.push_back(t.shape()[i]);
      st.push_back(t.strides()[i]);
    }
  }
  return tensor<T, B>(t.storage(), s, st, t.offset());
}

/// Inserts a dimension of extent 1 at position dim (0..rank; negative counts from the end).
template <class T, class B>
tensor<T, B> unsqueeze(const tensor<T, B>& t, int dim) {
  const int d = dim < 0 ? dim + t.rank() + 1 : dim;
  if (d < 0 || d > t.rank()) {
    throw shape_error("kiln::unsqueeze: position " + std::to_string(dim) + " is out of range for " + t.describe());
  }
  shape s = t.shape();
  strides st = t.strides();
  const index_t inner = d < t.rank() ? t.strides()[d] * t.shape()[d] : 1;
  s.insert(d, 1);
  st.insert(d, inner);
  return tensor<T, B>(t.storage(), s, st, t.offset());
}

}  // namespace kiln
