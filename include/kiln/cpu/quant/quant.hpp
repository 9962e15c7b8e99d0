// kiln/cpu/quant/quant.hpp — the CPU kernels of the quant family (ops/quant/): the
// packing of kiln::quantize, kiln::dequantize, and the product of activations with a
// qtensor (matmul / linear / bitlinear), over cpu/structural.hpp's position runs (so
// prologues, epilogues, strides and dtypes come from the shared loads and stores).
//
// The product: first every row of x (after its prologue) is quantized to int8 (absmax,
// ops/quant/qmatmul.hpp) into a buffer padded with zeros to whole chunks, then tasks of
// (64 activation rows, 64 weight rows) run the integer micro-kernel (cpu/quant/dot.hpp)
// on 4 x 4 tiles (1 x 4 for a single row: the decode step) over the whole of K and hand
// each finished row segment to the epilogue once. A single row against one scale per
// weight row (BitNet's projections, an int8 LM head), where the build has AVX-512 VNNI,
// takes cpu/quant/matvec.hpp's 512-bit kernel instead, tasks of 256 weight rows. A task's weight rows (64 x K bytes at
// most) and activation rows stay in L2 while the tiles sweep them.
// With at least panel_rows rows of x (prefill: 16, ternary 24), where the build has
// AVX-512 VNNI, tasks of (64 weight rows, up to 512 rows of x) unpack their weight rows
// into two column panels once and run cpu/quant/panel.hpp's 6 x 32 tiles over every row
// of x: a group's rescale is then one float multiply-add per 16 outputs, not one per output.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/cpu/quant/dot.hpp"
#include "kiln/cpu/quant/matvec.hpp"
#include "kiln/cpu/quant/panel.hpp"
#include "kiln/cpu/structural.hpp"
#include "kiln/ops/quant/quantize.hpp"
#include "kiln/ops/quant/qmatmul.hpp"

namespace kiln::detail {
namespace cpu_quant {

/// The bytes of row n of a codes tensor.
template <class Tn>
inline const std::uint8_t* code_row(const Tn& codes, const quant_layout& l, index_t n) {
  return reinterpret_cast<const std::uint8_t*>(codes.data() + n * l.words);
}

/// Scales of row n (one per group; the same line for every row when per tensor).
template <class Tn>
inline const auto* scale_row(const Tn& scales, const quant_layout& l, index_t n) {
  return scales.data() + n * l.scale_row_stride();
}

/// Packs one row of K floats w with reciprocal scales inv (one per group) into
/// chunks * 32 bytes at dst (ops/quant/scheme.hpp).
template <class Scheme>
void pack_row(const float* w, const float* inv, const quant_layout& l, std::uint8_t* dst) {
  constexpr int P = planes<Scheme>;
  const float q = float(Scheme::qmax);
  for (index_t c = 0; c < l.chunks; ++c) {
    for (int j = 0; j < 32; ++j) {
      unsigned byte = 0;
      for (int p = 0; p < P; ++p) {
        const index_t k = c * Scheme::chunk + 32 * p + j;
        int code = Scheme::offset;  // padding: worth 0
        if (k < l.K) {
          const float v = std::clamp(w[k] * inv[k / l.group], -q, q);
          code = int(std::nearbyint(v)) + Scheme::offset;  // round half to even (the default mode)
        }
        byte |= unsigned(code) << (Scheme::bits * p);
      }
      dst[c * 32 + j] = static_cast<std::uint8_t>(byte);
    }
  }
}

/// Row n of the weight as floats: (code - offset) * scale.
template <class Scheme>
void unpack_row(const std::uint8_t* row, const scale_t<Scheme>* scale, const quant_layout& l, float* dst) {
  constexpr int P = planes<Scheme>;
  constexpr unsigned mask = (1u << Scheme::bits) - 1;
  for (index_t c = 0; c < l.chunks; ++c) {
    for (int p = 0; p < P; ++p) {
      const index_t k0 = c * Scheme::chunk + 32 * p;
      const index_t n = std::min<index_t>(32, l.K - k0);
      for (index_t j = 0; j < n; ++j) {
        const int code = int((unsigned(row[c * 32 + j]) >> (Scheme::bits * p)) & mask) - Scheme::offset;
        dst[k0 + j] = float(code) * scale_value(scale[(k0 + j) / l.group]);
      }
    }
  }
}

/// Quantizes a row of K floats to int8 (absmax) into dst (padded with zeros to Kp);
/// returns the row's scale max|x| / 127 (NaN for a row holding NaN or Inf: its outputs
/// are NaN).
inline float quantize_activations(const float* x, index_t K, index_t Kp, std::int8_t* dst) {
  float amax = 0.0f;
  index_t k0 = 0;
#if defined(__AVX512F__)
  // 16 at a time (max|x| is exact in any order; NaN rows are found below either way)
  {
    __m512 m = _mm512_setzero_ps();
    for (; k0 + 16 <= K; k0 += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + k0)));
    amax = _mm512_reduce_max_ps(m);
  }
#endif
  for (index_t k = k0; k < K; ++k) amax = std::max(amax, std::abs(x[k]));
  bool finite = std::isfinite(amax);
  if (finite) {  // std::max drops NaN: look for one
    for (index_t k = 0; k < K && finite; ++k) finite = !std::isnan(x[k]);
  }
  const float inv = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
  index_t k = 0;
#if defined(__AVX512F__)
  // the same rounding as std::nearbyint (the current mode: to nearest, ties to even)
  const __m512 vi = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (; k + 16 <= K; k += 16) {
    const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(x + k), vi), lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v)));
  }
