// kiln/core/impl/factories.ipp — definitions of kiln/core/factories.hpp
// (inline in the header-only mode, compiled once in kiln::runtime otherwise; see
// kiln/detail/config.hpp).
#pragma once

#include <random>

#include "kiln/core/factories.hpp"

namespace kiln::detail {

KILN_DECL void random_uniform_floats(float* out, std::size_t n, float low, float high, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(low, high);
  for (std::size_t i = 0; i < n; ++i) out[i] = dist(gen);
}

KILN_DECL void random_uniform_ints(int* out, std::size_t n, int low, int high, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> dist(low, high);
  for (std::size_t i = 0; i < n; ++i) out[i] = dist(gen);
}

}  // namespace kiln::detail
