// tests/core/half_test.cpp — kiln::half against an independent binary16 model.
// Every one of the 65,536 bit patterns is decoded with std::ldexp from its fields; every
// rounding boundary between consecutive halves is probed. Both the portable conversion
// (detail::half_bits_*_soft) and the public kiln::half (F16C under -march=native) are
// held to the same model, bit for bit.
#include <gtest/gtest.h>

#include <kiln/core/half.hpp>

#include <algorithm>
#include <bit>  // std::bit_cast
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "random.hpp"

namespace {

using kiln::detail::half_bits_from_float_soft;
using kiln::detail::half_bits_to_float_soft;

constexpr std::uint32_t patterns = 1u << 16;

bool is_nan_pattern(std::uint32_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

/// binary16 value from its fields: (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m for e == 0.
double reference_value(std::uint32_t h) {
  const bool neg = (h & 0x8000u) != 0;
  const int e = static_cast<int>((h >> 10) & 0x1fu);
  const int m = static_cast<int>(h & 0x3ffu);
  double v;
  if (e == 0) v = std::ldexp(static_cast<double>(m), -24);
  else if (e == 31) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(static_cast<double>(1024 + m), e - 25);
  return neg ? -v : v;  // keeps the sign of zero and of NaN
}

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%04x", v);
  return buf;
}
std::string fhex(float f) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%a (0x%08x)", static_cast<double>(f), std::bit_cast<std::uint32_t>(f));
  return buf;
}

/// The public conversions, as bits.
std::uint16_t public_from_float(float f) { return kiln::half(f).bits; }
float public_to_float(std::uint16_t h) { return static_cast<float>(kiln::half::from_bits(h)); }

/// Round-to-nearest-even into binary16 by searching the sorted table of positive finite
/// halves. The table ends with 2^16 standing for infinity, the value the next exponent
/// would start at, which makes IEEE overflow (>= 65520 -> inf) fall out of the same rule.
class nearest_even {
 public:
  nearest_even() {
    for (std::uint32_t h = 0; h < 0x7c00u; ++h) v_.push_back(reference_value(h));
    v_.push_back(65536.0);  // bits 0x7c00: +inf
  }
  std::uint16_t operator()(float f) const {
    const double x = f;
    const std::uint32_t sign = std::signbit(x) ? 0x8000u : 0u;
    const double a = std::abs(x);
    if (a >= v_.back()) return static_cast<std::uint16_t>(sign | 0x7c00u);
    const auto hi = static_cast<std::uint32_t>(std::upper_bound(v_.begin(), v_.end(), a) - v_.begin());
    const std::uint32_t lo = hi - 1;  // v_[lo] <= a < v_[hi]
    const double dl = a - v_[lo], dh = v_[hi] - a;
    const std::uint32_t r = dl < dh ? lo : dh < dl ? hi : ((lo & 1u) ? hi : lo);
    return static_cast<std::uint16_t>(sign | r);
  }

 private:
  std::vector<double> v_;
};

