// kiln/ops/sampling/sample.hpp — kiln::sample: one token id drawn from each row of logits
// [..., V] on the device that holds them (a reduce-family structural op: the last axis
// is reduced to an int32 id). Kernels: cpu/sampling/sample.hpp, vulkan/ops/sample.hpp
// (kernels/sampling/sample.comp). Opt-in: include <kiln/sampling.hpp>.
//
// The chain, llama.cpp's order, every stage optional (its neutral value turns it off):
//   1. penalties   on the ids in `history` (each id once, whatever its count): a
//                  logit l becomes l / r where l > 0, l * r otherwise (repetition
//                  penalty r), then l - a (presence penalty a);
//   2. top-k       keeps the logits >= the k-th largest (ties with it are all kept, as
//                  Hugging Face's TopKLogitsWarper);
//   3. top-p       on the probabilities at temperature 1 over what top-k kept: keeps a
//                  token when the probability of the tokens strictly more likely than it
//                  is below p (the smallest prefix of the sorted distribution whose
//                  cumulative sum reaches p; ties at the cut are all kept);
//   4. min-p       keeps a token whose probability is at least min_p times the largest;
//   5. temperature divides what is left by t;
//   6. the draw    by inverse CDF in index order: u = philox(seed, step, row) in
//                  [0, 1), the first kept id whose running sum of weights passes
//                  u * (the sum of all kept weights).
// temperature 0 (the default) is greedy: the first largest logit after the penalties,
// no random number, the other filters moot. Both backends run the same steps in float
// with the same counter-based generator (Philox4x32-10, ops/sampling/philox.hpp), so a
// (seed, step) pair gives the same id on every run of a backend, and the two backends
// agree except where a running sum lands within float rounding of the target.
// Logits: NaN and -inf are never drawn; +inf is taken as the largest float (the +inf
// tokens share all the probability). A row with nothing finite to draw gives id -1.
// The cut-offs of top-k and top-p are found without sorting, on the 32-bit keys that
// order floats (kiln::detail::sample_key): eight passes of a 16-bin histogram each, the
// counts for top-k and the probabilities for top-p, which pick the same set the sorted
// cumulative sum does.
#pragma once

#include <algorithm>
#include <bit>  // std::bit_cast
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/expr/assign.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/ops/sampling/philox.hpp"

namespace kiln {

/// What kiln::sample does to each row of logits before it draws (see the chain at the
/// top of kiln/ops/sampling/sample.hpp). The defaults are greedy decoding.
struct sampling_options {
  float temperature = 0.0f;       ///< 0: greedy (argmax); > 0: sample at this temperature
  std::int32_t top_k = 0;         ///< 0: off; else keep the k largest logits (ties kept)
  float top_p = 1.0f;             ///< 1: off; in (0, 1]
  float min_p = 0.0f;             ///< 0: off; in [0, 1]
  float repeat_penalty = 1.0f;    ///< 1: off; > 0 (llama.cpp's --repeat-penalty)
  float presence_penalty = 0.0f;  ///< 0: off; subtracted from the logits of ids in the history
  std::uint64_t seed = 0;         ///< with the step, names the random number of each draw
};

namespace detail {

/// The op descriptor: the options, the step and the history's length (the history itself
/// is the node's parameter tensor, sorted and without repeats).
struct sample_op {
  static constexpr std::string_view name = "sample";
  static constexpr structural_family family = structural_family::reduce;
  template <class In>
  using result_type = std::int32_t;

  sampling_options opt;
  std::uint64_t step = 0;
  std::int32_t history = 0;  // ids in the parameter tensor (it holds at least one element)
};

/// The 32-bit key that orders floats (not NaN) as their values: keys of larger floats are
/// larger, and -0 has +0's key (equal values, one key).
inline std::uint32_t sample_key(float f) {
  std::uint32_t b = std::bit_cast<std::uint32_t>(f);
  if (b == 0x80000000u) b = 0u;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

/// What is wrong with o, in words naming the option and its valid range; empty if nothing.
inline std::string sample_problem(const sampling_options& o) {
  auto num = [](float v) { return std::to_string(v); };
  if (!(o.temperature >= 0.0f) || !std::isfinite(o.temperature))
    return "temperature must be finite and >= 0 (0: greedy), got " + num(o.temperature);
  if (o.top_k < 0) return "top_k must be >= 0 (0: off), got " + std::to_string(o.top_k);
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) return "top_p must be in (0, 1] (1: off), got " + num(o.top_p);
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f)) return "min_p must be in [0, 1] (0: off), got " + num(o.min_p);
  if (!(o.repeat_penalty > 0.0f) || !std::isfinite(o.repeat_penalty))
    return "repeat_penalty must be finite and > 0 (1: off), got " + num(o.repeat_penalty);
  if (!std::isfinite(o.presence_penalty)) return "presence_penalty must be finite (0: off), got " + num(o.presence_penalty);
  return {};
}

}  // namespace detail

