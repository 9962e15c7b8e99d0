// tests/fuzz/reference.hpp — the fuzzer's oracle: kiln's ops in double precision, carried
// as enclosures of what a float32 kernel may return.
//
// A float value is an interval [lo, hi] plus two flags (NaN possible, a number possible):
// the set of results the kernel may give, not one expected number. Every op maps its
// operands' sets through the double-precision reference (evaluated at the interval ends,
// at 0 with both signs, and at the function's turning points: the image of a monotone
// piece is spanned by its ends) and widens the hull by its stated tolerance (relative +
// absolute, tests/support/tolerances.hpp) and by FLT_MIN (a device may flush subnormals;
// a subnormal operand is sampled at 0 and FLT_MIN too, see samples()).
// So error propagates exactly as far as the tree lets it: a cancellation widens the
// interval in absolute terms, a division by an interval around 0 gives "anything", and an
// ill-conditioned comparison makes a mask "either". A kernel's value passes when it lies
// in the set; a NaN passes only where NaN is possible. Signed zeros are not told apart.
// Integer values are exact (int32 with wrap-around, kiln's division rules). f16/bf16
// rounding at a cast or store maps the interval's ends through kiln::half / bfloat16 (the
// host conversion), which is exact since rounding is monotone.
#pragma once

#include <kiln/kiln.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace kiln_fuzz {

/// What a node may evaluate to at one element.
struct value {
  enum class kind : std::uint8_t { number, integer, mask } what = kind::number;
  double lo = 0, hi = 0;          // number: the enclosure of the non-NaN results
  bool nan = false, num = true;   // number: NaN possible / a number possible
  std::int32_t i = 0;             // integer: exact
  bool can_true = false, can_false = false;  // mask
  double ref = 0;                 // number: the double-precision value of the tree

  static value point(double v) {
    value r;
    r.ref = v;
    if (std::isnan(v)) {
      r.nan = true;
      r.num = false;
    } else {
      r.lo = r.hi = v;
    }
    return r;
  }
  static value integer_value(std::int32_t v) {
    value r;
    r.what = kind::integer;
    r.i = v;
    r.ref = v;
    return r;
  }
  static value mask_value(bool t, bool f, bool ref) {
    value r;
    r.what = kind::mask;
    r.can_true = t;
    r.can_false = f;
    r.ref = ref;
    return r;
  }
  /// Tight: a number whose enclosure is within ~1e-3 of its size (or NaN for sure).
  bool tight() const {
    if (what != kind::number) return true;
    if (!num) return true;
    if (nan) return false;
    if (std::isinf(lo) || std::isinf(hi)) return lo == hi;
    return hi - lo <= 1e-3 * std::max(1.0, std::abs(ref));
  }
  bool accepts(double x) const {
    if (std::isnan(x)) return nan;
    return num && lo <= x && x <= hi;
  }
  std::string describe() const;
};

