// kiln/cpu/sampling/sample.hpp — kiln::sample on the CPU (cpu_structural_kernel<sample_op>).
//
// A row is read once through the prologue into a per-thread buffer and penalised there.
// The cut-offs work as a host sampler does: top-k's k-th value from a min-heap of the k
// largest (one pass); top-p's by sorting the most likely candidates and walking their
// probabilities' prefix sums (the cumsum kernel's scan, cpu/reduce/cumsum.hpp): 256
// candidates first, eight times more while the nucleus is not complete, so a peaked
// distribution sorts a few hundred ids; past 4096 candidates (no top-k over a whole
// vocabulary) the Vulkan kernel's 16-bin passes over the float keys instead of a sort.
// The kept set is the Vulkan kernel's (kernels/sampling/sample.comp): values >= the k-th
// largest, then the ties-kept sorted prefix reaching p, then min-p. The draw sums the
// kept weights in index order in float; the GPU sums in another order, so the backends
// agree except where a sum lands within rounding of a cut or of the target.
// Rows split over threads; the buffers are per thread and kept between calls.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>  // std::greater
#include <limits>
#include <string>
#include <vector>

#include "kiln/cpu/reduce/cumsum.hpp"  // cpu_scan::scan
#include "kiln/cpu/scheduler.hpp"
#include "kiln/cpu/structural.hpp"
#include "kiln/ops/sampling/philox.hpp"
#include "kiln/ops/sampling/sample.hpp"

namespace kiln::detail {

namespace cpu_sample {

/// A thread's buffers for one row.
struct scratch {
  std::vector<float> y, q, cum;
  std::vector<std::int32_t> cand;
  std::vector<std::uint32_t> key;
};

/// Top-p sorts at most this many candidates (top_p_cut); past it, top_p_cut_wide.
inline constexpr std::size_t sorted_limit = 4096;

/// The smallest logit top-p keeps among cand (all finite; the first n_sorted of them
/// already sorted by decreasing value, the rest after): the sorted prefix whose mass
/// before each group of equal values stays below thr (= p * the candidates' total mass
/// at temperature 1). Sorts more of cand as the walk needs it.
template <class A>
float top_p_cut(const float* y, std::vector<std::int32_t>& cand, float m, float thr, scratch& sc) {
  const std::size_t n = cand.size();
  const auto larger = [&](std::int32_t a, std::int32_t b) { return y[a] > y[b] || (y[a] == y[b] && a < b); };
  for (std::size_t c = std::min<std::size_t>(n, 256);; c = std::min(n, c * 8)) {
    if (c < n) std::nth_element(cand.begin(), cand.begin() + std::ptrdiff_t(c), cand.end(), larger);
    std::sort(cand.begin(), cand.begin() + std::ptrdiff_t(c), larger);
    sc.q.resize(c);
    sc.cum.resize(c);
    for (std::size_t j = 0; j < c; ++j) sc.q[j] = std::exp(y[cand[j]] - m);
    cpu_scan::scan<A>(sc.q.data(), sc.cum.data(), index_t(c), 0.0f);  // inclusive prefix sums
    std::size_t j = 0;
    while (j < c) {
      const float before = j ? sc.cum[j - 1] : 0.0f;
      if (!(before < thr)) return y[cand[j - 1]];  // (j > 0: the first group always stays)
      std::size_t g = j;
      while (g < c && y[cand[g]] == y[cand[j]]) ++g;
      if (g == c && c < n) break;  // the group may go on past the sorted prefix: sort more
      j = g;
    }
    if (j == c && c == n) return y[cand[n - 1]];  // every candidate stays
  }
}

/// The same cut for many candidates (more than sorted_limit): the smallest key whose
/// heavier keys weigh less than thr, four bits at a time from the top (the Vulkan
/// kernel's passes), over the candidates' keys and weights (key / q: scratch). Four banks
/// of bins, so that neighbouring candidates (mostly in one bin in the first passes) do not
/// wait on each other's adds.
inline float top_p_cut_wide(const float* y, const std::vector<std::int32_t>& cand, float m, float thr, scratch& sc) {
  const std::size_t n = cand.size();
  sc.key.resize(n);
  sc.q.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    sc.key[j] = sample_key(y[cand[j]]);
    sc.q[j] = std::exp(y[cand[j]] - m);
  }
  std::uint32_t prefix = 0;
  float above = 0.0f;
  for (int shift = 28; shift >= 0; shift -= 4) {
    float bin[4][16] = {};
    std::uint32_t has = 0;
    const std::uint32_t high = shift == 28 ? 0u : ~0u << (shift + 4);
    for (std::size_t j = 0; j < n; ++j) {
      if ((sc.key[j] & high) != prefix) continue;
      const std::uint32_t d = (sc.key[j] >> shift) & 15u;
      bin[j & 3][d] += sc.q[j];
      has |= 1u << d;
    }
    int pick = -1;
    float run = above, at = above;
    for (int d = 15; d >= 0; --d) {
      if ((has >> d & 1u) && run < thr) {
        pick = d;
        at = run;
      }
      run += (bin[0][d] + bin[1][d]) + (bin[2][d] + bin[3][d]);
    }
    if (pick < 0) break;  // (not reached: the largest key always qualifies)
    prefix |= std::uint32_t(pick) << shift;
    above = at;
  }
  for (std::size_t j = 0; j < n; ++j)
    if (sc.key[j] == prefix) return y[cand[j]];
  return y[cand[0]];
}

/// The id drawn from row y[0, V) (penalised in place first) under op; u: the draw's
/// uniform number.
template <class A>
std::int32_t sample_row(float* y, index_t V, const sample_op& op, const std::int32_t* hist, float u, scratch& sc) {
  const sampling_options& o = op.opt;
  constexpr float ninf = -std::numeric_limits<float>::infinity(), big = std::numeric_limits<float>::max();
  // the largest (first on ties), in the pass that takes NaN out, again after penalties
  float m = ninf;
  index_t arg = -1;
  for (index_t i = 0; i < V; ++i) {
    const float v = y[i] != y[i] ? ninf : std::min(y[i], big);  // NaN: never drawn; +inf: the largest float
    y[i] = v;
    if (v > m) {
      m = v;
      arg = i;
    }
  }
  if (op.history > 0) {
    for (std::int32_t k = 0; k < op.history; ++k) {
      float& v = y[hist[k]];
      v = v > 0.0f ? v / o.repeat_penalty : v * o.repeat_penalty;
      v -= o.presence_penalty;
    }
    m = ninf;
    arg = -1;
    for (index_t i = 0; i < V; ++i) {
      if (y[i] > m) {
        m = y[i];
        arg = i;
      }
    }
  }
  if (arg < 0) return -1;  // nothing finite
  if (o.temperature == 0.0f) return static_cast<std::int32_t>(arg);
  float cut = ninf;  // kept: y >= cut (and finite), then min-p
  const bool top_k = o.top_k > 0 && index_t(o.top_k) < V, top_p = o.top_p < 1.0f;
  if (top_k) {
    // the k largest values in a min-heap: one pass, most ids rejected by one compare
    sc.q.clear();
    const std::size_t k = std::size_t(o.top_k);
    for (index_t i = 0; i < V; ++i) {
      const float v = y[i];
      if (v == ninf) continue;
      if (sc.q.size() < k) {
        sc.q.push_back(v);
        std::push_heap(sc.q.begin(), sc.q.end(), std::greater<float>());
      } else if (v > sc.q.front()) {
        std::pop_heap(sc.q.begin(), sc.q.end(), std::greater<float>());
        sc.q.back() = v;
        std::push_heap(sc.q.begin(), sc.q.end(), std::greater<float>());
      }
    }
    if (sc.q.size() == k) cut = sc.q.front();  // the k-th largest (fewer finite ids: no cut)
  }
  if (top_p) {
    sc.cand.clear();
    for (index_t i = 0; i < V; ++i)
      if (y[i] != ninf && y[i] >= cut) sc.cand.push_back(static_cast<std::int32_t>(i));
    float z = 0.0f;
    for (std::int32_t i : sc.cand) z += std::exp(y[i] - m);
    const float thr = o.top_p * z;
    cut = std::max(cut, sc.cand.size() > sorted_limit ? top_p_cut_wide(y, sc.cand, m, thr, sc) : top_p_cut<A>(y, sc.cand, m, thr, sc));
  }
  const float inv_t = 1.0f / o.temperature;
  const auto kept = [&](index_t i) {
    return y[i] != ninf && y[i] >= cut && (o.min_p == 0.0f || std::exp(y[i] - m) >= o.min_p);
  };
  float w_sum = 0.0f;
  index_t last = arg;
  for (index_t i = 0; i < V; ++i) {
    if (!kept(i)) continue;
    w_sum += std::exp((y[i] - m) * inv_t);
    last = i;
  }
  const float target = u * w_sum;
  float run = 0.0f;
  for (index_t i = 0; i < V; ++i) {
    if (!kept(i)) continue;
    const float w = std::exp((y[i] - m) * inv_t);
    run += w;
    if (w > 0.0f && run > target) return static_cast<std::int32_t>(i);
  }
  return static_cast<std::int32_t>(last);  // the sum rounded below the target: the last kept id
}

}  // namespace cpu_sample

