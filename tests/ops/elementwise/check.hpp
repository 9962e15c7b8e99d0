// tests/ops/elementwise/check.hpp — the machinery every elementwise op test shares.
// An op test states three things: the kiln spelling (a generic lambda over tensors), the
// Eigen oracle (a lambda over Eigen arrays, in double or int64) and a tolerance from
// tolerances.hpp. The helpers here draw fresh random inputs for every size in
// test_sizes, upload them, evaluate the kiln expression in one statement and compare
// the result read back with the oracle over the same host data.
#pragma once

#include <gtest/gtest.h>

#include <Eigen/Core>
#include <kiln/kiln.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backends.hpp"
#include "eigen_oracle.hpp"
#include "random.hpp"
#include "tolerances.hpp"

namespace kiln_test {

/// Every op runs at each of these lengths: empty, one element, around the 4/8/16-lane
/// vector widths (scalar tails), around 1024, and one large enough for several threads.
inline constexpr std::array<std::size_t, 9> test_sizes = {0, 1, 7, 15, 16, 17, 1023, 1025, (std::size_t(1) << 20) + 3};

/// |got - want| <= atol + rtol * |want|.
struct tolerance {
  double rtol;
  double atol = 0.0;
};

inline constexpr tolerance exact_tol{tol::exact};
inline constexpr tolerance transcendental_tol{tol::transcendental, tol::transcendental_abs};
inline constexpr tolerance f16_tol{tol::f16, tol::f16_abs};
inline constexpr tolerance bf16_tol{tol::bf16};

/// How float inputs are drawn: uniform in [lo, hi), then (optionally) NaN, +inf, -inf and
/// -0 written over a few positions (kiln_test::add_specials).
struct float_inputs {
  float lo = -4.0f;
  float hi = 4.0f;
  bool specials = true;
};

using ArrayXl = Eigen::Array<std::int64_t, Eigen::Dynamic, 1>;
using ArrayXb = Eigen::Array<bool, Eigen::Dynamic, 1>;

/// Host values (any kiln dtype; half/bfloat16 through float) as an Eigen array of double.
template <class T>
ArrayXd to_double(const std::vector<T>& v) {
  ArrayXd a(Eigen::Index(v.size()));
  for (std::size_t i = 0; i < v.size(); ++i) a[Eigen::Index(i)] = static_cast<double>(static_cast<float>(v[i]));
  return a;
}

/// Integer host values as an Eigen array of int64 (wide enough for every product of two).
template <class T>
ArrayXl to_int64(const std::vector<T>& v) {
  ArrayXl a(Eigen::Index(v.size()));
  for (std::size_t i = 0; i < v.size(); ++i) a[Eigen::Index(i)] = static_cast<std::int64_t>(v[i]);
  return a;
}

/// An int64 oracle result wrapped to dtype T, as storing an integer result does (C++20
/// integer conversion is modular).
template <class T>
std::vector<T> wrap_to(const ArrayXl& a) {
  std::vector<T> v(std::size_t(a.size()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(a[Eigen::Index(i)]);
  return v;
}

/// Values rounded to float and widened back: an oracle's intermediate result rounded as
/// kiln rounds it, for chains in which a later op could magnify that rounding (a sum
/// that cancels), so that the comparison stays at one op's tolerance.
template <class A>
auto round_f32(const A& a) {
  return a.template cast<float>().template cast<double>().eval();
}

/// Host vector converted element by element (float -> kiln::half rounds to nearest even).
template <class To, class From>
std::vector<To> convert_all(const std::vector<From>& v) {
  std::vector<To> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = To(v[i]);
  return out;
}

/// Uploads each host vector as a 1-D tensor, assigns f(tensors...) to a fresh tensor of
/// dtype Out in one statement, and returns what it holds. A non-empty statement must run
/// exactly one kernel: an elementwise expression always fuses.
template <class Out, class B, class F, class... In>
std::vector<Out> eval(const F& f, const std::vector<In>&... in) {
  auto& c = ctx<B>();
  const std::size_t sizes[] = {in.size()...};
  const auto n = static_cast<kiln::index_t>(sizes[0]);
  auto y = kiln::empty<Out>(c, {n});
  const auto before = c.kernels_launched();
  y = f(kiln::from_host(c, {n}, in)...);
  EXPECT_EQ(c.kernels_launched() - before, n ? 1u : 0u) << "the statement did not fuse into one kernel";
  return y.to_host();
}

/// Whether backend B's device flushes f32 subnormals to zero (probed once: FLT_MIN * 0.5,
/// a subnormal result). Vulkan leaves it to the device unless the float controls ask for
/// them to be kept (kiln does where the device supports it); NVIDIA's H200 flushes.
template <class B>
bool flushes_subnormals() {
  static const bool flushes = [] {
    const auto got = eval<float, B>([](const auto& x) { return x * 0.5f; }, std::vector<float>{std::numeric_limits<float>::min()});
    return got[0] == 0.0f;
  }();
  return flushes;
}

/// Random floats for one run of an op (see float_inputs).
inline std::vector<float> draw(std::mt19937_64& g, std::size_t n, const float_inputs& in) {
  auto v = uniform(g, n, in.lo, in.hi);
  if (in.specials) add_specials(v);
  return v;
}

/// Random floats on a coarse grid (multiples of 0.5 in [-3, 3]) so that comparisons meet
/// ties, with the special values written over a few positions.
inline std::vector<float> draw_grid(std::mt19937_64& g, std::size_t n) {
  auto v = uniform_int<int>(g, n, -6, 6);
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = 0.5f * static_cast<float>(v[i]);
  add_specials(f);
  return f;
}

/// Random integers of dtype T in [lo, hi] (default: T's whole range) with T's minimum,
/// maximum, 0, -1 and 1 written over a few positions (the wrap-around and /0 cases).
template <class T>
std::vector<T> draw_int(std::mt19937_64& g, std::size_t n, int lo = std::numeric_limits<T>::min(),
                        int hi = std::numeric_limits<T>::max()) {
  auto v = uniform_int<T>(g, n, lo, hi);
  const T sp[] = {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T(0), static_cast<T>(-1), T(1)};
  if (!v.empty()) {
    for (std::size_t i = 0; i < std::size(sp); ++i) v[(i * 7919 + 3) % v.size()] = sp[i];
  }
  return v;
}

/// The special float values every binary op meets paired with each other.
inline constexpr float special_values[] = {std::numeric_limits<float>::quiet_NaN(),
                                           std::numeric_limits<float>::infinity(),
                                           -std::numeric_limits<float>::infinity(),
                                           0.0f,
                                           -0.0f,
                                           1.5f,
                                           -2.0f};

/// Unary float op: f(x) against oracle(ArrayXd) over every test size.
template <class B, class F, class O>
void check_unary(const F& f, const O& oracle, tolerance t, float_inputs in = {}) {
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n));
    const auto x = draw(g, n, in);
    const auto got = eval<float, B>(f, x);
    const ArrayXd xd = to_double(x);
    const ArrayXd want = oracle(xd);
    EXPECT_TRUE(all_close(got, want, t.rtol, t.atol));
  }
}