#endif
  for (; k < K; ++k) {
    dst[k] = static_cast<std::int8_t>(std::nearbyint(std::clamp(x[k] * inv, -127.0f, 127.0f)));
  }
  std::fill(dst + K, dst + Kp, std::int8_t(0));
  return finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
}

/// Rows of activations and of weights per task of the product.
inline constexpr index_t task_rows = 64;

/// The column panels (panel.hpp) with instruction set Isa: panel's (AVX-512 VNNI, every
/// scheme), panel256's (AVX2 without the 512-bit VNNI, codes of at most 4 bits), or none.
struct no_panels {
  static constexpr const char* name = "";
};
#if defined(KILN_QUANT_HAS_PANELS)
struct panels512 {
  static constexpr int MR = panel::MR, NP = panel::NP;
  static constexpr const char* name = "vnni512 panels";
  template <class Scheme, class... Args>
  static void pack(Args... a) noexcept { panel::pack<Scheme>(a...); }
  template <class Scheme, bool Grouped, class... Args>
  static void tile(Args... a) noexcept { panel::tile<Grouped>(a...); }
};
#endif
#if defined(KILN_QUANT_HAS_PANELS256)
struct panels256 {
  static constexpr int MR = panel256::MR, NP = panel256::NP;
  static constexpr const char* name = "avx2 panels";
  template <class Scheme, class... Args>
  static void pack(Args... a) noexcept { panel256::pack<Scheme>(a...); }
  template <class Scheme, bool Grouped, class... Args>
  static void tile(Args... a) noexcept { panel256::tile<Scheme, Grouped>(a...); }
};
#endif
template <class Scheme, class Isa>
constexpr auto panels_of() noexcept {
#if defined(KILN_QUANT_HAS_PANELS)
  if constexpr (std::is_same_v<Isa, isa_vnni>) return panels512{};
  else
#endif
#if defined(KILN_QUANT_HAS_PANELS256)
  if constexpr (!std::is_same_v<Isa, isa_portable> && panel256::takes<Scheme>) return panels256{};
  else
#endif
    return no_panels{};
}
template <class Scheme, class Isa>
using panels_t = decltype(panels_of<Scheme, Isa>());

