// kiln/core/tensor.hpp — kiln::tensor<T, B>: a shaped, strided view of backend storage.
// A tensor is a handle: copies and views (slice, transpose, ...) share the storage;
// assignment (`=`, `+=`) writes values into the elements the tensor views.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/backend.hpp"
#include "kiln/core/context.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

namespace kiln {

namespace detail {
template <class T, class B, class E>
void assign(tensor<T, B>& out, const E& e);
template <class T, class B, class S>
void fill(tensor<T, B>& out, S value);
}  // namespace detail

/// An n-dimensional array of T (rank <= 8, row-major) living on backend B.
///
/// Copies share the storage (a handle, like a view of the whole). Assignment writes
/// values: `y = expr` evaluates expr into y's elements in one fused kernel; expr's shape
/// must broadcast to y's, which never changes (NumPy's `y[...] = expr`); an empty y is
/// allocated with expr's shape. Throws kiln::shape_error on shape mismatch or when an
/// input is an empty tensor.
/// Example: `auto y = kiln::empty<float>(ctx, {4096}); y = kiln::relu(x) * 2.0f;`
template <class T, class B>
class tensor {
  static_assert(element<T>, "kiln: a tensor's element type must be float, kiln::half, "
                            "kiln::bfloat16, int8_t, int32_t or uint8_t");
  static_assert(backend<B>, "kiln: tensor<T, B> needs a backend tag such as kiln::cpu<> "
                            "(include <kiln/kiln.hpp>) or kiln::vulkan (<kiln/vulkan.hpp>)");

 public:
  using value_type = T;
  using backend_type = B;
  using traits = backend_traits<B>;
  using storage_type = typename traits::storage;

  tensor() = default;
  tensor(std::shared_ptr<storage_type> storage, kiln::shape s, kiln::strides st, index_t offset)
      : storage_(std::move(storage)), shape_(s), strides_(st), offset_(offset) {}

  tensor(const tensor&) = default;
  tensor(tensor&&) noexcept = default;
  ~tensor() = default;

  /// Writes other's values into this tensor's elements (allocates if this is empty).
  tensor& operator=(const tensor& other) {
    detail::assign(*this, other);
    return *this;
  }
  tensor& operator=(tensor&& other) {
    detail::assign(*this, other);
    return *this;
  }
  /// Evaluates an expression into this tensor's elements: one fused kernel.
  template <class E>
    requires requires { typename std::remove_cvref_t<E>::kiln_expression_tag; }
  tensor& operator=(E&& e) {
    detail::assign(*this, e);
    return *this;
  }
  /// Sets every element to value.
  template <class S>
    requires std::is_arithmetic_v<S>
  tensor& operator=(S value) {
    detail::fill(*this, value);
    return *this;
  }

  template <class E> tensor& operator+=(E&& e);
  template <class E> tensor& operator-=(E&& e);
  template <class E> tensor& operator*=(E&& e);
  template <class E> tensor& operator/=(E&& e);

  /// Exchanges the handles (no element is copied).
  friend void swap(tensor& a, tensor& b) noexcept {
    std::swap(a.storage_, b.storage_);
    std::swap(a.shape_, b.shape_);
    std::swap(a.strides_, b.strides_);
    std::swap(a.offset_, b.offset_);
  }

  bool defined() const noexcept { return storage_ != nullptr; }
  const kiln::shape& shape() const noexcept { return shape_; }
  const kiln::strides& strides() const noexcept { return strides_; }
  int rank() const noexcept { return shape_.rank(); }
  index_t numel() const noexcept { return shape_.numel(); }
  index_t size(int dim) const { return shape_[normalize_dim(dim)]; }
  index_t offset() const noexcept { return offset_; }
  static constexpr kiln::dtype dtype() noexcept { return dtype_traits<T>::value; }

  /// True when the elements are densely packed in row-major order.
  bool is_contiguous() const noexcept {
    index_t expect = 1;
    for (int i = rank() - 1; i >= 0; --i) {
      if (shape_[i] != 1 && strides_[i] != expect) return false;
      expect *= shape_[i];
    }
    return true;
  }

  /// Pointer to element [0, ..., 0]; backends whose memory the host can address only.
  T* data() const
    requires requires(storage_type& s) { s.data(); }
  {
    return storage_ ? reinterpret_cast<T*>(storage_->data()) + offset_ : nullptr;
  }

  const std::shared_ptr<storage_type>& storage() const noexcept { return storage_; }
  kiln::context<B> context() const { return kiln::context<B>(require_storage("context").ctx); }

  /// "f32[3, 4] on cpu"
  std::string describe() const {
    std::string s(dtype_traits<T>::name);
    s += shape_.to_string();
    s += storage_ ? " on " + traits::device_name(*storage_->ctx) : " (empty)";
    return s;
  }

  /// Copies the elements to a new row-major host vector (waits for pending work).
  std::vector<T> to_host() const {
    std::vector<T> out(static_cast<std::size_t>(numel()));
    copy_to(std::span<T>(out));
    return out;
  }

  /// Copies the elements, row-major, into dst (dst.size() must equal numel()).
  void copy_to(std::span<T> dst) const {
    if (static_cast<index_t>(dst.size()) != numel()) {
      throw shape_error("kiln::copy_to: destination holds " + std::to_string(dst.size()) +
                        " elements, source is " + describe());
    }
    if (numel() == 0) return;
    if (is_contiguous()) {
      traits::download(require_storage("copy_to"), static_cast<std::size_t>(offset_) * sizeof(T),
                       dst.data(), dst.size_bytes());
    } else {
      clone().copy_to(dst);
    }
  }

  /// A new contiguous tensor with the same values.
  tensor clone() const {
    tensor out(traits::allocate(require_storage("clone").ctx, static_cast<std::size_t>(numel()) * sizeof(T)),
               shape_, contiguous_strides(shape_), 0);
    out = *this;
    return out;
  }

  int normalize_dim(int dim) const {
    const int d = dim < 0 ? dim + rank() : dim;
    if (d < 0 || d >= rank()) {
      throw shape_error("kiln: dimension " + std::to_string(dim) + " is out of range for " + describe());
    }
    return d;
  }

 private:
  storage_type& require_storage(const char* op) const {
    if (!storage_) throw shape_error(std::string("kiln::") + op + ": the tensor is empty (default-constructed or moved from)");
    return *storage_;
  }

  std::shared_ptr<storage_type> storage_;
  kiln::shape shape_;
  kiln::strides strides_;
  index_t offset_ = 0;
};

}  // namespace kiln
