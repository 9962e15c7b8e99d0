// kiln/core/shape.hpp — shapes and strides (rank <= 8), NumPy broadcasting.
// Extents and strides are counted in elements, row-major; a stride of 0 marks a
// broadcast dimension. Everything here is checked in release builds too.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "kiln/core/error.hpp"
#include "kiln/detail/config.hpp"

namespace kiln {

using index_t = std::int64_t;

inline constexpr int max_rank = 8;

/// Most elements a tensor may hold: 2^59. Every byte count and element offset computed
/// from a shape (8-byte dtypes included) then stays far inside index_t, so size arithmetic
/// anywhere in kiln cannot wrap; larger shapes throw kiln::shape_error where they are made.
inline constexpr index_t max_numel = index_t(1) << 59;

namespace detail {

/// Fixed-capacity list of up to max_rank signed extents; no heap.
class dims {
 public:
  constexpr dims() noexcept = default;

  constexpr int rank() const noexcept { return rank_; }
  constexpr bool empty() const noexcept { return rank_ == 0; }
  constexpr index_t operator[](int i) const noexcept { return d_[static_cast<std::size_t>(i)]; }
  constexpr index_t& operator[](int i) noexcept { return d_[static_cast<std::size_t>(i)]; }
  constexpr const index_t* begin() const noexcept { return d_.data(); }
  constexpr const index_t* end() const noexcept { return d_.data() + rank_; }
  constexpr index_t* begin() noexcept { return d_.data(); }
  constexpr index_t* end() noexcept { return d_.data() + rank_; }
  constexpr index_t back() const noexcept { return d_[static_cast<std::size_t>(rank_ - 1)]; }

  constexpr void push_back(index_t v) {
    if (rank_ >= max_rank) {
      throw shape_error("kiln: rank above the maximum of " + std::to_string(max_rank));
    }
    d_[static_cast<std::size_t>(rank_++)] = v;
  }
  constexpr void insert(int pos, index_t v) {
    push_back(0);
    for (int i = rank_ - 1; i > pos; --i) d_[static_cast<std::size_t>(i)] = d_[static_cast<std::size_t>(i - 1)];
    d_[static_cast<std::size_t>(pos)] = v;
  }
  constexpr void erase(int pos) noexcept {
    for (int i = pos; i + 1 < rank_; ++i) d_[static_cast<std::size_t>(i)] = d_[static_cast<std::size_t>(i + 1)];
    d_[static_cast<std::size_t>(--rank_)] = 0;
  }

  friend constexpr bool operator==(const dims& a, const dims& b) noexcept {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i) {  // at most 8: a loop, not a call to memcmp
      if (a.d_[static_cast<std::size_t>(i)] != b.d_[static_cast<std::size_t>(i)]) return false;
    }
    return true;
  }

  /// "[3, 4]"
  std::string to_string() const;

 private:
  std::array<index_t, max_rank> d_{};
  int rank_ = 0;
};

/// a * b for extents (a >= 1, b >= 0); false when the product is above max_numel.
constexpr bool mul_extent(index_t a, index_t b, index_t& out) noexcept {
  if (b > max_numel / a) return false;
  out = a * b;
  return true;
}

/// True when the product of the extents, each counted as at least 1, is at most
/// max_numel: then the element count, every contiguous stride and every byte count made
/// from them fit in index_t (a zero extent does not excuse a huge one: strides still
/// multiply it).
constexpr bool extents_fit(const dims& d) noexcept {
  index_t n = 1;
  for (index_t v : d) {
    if (!mul_extent(n, v > 1 ? v : 1, n)) return false;
  }
  return true;
}

}  // namespace detail

/// Extents of a tensor: rank 0..8, each extent >= 0, at most kiln::max_numel elements.
/// Throws kiln::shape_error otherwise.
/// Example: `kiln::shape s{512, 256}; s.numel() == 131072`
class shape : public detail::dims {
 public:
  constexpr shape() noexcept = default;
  shape(std::initializer_list<index_t> e);
  explicit shape(std::span<const index_t> e);

  /// Number of elements (1 for rank 0).
  constexpr index_t numel() const noexcept {
    index_t n = 1;
    for (index_t v : *this) n *= v;
    return n;
  }

 private:
  template <class It>
  void assign(It first, It last) {
    if (last - first > max_rank) {
      throw shape_error("kiln::shape: rank " + std::to_string(last - first) +
                        " is above the maximum of " + std::to_string(max_rank));
    }
    for (; first != last; ++first) {
      if (*first < 0) {
        throw shape_error("kiln::shape: negative extent " + std::to_string(*first));
      }
      push_back(*first);
    }
    check_numel("kiln::shape");
  }

 public:
  /// Throws kiln::shape_error naming op when the element count is above max_numel (an
  /// extent count that would overflow any byte count made from it).
  void check_numel(const char* op) const;
};

/// Element strides of a tensor view (0 = broadcast).
class strides : public detail::dims {
 public:
  constexpr strides() noexcept = default;
  strides(std::initializer_list<index_t> e);
};

/// Row-major (C-order) strides of a contiguous tensor of shape s.
KILN_DECL strides contiguous_strides(const shape& s);

/// NumPy broadcasting of two shapes; false when they are incompatible.
KILN_DECL bool broadcast_shapes(const shape& a, const shape& b, shape& out);

/// True when shape `from` broadcasts to exactly `to` (NumPy rules, `to` unchanged).
KILN_DECL bool broadcasts_to(const shape& from, const shape& to) noexcept;

}  // namespace kiln

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/core/impl/shape.ipp"
#endif
