// tests/support/checks.hpp — small helpers shared by the core tests.
#pragma once

#include <gtest/gtest.h>

#include <kiln/core/error.hpp>

#include <cstddef>
#include <numeric>
#include <string>
#include <vector>

namespace kiln_test {

/// start, start+1, ... (n values).
inline std::vector<float> iota(std::size_t n, float start = 0.0f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

/// The message of the kiln::shape_error f throws (or a marker when it throws none).
template <class F>
std::string shape_error_of(F&& f) {
  try {
    f();
  } catch (const kiln::shape_error& e) {
    return e.what();
  }
  return "<no kiln::shape_error>";
}

/// The message of the exception of type E that f throws (or a marker when it throws none).
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<no exception of the expected type>";
}

/// msg contains part.
inline ::testing::AssertionResult has(const std::string& msg, const std::string& part) {
  if (msg.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << msg << "\" does not mention \"" << part << "\"";
}

}  // namespace kiln_test
