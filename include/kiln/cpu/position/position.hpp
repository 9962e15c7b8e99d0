// kiln/cpu/position/position.hpp — the CPU kernels of kiln::rope (row family) and
// kiln::embedding (gather family), over cpu/structural.hpp's position runs (so prologues,
// epilogues, strides and dtypes come from the shared loads and stores).
//
// rope: cos and sin of every (sequence index, pair) are tabulated once per call ([S, D/2]
// pairs from the float angle, by a vectorised reduction and polynomial good to about an
// ulp, the same algorithm as the Vulkan kernel's), then tasks of whole
// rows load a block of rows, turn each pair with the row's table line, and store: the
// table is shared by every head and batch, so a row costs four multiplies a pair.
// embedding: the ids are read and checked first (nothing is written for a bad id), then
// tasks of output rows load their table row and store it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/cpu/structural.hpp"
#include "kiln/ops/position/embedding.hpp"
#include "kiln/ops/position/rope.hpp"

namespace kiln::detail {

namespace cpu_position {

/// Element i of a rank-1 CPU tensor, any stride.
template <class Tn>
auto at(const Tn& t, index_t i) {
  return t.data()[i * t.strides()[0]];
}

/// cos and sin of float angles a[0..n) to about an ulp, the algorithm of
/// kernels/position/rope.comp (so both backends agree closely): a - j * pi/2 with pi/2 in
/// four parts of at most 7 significant bits (exact products for |j| < 2^17) and a float
/// fifth, then minimax polynomials on [-pi/4, pi/4]. Branch-free, so the compiler
/// vectorises the loop; angles past 2^17 * pi/2 are redone in double after it.
inline void sincos_floats(const float* a, float* c, float* s, index_t n) {
  for (index_t k = 0; k < n; ++k) {
    constexpr float round = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
    const float j = (a[k] * 0.636619772f + round) - round;
    float r = a[k] - j * 1.5625f;
    r = r - j * 0.0081787109375f;
    r = r - j * 0.00011730194091796875f;
    r = r - j * 3.129243850708008e-07f;
    r = r - j * 9.92093629470503e-10f;
    const float z = r * r;
    const float sp = r + r * z * ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f);
    const float cp = 1.0f - 0.5f * z + z * z * ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f);
    float q = j - 4.0f * ((j * 0.25f + round) - round);  // the quadrant: -2 .. 1, then 0 .. 3
    q = q < 0.0f ? q + 4.0f : q;
    const bool odd = q == 1.0f || q == 3.0f;
    const float sv = odd ? cp : sp, cv = odd ? sp : cp;
    s[k] = q >= 2.0f ? -sv : sv;
    c[k] = (q == 1.0f || q == 2.0f) ? -cv : cv;
  }
  for (index_t k = 0; k < n; ++k) {
    if (!(std::abs(a[k]) < 131072.0f * 1.5707963f)) {
      c[k] = static_cast<float>(std::cos(static_cast<double>(a[k])));
      s[k] = static_cast<float>(std::sin(static_cast<double>(a[k])));
    }
  }
}

/// The rotation of one row (half-split or interleaved) by the table line c, s.
template <class V>
inline void rotate_row(const V* x, V* o, const float* c, const float* s, index_t half, bool interleaved) {
  if (interleaved) {
    for (index_t i = 0; i < half; ++i) {
      const V x0 = x[2 * i], x1 = x[2 * i + 1];
      o[2 * i] = x0 * c[i] - x1 * s[i];
      o[2 * i + 1] = x1 * c[i] + x0 * s[i];
    }
  } else {
    for (index_t i = 0; i < half; ++i) {
      const V x0 = x[i], x1 = x[i + half];
      o[i] = x0 * c[i] - x1 * s[i];
      o[i + half] = x1 * c[i] + x0 * s[i];
    }
  }
}

}  // namespace cpu_position