template <>
struct cpu_structural_kernel<sample_op> {
  /// kiln::kernel_variant: "cpu.sample".
  template <class A, class S>
  static std::string variant(const S&) {
    return "cpu.sample";
  }
  template <class A, class Io, class S>
  static void run(const cpu_state& state, const Io& io, const S& s, axis_split sp) {
    using namespace cpu_loop;
    static_assert(std::is_same_v<typename Io::in_type, float>);
    const index_t V = sp.extent, rows = sp.outer * sp.inner;
    if (rows == 0 || V == 0) return;
    const std::vector<std::int32_t> hist = std::get<0>(s.params).t.to_host();
    const sample_op& op = s.op;
    const int threads = structural_threads(state, double(rows) * double(V), 12.0, rows);
    for_tasks(rows, threads, [&](index_t r) {
      thread_local cpu_sample::scratch sc;
      sc.y.resize(static_cast<std::size_t>(V));
      io.load(r * V, r * V + V, sc.y.data());
      const float u = op.opt.temperature == 0.0f ? 0.0f : sample_uniform(op.opt.seed, op.step, std::uint32_t(r));
      // (a vector's worth: the epilogue's loop is written for whole vectors, and the
      // compiler cannot see that one element takes its scalar tail)
      alignas(64) std::int32_t id[16] = {};
      id[0] = cpu_sample::sample_row<A>(sc.y.data(), V, op, hist.data(), u, sc);
      io.store(r, r + 1, id);
    });
  }
};

}  // namespace kiln::detail
