// kiln/eigen.hpp — Eigen interop (opt-in: not part of <kiln/kiln.hpp>; needs Eigen 3.4).
// as_eigen views a CPU tensor's elements as an Eigen::Map (no copy, any strides);
// from_eigen copies any dense Eigen expression into a new row-major tensor.
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kiln/core/context.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/cpu/backend.hpp"

namespace kiln {

/// The Eigen view as_eigen returns: a row-major matrix map with run-time strides.
template <class T>
using eigen_map = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Unaligned,
                             Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;

namespace detail {

// Eigen knows the arithmetic dtypes; kiln::half / kiln::bfloat16 have no NumTraits there.
template <class T>
inline constexpr bool eigen_scalar_v =
    std::is_same_v<T, float> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int8_t> ||
    std::is_same_v<T, std::uint8_t>;

}  // namespace detail

/// Views a rank-1 or rank-2 CPU tensor as an Eigen matrix, without copying: rank 2 maps
/// to rows x cols, rank 1 to a column (n x 1). Any strides work (transposed, sliced and
/// stepped views); writes through the map change the tensor. The map borrows the
/// storage: keep the tensor (or another view of it) alive while the map is used.
/// Dtypes: float, int32_t, int8_t, uint8_t (f16/bf16: cast to float first).
/// Throws kiln::shape_error for other ranks, broadcast views (stride 0 over several
/// elements) and empty (default-constructed) tensors.
/// Example: `Eigen::MatrixXf m = kiln::as_eigen(kiln::transpose(x)) * w;`
template <class T, class Arch>
eigen_map<T> as_eigen(const tensor<T, cpu<Arch>>& t) {
  static_assert(detail::eigen_scalar_v<T>,
                "kiln::as_eigen: Eigen has no scalar type for kiln::half / kiln::bfloat16; "
                "convert with kiln::cast<float>(x) into a float tensor first");
  if (!t.defined()) throw shape_error("kiln::as_eigen: the tensor is empty (default-constructed or moved from)");
  if (t.rank() != 1 && t.rank() != 2) {
    throw shape_error("kiln::as_eigen: needs a rank-1 or rank-2 tensor, got " + t.describe() +
                      "; reshape it first (kiln::reshape)");
  }
  for (int d = 0; d < t.rank(); ++d) {
    if (t.shape()[d] > 1 && t.strides()[d] == 0) {
      throw shape_error("kiln::as_eigen: " + t.describe() + " is a broadcast view (stride 0 in dimension " +
                        std::to_string(d) + "); materialise it with .clone() first");
    }
  }
  const Eigen::Index rows = t.shape()[0];
  const Eigen::Index cols = t.rank() == 2 ? t.shape()[1] : 1;
  // Row-major map: the outer stride steps between rows, the inner one along a row. A
  // unit extent never steps, and kiln allows any stride there (0 after broadcast_to);
  // Eigen gets a plain 1 instead.
  auto nonzero = [](index_t s) { return s == 0 ? index_t(1) : s; };
  const Eigen::Index outer = nonzero(t.strides()[0]);
  const Eigen::Index inner = t.rank() == 2 ? nonzero(t.strides()[1]) : 1;
  return eigen_map<T>(t.data(), rows, cols, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(outer, inner));
}

/// Tensors of other backends cannot be mapped: their memory is not the host's.
template <class T, class B>
eigen_map<T> as_eigen(const tensor<T, B>&) {
  static_assert(!std::is_same_v<B, B>,
                "kiln::as_eigen: only CPU tensors can be mapped; copy out with t.to_host() and use Eigen::Map");
  return eigen_map<T>(nullptr, 0, 0, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(1, 1));
}

/// Copies a dense Eigen matrix or array expression (any storage order, any scalar kiln
/// stores: float, int32_t, int8_t, uint8_t) into a new row-major tensor of shape
/// {rows, cols} on ctx. Vectors become {n, 1} or {1, n}; reshape for rank 1.
/// Example: `auto w = kiln::from_eigen(ctx, Eigen::MatrixXf::Random(64, 32));`
template <class B, class Derived>
auto from_eigen(const context<B>& ctx, const Eigen::DenseBase<Derived>& m) {
  using T = typename Derived::Scalar;
  static_assert(element<T> && detail::eigen_scalar_v<T>,
                "kiln::from_eigen: the scalar type must be one kiln stores: float, int32_t, int8_t or uint8_t");
  using row_major = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const shape s{static_cast<index_t>(m.rows()), static_cast<index_t>(m.cols())};
  auto t = empty<T>(ctx, s);
  if (s.numel() == 0) return t;
  if constexpr (requires { t.data(); }) {
    // host-addressable storage: evaluate the expression straight into the tensor
    Eigen::Map<row_major>(t.data(), m.rows(), m.cols()) = m.derived().matrix();
  } else {
    const row_major host = m.derived().matrix();
    backend_traits<B>::upload(*t.storage(), 0, host.data(), static_cast<std::size_t>(host.size()) * sizeof(T));
  }
  return t;
}

}  // namespace kiln