/// Binary float op: f(a, b) against oracle(ArrayXd, ArrayXd) over every test size (a
/// carries the special values, b is drawn plain), then, unless b_in.specials is false,
/// over every pair of special_values.
template <class B, class F, class O>
void check_binary(const F& f, const O& oracle, tolerance t, float_inputs a_in = {}, float_inputs b_in = {}) {
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n));
    const auto a = draw(g, n, a_in);
    const auto b = draw(g, n, {b_in.lo, b_in.hi, false});
    const auto got = eval<float, B>(f, a, b);
    const ArrayXd ad = to_double(a), bd = to_double(b);
    const ArrayXd want = oracle(ad, bd);
    EXPECT_TRUE(all_close(got, want, t.rtol, t.atol));
  }
  if (!b_in.specials) return;
  SCOPED_TRACE("every pair of special values");
  std::vector<float> a, b;
  for (float x : special_values) {
    for (float y : special_values) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  const auto got = eval<float, B>(f, a, b);
  const ArrayXd ad = to_double(a), bd = to_double(b);
  const ArrayXd want = oracle(ad, bd);
  EXPECT_TRUE(all_close(got, want, t.rtol, t.atol));
}

/// Unary float op on kiln::half or kiln::bfloat16 operands: computed in float, rounded on
/// store, so held to the storage type's tolerance against the oracle over the same
/// (already rounded) inputs.
template <class B, class H, class F, class O>
void check_unary_lowp(const F& f, const O& oracle, tolerance t, float_inputs in = {}) {
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n) + ", dtype " + std::string(kiln::dtype_name_v<H>));
    const auto x = convert_all<H>(draw(g, n, in));
    const auto got = eval<H, B>(f, x);
    const ArrayXd xd = to_double(x);
    const ArrayXd want = oracle(xd);
    EXPECT_TRUE(all_close(got, want, t.rtol, t.atol));
  }
}

/// Binary float op on kiln::half or kiln::bfloat16 operands (see check_unary_lowp).
template <class B, class H, class F, class O>
void check_binary_lowp(const F& f, const O& oracle, tolerance t, float_inputs a_in = {}, float_inputs b_in = {}) {
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n) + ", dtype " + std::string(kiln::dtype_name_v<H>));
    const auto a = convert_all<H>(draw(g, n, a_in));
    const auto b = convert_all<H>(draw(g, n, {b_in.lo, b_in.hi, false}));
    const auto got = eval<H, B>(f, a, b);
    const ArrayXd ad = to_double(a), bd = to_double(b);
    const ArrayXd want = oracle(ad, bd);
    EXPECT_TRUE(all_close(got, want, t.rtol, t.atol));
  }
}