/// Rows of x from which the product runs on column panels (panel.hpp), where built: where
/// unpacking a task's weight rows costs less than the panels save. x [M, 4096] @ w^T,
/// w [4096, 4096], one thread, against the 4 x 4 tiles: at M = 16 int8 0.96x, int8 g128
/// 0.82x, int4 g32 0.31x the time, ternary 1.13x (four codes a byte to unpack; 0.63x at
/// M = 128, so about even at 24) with the VNNI panels.
template <class Scheme>
inline constexpr index_t panel_rows = Scheme::bits == 2 ? 24 : 16;

/// Whether the product of M rows takes the panels with instruction set Isa.
template <class Scheme, class Isa>
constexpr bool use_panels(index_t M) noexcept {
  if constexpr (std::is_same_v<panels_t<Scheme, Isa>, no_panels>) {
    (void)M;
    return false;
  } else {
    return M >= panel_rows<Scheme>;
  }
}

/// Whether the product of M rows of x takes matvec.hpp's kernel with instruction set Isa:
/// one row (the decode step), one scale per weight row (gsub 0) or per group of 32, 64 or
/// 128 weights (gsub 1, 2, 4), where built.
template <class Isa>
constexpr bool use_matvec(index_t M, index_t gsub) noexcept {
#if defined(KILN_QUANT_HAS_MATVEC512)
  return std::is_same_v<Isa, isa_vnni> && M == 1 && (gsub == 0 || gsub == 1 || gsub == 2 || gsub == 4);
#else
  (void)M;
  (void)gsub;
  return false;
#endif
}

/// Work units per weight byte of a decode product (one row of x), for the thread count:
/// the weight streams from memory once, read at about 20 GB/s by a core, where
/// cpu/evaluate.hpp's byte_cost prices data in the caches. With byte_cost, the q/k/v and
/// o projections of BitNet 2B-4T (2.5 and 1.6 MB of codes) counted as too little work for
/// a second thread and ran on one.
inline constexpr double stream_byte_cost = 4 * cpu_loop::byte_cost;

/// Weight rows per task of matvec.hpp's kernel: long enough runs of contiguous rows for
/// the prefetchers, enough tasks to even out two threads.
inline constexpr index_t matvec_task_rows = 256;

/// out[r][c] for a tile of R activation rows from m0 and up to 4 weight rows from n0 (a
/// tile past the end repeats its last row; those results are dropped by the caller).
template <class Scheme, class Isa, int R>
void tile(Isa isa, const std::int8_t* xq, const std::int32_t* xoff, index_t Kp, index_t m0, index_t m_end,
          const std::uint8_t* codes, index_t row_bytes, const scale_t<Scheme>* scales, index_t scale_stride, index_t groups,
          index_t n0, index_t n_end, index_t chunks, index_t gsub, float (&out)[R][4]) {
  const std::uint8_t* w[4];
  const scale_t<Scheme>* sc[4];
  const std::int8_t* x[R];
  const std::int32_t* xo[R];
  const index_t nseg = segments(Kp, gsub);
  for (int c = 0; c < 4; ++c) {
    const index_t n = std::min(n0 + c, n_end - 1);
    w[c] = codes + n * row_bytes;
    sc[c] = scales + n * scale_stride;
  }
  for (int r = 0; r < R; ++r) {
    const index_t m = std::min(m0 + r, m_end - 1);
    x[r] = xq + m * Kp;
    xo[r] = xoff + m * nseg;
  }
  // one activation row (the decode step): the next tile's weight rows are fetched while
  // this one runs (with more rows, these weight rows are reused and the next ones wait)
  const std::uint8_t* nx[4];
  const bool ahead = R == 1 && n0 + 4 < n_end;
  for (int c = 0; c < 4; ++c) nx[c] = codes + std::min(n0 + 4 + c, n_end - 1) * row_bytes;
  qdot<Scheme, R, 4>(isa, w, x, chunks, gsub, sc, groups, out, xo, ahead ? nx : nullptr);
}

}  // namespace cpu_quant

