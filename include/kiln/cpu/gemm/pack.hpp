// kiln/cpu/gemm/pack.hpp — packing panels of A and B for the micro-kernel, and the
// cache sizes the blocking is derived from.
//
// Packed A: panels of MR rows, each kc steps of MR floats (rows past the matrix edge are
// zeros). Packed B: panels of NR columns, each K steps of NR floats (columns past the
// edge are zeros), 64-byte aligned, so that the micro-kernel reads both sequentially
// from cache. Any strides and any float dtype are read (a transposed view, f16/bf16
// weights converted to float here, once, in the vector loads: no conversion pass).
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
/// a time), and mc, the most rows of A in one row block (packed for a step at a time).
struct blocking {
  index_t kc = 0, mc = 0;
};

/// Blocking for a product of depth K on arch A with caches cs.
/// kc: each micro-kernel call reads and writes its MR x NR tile of C once per step, a cost
/// that only a deep step amortises (at kc = 128 the tile updates took 12% of the kernel's
/// time at n = 2048 on a Zen 4: the tile's rows, a power of two apart, miss in L1). The
/// bound is the L2: a block of A must keep at least 8 micro-panels (8 MR rows, kc deep)
/// in half of it beside the kc x NR micro-panel of B the kernel re-reads for each of them
/// (on AVX-512 with a 1 MiB L2: kc = 1024, 3-5% faster than 512 at n = 1024 and 2048 on
/// two threads; 16 micro-panels gave 576). K is cut into equal steps no deeper than that.
/// Below AVX-512 (6 x 16 tiles on AVX2) the micro-panel of B also stays within half of
/// the L1, as BLIS's Haswell and Zen configurations have it (kc = 256 with a 32 KiB L1):
/// on a Zen 2 (AVX2, 512 KiB L2, process CPU time at 2 threads, three interleaved rounds)
/// kc = 256 against the L2 bound's 1024: f32 gate/up [11264, 2048] at S = 512 1.2-1.3x
/// faster, down, q/o and SGEMM 2048 1.04-1.1x; 384 about as 256.
/// mc: as many rows as then fill that half of the L2.
template <class A>
blocking blocking_for(index_t K, const cache_sizes& cs) {
  constexpr index_t MR = tile<A>::MR, NR = tile<A>::NR;
  const index_t half_l2 = index_t(cs.l2 / 2 / sizeof(float));  // in floats
  index_t kc_max = std::clamp<index_t>(half_l2 / (8 * MR + NR) / 64 * 64, 64, 1024);
  if constexpr (!simd::is_avx512<A>) {
    const index_t half_l1 = index_t(cs.l1 / 2 / sizeof(float));
    kc_max = std::min(kc_max, std::max<index_t>(half_l1 / NR / 64 * 64, 128));
  }
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

/// Packs `rows` rows (rows <= MR; row i's floats k < kc at r[i]) into the MR-row panel at
/// panel, rows past them zero. With vectors, a square of L rows x L steps at a time is
/// loaded row-wise and transposed in registers (AVX-512: 16 x 16, rows 12-15 zero; AVX2:
/// 8 x 8, rows 6-7 zero), each step's MR floats stored at once: a scalar store per
/// element took a sixth of the packed product's time at n = 512 on two threads.
template <class A>
void pack_a_rows(const float* const* r, int rows, index_t kc, float* panel) noexcept {
  constexpr int MR = tile<A>::MR;
  index_t k0 = 0;
  if constexpr (simd::is_avx512<A> && MR <= 16) {
    const __mmask16 keep = __mmask16((1u << MR) - 1);
    for (; k0 + 16 <= kc; k0 += 16) {
      fvec<A> v[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) v[i] = i < rows ? fvec<A>(_mm512_loadu_ps(r[i] + k0)) : vzero<A>();
      transpose_square<A>(v, [&](int j, __m512 x) { _mm512_mask_storeu_ps(panel + (k0 + j) * MR, keep, x); });
    }
  } else if constexpr (simd::is_avx2<A> && MR <= 8) {
    const __m256i keep = _mm256_setr_epi32(0 < MR ? -1 : 0, 1 < MR ? -1 : 0, 2 < MR ? -1 : 0, 3 < MR ? -1 : 0,
                                           4 < MR ? -1 : 0, 5 < MR ? -1 : 0, 6 < MR ? -1 : 0, 7 < MR ? -1 : 0);
    for (; k0 + 8 <= kc; k0 += 8) {
      fvec<A> v[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) v[i] = i < rows ? fvec<A>(_mm256_loadu_ps(r[i] + k0)) : vzero<A>();
      transpose_square<A>(v, [&](int j, __m256 x) {
        float* p = panel + (k0 + j) * MR;
        if constexpr (MR == 6) {  // 4 + 2 floats (a masked store is slow on AMD)
          _mm_storeu_ps(p, _mm256_castps256_ps128(x));
          _mm_storel_pi(reinterpret_cast<__m64*>(p + 4), _mm256_extractf128_ps(x, 1));
        } else {
          _mm256_maskstore_ps(p, keep, x);
        }
      });
    }
  }
  for (int i = 0; i < MR; ++i) {
    if (i < rows) {
      for (index_t k = k0; k < kc; ++k) panel[k * MR + i] = r[i][k];
    } else {
      for (index_t k = k0; k < kc; ++k) panel[k * MR + i] = 0.0f;
    }
  }
}

/// Zeros rows [rows, MR) of an MR-row panel.
template <class A>
void pad_a_panel(int rows, index_t kc, float* panel) noexcept {
  constexpr int MR = tile<A>::MR;
  for (int i = rows; i < MR; ++i) {
    for (index_t k = 0; k < kc; ++k) panel[k * MR + i] = 0.0f;
  }
}

/// Packs n <= NR k-contiguous columns (column j's K elements from col(j), any float dtype)
/// into one NR-wide panel, NR floats per k, the columns past n zero: L columns x L steps at
/// a time, each column's L elements loaded (16-bit weights converted in the load: F16C /
/// AVX-512 for f16, a shift for bf16), the square transposed in registers and stored a
/// step at a time. One element at a time, this packing took 30% of x [128, 2048] @ w^T
/// (w f16 [2048, 2048]) on one thread. L columns go down the whole K before the next L,
/// their pointers held (one Zen 2 core, f16 panels of 16
/// columns x 256 from the L2 into a panel in the L1: 0.23 -> 0.105 ns an element, against
/// squares taken across the panel at each k with the pointers computed per load).
template <class A, int NR, class Col>
void pack_columns(Col&& col, int n, index_t K, float* dst) noexcept {
  index_t k0 = 0;
  if constexpr (tile<A>::vector) {
    constexpr int L = tile<A>::L;
    const index_t kv = K / L * L;
    // L columns from j0 (whole: all of them exist; else those past n read as zeros)
    const auto squares = [&](int j0, auto whole) {
      decltype(col(0)) c[L];
#pragma GCC unroll 16
      for (int i = 0; i < L; ++i) c[i] = whole || j0 + i < n ? col(j0 + i) : nullptr;
      for (index_t k = 0; k < kv; k += L) {
        fvec<A> v[L];
#pragma GCC unroll 16
        for (int i = 0; i < L; ++i) v[i] = whole || c[i] ? vload<A>(c[i] + k) : vzero<A>();
        transpose_square<A>(v, [&](int kk, fvec<A> x) { vstore<A>(dst + (k + kk) * NR + j0, x); });
      }
    };
#pragma GCC unroll 1
    for (int j0 = 0; j0 < NR; j0 += L) {
      if (j0 + L <= n) squares(j0, std::true_type{});
      else squares(j0, std::false_type{});
    }
    k0 = kv;
  }
  for (int j = 0; j < NR; ++j) {
    for (index_t k = k0; k < K; ++k) dst[k * NR + j] = j < n ? static_cast<float>(col(j)[k]) : 0.0f;
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
  if (b.rs == 1) {  // k-contiguous columns (an nn.Linear weight read as its transpose)
    pack_columns<A, NR>([&](int j) { return b.at(0, n0 + j); }, int(nr), K, dst);
    return;
  }
  for (index_t k = 0; k < K; ++k) {
    for (index_t j = 0; j < nr; ++j) dst[k * NR + j] = static_cast<float>(*b.at(k, n0 + j));
  }
  for (index_t k = 0; k < K; ++k) {
    for (index_t j = nr; j < NR; ++j) dst[k * NR + j] = 0.0f;
  }
}

/// Packs `rows` rows (rows <= NR, tile_t's; row j's floats k < K at r[j]) into one NR-wide
/// panel, NR floats per k (rows past them zero): x's rows as the B panel of micro_t(),
/// through pack_columns().
template <class A>
void pack_rows_panel(const float* const* r, int rows, index_t K, float* dst) noexcept {
  pack_columns<A, tile_t<A>::NR>([&](int j) { return r[j]; }, rows, K, dst);
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
