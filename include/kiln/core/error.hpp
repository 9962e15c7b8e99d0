// kiln/core/error.hpp — the exception hierarchy.
// Every failure kiln reports at run time is a kiln::error (a std::runtime_error); the
// subclass says which kind. Messages name the op, each operand's dtype/shape and device.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "kiln/detail/config.hpp"

namespace kiln {

/// Base of every exception kiln throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Shapes that cannot be combined (broadcasting, views, assignment targets).
class shape_error : public error {
 public:
  using error::error;
};

/// A dtype that an op does not accept at run time (most dtype misuse fails to compile).
class dtype_error : public error {
 public:
  using error::error;
};

/// A backend call failed (names the call and the result code).
class device_error : public error {
 public:
  using error::error;
};

/// No usable device for the requested backend; the message says why.
class device_unavailable : public device_error {
 public:
  using device_error::device_error;
};

/// An allocation failed after the pool was trimmed and the request retried.
class out_of_memory : public device_error {
 public:
  out_of_memory(const std::string& what, std::size_t requested, std::size_t available);
  std::size_t requested() const noexcept { return requested_; }
  std::size_t available() const noexcept { return available_; }

 private:
  std::size_t requested_;
  std::size_t available_;
};

/// An index (an embedding id, a gathered position) outside the range its operand allows;
/// the message names the op, the bad index, where it was and the valid range.
class index_error : public error {
 public:
  using error::error;
};

/// A value an op cannot take (a NaN or infinite weight given to kiln::quantize); the
/// message names the op, the operand and where the value is.
class value_error : public error {
 public:
  using error::error;
};

/// A file that is not what its format requires (damaged, truncated, or a dtype the reader
/// cannot give as the requested type); the message names the file and, where there is
/// one, the entry.
class format_error : public error {
 public:
  using error::error;
};

/// A generated or user-supplied shader failed to compile.
class shader_error : public error {
 public:
  using error::error;
};

}  // namespace kiln

/// Internal invariant check (not for user input: those throw in every build mode).
#if defined(NDEBUG) && !defined(KILN_ENABLE_ASSERTS)
#define KILN_ASSERT(cond) ((void)0)
#else
#include <cstdio>
#include <cstdlib>
#define KILN_ASSERT(cond)                                                              \
  ((cond) ? (void)0                                                                    \
          : (std::fprintf(stderr, "kiln: internal invariant failed: %s (%s:%d)\n", #cond, \
                          __FILE__, __LINE__),                                         \
             std::abort()))
#endif

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/core/impl/error.ipp"
#endif