/// kiln::quantize's packing (one task per block of rows).
template <class Scheme>
struct cpu_structural_kernel<quant_pack_op<Scheme>> {
  template <class A, class S>
  static std::string variant(const S&) {
    return "cpu.quant.pack";
  }
  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S& s, axis_split) {
    using namespace cpu_loop;
    const quant_layout& l = s.op.layout;
    const auto& inv = std::get<0>(s.params).t;
    std::int32_t* const out = io.direct_out();  // kiln::quantize writes a new contiguous tensor
    KILN_ASSERT(out != nullptr);
    if (l.N == 0 || l.K == 0) return;
    const index_t per_task = std::max<index_t>(1, block_elements / l.K);
    const index_t tasks = (l.N + per_task - 1) / per_task;
    const int threads = structural_threads(state, double(l.N * l.K), 8.0, tasks);
    for_tasks(tasks, threads, [&](index_t t) {
      const index_t r0 = t * per_task, r1 = std::min(l.N, r0 + per_task);
      std::unique_ptr<float[]> buf;
      for (index_t r = r0; r < r1; ++r) {
        const float* w = io.direct(r * l.K);
        if (!w) {
          if (!buf) buf.reset(new float[static_cast<std::size_t>(l.K)]);
          io.load(r * l.K, r * l.K + l.K, buf.get());
          w = buf.get();
        }
        const float* iv = inv.data() + r * l.scale_row_stride();
        cpu_quant::pack_row<Scheme>(w, iv, l, reinterpret_cast<std::uint8_t*>(out + r * l.words));
      }
    });
  }
};

/// kiln::dequantize: rows decoded into a buffer (or the output) and stored through the
/// epilogue.
template <class Scheme>
struct cpu_structural_kernel<dequantize_op<Scheme>> {
  template <class A, class S>
  static std::string variant(const S&) {
    return "cpu.quant.dequantize";
  }
  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S& s, axis_split) {
    using namespace cpu_loop;
    const quant_layout& l = s.op.layout;
    const auto& codes = s.arg.t;
    const auto& scales = std::get<0>(s.params).t;
    if (l.N == 0 || l.K == 0) return;
    const index_t per_task = std::max<index_t>(1, block_elements / l.K);
    const index_t tasks = (l.N + per_task - 1) / per_task;
    const int threads = structural_threads(state, double(l.N * l.K), 4.0, tasks);
    float* const direct = io.direct_out();
    for_tasks(tasks, threads, [&](index_t t) {
      const index_t r0 = t * per_task, r1 = std::min(l.N, r0 + per_task);
      std::unique_ptr<float[]> buf;
      float* o = direct ? direct + r0 * l.K : (buf.reset(new float[static_cast<std::size_t>((r1 - r0) * l.K)]), buf.get());
      for (index_t r = r0; r < r1; ++r) {
        cpu_quant::unpack_row<Scheme>(cpu_quant::code_row(codes, l, r), cpu_quant::scale_row(scales, l, r), l,
                                      o + (r - r0) * l.K);
      }
      if (!direct) io.store(r0 * l.K, r1 * l.K, o);
    });
  }
};

/// The product of activations with a qtensor (matmul / linear / bitlinear).
template <class Scheme>
struct cpu_structural_kernel<qmatmul_op<Scheme>> {
  template <class A, class S>
  static std::string variant(const S& s) {
    const index_t K = s.op.layout.K;
    const index_t M = K > 0 ? s.input_shape.numel() / K : 0;
    if (cpu_quant::use_panels<Scheme, cpu_quant::isa_best>(M))
      return std::string("cpu.quant.gemm ") + cpu_quant::panels_t<Scheme, cpu_quant::isa_best>::name;
    const quant_layout& l = s.op.layout;
    if (cpu_quant::use_matvec<cpu_quant::isa_best>(M, l.groups > 1 ? l.group / 32 : 0)) return "cpu.quant.matvec vnni512";
    return std::string(M == 1 ? "cpu.quant.matvec " : "cpu.quant.gemm ") + cpu_quant::isa_best::name;
  }