::testing::AssertionResult same_float(float got, double want, std::uint32_t h, const char* which) {
  if (std::isnan(want)) {
    if (std::isnan(got) && std::signbit(got) == std::signbit(want)) return ::testing::AssertionSuccess();
  } else if (std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(static_cast<float>(want))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << which << "(" << hex(h) << ") = " << fhex(got) << ", reference "
                                       << fhex(static_cast<float>(want));
}

::testing::AssertionResult rounds_to(float f, std::uint16_t want) {
  const std::uint16_t soft = half_bits_from_float_soft(f), pub = public_from_float(f);
  if (soft == want && pub == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << fhex(f) << ": soft " << hex(soft) << ", kiln::half " << hex(pub)
                                       << ", expected " << hex(want);
}

// The soft conversions are constexpr: spot values at compile time.
static_assert(half_bits_from_float_soft(1.0f) == 0x3c00u);
static_assert(half_bits_from_float_soft(-2.0f) == 0xc000u);
static_assert(half_bits_from_float_soft(65504.0f) == 0x7bffu);
static_assert(half_bits_from_float_soft(65520.0f) == 0x7c00u);
static_assert(half_bits_from_float_soft(5.9604644775390625e-08f) == 0x0001u);
static_assert(half_bits_to_float_soft(0x3555u) == 0.333251953125f);
static_assert(half_bits_to_float_soft(0x0400u) == 6.103515625e-05f);
static_assert(kiln::half::from_bits(0x1234u).bits == 0x1234u);

}  // namespace

TEST(half, to_float_matches_reference_for_every_pattern) {
  std::uint32_t bad = 0;
  for (std::uint32_t h = 0; h < patterns; ++h) {
    const double want = reference_value(h);
    const auto r1 = same_float(half_bits_to_float_soft(static_cast<std::uint16_t>(h)), want, h, "soft");
    const auto r2 = same_float(public_to_float(static_cast<std::uint16_t>(h)), want, h, "kiln::half");
    if (!r1 || !r2) {
      if (++bad <= 10) ADD_FAILURE() << (r1 ? r2 : r1).message();
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST(half, nan_patterns_decode_to_quiet_nans_with_their_sign) {
  std::uint32_t checked = 0;
  for (std::uint32_t h = 0; h < patterns; ++h) {
    if (!is_nan_pattern(h)) continue;
    for (const float f : {half_bits_to_float_soft(static_cast<std::uint16_t>(h)), public_to_float(static_cast<std::uint16_t>(h))}) {
      const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
      ASSERT_TRUE(std::isnan(f)) << hex(h);
      ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << hex(h);
      ASSERT_NE(x & 0x400000u, 0u) << hex(h) << " decodes to a signalling NaN " << fhex(f);
      ASSERT_EQ((x >> 13) & 0x1ffu, h & 0x1ffu) << hex(h) << ": payload below the quiet bit is lost";
    }
    ++checked;
  }
  EXPECT_EQ(checked, 2u * 1023u);
}

TEST(half, every_non_nan_pattern_round_trips_exactly) {
  std::uint32_t bad = 0, checked = 0;
  for (std::uint32_t h = 0; h < patterns; ++h) {
    if (is_nan_pattern(h)) continue;
    const auto b = static_cast<std::uint16_t>(h);
    const std::uint16_t soft = half_bits_from_float_soft(half_bits_to_float_soft(b));
    const std::uint16_t pub = public_from_float(public_to_float(b));
    if (soft != b || pub != b) {
      if (++bad <= 10) ADD_FAILURE() << hex(h) << " -> soft " << hex(soft) << ", kiln::half " << hex(pub);
    }
    ++checked;
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(checked, patterns - 2u * 1023u);
}

TEST(half, nan_stays_nan_through_float) {
  for (std::uint32_t h = 0; h < patterns; ++h) {
    if (!is_nan_pattern(h)) continue;
    const auto b = static_cast<std::uint16_t>(h);
    const std::uint16_t soft = half_bits_from_float_soft(half_bits_to_float_soft(b));
    const std::uint16_t pub = public_from_float(public_to_float(b));
    ASSERT_TRUE(is_nan_pattern(soft)) << hex(h) << " -> " << hex(soft);
    ASSERT_TRUE(is_nan_pattern(pub)) << hex(h) << " -> " << hex(pub);
    ASSERT_EQ(soft & 0x8000u, h & 0x8000u) << hex(h);
    ASSERT_EQ(soft & 0x200u, 0x200u) << hex(h) << ": not quiet";
    ASSERT_EQ(soft & 0x1ffu, h & 0x1ffu) << hex(h) << ": payload changed";
    ASSERT_EQ(soft, pub) << hex(h);
  }
  // float NaNs whose payload lies below the bits a half keeps must not become infinity
  for (const std::uint32_t x : {0x7f800001u, 0xff800001u, 0x7f801fffu, 0x7fc00000u, 0xffc00000u, 0x7fffffffu,
                                0x7fa00000u}) {
    const float f = std::bit_cast<float>(x);
    for (const std::uint16_t r : {half_bits_from_float_soft(f), public_from_float(f)}) {
      EXPECT_TRUE(is_nan_pattern(r)) << fhex(f) << " -> " << hex(r);
      EXPECT_EQ(r & 0x8000u, (x >> 16) & 0x8000u) << fhex(f);
      EXPECT_EQ(r & 0x200u, 0x200u) << fhex(f) << ": not quiet";
    }
  }
}

TEST(half, every_midpoint_rounds_to_even_and_neighbours_round_to_nearest) {
  // consecutive finite halves h, h + 1 (same sign), including the step into infinity
  std::uint32_t checked = 0;
  for (const std::uint32_t sign : {0u, 0x8000u}) {
    for (std::uint32_t h = 0; h < 0x7c00u; ++h) {
      const double a = std::abs(reference_value(h));
      const double b = h + 1 == 0x7c00u ? 65536.0 : std::abs(reference_value(h + 1));
      const double mid_d = (a + b) / 2;
      const float mid = static_cast<float>(sign ? -mid_d : mid_d);
      ASSERT_EQ(static_cast<double>(std::abs(mid)), mid_d) << "midpoint not exact in float: " << hex(h);
      const std::uint32_t even = (h & 1u) ? h + 1 : h;
      const float toward_zero = std::nextafter(mid, 0.0f);
      const float away = std::nextafter(mid, sign ? -std::numeric_limits<float>::infinity()
                                                  : std::numeric_limits<float>::infinity());
      ASSERT_TRUE(rounds_to(mid, static_cast<std::uint16_t>(sign | even))) << "tie between " << hex(h) << " and "
                                                                            << hex(h + 1);
      ASSERT_TRUE(rounds_to(toward_zero, static_cast<std::uint16_t>(sign | h))) << "just below the midpoint";
      ASSERT_TRUE(rounds_to(away, static_cast<std::uint16_t>(sign | (h + 1)))) << "just above the midpoint";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2u * 0x7c00u);
}

TEST(half, special_values) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(rounds_to(0.0f, 0x0000u));
  EXPECT_TRUE(rounds_to(-0.0f, 0x8000u));
  EXPECT_TRUE(rounds_to(inf, 0x7c00u));
  EXPECT_TRUE(rounds_to(-inf, 0xfc00u));
  EXPECT_TRUE(rounds_to(1.0f, 0x3c00u));
  EXPECT_TRUE(rounds_to(-1.5f, 0xbe00u));
  // overflow: 65504 is the largest half; the tie at 65520 goes to infinity
  EXPECT_TRUE(rounds_to(65504.0f, 0x7bffu));
  EXPECT_TRUE(rounds_to(65519.99f, 0x7bffu));
  EXPECT_TRUE(rounds_to(std::nextafter(65520.0f, 0.0f), 0x7bffu));
  EXPECT_TRUE(rounds_to(65520.0f, 0x7c00u));
  EXPECT_TRUE(rounds_to(-65520.0f, 0xfc00u));
  EXPECT_TRUE(rounds_to(-65519.99f, 0xfbffu));
  EXPECT_TRUE(rounds_to(1e10f, 0x7c00u));
  EXPECT_TRUE(rounds_to(std::numeric_limits<float>::max(), 0x7c00u));
  // subnormals: 2^-24 is the smallest; 2^-25 ties to zero (even); just above it rounds up
  const float tiny = std::ldexp(1.0f, -24);
  EXPECT_TRUE(rounds_to(tiny, 0x0001u));
  EXPECT_TRUE(rounds_to(-tiny, 0x8001u));
  EXPECT_TRUE(rounds_to(std::ldexp(1.0f, -25), 0x0000u));
  EXPECT_TRUE(rounds_to(-std::ldexp(1.0f, -25), 0x8000u));
  EXPECT_TRUE(rounds_to(std::nextafter(std::ldexp(1.0f, -25), 1.0f), 0x0001u));
  EXPECT_TRUE(rounds_to(std::ldexp(3.0f, -25), 0x0002u));  // 1.5 * 2^-24: tie, to even 2
  EXPECT_TRUE(rounds_to(std::ldexp(5.0f, -25), 0x0002u));  // 2.5 * 2^-24: tie, to even 2
  EXPECT_TRUE(rounds_to(std::ldexp(1023.0f, -24), 0x03ffu));  // largest subnormal
  EXPECT_TRUE(rounds_to(std::ldexp(2047.0f, -25), 0x0400u));  // tie between it and 2^-14: even
  EXPECT_TRUE(rounds_to(std::ldexp(1.0f, -14), 0x0400u));     // smallest normal
  EXPECT_TRUE(rounds_to(std::numeric_limits<float>::denorm_min(), 0x0000u));
  EXPECT_TRUE(rounds_to(-std::numeric_limits<float>::denorm_min(), 0x8000u));
  EXPECT_TRUE(rounds_to(std::numeric_limits<float>::min(), 0x0000u));
  EXPECT_TRUE(std::isnan(static_cast<float>(kiln::half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(static_cast<float>(kiln::half(-0.0f))), 0x80000000u);
}

TEST(half, soft_and_public_agree_on_float_inputs_and_match_nearest_even) {
  // The soft path and kiln::half against the table model: every float whose top 19 bits
  // are any pattern and whose low 13 bits (the ones a normal half drops) sit at or next
  // to the rounding boundary, a dense walk through the half subnormal range, and random
  // bit patterns.
  const nearest_even model;
  std::uint64_t bad = 0, checked = 0;
  auto check = [&](std::uint32_t x) {
    const float f = std::bit_cast<float>(x);
    const std::uint16_t soft = half_bits_from_float_soft(f), pub = public_from_float(f);
    ++checked;
    if (std::isnan(f)) {
      if (soft != pub || !is_nan_pattern(soft) || (soft & 0x8000u) != ((x >> 16) & 0x8000u)) {
        if (++bad <= 10) ADD_FAILURE() << fhex(f) << ": soft " << hex(soft) << ", kiln::half " << hex(pub);
      }
      return;
    }
    const std::uint16_t want = model(f);
    if (soft != want || pub != want) {
      if (++bad <= 10) {
        ADD_FAILURE() << fhex(f) << ": soft " << hex(soft) << ", kiln::half " << hex(pub) << ", nearest even "
                      << hex(want);
      }
    }
  };
  for (std::uint32_t top = 0; top < (1u << 19); ++top) {
    for (const std::uint32_t low : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu}) check(top << 13 | low);
  }
  // |x| in [2^-26, 2^-13]: exponents 101..113, where the rounding position moves
  for (std::uint32_t x = 101u << 23; x < 114u << 23; x += 61) {
    check(x);
    check(x | 0x80000000u);
  }
  auto g = kiln_test::rng();
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 1'000'000; ++i) check(bits(g));
  EXPECT_EQ(bad, 0u) << "of " << checked << " inputs; " << kiln_test::seed_note();
}

TEST(half, arithmetic_goes_through_float) {
  const kiln::half a = 1.5f, b = 2.25f;
  const kiln::half c = a * b;  // 3.375 is exact in binary16
  EXPECT_EQ(static_cast<float>(c), 3.375f);
  EXPECT_TRUE(same_bits(kiln::half(0.1f), kiln::half::from_bits(0x2e66u)));
  EXPECT_FALSE(same_bits(kiln::half(0.0f), kiln::half(-0.0f)));
  EXPECT_EQ(kiln::half().bits, 0u);
#if defined(__F16C__)
  RecordProperty("conversion", "F16C");
#else
  RecordProperty("conversion", "soft");
#endif
}