inline std::string fmt(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

inline std::string value::describe() const {
  switch (what) {
    case kind::integer: return std::to_string(i);
    case kind::mask: return can_true && can_false ? "true or false" : can_true ? "true" : "false";
    case kind::number: break;
  }
  std::string s;
  if (num) s = fmt(ref) + " in [" + fmt(lo) + ", " + fmt(hi) + "]";
  if (nan) s += num ? " or NaN" : "NaN";
  return s;
}

/// Per-op error allowance of a float kernel: |got - exact| <= rel * |exact| + abs.
struct allowance {
  double rel = 0, abs = 0;
};

/// Samples of a value's set that span every monotone piece of the ops below.
inline std::vector<double> samples(const value& v, const std::vector<double>& turning = {}) {
  std::vector<double> s;
  if (v.nan) s.push_back(std::numeric_limits<double>::quiet_NaN());
  if (!v.num) return s;
  s.push_back(v.lo);
  if (v.hi != v.lo) s.push_back(v.hi);
  if (v.lo <= 0 && 0 <= v.hi) {
    s.push_back(0.0);
    s.push_back(-0.0);
  }
  for (double t : turning)
    if (v.lo < t && t < v.hi) s.push_back(t);
  // an infinite end holds finite values too, whose image may differ from the end's own
  // (silu(-inf) is NaN, silu(x) -> -0 as x -> -inf): the largest finite floats stand for them
  constexpr double fmax = std::numeric_limits<float>::max();
  if (v.lo == -std::numeric_limits<double>::infinity() && v.hi > -fmax) s.push_back(-fmax);
  if (v.hi == std::numeric_limits<double>::infinity() && v.lo < fmax) s.push_back(fmax);
  // a subnormal operand may be taken as anything from 0 to FLT_MIN by a device's
  // transcendental functions (lavapipe's log of 9e-41 is -88.2, of 0 -inf, of FLT_MIN
  // -87.3; the true value is -92.2): such an end spans [0, FLT_MIN] with its sign
  constexpr double fmin = std::numeric_limits<float>::min();
  for (double e : {v.lo, v.hi}) {
    if (e != 0 && std::abs(e) < fmin) {
      s.push_back(std::copysign(0.0, e));
      s.push_back(std::copysign(fmin, e));
    }
  }
  return s;
}

/// The enclosure of f over sample outputs, widened by the allowance and mapped to float
/// (beyond FLT_MAX a float result is inf; near it, either).
struct hull {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  bool nan = false;
  void add(double y) {
    if (std::isnan(y)) {
      nan = true;
    } else {
      lo = std::min(lo, y);
      hi = std::max(hi, y);
    }
  }
  value finish(double ref, allowance a) const {
    value r;
    r.ref = ref;
    r.nan = nan;
    r.num = lo <= hi;
    if (!r.num) return r;
    constexpr double fmax = std::numeric_limits<float>::max();
    constexpr double fmin = std::numeric_limits<float>::min();
    // each end widened by the error allowed at its own magnitude: the result at a point
    // y of [lo, hi] is off by at most rel |y| + abs, so it cannot pass below
    // lo - rel |lo| - abs (nor above hi + rel |hi| + abs); an infinite end stays put
    const auto widen = [&](double x) { return std::isinf(x) ? 0.0 : a.rel * std::abs(x) + a.abs + fmin; };
    r.lo = lo - widen(lo);
    r.hi = hi + widen(hi);
    auto to_float = [&](double& x, bool upper) {
      if (std::isinf(x)) return;
      // an end beyond FLT_MAX (with margin) is inf for sure, near it either
      if (std::abs(x) > fmax * (1 + 1e-5)) x = std::copysign(std::numeric_limits<double>::infinity(), x);
      else if (upper ? x > fmax * (1 - 1e-5) : x < -fmax * (1 - 1e-5))
        x = std::copysign(std::numeric_limits<double>::infinity(), x);
      else if (std::abs(x) > fmax) x = std::copysign(fmax, x);
    };
    to_float(r.lo, false);
    to_float(r.hi, true);
    return r;
  }
};

// ---- the ops in double, one function per kiln op, same semantics ----

inline double ref_gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
inline double ref_gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
}
inline double ref_softplus(double x) {
  if (std::isnan(x)) return x;
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}
inline double nan_or(double a, double b, double r) { return std::isnan(a) || std::isnan(b) ? a + b : r; }

