// tests/ops/reduce/reduce_check.hpp — what the reduction, softmax and norm tests share: a
// float64 reference over the [outer, extent, inner] split of expr/structural.hpp, and
// element comparisons with tolerances derived from the accumulation length.
//
// Tolerance of a float sum of n terms: every kernel (CPU: four vector accumulators per
// buffer, buffers merged in order; Vulkan: per-invocation partial sums, then a tree over
// the workgroup, then the split pass) adds each term into a chain of at most n / 16 + 64
// other additions, so |error| <= (n / 16 + 64) * 2^-24 * sum |x_i| (the classic bound
// gamma_k * sum |x_i| with k the longest chain). sum_tolerance() gives that bound.
#pragma once

#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backends.hpp"
#include "checks.hpp"
#include "random.hpp"
#include "reference.hpp"

namespace kiln_test {

struct line_split {
  std::int64_t outer = 1, extent = 1, inner = 1;
};

/// The split of shape s around axis (all: one line of every element).
inline line_split split_of(const kiln::shape& s, int axis, bool all = false) {
  line_split p;
  if (all) {
    p.extent = s.numel();
    return p;
  }
  if (axis < 0) axis += s.rank();
  for (int d = 0; d < s.rank(); ++d) {
    if (d < axis) p.outer *= s[d];
    else if (d == axis) p.extent = s[d];
    else p.inner *= s[d];
  }
  return p;
}

/// x[o, r, j] of a row-major buffer under split p.
inline std::size_t at(const line_split& p, std::int64_t o, std::int64_t r, std::int64_t j) {
  return static_cast<std::size_t>((o * p.extent + r) * p.inner + j);
}

/// k * 2^-24 * sum|x| for a sum of n terms (see the top of this file).
inline double sum_tolerance(std::int64_t n, double abs_sum) { return (double(n) / 16.0 + 64.0) * 0x1p-24 * abs_sum; }

enum class red { sum, mean, max, min };

/// The float64 reduction of x under p, and per output the tolerance a float kernel is
/// held to (exact for max/min).

inline reference ref_reduce(const std::vector<float>& x, const line_split& p, red op) {
  reference r;
  r.value.resize(static_cast<std::size_t>(p.outer * p.inner));
  r.tol.resize(r.value.size());
  for (std::int64_t o = 0; o < p.outer; ++o) {
    for (std::int64_t j = 0; j < p.inner; ++j) {
      double acc = op == red::max ? -INFINITY : op == red::min ? INFINITY : 0.0, abs_sum = 0.0;
      bool nan = false;
      for (std::int64_t k = 0; k < p.extent; ++k) {
        const double v = x[at(p, o, k, j)];
        nan = nan || std::isnan(v);
        abs_sum += std::fabs(v);
        if (op == red::max) acc = std::max(acc, v);
        else if (op == red::min) acc = std::min(acc, v);
        else acc += v;
      }
      if (nan) acc = NAN;
      double tol = op == red::sum || op == red::mean ? sum_tolerance(p.extent, abs_sum) : 0.0;
      if (op == red::mean) {
        acc /= double(p.extent);
        tol = tol / double(p.extent) + std::fabs(acc) * 0x1p-23;
      }
      const auto i = static_cast<std::size_t>(o * p.inner + j);
      r.value[i] = acc;
      r.tol[i] = tol;
    }
  }
  return r;
}

/// Index of the first largest (smallest) element per line; the first NaN wins.
inline std::vector<std::int32_t> ref_arg(const std::vector<float>& x, const line_split& p, bool largest) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(p.outer * p.inner));
  for (std::int64_t o = 0; o < p.outer; ++o) {
    for (std::int64_t j = 0; j < p.inner; ++j) {
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < p.extent; ++k) {
        const float v = x[at(p, o, k, j)], b = x[at(p, o, best, j)];
        if (std::isnan(b)) break;
        if (std::isnan(v) || (largest ? v > b : v < b)) best = k;
      }
      out[static_cast<std::size_t>(o * p.inner + j)] = static_cast<std::int32_t>(best);
    }
  }
  return out;
}

/// Softmax (or log_softmax) of every line, in float64 (NaN for lines holding NaN or +inf
/// and for lines of -inf only, see kiln::softmax).
inline reference ref_softmax(const std::vector<float>& x, const line_split& p, bool log) {
  reference r;
  r.value.resize(x.size());
  r.tol.resize(x.size());
  for (std::int64_t o = 0; o < p.outer; ++o) {
    for (std::int64_t j = 0; j < p.inner; ++j) {
      double m = -INFINITY;
      bool nan = false;
      for (std::int64_t k = 0; k < p.extent; ++k) {
        const double v = x[at(p, o, k, j)];
        nan = nan || std::isnan(v) || v == INFINITY;
        m = std::max(m, v);
      }
      nan = nan || m == -INFINITY;
      double s = 0;
      for (std::int64_t k = 0; k < p.extent; ++k) s += std::exp(double(x[at(p, o, k, j)]) - m);
      // exp to a few ulps per term, the sum to its accumulation bound (terms are positive)
      const double rel = 8e-7 + (double(p.extent) / 16.0 + 64.0) * 0x1p-24;
      for (std::int64_t k = 0; k < p.extent; ++k) {
        const std::size_t i = at(p, o, k, j);
        const double d = double(x[i]) - m;
        const double v = nan ? NAN : log ? d - std::log(s) : std::exp(d) / s;
        r.value[i] = v;
        r.tol[i] = log ? rel + 4e-7 * (std::fabs(d) + std::fabs(std::log(s))) : rel * std::fabs(v) + 1e-30;
      }
    }
  }
  return r;
}

/// layer_norm (rms = false) or rms_norm over the last axis of extent n, with optional
/// weight / bias (empty vectors: none).
inline reference ref_norm(const std::vector<float>& x, std::int64_t n, const std::vector<float>& w,
                          const std::vector<float>& b, double eps, bool rms) {
  reference r;
  r.value.resize(x.size());
  r.tol.resize(x.size());
  const std::int64_t rows = n ? static_cast<std::int64_t>(x.size()) / n : 0;
  for (std::int64_t o = 0; o < rows; ++o) {
    const float* row = x.data() + o * n;
    double mean = 0, var = 0;
    if (rms) {
      for (std::int64_t k = 0; k < n; ++k) var += double(row[k]) * row[k];
      var /= double(n);
    } else {
      for (std::int64_t k = 0; k < n; ++k) mean += row[k];
      mean /= double(n);
      for (std::int64_t k = 0; k < n; ++k) var += (row[k] - mean) * (row[k] - mean);
      var /= double(n);
    }
    const double scale = 1.0 / std::sqrt(var + eps);
    for (std::int64_t k = 0; k < n; ++k) {
      double y = (double(row[k]) - mean) * scale;
      const double wk = w.empty() ? 1.0 : w[static_cast<std::size_t>(k)];
      y = y * wk + (b.empty() ? 0.0 : b[static_cast<std::size_t>(k)]);
      const auto i = static_cast<std::size_t>(o * n + k);
      r.value[i] = y;
      // the statistics to their accumulation bound (relative), then a few float roundings
      r.tol[i] = ((double(n) / 16.0 + 64.0) * 0x1p-24 * 4.0 + 1e-6) * (std::fabs(y) + std::fabs(wk)) + 1e-6;
    }
  }
  return r;
}

}  // namespace kiln_test
