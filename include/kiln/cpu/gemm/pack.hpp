// kiln/cpu/gemm/pack.hpp — packing panels of A and B for the micro-kernel, and the
// cache sizes the blocking is derived from.
//
// Packed A: panels of MR rows, each kc steps of MR floats (rows past the matrix edge are
// zeros). Packed B: panels of NR columns, each K steps of NR floats (columns past the
// edge are zeros), 64-byte aligned, so that the micro-kernel reads both sequentially
// from cache. Any strides and any float dtype are read (a transposed view, f16/bf16
// weights converted to float here, once).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#include "kiln/core/shape.hpp"
#include "kiln/cpu/gemm/kernel.hpp"

namespace kiln::detail::cpu_gemm {

/// Per-core L1 and L2 data cache sizes and the shared L3 (sysconf where the C library
/// knows them; typical sizes otherwise).
struct cache_sizes {
  std::size_t l1 = 32 << 10, l2 = 512 << 10, l3 = 8 << 20;
};

inline const cache_sizes& caches() {
  static const cache_sizes c = [] {
    cache_sizes s;
#if defined(_SC_LEVEL1_DCACHE_SIZE)
    const auto get = [](int name, std::size_t fallback) {
      const long v = ::sysconf(name);
      return v >= 4096 ? static_cast<std::size_t>(v) : fallback;
    };
    s.l1 = get(_SC_LEVEL1_DCACHE_SIZE, s.l1);
    s.l2 = get(_SC_LEVEL2_CACHE_SIZE, s.l2);
    s.l3 = get(_SC_LEVEL3_CACHE_SIZE, s.l3);
#endif
    s.l2 = std::max(s.l2, s.l1);
    s.l3 = std::max(s.l3, s.l2);
    return s;
  }();
  return c;
}

/// The blocking of the packed product: kc, the depth of one step (the k range packed at
/// a time), and mc, the most rows of A one task packs for a step.
struct blocking {
  index_t kc = 0, mc = 0;
};

/// Blocking for a product of depth K on arch A with caches cs.
/// kc: each micro-kernel call reads and writes its MR x NR tile of C once per step, a cost
/// that only a deep step amortises (at kc = 128 the tile updates took 12% of the kernel's
/// time at n = 2048 on a Zen 4: the tile's rows, a power of two apart, miss in L1). The
/// bound is the L2: a block of A must keep at least 16 micro-panels (16 MR rows, kc deep)
/// in half of it beside the kc x NR micro-panel of B the kernel re-reads for each of them.
/// K is cut into equal steps no deeper than that. mc: as many rows as then fill that half
/// of the L2.
template <class A>
blocking blocking_for(index_t K, const cache_sizes& cs) {
  constexpr index_t MR = tile<A>::MR, NR = tile<A>::NR;
  const index_t half_l2 = index_t(cs.l2 / 2 / sizeof(float));  // in floats
  const index_t kc_max = std::clamp<index_t>(half_l2 / (16 * MR + NR) / 64 * 64, 64, 1024);
  const index_t steps = std::max<index_t>(1, (K + kc_max - 1) / kc_max);
  blocking b;
  b.kc = (K + steps - 1) / steps;
  b.mc = std::clamp<index_t>((half_l2 - b.kc * NR) / std::max<index_t>(b.kc, 1) / MR * MR, MR, 1020);
  return b;
}

/// A strided matrix of dtype U: element (r, c) at p[r * rs + c * cs].
template <class U>
struct strided {
  const U* p = nullptr;
  index_t rs = 0, cs = 0;
  const U* at(index_t r, index_t c) const noexcept { return p + r * rs + c * cs; }
};

/// Packs rows [0, mc) x columns [k0, k0 + kc) of A into MR-row panels at dst.
template <class A, class U>
void pack_a(const strided<U>& a, index_t mc, index_t k0, index_t kc, float* dst) noexcept {
  constexpr int MR = tile<A>::MR;
  for (index_t i0 = 0; i0 < mc; i0 += MR) {
    const int rows = static_cast<int>(std::min<index_t>(MR, mc - i0));
    if (a.cs == 1) {
      for (int i = 0; i < rows; ++i) {
        const U* src = a.at(i0 + i, k0);
        for (index_t k = 0; k < kc; ++k) dst[k * MR + i] = static_cast<float>(src[k]);
      }
    } else {
      for (index_t k = 0; k < kc; ++k) {
        const U* src = a.at(i0, k0 + k);
        for (int i = 0; i < rows; ++i) dst[k * MR + i] = static_cast<float>(src[i * a.rs]);
      }
    }
    for (int i = rows; i < MR; ++i) {
      for (index_t k = 0; k < kc; ++k) dst[k * MR + i] = 0.0f;
    }
    dst += kc * MR;
  }
}

/// Packs row r's floats (row[k] for k < kc, from wherever the caller got them) into row
/// i of the MR-row panel at dst.
template <class A>
void pack_a_row(const float* row, int i, index_t kc, float* panel) noexcept {
  constexpr int MR = tile<A>::MR;
  for (index_t k = 0; k < kc; ++k) panel[k * MR + i] = row[k];
}

/// Zeros rows [rows, MR) of an MR-row panel.
template <class A>
void pad_a_panel(int rows, index_t kc, float* panel) noexcept {
  constexpr int MR = tile<A>::MR;
  for (int i = rows; i < MR; ++i) {
    for (index_t k = 0; k < kc; ++k) panel[k * MR + i] = 0.0f;
  }
}

/// Packs columns [n0, n0 + nr) (nr <= NR) of B, all K rows, into one NR-column panel.
template <class A, class U>
void pack_b_panel(const strided<U>& b, index_t K, index_t n0, index_t nr, float* dst) noexcept {
  constexpr int NR = tile<A>::NR;
  if (nr == NR && b.cs == 1) {
    for (index_t k = 0; k < K; ++k) {
      const U* src = b.at(k, n0);
#pragma GCC unroll 4
      for (int j = 0; j < NR; j += tile<A>::L) vstore<A>(dst + k * NR + j, vload<A>(src + j));
    }
    return;
  }
  if (b.rs == 1) {  // k-contiguous columns (a transposed row-major weight)
    for (index_t j = 0; j < nr; ++j) {
      const U* src = b.at(0, n0 + j);
      for (index_t k = 0; k < K; ++k) dst[k * NR + j] = static_cast<float>(src[k]);
    }
  } else {
    for (index_t k = 0; k < K; ++k) {
      for (index_t j = 0; j < nr; ++j) dst[k * NR + j] = static_cast<float>(*b.at(k, n0 + j));
    }
  }
  for (index_t k = 0; k < K; ++k) {
    for (index_t j = nr; j < NR; ++j) dst[k * NR + j] = 0.0f;
  }
}

/// Packs `panels` whole NR-column panels of a row-major b (cs == 1) from column n0, K
/// rows, into panels ps floats apart at dst: row by row, so that each row is read in one
/// run of panels * NR elements (a panel at a time would touch every row's page per panel).
/// The rows a few ahead are requested meanwhile: a row is too short a run for the hardware
/// prefetcher, and the rows lie pages apart.
template <class A, class U>
void pack_b_rows(const strided<U>& b, index_t K, index_t n0, index_t panels, float* dst, index_t ps) noexcept {
  constexpr int NR = tile<A>::NR;
  constexpr index_t ahead = 4;
  constexpr index_t line = 64 / index_t(sizeof(U));
  const index_t run = panels * NR;
  for (index_t k = 0; k < K; ++k) {
    const U* src = b.at(k, n0);
    if (k + ahead < K) {
      const U* next = b.at(k + ahead, n0);
      for (index_t j = 0; j < run; j += line) __builtin_prefetch(next + j, 0, 3);
    }
    for (index_t q = 0; q < panels; ++q) {
#pragma GCC unroll 4
      for (int j = 0; j < NR; j += tile<A>::L) vstore<A>(dst + q * ps + k * NR + j, vload<A>(src + q * NR + j));
    }
  }
}

}  // namespace kiln::detail::cpu_gemm