template <>
struct cpu_structural_kernel<rope_op> {
  /// kiln::kernel_variant: "cpu.rope half-split" or "cpu.rope interleaved".
  template <class A, class S>
  static std::string variant(const S& s) {
    return s.op.interleaved ? "cpu.rope interleaved" : "cpu.rope half-split";
  }
  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S& s, axis_split sp) {
    using namespace cpu_loop;
    using In = typename Io::in_type;
    using Out = typename Io::result_type;
    static_assert(std::is_same_v<In, float> && std::is_same_v<Out, float>);
    const index_t D = sp.extent, rows = sp.outer, half = D / 2, S_ = s.op.seq;
    if (rows == 0 || D == 0) return;
    const auto& pos = std::get<0>(s.params).t;
    const auto& inv = std::get<1>(s.params).t;  // contiguous floats, made by kiln::rope

    // the [S, half] table of cos and sin (S_ >= 1 here: rows > 0)
    // (kept per thread between calls: a fresh table of 128 KiB and more would come from
    // mmap, and its page faults would cost more than the rotation)
    thread_local std::vector<float> table;
    if (table.size() < static_cast<std::size_t>(2 * S_ * half)) table.resize(static_cast<std::size_t>(2 * S_ * half));
    float* cs = table.data();
    float* sn = cs + S_ * half;
    const float* fr = inv.data();
    const int tthreads = structural_threads(state, double(S_ * half), 12.0, S_);
    const index_t tchunk = std::max<index_t>(1, (S_ + tthreads * 4 - 1) / (tthreads * 4));
    for_tasks((S_ + tchunk - 1) / tchunk, tthreads, [&](index_t t) {
      std::vector<float> ang(static_cast<std::size_t>(half));
      for (index_t q = t * tchunk; q < std::min(S_, (t + 1) * tchunk); ++q) {
        const float p = static_cast<float>(cpu_position::at(pos, q));
        for (index_t i = 0; i < half; ++i) ang[static_cast<std::size_t>(i)] = p * fr[i];  // the float angle, as Hugging Face's
        cpu_position::sincos_floats(ang.data(), cs + q * half, sn + q * half, half);
      }
    });

    const index_t per_task = std::max<index_t>(1, 4 * block_elements / std::max<index_t>(D, 1));
    const index_t tasks = (rows + per_task - 1) / per_task;
    const int threads = structural_threads(state, double(rows * D), 3.0, tasks);
    float* const direct = io.direct_out();  // the bare op into a contiguous float tensor: rows written in place
    for_tasks(tasks, threads, [&](index_t t) {
      const index_t r0 = t * per_task, r1 = std::min(rows, r0 + per_task);
      const std::size_t n = static_cast<std::size_t>((r1 - r0) * D);
      std::unique_ptr<float[]> buf;
      const float* src = io.direct(r0 * D);
      float* o = direct ? direct + r0 * D : nullptr;
      if (!src || !o) {
        buf.reset(new float[2 * n]);
        if (!src) {
          io.load(r0 * D, r1 * D, buf.get());
          src = buf.get();
        }
        if (!o) o = buf.get() + n;
      }
      for (index_t r = r0; r < r1; ++r) {
        const index_t q = r % S_;
        const std::size_t off = static_cast<std::size_t>((r - r0) * D);
        cpu_position::rotate_row(src + off, o + off, cs + q * half, sn + q * half, half, s.op.interleaved);
      }
      if (!direct) io.store(r0 * D, r1 * D, o);
    });
  }
};

template <>
struct cpu_structural_kernel<embedding_op> {
  /// kiln::kernel_variant: "cpu.embedding".
  template <class A, class S>
  static std::string variant(const S&) {
    return "cpu.embedding";
  }
  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S& s, axis_split) {
    using namespace cpu_loop;
    using In = typename Io::in_type;
    static_assert(std::is_same_v<In, typename Io::result_type>);
    const auto& idt = std::get<0>(s.params).t;
    const index_t V = s.input_shape[0], D = s.input_shape[1];
    const std::vector<std::int32_t> ids = idt.to_host();
    check_ids("embedding", ids, idt.shape(), V, "table " + s.arg.describe() + ", ids " + idt.describe());
    const index_t rows = static_cast<index_t>(ids.size());
    if (rows == 0 || D == 0) return;
    const index_t per_task = std::max<index_t>(1, block_elements / D);
    const index_t tasks = (rows + per_task - 1) / per_task;
    const int threads = structural_threads(state, double(rows * D), 1.0, tasks);
    In* const direct = io.direct_out();  // the bare op into a contiguous tensor: rows copied straight there
    for_tasks(tasks, threads, [&](index_t t) {
      const index_t r0 = t * per_task, r1 = std::min(rows, r0 + per_task);
      std::unique_ptr<In[]> buf;
      In* out = direct ? direct + r0 * D : (buf.reset(new In[static_cast<std::size_t>((r1 - r0) * D)]), buf.get());
      for (index_t r = r0; r < r1; ++r) {
        const index_t id = ids[static_cast<std::size_t>(r)];
        In* dst = out + (r - r0) * D;
        if (const In* p = io.direct(id * D)) {
          if (r + 2 < r1) {  // the table rows are scattered: ask for a later one while this one copies
            const char* next = reinterpret_cast<const char*>(io.direct(index_t(ids[static_cast<std::size_t>(r + 2)]) * D));
            for (index_t off = 0; off < D * index_t(sizeof(In)); off += 64) __builtin_prefetch(next + off, 0, 0);
          }
          std::copy(p, p + D, dst);
        } else {
          io.load(id * D, id * D + D, dst);
        }
      }
      if (!direct) io.store(r0 * D, r1 * D, out);
    });
  }
};

}  // namespace kiln::detail
