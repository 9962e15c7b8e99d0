// tests/core/bfloat16_test.cpp — kiln::bfloat16 against an independent model.
// All 65,536 patterns are decoded from their fields with std::ldexp; every tie between
// consecutive bfloat16 values is probed; NaNs must never collapse into infinity.
#include <gtest/gtest.h>

#include <kiln/core/bfloat16.hpp>

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

// A named namespace around the file: its helpers share names with half_test.cpp's, and
// the unity build (tests/CMakeLists.txt) compiles both in one translation unit.
namespace bfloat16_tests {
namespace {

constexpr std::uint32_t patterns = 1u << 16;

bool is_nan_pattern(std::uint32_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

/// bfloat16 value from its fields: 8-bit exponent (bias 127), 7-bit mantissa.
double reference_value(std::uint32_t b) {
  const bool neg = (b & 0x8000u) != 0;
  const int e = static_cast<int>((b >> 7) & 0xffu);
  const int m = static_cast<int>(b & 0x7fu);
  double v;
  if (e == 0) v = std::ldexp(static_cast<double>(m), -133);  // 2^-126 * m / 2^7
  else if (e == 255) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(static_cast<double>(128 + m), e - 134);
  return neg ? -v : v;
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

std::uint16_t to_bits(float f) { return kiln::bfloat16(f).bits; }
float from_bits(std::uint16_t b) { return static_cast<float>(kiln::bfloat16::from_bits(b)); }

::testing::AssertionResult rounds_to(float f, std::uint16_t want) {
  const std::uint16_t pub = to_bits(f), det = kiln::detail::bf16_bits_from_float(f);
  if (pub == want && det == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << fhex(f) << " -> " << hex(pub) << " (detail " << hex(det) << "), expected "
                                       << hex(want);
}

/// Round-to-nearest-even by table search; 2^128 stands for infinity (bits 0x7f80).
class nearest_even {
 public:
  nearest_even() {
    for (std::uint32_t b = 0; b < 0x7f80u; ++b) v_.push_back(reference_value(b));
    v_.push_back(std::ldexp(1.0, 128));
  }
  std::uint16_t operator()(float f) const {
    const double x = f;
    const std::uint32_t sign = std::signbit(x) ? 0x8000u : 0u;
    const double a = std::abs(x);
    if (a >= v_.back()) return static_cast<std::uint16_t>(sign | 0x7f80u);
    const auto hi = static_cast<std::uint32_t>(std::upper_bound(v_.begin(), v_.end(), a) - v_.begin());
    const std::uint32_t lo = hi - 1;
    const double dl = a - v_[lo], dh = v_[hi] - a;
    const std::uint32_t r = dl < dh ? lo : dh < dl ? hi : ((lo & 1u) ? hi : lo);
    return static_cast<std::uint16_t>(sign | r);
  }

 private:
  std::vector<double> v_;
};

static_assert(kiln::bfloat16(1.0f).bits == 0x3f80u);
static_assert(kiln::bfloat16(-2.0f).bits == 0xc000u);
static_assert(static_cast<float>(kiln::bfloat16::from_bits(0x4049u)) == 3.140625f);

}  // namespace

TEST(bfloat16, to_float_matches_reference_for_every_pattern) {
  std::uint32_t bad = 0;
  for (std::uint32_t b = 0; b < patterns; ++b) {
    const float got = from_bits(static_cast<std::uint16_t>(b));
    const double want = reference_value(b);
    bool ok;
    if (std::isnan(want)) ok = std::isnan(got) && std::signbit(got) == std::signbit(want);
    else ok = std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(static_cast<float>(want));
    if (!ok && ++bad <= 10) ADD_FAILURE() << hex(b) << " -> " << fhex(got) << ", reference " << want;
  }
  EXPECT_EQ(bad, 0u);
}

TEST(bfloat16, every_non_nan_pattern_round_trips_exactly) {
  std::uint32_t bad = 0, checked = 0;
  for (std::uint32_t b = 0; b < patterns; ++b) {
    if (is_nan_pattern(b)) continue;
    const std::uint16_t r = to_bits(from_bits(static_cast<std::uint16_t>(b)));
    if (r != b && ++bad <= 10) ADD_FAILURE() << hex(b) << " -> " << hex(r);
    ++checked;
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(checked, patterns - 2u * 127u);
}

TEST(bfloat16, every_midpoint_rounds_to_even_and_neighbours_round_to_nearest) {
  std::uint32_t checked = 0;
  for (const std::uint32_t sign : {0u, 0x8000u}) {
    for (std::uint32_t b = 0; b < 0x7f80u; ++b) {
      const double lo = std::abs(reference_value(b));
      const double hi = b + 1 == 0x7f80u ? std::ldexp(1.0, 128) : std::abs(reference_value(b + 1));
      const double mid_d = (lo + hi) / 2;
      const float mid = static_cast<float>(sign ? -mid_d : mid_d);
      ASSERT_EQ(static_cast<double>(std::abs(mid)), mid_d) << "midpoint not exact in float: " << hex(b);
      const std::uint32_t even = (b & 1u) ? b + 1 : b;
      const float toward_zero = std::nextafter(mid, 0.0f);
      const float away = std::nextafter(mid, sign ? -std::numeric_limits<float>::infinity()
                                                  : std::numeric_limits<float>::infinity());
      ASSERT_TRUE(rounds_to(mid, static_cast<std::uint16_t>(sign | even))) << "tie after " << hex(b);
      ASSERT_TRUE(rounds_to(toward_zero, static_cast<std::uint16_t>(sign | b))) << "below the tie after " << hex(b);
      ASSERT_TRUE(rounds_to(away, static_cast<std::uint16_t>(sign | (b + 1)))) << "above the tie after " << hex(b);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2u * 0x7f80u);
}

TEST(bfloat16, nan_stays_nan_and_keeps_its_sign) {
  // every float NaN class: quiet, signalling, payload only in the low 16 bits (which a
  // plain truncation would turn into infinity), all-ones, both signs
  for (const std::uint32_t x : {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0x7f810000u, 0x7fffffffu, 0x7fa00000u,
                                0xffc00000u, 0xff800001u, 0xff80ffffu, 0xffffffffu}) {
    const float f = std::bit_cast<float>(x);
    const std::uint16_t r = to_bits(f);
    EXPECT_TRUE(is_nan_pattern(r)) << fhex(f) << " -> " << hex(r);
    EXPECT_EQ(r & 0x8000u, (x >> 16) & 0x8000u) << fhex(f);
    EXPECT_EQ(r & 0x40u, 0x40u) << fhex(f) << " -> " << hex(r) << " is not quiet";
    EXPECT_EQ(r & 0x3fu, (x >> 16) & 0x3fu) << fhex(f) << ": payload in the kept bits changed";
  }
  for (std::uint32_t b = 0; b < patterns; ++b) {
    if (!is_nan_pattern(b)) continue;
    const std::uint16_t r = to_bits(from_bits(static_cast<std::uint16_t>(b)));
    ASSERT_TRUE(is_nan_pattern(r)) << hex(b) << " -> " << hex(r);
    ASSERT_EQ(r, b | 0x40u) << hex(b) << ": a NaN comes back quiet with its payload";
  }
}

TEST(bfloat16, special_values) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(rounds_to(0.0f, 0x0000u));
  EXPECT_TRUE(rounds_to(-0.0f, 0x8000u));
  EXPECT_TRUE(rounds_to(inf, 0x7f80u));
  EXPECT_TRUE(rounds_to(-inf, 0xff80u));
  EXPECT_TRUE(rounds_to(std::numeric_limits<float>::max(), 0x7f80u));  // above the largest bf16 tie
  EXPECT_TRUE(rounds_to(std::bit_cast<float>(0x7f7f7fffu), 0x7f7fu));  // just below that tie
  EXPECT_TRUE(rounds_to(std::numeric_limits<float>::denorm_min(), 0x0000u));
  EXPECT_TRUE(rounds_to(std::bit_cast<float>(0x00008000u), 0x0000u));  // tie at the smallest: to even 0
  EXPECT_TRUE(rounds_to(std::bit_cast<float>(0x00018000u), 0x0002u));  // tie: to even 2
  EXPECT_TRUE(rounds_to(std::bit_cast<float>(0x3f808000u), 0x3f80u));  // 1 + 2^-8: tie, to even 1.0
  EXPECT_TRUE(rounds_to(std::bit_cast<float>(0x3f818000u), 0x3f82u));  // tie, up to even
  EXPECT_TRUE(rounds_to(3.14159265f, 0x4049u));
}

TEST(bfloat16, matches_nearest_even_on_float_inputs) {
  // top 16 bits: every pattern; low 16 bits (dropped): on and around the tie, plus random
  const nearest_even model;
  auto g = kiln_test::rng();
  std::uniform_int_distribution<std::uint32_t> bits;
  std::uint64_t bad = 0, checked = 0;
  auto check = [&](std::uint32_t x) {
    const float f = std::bit_cast<float>(x);
    if (std::isnan(f)) return;
    ++checked;
    const std::uint16_t got = to_bits(f), want = model(f);
    if (got != want && ++bad <= 10) ADD_FAILURE() << fhex(f) << " -> " << hex(got) << ", nearest even " << hex(want);
  };
  for (std::uint32_t top = 0; top < patterns; ++top) {
    for (const std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) check(top << 16 | low);
    check(top << 16 | (bits(g) & 0xffffu));
  }
  for (int i = 0; i < 1'000'000; ++i) check(bits(g));
  EXPECT_EQ(bad, 0u) << "of " << checked << " inputs; " << kiln_test::seed_note();
}

}  // namespace bfloat16_tests
