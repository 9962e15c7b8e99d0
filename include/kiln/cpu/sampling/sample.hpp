// kiln/cpu/sampling/sample.hpp — kiln::sample on the CPU (cpu_structural_kernel<sample_op>).
//
// A row is read once through the prologue into a per-task buffer and penalised there;
// every later pass reads that buffer (the top-k and top-p cut-offs: eight 16-bin passes
// each over the float keys, kernels/sampling/sample.comp's steps in the same order).
// Rows split over threads. The running sums are float, summed in index order; the GPU
// sums the same terms in another order, so the backends agree except where a sum lands
// within rounding of a cut-off or of the draw's target.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kiln/cpu/scheduler.hpp"
#include "kiln/cpu/structural.hpp"
#include "kiln/ops/sampling/philox.hpp"
#include "kiln/ops/sampling/sample.hpp"

namespace kiln::detail {

namespace cpu_sample {

/// The smallest key k present among the elements with keep[i] such that the weight of
/// the kept elements with larger keys is below thr: a digit of four bits at a time, from
/// the top (weight 1: the thr-th largest; weight e: top-p's cut).
template <class Weight>
std::uint32_t cut_key(const std::uint32_t* key, const std::uint8_t* keep, index_t n, float thr, Weight&& weight) {
  std::uint32_t prefix = 0;
  float above = 0.0f;
  for (int shift = 28; shift >= 0; shift -= 4) {
    float bin[16] = {};
    float has[16] = {};
    const std::uint32_t high = shift == 28 ? 0u : ~0u << (shift + 4);
    for (index_t i = 0; i < n; ++i) {
      if (!keep[i] || (key[i] & high) != prefix) continue;
      const std::uint32_t d = (key[i] >> shift) & 15u;
      bin[d] += weight(i);
      has[d] = 1.0f;
    }
    // the lowest non-empty bin whose heavier bins weigh less than thr
    int pick = -1;
    float run = above, at = above;
    for (int d = 15; d >= 0; --d) {
      if (has[d] != 0.0f && run < thr) {
        pick = d;
        at = run;
      }
      run += bin[d];
    }
    if (pick < 0) return prefix;  // (not reached: the largest key always qualifies)
    prefix |= std::uint32_t(pick) << shift;
    above = at;
  }
  return prefix;
}

/// The id drawn from row y[0, V) (penalised in place first) under op; u: the draw's
/// uniform number. key / keep / e: scratch of V elements.
inline std::int32_t sample_row(float* y, index_t V, const sample_op& op, const std::int32_t* hist, float u,
                               std::vector<std::uint32_t>& key, std::vector<std::uint8_t>& keep, std::vector<float>& e) {
  const sampling_options& o = op.opt;
  const float big = std::numeric_limits<float>::max();
  for (index_t i = 0; i < V; ++i) {
    float v = y[i];
    if (std::isnan(v)) v = -std::numeric_limits<float>::infinity();
    y[i] = v > big ? big : v;  // +inf: the largest float
  }
  for (std::int32_t k = 0; k < op.history; ++k) {
    float& v = y[hist[k]];
    v = v > 0.0f ? v / o.repeat_penalty : v * o.repeat_penalty;
    v -= o.presence_penalty;
  }
  // the largest (first on ties) and the count of drawable ids
  float m = -std::numeric_limits<float>::infinity();
  index_t arg = -1, valid = 0;
  for (index_t i = 0; i < V; ++i) {
    if (y[i] == -std::numeric_limits<float>::infinity()) continue;
    ++valid;
    if (y[i] > m) {
      m = y[i];
      arg = i;
    }
  }
  if (valid == 0) return -1;
  if (o.temperature == 0.0f) return static_cast<std::int32_t>(arg);
  key.resize(std::size_t(V));
  keep.resize(std::size_t(V));
  e.resize(std::size_t(V));
  for (index_t i = 0; i < V; ++i) {
    keep[i] = y[i] != -std::numeric_limits<float>::infinity();
    key[i] = sample_key(y[i]);
  }
  if (o.top_k > 0 && index_t(o.top_k) < valid) {
    const std::uint32_t t = cut_key(key.data(), keep.data(), V, float(o.top_k), [](index_t) { return 1.0f; });
    for (index_t i = 0; i < V; ++i) keep[i] = keep[i] && key[i] >= t;
  }
  for (index_t i = 0; i < V; ++i) e[i] = keep[i] ? std::exp(y[i] - m) : 0.0f;
  if (o.top_p < 1.0f) {
    float z = 0.0f;
    for (index_t i = 0; i < V; ++i) z += e[i];
    const std::uint32_t t = cut_key(key.data(), keep.data(), V, o.top_p * z, [&](index_t i) { return e[i]; });
    for (index_t i = 0; i < V; ++i) keep[i] = keep[i] && key[i] >= t;
  }
  if (o.min_p > 0.0f) {
    for (index_t i = 0; i < V; ++i) keep[i] = keep[i] && e[i] >= o.min_p;
  }
  const float inv_t = 1.0f / o.temperature;
  float w_sum = 0.0f;
  index_t last = arg;
  for (index_t i = 0; i < V; ++i) {
    e[i] = keep[i] ? std::exp((y[i] - m) * inv_t) : 0.0f;
    w_sum += e[i];
    if (keep[i]) last = i;
  }
  const float target = u * w_sum;
  float run = 0.0f;
  for (index_t i = 0; i < V; ++i) {
    if (!keep[i]) continue;
    run += e[i];
    if (run > target) return static_cast<std::int32_t>(i);
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
      std::vector<float> y(static_cast<std::size_t>(V));
      std::vector<std::uint32_t> key;
      std::vector<std::uint8_t> keep;
      std::vector<float> e;
      io.load(r * V, r * V + V, y.data());
      const float u = op.opt.temperature == 0.0f ? 0.0f : sample_uniform(op.opt.seed, op.step, std::uint32_t(r));
      const std::int32_t id = cpu_sample::sample_row(y.data(), V, op, hist.data(), u, key, keep, e);
      io.store(r, r + 1, &id);
    });
  }
};

}  // namespace kiln::detail
