// tests/support/eigen_oracle.hpp — comparing kiln's results with Eigen's.
// The oracle is an Eigen array expression over the same host data (computed in double
// where float rounding would blur the comparison). NaN must meet NaN, inf the same inf.
#pragma once

#include <gtest/gtest.h>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>  // erf for the GELU oracle
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "random.hpp"

namespace kiln_test {

using ArrayXd = Eigen::Array<double, Eigen::Dynamic, 1>;
using ArrayXf = Eigen::Array<float, Eigen::Dynamic, 1>;

/// Float data viewed as an Eigen column array (no copy).
inline Eigen::Map<const ArrayXf> as_array(const std::vector<float>& v) {
  return Eigen::Map<const ArrayXf>(v.data(), Eigen::Index(v.size()));
}

/// |got - want| <= atol + rtol * |want| elementwise, with NaN == NaN and exact infinities.
template <class Got, class Want>
::testing::AssertionResult all_close(const Got& got, const Want& want, double rtol, double atol = 0.0) {
  if (std::size_t(got.size()) != std::size_t(want.size())) {
    return ::testing::AssertionFailure() << "size " << got.size() << " vs oracle " << want.size();
  }
  std::size_t bad = 0, first = 0;
  double worst = 0;
  for (std::size_t i = 0; i < std::size_t(got.size()); ++i) {
    const double g = static_cast<double>(got[i]);
    const double w = static_cast<double>(want[i]);
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::isfinite(g) && std::abs(g - w) <= atol + rtol * std::abs(w);
    if (!ok) {
      if (!bad) first = i;
      ++bad;
      if (std::isfinite(g) && std::isfinite(w)) worst = std::max(worst, std::abs(g - w));
    }
  }
  if (!bad) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements differ; first at " << first << ": got "
         << static_cast<double>(got[first]) << ", oracle " << static_cast<double>(want[first])
         << " (rtol " << rtol << ", atol " << atol << ", worst abs diff " << worst << "); " << seed_note();
}

/// Exact equality (integers, copies, masks).
template <class Got, class Want>
::testing::AssertionResult all_equal(const Got& got, const Want& want) {
  if (std::size_t(got.size()) != std::size_t(want.size())) {
    return ::testing::AssertionFailure() << "size " << got.size() << " vs oracle " << want.size();
  }
  for (std::size_t i = 0; i < std::size_t(got.size()); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (!(g == w || (std::isnan(g) && std::isnan(w)))) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", oracle " << w << "; "
                                           << seed_note();
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln_test
