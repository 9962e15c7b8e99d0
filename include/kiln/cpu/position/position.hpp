// kiln/cpu/position/position.hpp — the CPU kernels of kiln::rope (row family) and
// kiln::embedding (gather family), over cpu/structural.hpp's position runs (so prologues,
// epilogues, strides and dtypes come from the shared loads and stores).
//
// rope: cos and sin of every (sequence index, pair) are tabulated once per call ([S, D/2]
// pairs, computed in double from the float angle and rounded once), then tasks of whole
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
    std::vector<float> cs(static_cast<std::size_t>(S_ * half)), sn(cs.size());
    const float* fr = inv.data();
    const int tthreads = structural_threads(state, double(S_ * half), 40.0, S_);
    const index_t tchunk = std::max<index_t>(1, (S_ + tthreads * 4 - 1) / (tthreads * 4));
    for_tasks((S_ + tchunk - 1) / tchunk, tthreads, [&](index_t t) {
      for (index_t q = t * tchunk; q < std::min(S_, (t + 1) * tchunk); ++q) {
        const float p = static_cast<float>(cpu_position::at(pos, q));
        for (index_t i = 0; i < half; ++i) {
          const double a = static_cast<double>(p * fr[i]);  // the float angle, as Hugging Face's
          cs[static_cast<std::size_t>(q * half + i)] = static_cast<float>(std::cos(a));
          sn[static_cast<std::size_t>(q * half + i)] = static_cast<float>(std::sin(a));
        }
      }
    });

    const index_t per_task = std::max<index_t>(1, block_elements / std::max<index_t>(D, 1));
    const index_t tasks = (rows + per_task - 1) / per_task;
    const int threads = structural_threads(state, double(rows * D), 3.0, tasks);
    for_tasks(tasks, threads, [&](index_t t) {
      const index_t r0 = t * per_task, r1 = std::min(rows, r0 + per_task);
      const std::size_t n = static_cast<std::size_t>((r1 - r0) * D);
      std::unique_ptr<float[]> buf(new float[2 * n]);
      float* x = buf.get();
      float* o = x + n;
      const float* src = io.direct(r0 * D);
      if (!src) {
        io.load(r0 * D, r1 * D, x);
        src = x;
      }
      for (index_t r = r0; r < r1; ++r) {
        const index_t q = r % S_;
        const std::size_t off = static_cast<std::size_t>((r - r0) * D);
        cpu_position::rotate_row(src + off, o + off, cs.data() + q * half, sn.data() + q * half, half, s.op.interleaved);
      }
      io.store(r0 * D, r1 * D, o);
    });
  }
};

template <>
struct cpu_structural_kernel<embedding_op> {
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
    for_tasks(tasks, threads, [&](index_t t) {
      const index_t r0 = t * per_task, r1 = std::min(rows, r0 + per_task);
      std::unique_ptr<In[]> buf(new In[static_cast<std::size_t>((r1 - r0) * D)]);
      for (index_t r = r0; r < r1; ++r) {
        const index_t id = ids[static_cast<std::size_t>(r)];
        In* dst = buf.get() + (r - r0) * D;
        if (const In* p = io.direct(id * D)) std::copy(p, p + D, dst);
        else io.load(id * D, id * D + D, dst);
      }
      io.store(r0 * D, r1 * D, buf.get());
    });
  }
};

}  // namespace kiln::detail