  template <class A, class Io, class S, class Isa = cpu_quant::isa_best>
  static void run(const cpu_state& state, const Io& io, const S& s, axis_split, Isa isa = {}) {
    using namespace cpu_loop;
    using namespace cpu_quant;
    using R_t = typename Io::result_type;
    const quant_layout& l = s.op.layout;
    const index_t K = l.K, N = l.N;
    index_t M = 1;
    for (int d = 0; d + 1 < s.input_shape.rank(); ++d) M *= s.input_shape[d];
    if (M == 0 || N == 0) return;
    R_t* const direct = io.direct_out();
    if (K == 0) {  // empty sums: zeros through the epilogue
      std::vector<R_t> z(static_cast<std::size_t>(N), R_t(0));
      for (index_t m = 0; m < M; ++m) {
        if (direct) std::fill(direct + m * N, direct + m * N + N, R_t(0));
        else io.store(m * N, m * N + N, z.data());
      }
      return;
    }
    const auto& codes = std::get<0>(s.params).t;
    const auto& scales = std::get<1>(s.params).t;
    const index_t Kp = l.chunks * Scheme::chunk;
    const index_t gsub = l.groups > 1 ? l.group / 32 : 0;
    const index_t sstride = l.scale_row_stride();
    const std::uint8_t* const wbytes = reinterpret_cast<const std::uint8_t*>(codes.data());
    const index_t row_bytes = l.words * 4;

    // 1. the activations, quantized per row
    std::unique_ptr<std::int8_t[]> xq(new std::int8_t[static_cast<std::size_t>(M * Kp)]);
    std::unique_ptr<float[]> sx(new float[static_cast<std::size_t>(M)]);
    const index_t nseg = segments(Kp, gsub);
    std::unique_ptr<std::int32_t[]> xoff(new std::int32_t[static_cast<std::size_t>(M * nseg)]);
    {
      const index_t per_task = std::max<index_t>(1, block_elements / K);
      const index_t tasks = (M + per_task - 1) / per_task;
      for_tasks(tasks, structural_threads(state, double(M * K), 6.0, tasks), [&](index_t t) {
        std::unique_ptr<float[]> buf;
        for (index_t m = t * per_task, e = std::min(M, m + per_task); m < e; ++m) {
          const float* x = io.direct(m * K);
          if (!x) {
            if (!buf) buf.reset(new float[static_cast<std::size_t>(K)]);
            io.load(m * K, m * K + K, buf.get());
            x = buf.get();
          }
          sx[m] = quantize_activations(x, K, Kp, xq.get() + m * Kp);
          segment_offsets<Scheme>(xq.get() + m * Kp, Kp, gsub, xoff.get() + m * nseg);
        }
      });
    }

    if constexpr (!std::is_same_v<panels_t<Scheme, Isa>, no_panels>) {
      if (use_panels<Scheme, Isa>(M)) {
        // 2'. column panels: a task per (2 NP weight rows, up to 512 rows of x)
        using pn = panels_t<Scheme, Isa>;
        constexpr index_t cols = 2 * pn::NP, chunk_rows = 512;
        const bool grouped = gsub > 0;
        const index_t seg_k = (grouped ? gsub : flush_planes) * 32;
        const index_t nt2 = (N + cols - 1) / cols, mt2 = (M + chunk_rows - 1) / chunk_rows;
        const double work = double(M) * double(N) * double(K) * 0.03;
        const int threads = structural_threads(state, work, 1.0, mt2 * nt2);
        const index_t pbytes = Kp * pn::NP, sfloats = grouped ? l.groups * pn::NP : 0;
        for_tasks(mt2 * nt2, threads, [&](index_t t) {
          const index_t n0 = (t / mt2) * cols, n1 = std::min(N, n0 + cols), nn = n1 - n0;
          const index_t m0 = (t % mt2) * chunk_rows, m1 = std::min(M, m0 + chunk_rows);
          const index_t np = (nn + pn::NP - 1) / pn::NP;
          std::byte* mem = cpu_scheduler::scratch(std::size_t(2 * pbytes) +
                                                  sizeof(float) * std::size_t(2 * sfloats + pn::MR * pn::NP + cols) +
                                                  sizeof(R_t) * std::size_t(chunk_rows * cols) + 256);
          std::uint8_t* pan = reinterpret_cast<std::uint8_t*>(mem);  // 64-byte aligned, as are the sizes before each part
          float* psc = reinterpret_cast<float*>(pan + 2 * pbytes);
          float* out = psc + 2 * sfloats;
          float* rs = out + pn::MR * pn::NP;  // per column: its row scale (1 when grouped)
          R_t* res = reinterpret_cast<R_t*>(rs + cols);
          for (index_t p = 0; p < np; ++p) {
            pn::template pack<Scheme>(wbytes, row_bytes, l.chunks, n0 + p * pn::NP, std::min<index_t>(pn::NP, nn - p * pn::NP),
                             scales.data(), sstride, l.groups, grouped, pan + p * pbytes, psc + p * sfloats);
          }
          for (index_t n = n0; n < n1; ++n) rs[n - n0] = grouped ? 1.0f : scale_value(scales.data()[n * sstride]);
          for (index_t m = m0; m < m1; m += pn::MR) {
            const std::int8_t* xr[pn::MR];
            const std::int32_t* xo[pn::MR];
            for (int r = 0; r < pn::MR; ++r) {  // a tile past the last row repeats it (its results are dropped)
              const index_t mr = std::min(m + r, m1 - 1);
              xr[r] = xq.get() + mr * Kp;
              xo[r] = xoff.get() + mr * nseg;
            }
            const index_t rows = std::min<index_t>(pn::MR, m1 - m);
            for (index_t p = 0; p < np; ++p) {
              if (grouped) pn::template tile<Scheme, true>(pan + p * pbytes, psc + p * sfloats, xr, xo, Kp, seg_k, l.groups, out);
              else pn::template tile<Scheme, false>(pan + p * pbytes, psc, xr, xo, Kp, seg_k, l.groups, out);
              const index_t c0 = p * pn::NP, c1 = std::min(nn, c0 + pn::NP);
              for (index_t r = 0; r < rows; ++r) {
                R_t* dst = res + (m - m0 + r) * nn;
                const float sr = sx[m + r];
                for (index_t c = c0; c < c1; ++c) dst[c] = static_cast<R_t>(out[r * pn::NP + (c - c0)] * rs[c] * sr);
              }
            }
          }
          for (index_t m = m0; m < m1; ++m) {
            const R_t* v = res + (m - m0) * nn;
            if (direct) std::copy(v, v + nn, direct + m * N + n0);
            else io.store(m * N + n0, m * N + n1, v);
          }
        });
        return;
      }
    }

#if defined(KILN_QUANT_HAS_MATVEC512)
    if (use_matvec<Isa>(M, gsub)) {
      // 2''. one row of x: matvec.hpp's tiles, a task per matvec_task_rows weight rows
      std::unique_ptr<std::int8_t[]> xs(new std::int8_t[static_cast<std::size_t>(matvec::arranged_bytes<Scheme>(l.chunks))]);
      matvec::arrange<Scheme>(xq.get(), l.chunks, xs.get());
      std::unique_ptr<std::int32_t[]> xa;  // grouped scales: the arranged offsets
      if (gsub > 0) {
        xa.reset(new std::int32_t[static_cast<std::size_t>(matvec::offset_words<Scheme>(l.chunks))]);
        matvec::arrange_offsets<Scheme>(xq.get(), l.chunks, xa.get());
      }
      const index_t tasks = (N + matvec_task_rows - 1) / matvec_task_rows;
      const double work = double(N) * double(K) * 0.03 + double(N) * double(row_bytes) * stream_byte_cost;
      const int threads = structural_threads(state, work, 1.0, tasks);
      const float s0 = sx[0];
      for_tasks(tasks, threads, [&](index_t t) {
        const index_t n0 = t * matvec_task_rows, n1 = std::min(N, n0 + matvec_task_rows), nn = n1 - n0;
        std::byte* mem = cpu_scheduler::scratch(sizeof(float) * std::size_t((nn + 15) / 16 * 16) + sizeof(R_t) * std::size_t(nn));
        float* o = reinterpret_cast<float*>(mem);
        R_t* res = reinterpret_cast<R_t*>(o + (nn + 15) / 16 * 16);
        const auto* sc = scales.data();
        if (gsub > 0) {
          matvec::grouped_rows<Scheme>(wbytes + n0 * row_bytes, row_bytes, nn, sc + n0 * sstride, sstride, l.groups, gsub,
                                       xs.get(), xa.get(), l.chunks, o);
          for (index_t n = 0; n < nn; ++n) res[n] = static_cast<R_t>(o[n] * s0);
        } else {
          matvec::rows<Scheme>(wbytes + n0 * row_bytes, row_bytes, nn, xs.get(), l.chunks, xoff.get(), o);
          for (index_t n = 0; n < nn; ++n) res[n] = static_cast<R_t>(o[n] * scale_value(sc[(n0 + n) * sstride]) * s0);
        }
        if (direct) std::copy(res, res + nn, direct + n0);
        else io.store(n0, n1, res);
      });
      return;
    }
#endif

    // 2. tiles of the product, a task per (64 rows of x, 64 rows of the weight)
    const index_t mt = (M + task_rows - 1) / task_rows, nt = (N + task_rows - 1) / task_rows;
    const double work = double(M) * double(N) * double(K) * 0.03 + double(N) * double(row_bytes) * (M == 1 ? stream_byte_cost : byte_cost);
    const int threads = structural_threads(state, work, 1.0, mt * nt);
    for_tasks(mt * nt, threads, [&](index_t t) {
      const index_t m0 = (t % mt) * task_rows, m1 = std::min(M, m0 + task_rows);
      const index_t n0 = (t / mt) * task_rows, n1 = std::min(N, n0 + task_rows);
      const index_t nn = n1 - n0;
      std::unique_ptr<R_t[]> res(new R_t[static_cast<std::size_t>((m1 - m0) * nn)]);
      const auto put = [&](index_t m, index_t n, float v) {
        const float rs = gsub ? 1.0f : scale_value(scales.data()[n * sstride]);  // one scale per row (or tensor): applied here
        res[static_cast<std::size_t>((m - m0) * nn + (n - n0))] = static_cast<R_t>(v * rs * sx[m]);
      };
      for (index_t n = n0; n < n1; n += 4) {
        const index_t nc = std::min<index_t>(4, n1 - n);
        if (M == 1) {
          float o[1][4];
          tile<Scheme, Isa, 1>(isa, xq.get(), xoff.get(), Kp, 0, 1, wbytes, row_bytes, scales.data(), sstride, l.groups, n, n1, l.chunks, gsub, o);
          for (index_t c = 0; c < nc; ++c) put(0, n + c, o[0][c]);
          continue;
        }
        for (index_t m = m0; m < m1; m += 4) {
          float o[4][4];
          tile<Scheme, Isa, 4>(isa, xq.get(), xoff.get(), Kp, m, m1, wbytes, row_bytes, scales.data(), sstride, l.groups, n, n1, l.chunks, gsub, o);
          for (index_t r = 0; r < std::min<index_t>(4, m1 - m); ++r)
            for (index_t c = 0; c < nc; ++c) put(m + r, n + c, o[r][c]);
        }
      }
      for (index_t m = m0; m < m1; ++m) {
        const R_t* v = res.get() + (m - m0) * nn;
        if (direct) std::copy(v, v + nn, direct + m * N + n0);
        else io.store(m * N + n0, m * N + n1, v);
      }
    });
  }
};

}  // namespace kiln::detail
