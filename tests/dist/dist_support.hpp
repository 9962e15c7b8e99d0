// tests/dist/dist_support.hpp — what kiln_dist_tests' files share: the world communicator
// (one for the binary, made after main.cpp started MPI) and the typed suites' backend names.
#pragma once

#include <string>
#include <type_traits>

#include <kiln/dist/dist.hpp>
#include <kiln/kiln.hpp>

namespace kiln_test::dist {

/// MPI_COMM_WORLD as one kiln communicator for the whole binary.
inline kiln::dist::communicator& world() {
  static kiln::dist::communicator c = kiln::dist::communicator::world();
  return c;
}

/// Names the typed suites' backends "cpu" and "vulkan" (ctest filters on them).
struct backend_names {
  template <class B>
  static std::string GetName(int) {
    return std::is_same_v<B, kiln::cpu<>> ? "cpu" : "vulkan";
  }
};

}  // namespace kiln_test::dist
