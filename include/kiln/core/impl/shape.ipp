// kiln/core/impl/shape.ipp — definitions of kiln/core/shape.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/core/shape.hpp"

namespace kiln {

namespace detail {

KILN_DECL std::string dims::to_string() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(d_[static_cast<std::size_t>(i)]);
  }
  return s + "]";
}

}  // namespace detail

KILN_DECL shape::shape(std::initializer_list<index_t> e) { assign(e.begin(), e.end()); }
KILN_DECL shape::shape(std::span<const index_t> e) { assign(e.begin(), e.end()); }

KILN_DECL void shape::check_numel(const char* op) const {
  if (!detail::extents_fit(*this)) {
    throw shape_error(std::string(op) + ": shape " + to_string() + " spans more than 2^59 elements");
  }
}

KILN_DECL strides::strides(std::initializer_list<index_t> e) {
  for (index_t v : e) push_back(v);
}

KILN_DECL strides contiguous_strides(const shape& s) {
  strides st;
  for (int i = 0; i < s.rank(); ++i) st.push_back(0);
  index_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= std::max<index_t>(s[i], 1);
  }
  return st;
}

KILN_DECL bool broadcast_shapes(const shape& a, const shape& b, shape& out) {
  // The common cases (equal shapes; a scalar's rank-0 shape) copy a shape whole. The
  // general case builds its result element by element, so it is kept off that path.
  if (b.rank() == 0 || a == b) {
    if (&out != &a) out = a;
    return true;
  }
  if (a.rank() == 0) {
    out = b;
    return true;
  }
  const int r = std::max(a.rank(), b.rank());
  shape res;
  for (int i = 0; i < r; ++i) {
    const int ia = i - (r - a.rank());
    const int ib = i - (r - b.rank());
    const index_t da = ia >= 0 ? a[ia] : 1;
    const index_t db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    res.push_back(da == 1 ? db : da);
  }
  // two shapes within the limit can broadcast to one beyond it ([2^40, 1] and [1, 2^40])
  if (!detail::extents_fit(res)) {
    throw shape_error("kiln: broadcasting " + a.to_string() + " with " + b.to_string() + " gives " +
                      res.to_string() + ", which spans more than 2^59 elements");
  }
  out = res;
  return true;
}

KILN_DECL bool broadcasts_to(const shape& from, const shape& to) noexcept {
  const int lead = to.rank() - from.rank();
  if (lead < 0) return false;
  for (int i = 0; i < from.rank(); ++i) {
    if (from[i] != 1 && from[i] != to[i + lead]) return false;
  }
  return true;
}

}  // namespace kiln