/// unary_ops order (dynamic_ops.hpp).
inline double ref_unary(int op, double x) {
  switch (op) {
    case 0: return std::abs(x);
    case 1: return -x;
    case 2: return std::exp(x);
    case 3: return std::log(x);
    case 4: return std::sqrt(x);
    case 5: return 1.0 / std::sqrt(x);
    case 6: return x * x;
    case 7: return std::erf(x);
    case 8: return std::tanh(x);
    case 9: return 1.0 / (1.0 + std::exp(-x));
    case 10: return x < 0 ? 0.0 : x;
    case 11: return ref_gelu(x);
    case 12: return ref_gelu_tanh(x);
    case 13: return x / (1.0 + std::exp(-x));
    case 14: return ref_softplus(x);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

/// binary_ops order.
inline double ref_binary(int op, double a, double b) {
  switch (op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    case 4: return nan_or(a, b, b < a ? b : a);
    case 5: return nan_or(a, b, a < b ? b : a);
    case 6: return std::pow(a, b);
    case 7: return a < 0 ? b * a : a;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

/// compare_ops order.
inline bool ref_compare(int op, double a, double b) {
  switch (op) {
    case 0: return a == b;
    case 1: return !(a == b);
    case 2: return a < b;
    case 3: return a <= b;
    case 4: return a > b;
    case 5: return a >= b;
  }
  return false;
}

inline std::int32_t wrap(std::int64_t v) { return static_cast<std::int32_t>(static_cast<std::uint32_t>(v)); }

/// unary_ops on int32 (only those kiln allows on integers).
inline std::int32_t ref_unary_int(int op, std::int32_t x) {
  switch (op) {
    case 0: return x < 0 ? wrap(-std::int64_t(x)) : x;  // INT_MIN stays INT_MIN
    case 1: return wrap(-std::int64_t(x));
    case 6: return wrap(std::int64_t(x) * x);
    case 10: return x < 0 ? 0 : x;
  }
  return 0;
}

inline std::int32_t ref_binary_int(int op, std::int32_t a, std::int32_t b) {
  switch (op) {
    case 0: return wrap(std::int64_t(a) + b);
    case 1: return wrap(std::int64_t(a) - b);
    case 2: return wrap(std::int64_t(a) * b);
    case 3: return b == 0 ? 0 : b == -1 ? wrap(-std::int64_t(a)) : a / b;
    case 4: return b < a ? b : a;
    case 5: return a < b ? b : a;
  }
  return 0;
}

/// Error allowances per op (tests/support/tolerances.hpp, and the GLSL precision rules on
/// Vulkan where they are looser). pow's grows with |b log2 a|: both backends compute
/// 2^(b log2 a) (xsimd: e^(b ln a)), whose exponent carries the log's relative error.
inline allowance unary_allowance(int op, bool vulkan) {
  switch (op) {
    case 0: case 1: case 6: case 10: return {2.5e-7, 0};            // abs, neg, square, relu: exact
    case 4: case 5: return {5e-7, 0};                                 // sqrt, rsqrt: 2 ulp in GLSL
    case 3: return {4e-6, vulkan ? 4.8e-7 : 0};                       // log: GLSL 2^-21 absolute in [0.5, 2]
    case 11: return {4e-6, 1.5e-6};                                   // gelu: tol::gelu_abs
    case 12: return {4e-6, 2e-6};                                     // gelu_tanh: tol::gelu_tanh_abs
    // softplus on Vulkan is log(1 + e^-|x|), which loses e^-|x| below ulp(1) (issue 12,
    // "Vulkan softplus"): allow the absolute error of that formula until it is fixed.
    case 14: return {4e-6, vulkan ? 1.2e-7 : 0};
    default: return {4e-6, 0};                                        // exp, erf, tanh, sigmoid, silu
  }
}

inline allowance binary_allowance(int op, double b_mag_log, double b_mag, bool vulkan) {
  switch (op) {
    case 0: case 1: case 2: case 4: case 5: case 7: return {2.5e-7, 0};
    case 3: return {3.5e-7, 0};  // GLSL division: 2.5 ulp
    // GLSL's log2 is 2^-21 absolute in [0.5, 2]: b log2 a is off by |b| 2^-21, the result
    // by |b| 2^-21 ln 2 relative (pow(0.988, 88.5): 2.9e-5 on lavapipe)
    case 6: return {4e-6 + 1.2e-6 * b_mag_log + (vulkan ? 3.4e-7 * b_mag : 0.0), 0};
  }
  return {};
}

/// Turning points of the non-monotone unary ops (their minima).
inline std::vector<double> unary_turning(int op) {
  switch (op) {
    case 11: return {-0.7517915246935};
    case 12: return {-0.7522};
    case 13: return {-1.2784645427610738};
  }
  return {};
}

inline value eval_unary(int op, const value& x, bool vulkan) {
  if (x.what == value::kind::integer) return value::integer_value(ref_unary_int(op, x.i));
  hull h;
  for (double s : samples(x, unary_turning(op))) h.add(ref_unary(op, s));
  return h.finish(ref_unary(op, x.ref), unary_allowance(op, vulkan));
}

inline value eval_binary(int op, const value& a, const value& b, bool vulkan) {
  if (a.what == value::kind::integer) return value::integer_value(ref_binary_int(op, a.i, b.i));
  const double ref = ref_binary(op, a.ref, b.ref);
  if (op == 6 && a.num && a.lo < 0 && b.num && b.lo != b.hi) {
    // a negative base gives numbers only at integer exponents: with an uncertain
    // exponent, the result may be anything
    value r;
    r.ref = ref;
    r.lo = -std::numeric_limits<double>::infinity();
    r.hi = std::numeric_limits<double>::infinity();
    r.nan = true;
    return r;
  }
  double blog = 0, bmag = 0;
  if (op == 6) {
    for (double sb : samples(b)) {
      if (std::isfinite(sb)) bmag = std::max(bmag, std::abs(sb));
      for (double sa : samples(a))
        if (std::isfinite(sb) && std::isfinite(sa) && sa != 0) blog = std::max(blog, std::abs(sb * std::log2(std::abs(sa))));
    }
  }
  hull h;
  const auto sb = samples(b);
  // pow(1, y) is 1 for every y, NaN included: a base interval around 1 samples 1 itself
  for (double x : samples(a, op == 6 ? std::vector<double>{1.0} : std::vector<double>{}))
    for (double y : sb) h.add(ref_binary(op, x, y));
  return h.finish(ref, binary_allowance(op, blog, bmag, vulkan));
}

inline value eval_compare(int op, const value& a, const value& b) {
  if (a.what == value::kind::integer) {
    const bool r = ref_compare(op, a.i, b.i);
    return value::mask_value(r, !r, r);
  }
  bool t = false, f = false;
  for (double x : samples(a))
    for (double y : samples(b)) (ref_compare(op, x, y) ? t : f) = true;
  // == holds somewhere inside overlapping intervals even when no pair of ends is equal
  if ((op == 0 || op == 1) && a.num && b.num && a.lo <= b.hi && b.lo <= a.hi) (op == 0 ? t : f) = true;
  const bool ref = ref_compare(op, a.ref, b.ref);
  return value::mask_value(t, f, ref);
}

inline value join(const value& a, const value& b, double ref) {
  if (a.what == value::kind::integer) return a;  // only called when both are possible: caller handles ints
  value r;
  r.ref = ref;
  r.nan = a.nan || b.nan;
  r.num = a.num || b.num;
  r.lo = std::min(a.num ? a.lo : b.lo, b.num ? b.lo : a.lo);
  r.hi = std::max(a.num ? a.hi : b.hi, b.num ? b.hi : a.hi);
  return r;
}

inline value eval_where(const value& m, const value& a, const value& b) {
  bool c_t, c_f, c_ref;
  if (m.what == value::kind::mask) {
    c_t = m.can_true, c_f = m.can_false, c_ref = m.ref != 0;
  } else {  // an integer condition: non-zero is true
    c_t = m.i != 0, c_f = m.i == 0, c_ref = m.i != 0;
  }
  if (a.what == value::kind::integer) return c_ref ? a : b;
  const double ref = c_ref ? a.ref : b.ref;
  if (c_t && c_f) return join(a, b, ref);
  value r = c_t ? a : b;
  r.ref = ref;
  return r;
}

inline value eval_clamp(const value& x, const value& lo, const value& hi) {
  auto f = [](double v, double l, double h) { return v < l ? l : (h < v ? h : v); };
  if (x.what == value::kind::integer) {
    const std::int32_t v = x.i, l = lo.i, h = hi.i;
    return value::integer_value(v < l ? l : (h < v ? h : v));
  }
  auto xs = samples(x);
  // the jumps of clamp are where x meets lo or hi: sample there too
  for (const value* e : {&lo, &hi})
    for (double s : samples(*e))
      if (x.num && x.lo < s && s < x.hi) xs.push_back(s);
  hull h;
  const auto ls = samples(lo), hs = samples(hi);
  for (double v : xs)
    for (double l : ls)
      for (double u : hs) h.add(f(v, l, u));
  return h.finish(f(x.ref, lo.ref, hi.ref), {0, 0});
}

/// Rounds to To's precision (f16/bf16 through kiln's host conversion; float: float).
template <class To>
double round_to(double v) {
  const float f = static_cast<float>(v);
  if constexpr (std::is_same_v<To, float>) return f;
  else return static_cast<float>(To(f));
}

/// A float value rounded to To at a cast or a store: monotone, so the ends map.
template <class To>
value round_value(const value& v) {
  value r = v;
  r.ref = round_to<To>(v.ref);
  if (v.num) {
    r.lo = round_to<To>(v.lo);
    r.hi = round_to<To>(v.hi);
  }
  return r;
}

/// float -> integer dtype To: truncate toward zero, saturate, NaN -> 0 (exact inputs only).
template <class To>
std::int32_t float_to_int(double v) {
  if (std::isnan(v)) return 0;
  if constexpr (std::is_same_v<To, std::int32_t>) {
    if (v >= 2147483648.0) return std::numeric_limits<std::int32_t>::max();
  }
  const double c = std::clamp(v, double(kiln::detail::int_lo<To>()), double(kiln::detail::int_hi<To>()));
  return static_cast<std::int32_t>(static_cast<To>(static_cast<std::int32_t>(c)));
}

/// value of dtype From converted to dtype To (kiln::cast's rules).
template <class To, class From>
value convert(const value& v) {
  if constexpr (std::is_same_v<From, bool>) {
    // a mask -> 1 / 0
    if constexpr (kiln::is_floating_v<To>) {
      hull h;
      if (v.can_true) h.add(1.0);
      if (v.can_false) h.add(0.0);
      return h.finish(v.ref, {});
    } else {
      return value::integer_value(v.ref != 0 ? 1 : 0);
    }
  } else if constexpr (kiln::is_floating_v<From>) {
    if constexpr (kiln::is_floating_v<To>) return round_value<To>(v);
    else return value::integer_value(float_to_int<To>(v.ref));  // the generator casts exact values only
  } else {
    if constexpr (kiln::is_floating_v<To>) return value::point(static_cast<float>(v.i));
    else return value::integer_value(static_cast<std::int32_t>(static_cast<To>(v.i)));
  }
}

}  // namespace kiln_fuzz
