// kiln/cpu/reduce/row.hpp — the row family on the CPU: softmax, log_softmax, layer_norm,
// rms_norm. Every line along the axis is normalised as a whole (a row op along another
// axis walks it innermost: cpu/structural.hpp).
//
// Rows up to block_elements long: blocks of whole rows are read into a buffer (one
// prologue run), each row's statistics are taken from the buffer (L1-resident), the
// row is normalised in place and the block goes out through the epilogue: each input
// element is read from memory once and each output written once. softmax keeps
// exp(x - max) from its sum pass, so it takes one exp per element. Each algorithm
// splits a row into `first` (the statistics, from the first pass on) and `tail` (the
// last pass, over any range of positions): the bare op into its own contiguous output
// runs the previous row's tail and requests a later row's input inside each row's
// first pass (run_rows_pipelined), so that memory traffic and arithmetic overlap.
// Longer rows are read twice, a buffer at a time: once for the statistics (softmax: an
// online max and rescaled sum; layer_norm: per-buffer mean and squared deviations merged
// with Chan's formula), once to normalise.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "kiln/cpu/reduce/lines.hpp"
#include "kiln/cpu/structural.hpp"
#include "kiln/ops/elementwise/exp.hpp"
#include "kiln/ops/norm/layer_norm.hpp"
#include "kiln/ops/reduce/reducer.hpp"
#include "kiln/ops/reduce/softmax.hpp"

