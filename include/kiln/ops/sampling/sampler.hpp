// kiln/ops/sampling/sampler.hpp — kiln::sampler: a generation loop's sampling state (the
// options, the step that names each draw's random number, the penalties' window of
// recent ids) over kiln::sample.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "kiln/core/tensor.hpp"
#include "kiln/core/views.hpp"
#include "kiln/ops/sampling/sample.hpp"

namespace kiln {

/// Draws the next token of one sequence: kiln::sample on the last row of the logits with
/// the options, step 0, 1, 2, ... and the last `penalty_last_n` accepted ids as the
/// history (llama.cpp's --repeat-last-n, default 64; 0: the whole history). The same
/// options, seed and logits repeat the same ids. Throws what kiln::sample throws; the
/// constructor throws kiln::shape_error for bad options.
///
///   kiln::sampler s({.temperature = 0.7f, .top_p = 0.9f, .seed = 42});
///   s.accept(prompt);                              // the prompt counts for the penalties
///   std::int32_t id = s.next(logits);              // drawn, read back, accepted
class sampler {
 public:
  explicit sampler(const sampling_options& opt = {}, std::size_t penalty_last_n = 64) : opt_(opt), last_n_(penalty_last_n) {
    if (const std::string bad = detail::sample_problem(opt); !bad.empty()) throw shape_error("kiln::sampler: " + bad);
  }

  /// Draws from the last row of logits [..., V] (on its device), reads the id back and
  /// accepts it; advances the step.
  template <class T, class B>
  std::int32_t next(const tensor<T, B>& logits) {
    const kiln::shape& sh = logits.shape();
    if (sh.rank() < 1) throw shape_error("kiln::sampler::next: the logits need a vocabulary axis (logits " + logits.describe() + ")");
    const index_t V = sh.back(), rows = V ? sh.numel() / V : 0;
    const tensor<T, B> last = rows > 1 ? kiln::slice(kiln::reshape(logits, {index_t(-1), V}), 0, rows - 1, rows) : logits;
    const std::vector<std::int32_t> h(recent_.begin(), recent_.end());
    const std::int32_t id = sample(last, opt_, step_, h).to_host().at(0);
    ++step_;
    if (id >= 0) accept(id);
    return id;
  }

  /// Counts ids as generated (the penalties' history), e.g. the prompt.
  void accept(std::int32_t id) {
    recent_.push_back(id);
    if (last_n_ && recent_.size() > last_n_) recent_.pop_front();
  }
  void accept(std::span<const std::int32_t> ids) {
    for (std::int32_t id : ids) accept(id);
  }

  const sampling_options& options() const noexcept { return opt_; }
  /// The step the next draw takes (its random number's counter).
  std::uint64_t step() const noexcept { return step_; }

 private:
  sampling_options opt_;
  std::size_t last_n_;
  std::uint64_t step_ = 0;
  std::deque<std::int32_t> recent_;
};

}  // namespace kiln
