// tests/support/matmul_reference.hpp — the float64 matrix product (NumPy rules: 1-D
// operands as vectors, broadcast batches) with a tolerance per element, shared by the
// typed matmul tests and the Vulkan variant tests.
//
// Tolerance (f32 result): (K + 4) * 2^-24 * sum_k |a_ik| |b_kj|, the bound of a float dot
// product of K terms summed in any order; `round` adds the result dtype's rounding.
#pragma once

#include <kiln/kiln.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "reference.hpp"

namespace kiln_test {

using kiln::index_t;

template <class T>
std::vector<double> as_doubles(const std::vector<T>& v) {
  std::vector<double> d(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) d[i] = static_cast<double>(static_cast<float>(v[i]));
  return d;
}

/// The float64 product of logical row-major operands a (shape sa) and b (shape sb), NumPy
/// rules; out_shape receives the result's shape. `round` is the result dtype's relative
/// rounding (0 for f32).
inline reference ref_matmul(const std::vector<double>& a, const kiln::shape& sa, const std::vector<double>& b,
                            const kiln::shape& sb, kiln::shape& out_shape, double round = 0.0) {
  const bool av = sa.rank() == 1, bv = sb.rank() == 1;
  const index_t M = av ? 1 : sa[sa.rank() - 2], K = sa.back(), N = bv ? 1 : sb.back();
  const int ra = av ? 0 : sa.rank() - 2, rb = bv ? 0 : sb.rank() - 2, r = std::max(ra, rb);
  std::vector<index_t> batch(static_cast<std::size_t>(r)), ea(batch.size()), eb(batch.size());
  for (int i = 0; i < r; ++i) {
    const int ia = i - (r - ra), ib = i - (r - rb);
    ea[i] = ia >= 0 ? sa[ia] : 1;
    eb[i] = ib >= 0 ? sb[ib] : 1;
    batch[i] = std::max(ea[i], eb[i]);
  }
  out_shape = kiln::shape{};
  index_t nb = 1;
  for (index_t e : batch) out_shape.push_back(e), nb *= e;
  if (!av) out_shape.push_back(M);
  if (!bv) out_shape.push_back(N);
  reference ref;
  ref.value.resize(static_cast<std::size_t>(nb * M * N));
  ref.tol.resize(ref.value.size());
  for (index_t bo = 0; bo < nb; ++bo) {
    index_t rem = bo, ia = 0, ib = 0, sa_ = 1, sb_ = 1;
    for (int i = r - 1; i >= 0; --i) {
      const index_t idx = rem % batch[i];
      rem /= batch[i];
      ia += (ea[i] == 1 ? 0 : idx) * sa_;
      ib += (eb[i] == 1 ? 0 : idx) * sb_;
      sa_ *= ea[i];
      sb_ *= eb[i];
    }
    for (index_t m = 0; m < M; ++m) {
      for (index_t n = 0; n < N; ++n) {
        double s = 0, mag = 0;
        for (index_t k = 0; k < K; ++k) {
          const double x = a[static_cast<std::size_t>((ia * M + m) * K + k)];
          const double y = b[static_cast<std::size_t>((ib * K + k) * N + n)];
          s += x * y;
          mag += std::fabs(x * y);
        }
        const auto o = static_cast<std::size_t>((bo * M + m) * N + n);
        ref.value[o] = s;
        ref.tol[o] = double(K + 4) * 0x1p-24 * mag + round * std::fabs(s) + 1e-30;
      }
    }
  }
  return ref;
}

}  // namespace kiln_test