/// Dense float op check: f(x) for n evenly spaced x in [lo, hi] (an odd n, so the lanes and
/// the scalar tail both see the range), against ref(x) in long double, in relative error
/// wherever |ref(x)| >= FLT_MIN; below (where a device may flush to 0 or round in the
/// subnormals) the result must be within FLT_MIN of it. On a device that flushes
/// subnormals (flushes_subnormals) that floor is 2^-118: a result a few binades above
/// FLT_MIN may be computed through a subnormal intermediate (an exp of the tail) and
/// come out 0. Returns the worst relative error, which the test reports, so that a change
/// in accuracy shows in the log.
template <class B, class F, class R>
double check_unary_dense(const F& f, const R& ref, float lo, float hi, double rtol, std::size_t n = (std::size_t(1) << 20) + 3) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = lo + (hi - lo) * static_cast<float>(double(i) / double(n - 1));
  const auto got = eval<float, B>(f, x);
  const double floor = flushes_subnormals<B>() ? 0x1p-118 : std::numeric_limits<float>::min();
  double worst = 0.0;
  float worst_x = 0.0f;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double want = static_cast<double>(ref(static_cast<long double>(x[i])));
    const double diff = std::abs(static_cast<double>(got[i]) - want);
    const bool normal = std::abs(want) >= floor;
    const double rel = normal ? diff / std::abs(want) : 0.0;
    if (rel > worst || std::isnan(got[i])) {
      worst = std::isnan(got[i]) ? std::numeric_limits<double>::infinity() : rel;
      worst_x = x[i];
    }
    if (!(normal ? rel <= rtol : diff <= floor)) {
      if (!bad) first = i;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << bad << " of " << n << " results in [" << lo << ", " << hi << "] off; first at x = " << x[first]
                     << ": got " << got[first] << ", want " << static_cast<double>(ref(static_cast<long double>(x[first])))
                     << " (rtol " << rtol << ")";
  std::printf("  [%g, %g]: worst relative error %.3g at x = %.9g\n", double(lo), double(hi), worst, double(worst_x));
  return worst;
}

/// Integer draw range: [lo, hi] clipped to the dtype (default: the dtype's whole range).
struct int_inputs {
  int lo = std::numeric_limits<int>::min();
  int hi = std::numeric_limits<int>::max();

  template <class T>
  std::vector<T> draw(std::mt19937_64& g, std::size_t n) const {
    const int l = std::max<long long>(lo, std::numeric_limits<T>::min());
    const int h = std::min<long long>(hi, std::numeric_limits<T>::max());
    return draw_int<T>(g, n, l, h);
  }
};

/// Unary integer op on dtype T: f(x) against oracle(ArrayXl) computed in int64 and
/// wrapped to T; must match exactly.
template <class B, class T, class F, class O>
void check_int_unary(const F& f, const O& oracle, int_inputs in = {}) {
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n) + ", dtype " + std::string(kiln::dtype_name_v<T>));
    const auto x = in.draw<T>(g, n);
    const auto got = eval<T, B>(f, x);
    const ArrayXl xl = to_int64(x);
    const ArrayXl want = oracle(xl);
    EXPECT_TRUE(all_equal(got, wrap_to<T>(want)));
  }
}

/// Binary integer op on dtype T (see check_int_unary).
template <class B, class T, class F, class O>
void check_int_binary(const F& f, const O& oracle, int_inputs a_in = {}, int_inputs b_in = {}) {
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n) + ", dtype " + std::string(kiln::dtype_name_v<T>));
    const auto a = a_in.draw<T>(g, n);
    auto b = b_in.draw<T>(g, n);
    std::rotate(b.begin(), b.begin() + std::ptrdiff_t(n / 3), b.end());  // specials meet non-specials
    const auto got = eval<T, B>(f, a, b);
    const ArrayXl al = to_int64(a), bl = to_int64(b);
    const ArrayXl want = oracle(al, bl);
    EXPECT_TRUE(all_equal(got, wrap_to<T>(want)));
  }
}

/// Runs check(type_tag) for each integer dtype: int8_t, int32_t, uint8_t.
template <class C>
void for_each_int_dtype(const C& check) {
  check(std::type_identity<std::int8_t>{});
  check(std::type_identity<std::int32_t>{});
  check(std::type_identity<std::uint8_t>{});
}

}  // namespace kiln_test
