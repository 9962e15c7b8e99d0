// kiln/dist/detail/host_access.hpp — a host pointer to a tensor's elements for the length
// of one MPI call, on any backend: the storage itself where the host can address it (CPU
// memory, or a Vulkan context's mapped device memory: zero-copy), else a host copy that is
// downloaded before and uploaded after. Written against backend_traits only: no backend
// header is included here.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/backend.hpp"
#include "kiln/core/tensor.hpp"

namespace kiln::dist::detail {

enum class access { read, write, read_write };

/// True when a stride of 0 makes several elements one (kiln::broadcast_to): not writable.
template <class T, class B>
bool aliases_elements(const tensor<T, B>& t) {
  for (int i = 0; i < t.rank(); ++i) {
    if (t.shape()[i] > 1 && t.strides()[i] == 0) return true;
  }
  return false;
}

/// Host access to the contiguous elements of t. Non-contiguous t is copied into a
/// contiguous tensor of its backend first (and the result written back into t's elements
/// by finish()). Synchronous: the backend's pending work on the storage is finished before
/// the pointer is handed out, and an upload (if any) is recorded by finish(), ordered
/// before any later kernel that reads t.
template <class T, class B>
class host_span {
  using traits = backend_traits<B>;
  using storage_type = typename traits::storage;

 public:
  // work_ is constructed, never assigned: a tensor's `=` copies values, its constructor the handle
  host_span(const tensor<T, B>& t, access mode, std::vector<std::byte>& scratch)
      : target_(t), work_(t.is_contiguous() ? t : t.clone()), mode_(mode) {
    const std::size_t n = static_cast<std::size_t>(work_.numel());
    if (n == 0) return;
    storage_type& s = *work_.storage();
    const std::size_t at = static_cast<std::size_t>(work_.offset()) * sizeof(T);
    if constexpr (requires { s.data(); }) {
      if constexpr (traits::asynchronous) traits::synchronize(*s.ctx);
      ptr_ = reinterpret_cast<T*>(s.data() + at);
      return;
    } else {
      if constexpr (requires { s.mapped(); }) {
        if (std::byte* m = s.mapped()) {  // zero-copy: host-visible, coherent device memory
          // Everything recorded so far, so that the GPU's writes to t are visible and no
          // kernel still reads what MPI is about to overwrite.
          traits::synchronize(*s.ctx);
          ptr_ = reinterpret_cast<T*>(m + at);
          return;
        }
      }
      staged_ = true;
      if (scratch.size() < n * sizeof(T)) scratch.resize(n * sizeof(T));
      ptr_ = reinterpret_cast<T*>(scratch.data());
      if (mode_ != access::write) traits::download(s, at, ptr_, n * sizeof(T));
    }
  }

  T* data() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return static_cast<std::size_t>(work_.numel()); }
  /// Whether the elements went through a host copy (false: MPI reads/writes the storage).
  bool staged() const noexcept { return staged_; }

  /// After MPI wrote the elements: upload a host copy, write a contiguous copy back.
  void finish() {
    if (mode_ == access::read || size() == 0) return;
    if (staged_) {
      traits::upload(*work_.storage(), static_cast<std::size_t>(work_.offset()) * sizeof(T), ptr_, size() * sizeof(T));
    }
    if (work_.storage() != target_.storage() || work_.offset() != target_.offset() ||
        work_.strides() != target_.strides()) {
      tensor<T, B> view = target_;  // a handle onto the caller's elements
      view = work_;                 // one copy kernel into the strided view
    }
  }

 private:
  tensor<T, B> target_;
  tensor<T, B> work_;
  access mode_;
  T* ptr_ = nullptr;
  bool staged_ = false;
};

}  // namespace kiln::dist::detail
