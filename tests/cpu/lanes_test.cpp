// tests/cpu/lanes_test.cpp — the op-body vocabulary on the CPU's vector types
// (expr/lanes.hpp, the lane_traits of cpu/simd.hpp).
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <cmath>
#include <random>

#include "random.hpp"

TEST(lanes, fmadd_rounds_once_on_batches_as_on_scalars) {
  // the error of a square, c * c - h with h = c * c rounded: 0 when the multiply and the
  // add round separately (xsimd 8's AVX-512 fma is such a pair), exact with one rounding
  using batch = xsimd::batch<float>;
  auto g = kiln_test::rng();
  std::uniform_real_distribution<float> d(1.0f, 16.0f);
  int checked = 0;
  for (int trial = 0; trial < 64; ++trial) {
    const float c = d(g);
    const float h = c * c;
    const double exact = static_cast<double>(c) * static_cast<double>(c) - static_cast<double>(h);
    const float want = static_cast<float>(exact);  // representable: the error of a product is
    EXPECT_EQ(kiln::detail::fmadd(c, c, -h), want) << "scalar, c = " << c << " " << kiln_test::seed_note();
    const batch v = kiln::detail::fmadd(batch(c), batch(c), batch(-h));
    for (std::size_t j = 0; j < batch::size; ++j) {
      EXPECT_EQ(v.get(j), want) << "lane " << j << ", c = " << c << " " << kiln_test::seed_note();
    }
    checked += exact != 0.0;
  }
  EXPECT_GT(checked, 32);  // most squares of random floats are inexact
}
