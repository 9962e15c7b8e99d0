// tests/support/reference.hpp — a float64 reference with a tolerance per element, the
// comparison against it, and the kernel count of a statement: what the structural-op
// tests (reductions, norms, matmul) share.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends.hpp"
#include "random.hpp"

namespace kiln_test {

/// Expected values and, per value, the largest acceptable |got - want|.
struct reference {
  std::vector<double> value;
  std::vector<double> tol;
};

/// Every got[i] within tol[i] of want[i]; NaN where want is NaN, equal infinities.
template <class G>
::testing::AssertionResult close(const std::vector<G>& got, const reference& want, const std::string& what) {
  if (got.size() != want.value.size()) {
    return ::testing::AssertionFailure() << what << ": " << got.size() << " values, expected " << want.value.size();
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(static_cast<float>(got[i])), w = want.value[i];
    const bool ok = std::isnan(w) ? std::isnan(g) : std::isinf(w) ? g == w : std::fabs(g - w) <= want.tol[i];
    if (!ok) {
      return ::testing::AssertionFailure() << what << ": element " << i << " is " << g << ", expected " << w
                                           << " within " << want.tol[i] << " (" << seed_note() << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

/// Kernels a statement runs: the context's count before and after f.
template <class B, class F>
std::uint64_t kernels_of(F&& f) {
  auto& c = ctx<B>();
  c.synchronize();
  const std::uint64_t before = c.kernels_launched();
  f();
  c.synchronize();
  return c.kernels_launched() - before;
}

}  // namespace kiln_test
