// tests/support/random.hpp — fresh random inputs every run, reproducible on demand.
// The run's seed is printed at start and with every failure; KILN_TEST_SEED=<n>
// replays a run.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kiln_test {

inline std::uint64_t run_seed() {
  static const std::uint64_t seed = [] {
    if (const char* s = std::getenv("KILN_TEST_SEED"); s && *s) return static_cast<std::uint64_t>(std::strtoull(s, nullptr, 10));
    return static_cast<std::uint64_t>((std::uint64_t(std::random_device{}()) << 32) ^ std::random_device{}());
  }();
  return seed;
}

/// A generator seeded from the run seed and the current test's name.
inline std::mt19937_64 rng() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::uint64_t h = run_seed();
  if (info) {
    for (const char* p = info->test_suite_name(); *p; ++p) h = h * 1099511628211ull ^ std::uint64_t(*p);
    for (const char* p = info->name(); *p; ++p) h = h * 1099511628211ull ^ std::uint64_t(*p);
  }
  return std::mt19937_64(h);
}

inline std::string seed_note() { return "KILN_TEST_SEED=" + std::to_string(run_seed()); }

/// Uniform floats in [lo, hi).
inline std::vector<float> uniform(std::mt19937_64& g, std::size_t n, float lo = -4.0f, float hi = 4.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// Uniform integers in [lo, hi], as T.
template <class T>
std::vector<T> uniform_int(std::mt19937_64& g, std::size_t n, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(g));
  return v;
}

/// Overwrites a few positions (first, last, and some inside) with NaN, +inf, -inf, -0.
inline void add_specials(std::vector<float>& v) {
  const float sp[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), -0.0f};
  if (v.empty()) return;
  for (std::size_t i = 0; i < 4; ++i) v[(i * 7919) % v.size()] = sp[i];
  v.back() = sp[0];
}

/// Runs a seed banner once per test binary.
class seed_banner : public ::testing::Environment {
 public:
  void SetUp() override { std::printf("kiln tests: %s\n", seed_note().c_str()); }
};

}  // namespace kiln_test