/// Draws one token id (int32) from each row of `logits` [..., V] (f32, f16 or bf16, on
/// either backend) after the options' filters, on the logits' device; the result has
/// logits' shape without the last axis. `step` and `opt.seed` name the draw's random
/// number (a generation loop passes 0, 1, 2, ...), so the same call repeats its ids.
/// `history`: the ids the penalties apply to (any order, repeats counted once), e.g. the
/// last 64 tokens. Throws kiln::shape_error for a bad option, a rank-0 or empty
/// vocabulary axis or a vocabulary past 2^24, and kiln::index_error for a history id
/// outside [0, V), each naming kiln::sample and the logits (dtype, shape, device).
///
///   kiln::sampling_options o{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 7};
///   auto ids = kiln::sample(logits, o, step, history);      // int32 [rows], on the device
///   std::int32_t next = ids.to_host()[0];
template <class T, class B>
tensor<std::int32_t, B> sample(const tensor<T, B>& logits, const sampling_options& opt, std::uint64_t step = 0,
                               std::span<const std::int32_t> history = {}) {
  static_assert(is_floating_v<T>, "kiln: sample needs floating-point logits (f32, f16 or bf16); convert with kiln::cast<float>(x)");
  if (!logits.storage()) throw shape_error("kiln::sample: the logits are an empty tensor (default-constructed or moved from)");
  const auto where = [&] { return " (logits " + logits.describe() + ")"; };
  if (const std::string bad = detail::sample_problem(opt); !bad.empty()) throw shape_error("kiln::sample: " + bad + where());
  const kiln::shape& s = logits.shape();
  if (s.rank() < 1) throw shape_error("kiln::sample: the logits need a vocabulary axis (rank >= 1)" + where());
  const index_t V = s[s.rank() - 1];
  const index_t rows = V ? s.numel() / V : 0;
  kiln::shape out_shape = s;
  out_shape.erase(out_shape.rank() - 1);
  if (V == 0 && out_shape.numel() > 0) throw shape_error("kiln::sample: the vocabulary axis is empty; there is no id to draw" + where());
  if (V > (index_t(1) << 24)) {
    throw shape_error("kiln::sample: a vocabulary of " + std::to_string(V) +
                      " ids is past the 2^24 the kernels count exactly in float" + where());
  }
  // the history sorted, each id once: the kernels look ids up by binary search
  std::vector<std::int32_t> h(history.begin(), history.end());
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (h[i] < 0 || index_t(h[i]) >= V) {
      throw index_error("kiln::sample: history id " + std::to_string(h[i]) + " at history[" + std::to_string(i) +
                        "] is outside [0, " + std::to_string(V) + "), the vocabulary" + where());
    }
  }
  std::sort(h.begin(), h.end());
  h.erase(std::unique(h.begin(), h.end()), h.end());
  const bool penalised = opt.repeat_penalty != 1.0f || opt.presence_penalty != 0.0f;
  if (!penalised) h.clear();
  const auto count = static_cast<std::int32_t>(h.size());
  if (h.empty()) h.push_back(0);  // a buffer to bind; `history` = 0 says it holds nothing
  const context<B> ctx = logits.context();
  auto hist = from_host(ctx, {index_t(h.size())}, std::span<const std::int32_t>(h));
  auto out = empty<std::int32_t>(ctx, out_shape);
  if (rows == 0) return out;
  out = detail::make_structural(detail::sample_op{opt, step, count}, logits, {.axis = -1}, std::move(hist));
  return out;
}

}  // namespace kiln