namespace kiln::detail {

namespace cpu_row {

/// A norm's parameter as contiguous floats: the tensor's memory when it is already that,
/// else a converted copy owned here.
struct param_floats {
  const float* data = nullptr;
  std::vector<float> copy;
};

template <class Leaf>
param_floats to_floats(const Leaf& leaf) {
  param_floats p;
  const auto& t = leaf.t;
  using U = typename std::remove_cvref_t<decltype(t)>::value_type;
  if constexpr (std::is_same_v<U, float>) {
    if (t.strides()[0] == 1) {
      p.data = t.data();
      return p;
    }
  }
  const index_t n = t.shape()[0], st = t.strides()[0];
  p.copy.resize(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) p.copy[static_cast<std::size_t>(i)] = static_cast<float>(t.data()[i * st]);
  p.data = p.copy.data();
  return p;
}

/// Whether V is a batch of 16 floats on AVX-512.
template <class V>
inline constexpr bool is_avx512_batch = false;
template <class A>
inline constexpr bool is_avx512_batch<xsimd::batch<float, A>> = std::is_base_of_v<xsimd::avx512f, A>;

/// P of e^r ~= 1 + r + r^2 P(r) one degree below exp.hpp's exp_pf: within 2.3 ulp of e^x
/// instead of 1 (scripts/fit_exp.py 3), one multiply-add fewer an element where the exp
/// is most of a softmax's (and attention's) arithmetic.
inline constexpr std::array<float, 4> row_exp_pf = {4.999923110e-01f, 1.666711420e-01f, 4.189011455e-02f,
                                                    8.312527090e-03f};

/// e^x for x <= 0 (softmax's x - max) or NaN: kiln's exp reduction (ops/elementwise/
/// exp.hpp) with row_exp_pf, without the overflow side, 2^n one exponent field (n in
/// [-126, 0]), and results below FLT_MIN flushed to 0 (below 1.2e-38 of the row's
/// largest term: nothing a sum or a probability can show). On AVX2 about a third fewer
/// instructions than the general exp, where exp is most of softmax's work.
template <class V>
V exp_nonpositive(const V& x) {
  using std::nearbyint;
  constexpr float lowest = -87.33654f;  // ln(FLT_MIN)
  if constexpr (is_avx512_batch<V>) {
    // the same values in fewer instructions: no clamp (lanes below `lowest`, -inf too,
    // are masked to 0 by the scale instruction itself; NaN is kept: the compare is true
    // when unordered), 2^n by scalef
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(lowest), _CMP_NLT_UQ);
    const V n = _mm512_maskz_roundscale_ps(__mmask16(0xffff), x * V(exp_log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const V r = fmadd(n, V(-exp_ln2_lo), fmadd(n, V(-exp_ln2_hi), x));
    // P(r) by Estrin's scheme: a shorter dependency chain than Horner's (the exp is a
    // chain of some 35 cycles, and out-of-order execution overlaps only so many)
    const V r2 = r * r;
    const V p = fmadd(r2, fmadd(V(row_exp_pf[3]), r, V(row_exp_pf[2])), fmadd(V(row_exp_pf[1]), r, V(row_exp_pf[0])));
    const V er = fmadd(r2, p, r) + V(1.0f);
    return _mm512_maskz_scalef_ps(keep, er, n);
  } else {
    const V c = max_keep_nan(V(lowest), x);
    const V n = nearbyint(c * V(exp_log2e));
    const V r = fmadd(n, V(-exp_ln2_lo), fmadd(n, V(-exp_ln2_hi), c));
    const V er = fmadd(r * r, horner(r, row_exp_pf), r) + V(1.0f);
    if constexpr (std::is_same_v<V, float>) {
      return x < lowest ? 0.0f : std::ldexp(er, static_cast<int>(n == n ? n : 0.0f)) + (n - n);
    } else {
      using I = xsimd::batch<std::int32_t, typename V::arch_type>;
      const V pow2 = xsimd::bitwise_cast<V>((xsimd::to_int(n) + I(127)) << 23);
      return xsimd::select(x < V(lowest), V(0.0f), er * pow2);
    }
  }
}

/// softmax / log_softmax. State: the running max m and sum s of exp(x - m).
template <bool Log>
struct softmax_algo {
  struct stats {
    float m = -std::numeric_limits<float>::infinity();
    float s = 0.0f;
  };
  float eps = 0;

  /// What a row's last pass needs: its input x, the buffer holding exp(x - m) (softmax)
  /// and the row's constants.
  struct tail_state {
    const float* x = nullptr;
    const float* buf = nullptr;
    float m = 0, k = 0;  // softmax: k = 1 / sum; log_softmax: k = log(sum)
  };

  /// A whole row x (the input in memory, or a buffer) up to its last pass: the max, then
  /// exp(x - m) into the row-sized buffer buf (may be x) and its sum. `pf`: the hook of
  /// the exp pass (cpu_lines::no_prefetch), called once a step.
  template <class A, class Pf>
  tail_state first(const float* x, float* buf, index_t n, const Pf& pf) const {
    // no NaN tracking: a NaN (or a +inf, or a line of -inf) makes the exp pass's sum NaN,
    // and with it the whole line, whatever the max
    const float m = cpu_lines::plain_max<A>(x, n);
    if constexpr (Log) {
      const float s = cpu_lines::sum_of<A>(x, n, [m](const auto& v) { return exp_nonpositive(v - std::remove_cvref_t<decltype(v)>(m)); }, pf);
      return {x, buf, m, std::log(s)};
    } else {
      const float s = cpu_lines::map_sum<A>(x, buf, n, [m](const auto& v) { return exp_nonpositive(v - std::remove_cvref_t<decltype(v)>(m)); }, pf);
      return {x, buf, m, 1.0f / s};
    }
  }
  /// The last pass over positions [i0, i1) of the row: y = exp(x - m) / sum, or
  /// (x - m) - log(sum). `stream`: may bypass the cache (y + i0 aligned when i0 > 0).
  template <class A>
  void tail(const tail_state& t, float* y, index_t i0, index_t i1, bool stream) const {
    const float m = t.m, k = t.k;
    if constexpr (Log) {
      cpu_lines::map<A>(t.x + i0, y + i0, i1 - i0, [m, k](const auto& v, index_t) {
        using V = std::remove_cvref_t<decltype(v)>;
        return (v - V(m)) - V(k);
      }, stream);
    } else {
      cpu_lines::map<A>(t.buf + i0, y + i0, i1 - i0, [k](const auto& v, index_t) { return v * std::remove_cvref_t<decltype(v)>(k); }, stream);
    }
  }
  /// Long rows: one buffer of statistics at a time, then each buffer normalised.
  template <class A>
  void add(stats& st, const float* x, index_t n) const {
    const float mc = cpu_lines::combine_run<A, max_reducer>(x, n, -std::numeric_limits<float>::infinity());
    const float m2 = max_op::apply(st.m, mc);
    if (m2 == -std::numeric_limits<float>::infinity()) return;  // nothing but -inf so far
    const float scale = st.m == m2 ? 1.0f : exp_approx(st.m - m2);
    st.s = st.s * scale + cpu_lines::sum_of<A>(x, n, [m2](const auto& v) { return exp_nonpositive(v - std::remove_cvref_t<decltype(v)>(m2)); });
    st.m = m2;
  }
  void finish(stats& st, index_t) const {
    if (st.m == -std::numeric_limits<float>::infinity()) st.s = std::numeric_limits<float>::quiet_NaN();  // all -inf: 0/0
  }
  template <class A>
  void apply(const stats& st, float* x, index_t n, index_t) const {
    const float m = st.m;
    if constexpr (Log) {
      const float ls = std::log(st.s);
      cpu_lines::map<A>(x, x, n, [m, ls](const auto& v, index_t) {
        using V = std::remove_cvref_t<decltype(v)>;
        return (v - V(m)) - V(ls);
      });
    } else {
      const float inv = 1.0f / st.s;
      cpu_lines::map<A>(x, x, n, [m, inv](const auto& v, index_t) {
        using V = std::remove_cvref_t<decltype(v)>;
        return exp_nonpositive(v - V(m)) * V(inv);
      });
    }
  }
};

/// layer_norm (Root = false) and rms_norm (Root = true), with optional weight and bias.
/// layer_norm works on x - s, s the mean of the row's first vector: for a row whose mean
/// is large against its spread (values around 1e4, spread 0.1) x - s is exact and small,
/// so the mean of the differences, the variance and the output (x - s) - mean keep the
/// precision a float mean near 1e4 (ulp 1e-3) would lose. The variance takes one pass
/// (sums of d and d^2) when the mean is within the spread of s, else two.
template <bool Root>
struct norm_algo {
  struct stats {
    double count = 0;  // elements so far
    float shift = 0;   // layer_norm: the row's first element
    float mean = 0;    // layer_norm: the mean of x - shift so far
    float m2 = 0;      // layer_norm: sum of squared deviations; rms_norm: sum of squares
    float scale = 0;   // after finish: 1 / sqrt(var + eps)
  };
  float eps = 0;
  const float* w = nullptr;  // [extent] or null
  const float* b = nullptr;

  /// layer_norm's shift: the mean of the row's first vector (its first element when
  /// shorter), near the row's mean far more often than one element is.
  template <class A>
  static float shift_of(const float* x, index_t n) {
    if constexpr (simd::enabled<A>) {
      using V = xsimd::batch<float, A>;
      constexpr auto W = static_cast<index_t>(V::size);
      if (n >= W) return xsimd::hadd(V::load_unaligned(x)) / static_cast<float>(W);
    }
    return x[0];
  }

  template <class A, class Pf = cpu_lines::no_prefetch>
  void add(stats& st, const float* x, index_t n, const Pf& pf = {}) const {
    if constexpr (Root) {
      st.m2 += cpu_lines::sum_of<A>(x, n, [](const auto& v) { return v * v; }, pf);
    } else {
      if (n == 0) return;
      if (st.count == 0) st.shift = shift_of<A>(x, n);
      const float sh = st.shift;
      // one pass: the sums of d = x - sh and of d^2, then sum (d - mean)^2 = sum d^2 -
      // n mean^2, which cancels as far as the mean stands from the shift: by at most a
      // factor 2 (|mean| <= the spread) it is kept, else the exact second pass runs
      const cpu_lines::shifted_sums_t ss = cpu_lines::shifted_sums<A>(x, n, sh, pf);
      const float mc = ss.d / static_cast<float>(n);
      float m2c = ss.dd - ss.d * mc;
      if (!(m2c >= 0.5f * ss.dd)) {  // also a NaN or inf in the row: the second pass says what
        m2c = cpu_lines::sum_of<A>(x, n, [sh, mc](const auto& v) {
          using V = std::remove_cvref_t<decltype(v)>;
          const V d = (v - V(sh)) - V(mc);
          return d * d;
        });
      }
      const double na = st.count, nb = double(n), nt = na + nb;
      const double delta = double(mc) - double(st.mean);
      st.mean = static_cast<float>(double(st.mean) + delta * nb / nt);
      st.m2 = static_cast<float>(double(st.m2) + double(m2c) + delta * delta * na * nb / nt);
    }
    st.count += double(n);
  }
  void finish(stats& st, index_t n) const {
    const float var = st.m2 / static_cast<float>(n);  // biased, as PyTorch's layer_norm
    st.scale = 1.0f / std::sqrt(var + eps);
  }
  template <class A>
  void apply(const stats& st, float* x, index_t n, index_t c0) const {
    apply<A>(st, x, x, n, c0);
  }
  template <class A, class Pf = cpu_lines::no_prefetch>
  void apply(const stats& st, const float* x, float* out, index_t n, index_t c0, bool stream = false,
             const Pf& pf = {}) const {
    const float scale = st.scale;
    const float* wp = w ? w + c0 : nullptr;
    const float* bp = b ? b + c0 : nullptr;
    // the centred value t, then y = t * (scale * w) + b in one multiply-add
    auto out_of = [&](const auto& centred) {
      cpu_lines::map<A>(x, out, n, [centred, scale, wp, bp](const auto& v, index_t i) {
        using V = std::remove_cvref_t<decltype(v)>;
        const V t = centred(v);
        const V s = wp ? cpu_lines::load_as<V>(wp, i) * V(scale) : V(scale);
        return bp ? fmadd(t, s, cpu_lines::load_as<V>(bp, i)) : t * s;
      }, stream, pf);
    };
    if constexpr (Root) {
      out_of([](const auto& v) { return v; });
    } else {
      // x - (shift + mean) in one subtraction where rounding the centre moves an output
      // by at most 16 * 2^-24 (|centre| * scale <= 16: a mean within 16 standard
      // deviations of 0, the common case); else (x - shift) - mean, exact for a row
      // whose mean is large against its spread
      const float shift = st.shift, mean = st.mean, centre = shift + mean;
      if (std::abs(centre) * scale <= 16.0f) {
        out_of([centre](const auto& v) { return v - std::remove_cvref_t<decltype(v)>(centre); });
      } else {
        out_of([shift, mean](const auto& v) {
          using V = std::remove_cvref_t<decltype(v)>;
          return (v - V(shift)) - V(mean);
        });
      }
    }
  }
  struct tail_state {
    const float* x = nullptr;
    stats st;
  };
  /// A whole row's statistics (the last pass: tail); `pf`: the hook of the first pass.
  template <class A, class Pf>
  tail_state first(const float* x, float*, index_t n, const Pf& pf) const {
    tail_state t{x, {}};
    add<A>(t.st, x, n, pf);
    finish(t.st, n);
    return t;
  }
  /// The normalised positions [i0, i1) of the row into y.
  template <class A>
  void tail(const tail_state& t, float* y, index_t i0, index_t i1, bool stream) const {
    apply<A>(t.st, t.x + i0, y + i0, i1 - i0, i0, stream);
  }
};

/// Rows from this length on request the next task's input piecewise inside their passes
/// (a piece of this many elements at a time); shorter rows, all at once per task.
inline constexpr index_t spread_prefetch_min = 256;

/// The prefetch hook (cpu_lines::no_prefetch) of a row kernel's passes: a later row's
/// input, a plain row in memory at p, or positions [b, b + n) of the statement's input
/// (of_input): each tensor's lines a step's worth at a time where the row lies in one
/// innermost run of the input, else requested through io in pieces of
/// spread_prefetch_min; neither: nothing.
template <class Io>
struct row_prefetch {
  const float* p = nullptr;
  const Io* io = nullptr;
  index_t b = 0, n = 0;
  typename Io::input_runs runs{};

  static row_prefetch of_input(const Io& io, index_t b, index_t n) {
    row_prefetch h;
    h.runs = io.runs(b, n);
    if (!h.runs.ok) {
      h.io = &io;
      h.b = b;
      h.n = n;
    }
    return h;
  }
  void operator()(index_t i, index_t count) const {
    if (p) {
      cpu_lines::prefetch_floats{p}(i, count);
    } else if (runs.ok) {
      for (int k = 0; k < runs.count; ++k) cpu_lines::prefetch_lines(runs.p[k], runs.size[k], i, count);
    } else if (io && i % spread_prefetch_min == 0) {
      io->prefetch(b + i, b + std::min(n, i + spread_prefetch_min));
    }
  }
};

/// The hook of a row's first pass in a pipelined run (run_rows): it requests a later
/// row's input (row_prefetch) and writes the same positions of the previous row's last
/// pass, so that the reads, the writes and the arithmetic of neighbouring rows overlap
/// instead of taking turns. `done`: how much of the previous row is written.
template <class A, class Io, class Algo>
struct row_pipeline_hook {
  row_prefetch<Io> pre;
  const Algo* al = nullptr;
  const typename Algo::tail_state* prev = nullptr;  // null: no row pending
  float* prev_y = nullptr;
  bool prev_stream = false;
  mutable index_t done = 0;
  void operator()(index_t i, index_t count) const {
    pre(i, count);
    if (prev) {
      al->template tail<A>(*prev, prev_y, i, i + count, prev_stream);
      done = i + count;
    }
  }
};

/// Rows up to block_elements long into the statement's own contiguous output (the bare
/// op; run_rows): a task runs several blocks of rows, and each row's first pass carries
/// the previous row's last pass and requests a later row's input (row_pipeline_hook).
/// One row's arithmetic then overlaps its neighbours' reads and writes: taking turns,
/// a softmax spent about as long waiting for memory as computing.
template <class A, class Io, class Algo>
void run_rows_pipelined(const cpu_state& state, const Io& io, axis_split sp, const Algo& al, double elements,
                        double work, float* dout) {
  using namespace cpu_loop;
  using tail_t = typename Algo::tail_state;
  const index_t R = sp.extent, outer = sp.outer;
  const index_t block = std::max<index_t>(1, block_elements / R);  // rows one load holds
  const index_t blocks = (outer + block - 1) / block;
  const index_t rows = block * std::max<index_t>(1, blocks / 64);  // a task's rows: ~64 tasks
  const index_t tasks = (outer + rows - 1) / rows;
  const bool in_place = io.direct(0) != nullptr;  // a plain tensor: read where it lies
  const bool spread = in_place || R >= spread_prefetch_min;
  const index_t ahead = in_place ? std::max<index_t>(1, 1024 / R) : block;  // rows: >= 4 KiB on
  for_tasks(tasks, structural_threads(state, elements, work, tasks), [&](index_t t) {
    const index_t o0 = t * rows, o1 = std::min(outer, o0 + rows);
    float* const base = reinterpret_cast<float*>(cpu_scheduler::scratch(2 * (block_elements + 16) * sizeof(float)));
    float* const buf[2] = {base, base + block_elements + 16};
    tail_t pend{};
    float* pend_y = nullptr;
    bool have = false, pend_stream = false, streamed = false;
    for (index_t o = o0; o < o1; ++o) {
      const index_t bi = (o - o0) / block, j = (o - o0) % block;  // block, row in it
      const float* src;
      float* b;
      if (in_place) {
        src = io.direct(o * R);
        b = buf[o & 1];
      } else {
        float* const blk = buf[bi & 1];  // the previous block's rows may still be pending
        if (j == 0) {
          const index_t e = std::min(o1, o + block);
          io.load(o * R, e * R, blk);
          if (!spread) io.prefetch(e * R, std::min(outer, e + block) * R);
        }
        src = b = blk + j * R;
      }
      row_pipeline_hook<A, Io, Algo> h;
      if (spread && o + ahead < outer) {
        if (in_place) h.pre.p = io.direct((o + ahead) * R);
        else h.pre = row_prefetch<Io>::of_input(io, (o + ahead) * R, R);
      }
      h.al = &al;
      if (have) {
        h.prev = &pend;
        h.prev_y = pend_y;
        h.prev_stream = pend_stream;
      }
      tail_t cur = al.template first<A>(src, b, R, h);
      if (have) al.template tail<A>(pend, pend_y, h.done, R, pend_stream);
      pend = cur;
      pend_y = dout + o * R;
      pend_stream = cpu_lines::can_stream_to<A>(io.stream, pend_y);
      streamed = streamed || pend_stream;
      have = true;
    }
    if (have) al.template tail<A>(pend, pend_y, 0, R, pend_stream);
    if (streamed) simd::stream_fence();
  });
}

/// Runs algorithm `al` over every row of a row-family statement.
template <class A, class Io, class Algo>
void run_rows(const cpu_state& state, const Io& io, axis_split sp, const Algo& al, double per_element) {
  using namespace cpu_loop;
  const index_t R = sp.extent;
  if (R == 0 || sp.outer == 0) return;
  const double elements = double(sp.outer) * double(R);
  const double work = per_element + byte_cost * double(leaf_bytes_v<decltype(io.node.arg)> + 4);
  if (float* const dout = io.direct_out(); dout && R <= block_elements) {
    run_rows_pipelined<A>(state, io, sp, al, elements, work, dout);
    return;
  }
  const index_t rows = R <= block_elements ? std::max<index_t>(1, block_elements / R) : 1;
  const index_t tasks = (sp.outer + rows - 1) / rows;
  for_tasks(tasks, structural_threads(state, elements, work, tasks), [&](index_t t) {
    const index_t o0 = t * rows, o1 = std::min(sp.outer, o0 + rows);
    float* x = reinterpret_cast<float*>(cpu_scheduler::scratch((block_elements + 16) * sizeof(float)));
    if (R <= block_elements) {
      // The next task's input is requested while this one computes (a row op is as much
      // arithmetic as memory traffic; without it each row's first pass waits for
      // memory): row by row, spread over each row's passes (the next task's rows are
      // this task's, one task on), or for short rows all at once after the load.
      const float* in = io.direct(o0 * R);  // a plain tensor: read in place
      const index_t next_rows = t + 1 < tasks ? std::min(sp.outer, o1 + rows) - o1 : 0;
      const bool spread = in || R >= spread_prefetch_min;
      if (!in) {
        io.load(o0 * R, o1 * R, x);
        if (!spread && next_rows > 0) io.prefetch(o1 * R, (o1 + next_rows) * R);
      }
      auto hook = [&](index_t o) {  // the prefetch hook of row o
        row_prefetch<Io> h;
        if (spread && o - o0 < next_rows) {
          if (in) h.p = in + (o1 - o0 + o - o0) * R;  // the same row, one task on
          else h = row_prefetch<Io>::of_input(io, (o + (o1 - o0)) * R, R);
        }
        return h;
      };
      const float* src = in ? in : x;
      for (index_t o = o0; o < o1; ++o) {
        float* const row = x + (o - o0) * R;
        al.template tail<A>(al.template first<A>(src + (o - o0) * R, row, R, hook(o)), row, 0, R, false);
      }
      io.store(o0 * R, o1 * R, x);
      return;
    }
    typename Algo::stats st;
    for (index_t c = 0; c < R; c += block_elements) {
      const index_t len = std::min(block_elements, R - c);
      io.load(o0 * R + c, o0 * R + c + len, x);
      al.template add<A>(st, x, len);
    }
    al.finish(st, R);
    for (index_t c = 0; c < R; c += block_elements) {
      const index_t len = std::min(block_elements, R - c);
      io.load(o0 * R + c, o0 * R + c + len, x);
      al.template apply<A>(st, x, len, c);
      io.store(o0 * R + c, o0 * R + c + len, x);
    }
  });
}

}  // namespace cpu_row

template <bool Log>
struct cpu_structural_kernel<softmax_op<Log>> {
  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S&, axis_split sp) {
    cpu_row::run_rows<A>(state, io, sp, cpu_row::softmax_algo<Log>{}, double(op_cost_v<exp_op>) + 4.0);
  }
};

template <bool Root>
struct cpu_structural_kernel<norm_op<Root>> {
  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S& s, axis_split sp) {
    cpu_row::norm_algo<Root> al;
    al.eps = s.op.eps;
    cpu_row::param_floats p[2];
    std::size_t k = 0;
    std::apply([&](const auto&... leaf) { ((p[k++] = cpu_row::to_floats(leaf)), ...); }, s.params);
    if (k > 0) al.w = p[0].data;
    if (k > 1) al.b = p[1].data;
    cpu_row::run_rows<A>(state, io, sp, al, 6.0);
  }
};

}  // namespace kiln::detail
