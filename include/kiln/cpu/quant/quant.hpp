// kiln/cpu/quant/quant.hpp — the CPU kernels of the quant family (ops/quant/): the
// packing of kiln::quantize, kiln::dequantize, and the product of activations with a
// qtensor (matmul / linear / bitlinear), over cpu/structural.hpp's position runs (so
// prologues, epilogues, strides and dtypes come from the shared loads and stores).
//
// The product: first every row of x (after its prologue) is quantized to int8 (absmax,
// ops/quant/qmatmul.hpp) into a buffer padded with zeros to whole chunks, then tasks of
// (64 activation rows, 64 weight rows) run the integer micro-kernel (cpu/quant/dot.hpp)
// on 4 x 4 tiles (1 x 4 for a single row: the decode step) over the whole of K and hand
// each finished row segment to the epilogue once. A task's weight rows (64 x K bytes at
// most) and activation rows stay in L2 while the tiles sweep them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/cpu/quant/dot.hpp"
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
inline const float* scale_row(const Tn& scales, const quant_layout& l, index_t n) {
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
void unpack_row(const std::uint8_t* row, const float* scale, const quant_layout& l, float* dst) {
  constexpr int P = planes<Scheme>;
  constexpr unsigned mask = (1u << Scheme::bits) - 1;
  for (index_t c = 0; c < l.chunks; ++c) {
    for (int p = 0; p < P; ++p) {
      const index_t k0 = c * Scheme::chunk + 32 * p;
      const index_t n = std::min<index_t>(32, l.K - k0);
      for (index_t j = 0; j < n; ++j) {
        const int code = int((unsigned(row[c * 32 + j]) >> (Scheme::bits * p)) & mask) - Scheme::offset;
        dst[k0 + j] = float(code) * scale[(k0 + j) / l.group];
      }
    }
  }
}

/// Quantizes a row of K floats to int8 (absmax) into dst (padded with zeros to Kp);
/// returns the row's scale max|x| / 127 (NaN for a row holding NaN or Inf: its outputs
/// are NaN).
inline float quantize_activations(const float* x, index_t K, index_t Kp, std::int8_t* dst) {
  float amax = 0.0f;
  for (index_t k = 0; k < K; ++k) amax = std::max(amax, std::abs(x[k]));
  bool finite = std::isfinite(amax);
  if (finite) {  // std::max drops NaN: look for one
    for (index_t k = 0; k < K && finite; ++k) finite = !std::isnan(x[k]);
  }
  const float inv = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
  for (index_t k = 0; k < K; ++k) {
    dst[k] = static_cast<std::int8_t>(std::nearbyint(std::clamp(x[k] * inv, -127.0f, 127.0f)));
  }
  std::fill(dst + K, dst + Kp, std::int8_t(0));
  return finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
}

/// Rows of activations and of weights per task of the product.
inline constexpr index_t task_rows = 64;

/// out[r][c] for a tile of R activation rows from m0 and up to 4 weight rows from n0 (a
/// tile past the end repeats its last row; those results are dropped by the caller).
template <class Scheme, class Isa, int R>
void tile(Isa isa, const std::int8_t* xq, const std::int32_t* xoff, index_t Kp, index_t m0, index_t m_end,
          const std::uint8_t* codes, index_t row_bytes, const float* scales, index_t scale_stride, index_t groups,
          index_t n0, index_t n_end, index_t chunks, index_t gsub, float (&out)[R][4]) {
  const std::uint8_t* w[4];
  const float* sc[4];
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

    // 2. tiles of the product, a task per (64 rows of x, 64 rows of the weight)
    const index_t mt = (M + task_rows - 1) / task_rows, nt = (N + task_rows - 1) / task_rows;
    const double work = double(M) * double(N) * double(K) * 0.03 + double(N) * double(row_bytes) * byte_cost;
    const int threads = structural_threads(state, work, 1.0, mt * nt);
    for_tasks(mt * nt, threads, [&](index_t t) {
      const index_t m0 = (t % mt) * task_rows, m1 = std::min(M, m0 + task_rows);
      const index_t n0 = (t / mt) * task_rows, n1 = std::min(N, n0 + task_rows);
      const index_t nn = n1 - n0;
      std::unique_ptr<R_t[]> res(new R_t[static_cast<std::size_t>((m1 - m0) * nn)]);
      const auto put = [&](index_t m, index_t n, float v) {
        const float rs = gsub ? 1.0f : scales.data()[n * sstride];  // one scale per row (or tensor): applied here
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
