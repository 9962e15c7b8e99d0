// kiln/serving/engine.hpp — kiln::serving::engine: continuous batching of many generation
// requests over one decoder and one paged KV cache (vLLM's scheduler, in small).
//
// Requests are submitted (any thread) into a bounded wait queue; each step (one worker
// thread) admits waiting requests while the batch has room and the KV pool has the blocks
// for their whole length (prompt + max_tokens - 1 positions, reserved at admission, so a
// running sequence never runs out of blocks and nothing is ever preempted), then builds one
// batch: the next token of every decoding sequence, plus chunks of prompts being prefilled
// (at most engine_options::prefill_chunk prompt tokens a step over all of them, so a long
// prompt does not stall the decoding ones), runs the decoder once over it
// (Model::forward(cache, batch): the rows batched through every projection, attention per
// sequence through its block table), draws each sequence's next token with its own
// sampling options, seed and step (kiln::sample: the same ids as the request alone) and
// delivers it to the request's token_stream. A sequence that ends (max_tokens, a stop id,
// cancelled) gives its blocks back at once, and the next step can admit another.
//
// Threads: submit, cancel, stats, queued, active, idle and wait_for_work are safe from any
// thread at any time; step (and run) belong to one worker thread at a time (a second caller
// waits for the first). Only the worker touches tensors, so an HTTP server's threads parse,
// submit, stream and cancel without ever blocking on the device:
//
//   kiln::serving::engine eng(model, {.max_batch = 16, .kv_bytes = std::size_t(1) << 30});
//   std::jthread worker([&](std::stop_token st) {
//     while (!st.stop_requested()) if (eng.wait_for_work(std::chrono::milliseconds(50))) eng.step();
//   });
//   auto s = eng.submit({.prompt = ids, .max_tokens = 64});   // from a request thread
//   for (std::int32_t id : s->wait()) std::cout << id << ' ';
//
// Model is a decoder with forward(paged_kv_cache<float, B>&, std::span<const
// models::batch_entry>) and make_paged_cache (kiln::llama::model, kiln::bitnet::model). Include <kiln/vulkan.hpp>
// first for a Vulkan decoder (the sampling kernel, as <kiln/sampling.hpp>).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"
#include "kiln/models/batch_entry.hpp"
#include "kiln/sampling.hpp"
#include "kiln/serving/queue_full.hpp"
#include "kiln/serving/request.hpp"
#include "kiln/serving/stats.hpp"
#include "kiln/serving/token_stream.hpp"

namespace kiln::serving {

/// The engine's settings. The KV pool's size is given as kv_blocks or as kv_bytes (the
/// blocks that fit), one of the two.
struct engine_options {
  index_t max_batch = 16;       ///< sequences admitted at once (decoding and prefilling)
  index_t prefill_chunk = 256;  ///< prompt tokens a step, over all sequences being prefilled
  index_t block_size = 16;      ///< positions a KV block holds
  index_t kv_blocks = 0;        ///< the pool in blocks, or
  std::size_t kv_bytes = 0;     ///< in bytes
  index_t max_queue = 64;       ///< requests that may wait beyond the batch's free places
  index_t max_context = 0;      ///< positions a request may use (prompt + max_tokens - 1); 0: the model's
};

namespace detail {

/// A request inside the engine: its stream, its cache sequence and its progress.
struct live_request {
  request req;
  std::shared_ptr<token_stream> out;
  std::uint32_t seq = 0;    // the paged cache's handle, once admitted
  index_t blocks = 0;       // blocks its whole length needs (reserved at admission)
  index_t done = 0;         // prompt tokens run
  index_t generated = 0;
  std::int32_t last = 0;    // the last id drawn: the next step's input
  std::uint64_t step = 0;   // the sampling step (names the draw's random number)
  std::deque<std::int32_t> recent;  // the penalties' window

  bool prefilling() const noexcept { return done < static_cast<index_t>(req.prompt.size()); }
  bool plain_greedy() const noexcept {
    const auto& o = req.sampling;
    return o.temperature == 0.0f && o.repeat_penalty == 1.0f && o.presence_penalty == 0.0f;
  }
};

}  // namespace detail

template <class Model>
class engine {
 public:
  using backend = typename Model::backend;

  /// An engine over model (which must outlive it) with a paged KV pool of its own. Throws
  /// kiln::shape_error for a setting out of range (naming it) and kiln::out_of_memory when
  /// the pool cannot be allocated.
  engine(Model& model, const engine_options& o = {}) : model_(&model), o_(o), cache_(make_cache(model, o)) {
    context_ = model.capacity();
    if (o_.max_context > 0) context_ = std::min(context_, o_.max_context);
  }

  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// Ends every request still waiting or running as cancelled (their streams stay readable;
  /// no callback runs).
  ~engine() {
    std::lock_guard lock(m_);
    for (auto& r : waiting_) r.out->finish(finish_reason::cancelled);
    for (auto& r : active_) r.out->finish(finish_reason::cancelled);
  }

  /// Queues r and returns its stream. Throws, before queueing anything: kiln::shape_error
  /// for an empty prompt, max_tokens below 1, a prompt and max_tokens past the context, a
  /// request whose KV blocks exceed the whole pool, or bad sampling options;
  /// kiln::index_error for a prompt or stop id outside the vocabulary; queue_full when
  /// max_queue requests already wait beyond the batch's free places. Any thread.
  std::shared_ptr<token_stream> submit(request r) {
    check(r);
    detail::live_request q;
    const index_t positions = static_cast<index_t>(r.prompt.size()) + r.max_tokens - 1;
    q.blocks = (positions + cache_.block_size() - 1) / cache_.block_size();
    for (std::int32_t id : r.prompt) remember(q, id);
    q.req = std::move(r);
    std::shared_ptr<token_stream> out;
    {
      std::lock_guard lock(m_);
      const index_t free_places = std::max<index_t>(o_.max_batch - active_n_, 0);
      if (static_cast<index_t>(waiting_.size()) >= o_.max_queue + free_places) {
        ++stats_.refused;
        throw queue_full("kiln::serving::engine::submit: the wait queue is full: " + std::to_string(waiting_.size()) +
                         " requests wait, " + std::to_string(active_n_) + " of " + std::to_string(o_.max_batch) +
                         " run (engine_options::max_queue " + std::to_string(o_.max_queue) + ", max_batch " +
                         std::to_string(o_.max_batch) + ")");
      }
      out = std::make_shared<token_stream>(++last_id_, static_cast<index_t>(q.req.prompt.size()));
      q.out = out;
      waiting_.push_back(std::move(q));
      ++stats_.submitted;
    }
    cv_.notify_all();
    return out;
  }

  /// Cancels request id: a waiting one leaves the queue at once, a running one at the next
  /// step (its blocks back to the pool); its stream ends with finish_reason::cancelled.
  /// Returns false when no such request waits or runs (unknown or already finished). Any
  /// thread.
  bool cancel(request_id id) {
    {
      std::lock_guard lock(m_);
      const auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& r) { return r.out->id() == id; });
      if (w != waiting_.end()) {
        w->out->finish(finish_reason::cancelled);
        dropped_.push_back(std::move(*w));
        waiting_.erase(w);
        ++stats_.cancelled;
      } else if (std::find(running_.begin(), running_.end(), id) != running_.end()) {
        if (std::find(cancels_.begin(), cancels_.end(), id) == cancels_.end()) cancels_.push_back(id);
      } else {
        return false;
      }
    }
    cv_.notify_all();
    return true;
  }

  /// Runs one step (see the top of this file) and returns what it did; a step with nothing
  /// to run returns at once. The worker thread's call. When the decoder fails (a device
  /// error), every running request ends with finish_reason::error and the exception is
  /// rethrown; waiting ones stay queued.
  step_stats step() {
    std::lock_guard step_lock(step_m_);
    const auto t0 = std::chrono::steady_clock::now();
    step_stats st;
    std::vector<detail::live_request> ended;     // finished this step: callbacks, then dropped
    std::vector<std::size_t> updated;            // active_ indices with new tokens
    std::vector<request_id> cancels;
    {
      std::lock_guard lock(m_);
      cancels.swap(cancels_);
      for (auto& r : dropped_) ended.push_back(std::move(r));
      dropped_.clear();
    }
    st.finished += static_cast<index_t>(ended.size());
    // running requests cancelled since the last step
    for (std::size_t i = 0; i < active_.size();) {
      if (std::find(cancels.begin(), cancels.end(), active_[i].out->id()) != cancels.end()) {
        end(i, finish_reason::cancelled, ended);
        ++st.finished;
      } else {
        ++i;
      }
    }
    admit();

    // the batch: decoding sequences first (one token each), then prompt chunks
    std::vector<models::batch_entry> batch;
    std::vector<std::size_t> who, sampled;  // each entry's request; the requests drawing a token
    for (std::size_t i = 0; i < active_.size(); ++i) {
      if (active_[i].prefilling()) continue;
      batch.push_back({active_[i].seq, std::span<const std::int32_t>(&active_[i].last, 1), true});
      who.push_back(i);
      ++st.decode_rows;
    }
    index_t budget = o_.prefill_chunk;
    for (std::size_t i = 0; i < active_.size() && budget > 0; ++i) {
      auto& r = active_[i];
      if (!r.prefilling()) continue;
      const index_t left = static_cast<index_t>(r.req.prompt.size()) - r.done;
      const index_t take = std::min(left, budget);
      batch.push_back({r.seq, std::span<const std::int32_t>(r.req.prompt).subspan(static_cast<std::size_t>(r.done),
                                                                                     static_cast<std::size_t>(take)),
                       take == left});
      who.push_back(i);
      budget -= take;
      st.prefill_rows += take;
    }
    st.sequences = static_cast<index_t>(batch.size());
    if (!batch.empty()) {
      std::vector<std::int32_t> ids;
      try {
        auto logits = model_->forward(cache_, batch);
        for (std::size_t k = 0; k < batch.size(); ++k) {
          if (batch[k].logits) sampled.push_back(who[k]);
        }
        ids = draw(logits, sampled);
      } catch (...) {
        const std::exception_ptr e = std::current_exception();
        std::string why = "kiln::serving::engine::step: the step failed";
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          why += std::string(": ") + x.what();
        } catch (...) {
        }
        while (!active_.empty()) end(active_.size() - 1, finish_reason::error, ended, why);
        finish_step(st, t0, ended);
        throw;
      }
      for (std::size_t k = 0; k < batch.size(); ++k) {
        auto& r = active_[who[k]];
        if (r.prefilling()) r.done += static_cast<index_t>(batch[k].ids.size());
      }
      for (std::size_t k = 0; k < sampled.size(); ++k) {
        auto& r = active_[sampled[k]];
        const std::int32_t id = ids[k];
        r.last = id;
        ++r.step;
        ++r.generated;
        remember(r, id);
        r.out->push(id);
        ++st.tokens;
        updated.push_back(sampled[k]);
      }
    }
    // callbacks of the requests that got tokens, then the ends (highest index first, so
    // the indices left stay valid)
    std::vector<std::pair<std::size_t, finish_reason>> ends;
    for (std::size_t i : updated) {
      auto& r = active_[i];
      finish_reason why = finish_reason::none;
      if (std::find(r.req.stop_ids.begin(), r.req.stop_ids.end(), r.last) != r.req.stop_ids.end()) {
        why = finish_reason::stop;
      } else if (r.generated >= r.req.max_tokens) {
        why = finish_reason::length;
      }
      if (why != finish_reason::none) {
        ends.emplace_back(i, why);
      } else if (!notify(r)) {
        ends.emplace_back(i, finish_reason::error);
      }
    }
    std::sort(ends.begin(), ends.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [i, why] : ends) {
      end(i, why, ended, why == finish_reason::error ? "kiln::serving::engine: the request's on_update threw" : "");
      ++st.finished;
    }
    finish_step(st, t0, ended);
    return st;
  }

  /// Steps until nothing waits or runs (the worker thread's call).
  void run() {
    while (!idle()) step();
  }

  /// Whether no request waits or runs. Any thread.
  bool idle() const {
    std::lock_guard lock(m_);
    return idle_locked();
  }

  /// Blocks until a request waits or runs (or one was cancelled), or d passes; returns
  /// whether there is work for step(). Any thread (a worker loop's wait).
  template <class Rep, class Period>
  bool wait_for_work(std::chrono::duration<Rep, Period> d) {
    std::unique_lock lock(m_);
    return cv_.wait_for(lock, d, [&] { return !idle_locked(); });
  }

  /// Totals and the last step's figures. Any thread.
  engine_stats stats() const {
    std::lock_guard lock(m_);
    return stats_;
  }
  /// Requests waiting for a place in the batch or KV blocks. Any thread.
  index_t queued() const {
    std::lock_guard lock(m_);
    return static_cast<index_t>(waiting_.size());
  }
  /// Requests admitted and not finished. Any thread.
  index_t active() const {
    std::lock_guard lock(m_);
    return active_n_;
  }
  /// Positions a request may use: prompt + max_tokens - 1 at most.
  index_t context() const noexcept { return context_; }
  const engine_options& options() const noexcept { return o_; }
  /// The paged KV cache (its used_blocks(), bytes(), ...). Read it on the worker thread only.
  const paged_kv_cache<float, backend>& cache() const noexcept { return cache_; }

 private:
  static paged_kv_cache<float, backend> make_cache(Model& model, const engine_options& o) {
    const auto fail = [&](const std::string& why) {
      throw shape_error("kiln::serving::engine: " + why + " (engine_options: max_batch " + std::to_string(o.max_batch) +
                        ", prefill_chunk " + std::to_string(o.prefill_chunk) + ", block_size " +
                        std::to_string(o.block_size) + ", kv_blocks " + std::to_string(o.kv_blocks) + ", kv_bytes " +
                        std::to_string(o.kv_bytes) + ", max_queue " + std::to_string(o.max_queue) + ", max_context " +
                        std::to_string(o.max_context) + ")");
    };
    if (o.max_batch < 1) fail("max_batch must be at least 1");
    if (o.prefill_chunk < 1) fail("prefill_chunk must be at least 1");
    if (o.block_size < 1) fail("block_size must be at least 1");
    if (o.max_queue < 0) fail("max_queue must be >= 0");
    if (o.max_context < 0) fail("max_context must be >= 0 (0: the model's)");
    if (o.kv_blocks < 0 || (o.kv_blocks > 0) == (o.kv_bytes > 0)) {
      fail("give the KV pool's size as kv_blocks or as kv_bytes, one of the two");
    }
    return model.make_paged_cache(o.block_size, o.kv_blocks, o.kv_bytes);
  }

  void check(const request& r) const {
    const std::string op = "kiln::serving::engine::submit: ";
    const index_t V = model_->cfg().vocab_size;
    const index_t n = static_cast<index_t>(r.prompt.size());
    if (n == 0) throw shape_error(op + "the prompt is empty");
    if (r.max_tokens < 1) throw shape_error(op + "max_tokens is " + std::to_string(r.max_tokens) + "; it must be at least 1");
    if (n > context_) {
      throw shape_error(op + "the prompt of " + std::to_string(n) + " tokens is longer than the context of " +
                        std::to_string(context_) + " positions");
    }
    if (n + r.max_tokens - 1 > context_) {
      throw shape_error(op + "a prompt of " + std::to_string(n) + " tokens and max_tokens " +
                        std::to_string(r.max_tokens) + " need " + std::to_string(n + r.max_tokens - 1) +
                        " positions; the context holds " + std::to_string(context_));
    }
    for (std::size_t j = 0; j < r.prompt.size(); ++j) {
      if (r.prompt[j] < 0 || r.prompt[j] >= V) {
        throw index_error(op + "prompt id " + std::to_string(r.prompt[j]) + " at prompt[" + std::to_string(j) +
                          "] is outside the vocabulary [0, " + std::to_string(V) + ")");
      }
    }
    for (std::size_t j = 0; j < r.stop_ids.size(); ++j) {
      if (r.stop_ids[j] < 0 || r.stop_ids[j] >= V) {
        throw index_error(op + "stop id " + std::to_string(r.stop_ids[j]) + " at stop_ids[" + std::to_string(j) +
                          "] is outside the vocabulary [0, " + std::to_string(V) + ")");
      }
    }
    if (const std::string bad = kiln::detail::sample_problem(r.sampling); !bad.empty()) throw shape_error(op + bad);
    const index_t positions = n + r.max_tokens - 1;
    const index_t blocks = (positions + cache_.block_size() - 1) / cache_.block_size();
    if (blocks > cache_.num_blocks()) {
      throw shape_error(op + "a prompt of " + std::to_string(n) + " tokens and max_tokens " +
                        std::to_string(r.max_tokens) + " need " + std::to_string(blocks) + " KV blocks of " +
                        std::to_string(cache_.block_size()) + " positions; the whole pool holds " +
                        std::to_string(cache_.num_blocks()) + " (engine_options::kv_blocks / kv_bytes)");
    }
  }

  static void remember(detail::live_request& r, std::int32_t id) {
    r.recent.push_back(id);
    if (r.req.penalty_last_n && r.recent.size() > r.req.penalty_last_n) r.recent.pop_front();
  }

  bool idle_locked() const { return waiting_.empty() && active_n_ == 0 && dropped_.empty() && cancels_.empty(); }

  /// Moves waiting requests into the batch, first come first served, while there are
  /// places and blocks for their whole length beside what the running ones still take.
  void admit() {
    index_t owed = 0;  // blocks the running sequences reserved and have not taken yet
    for (const auto& r : active_) owed += r.blocks - static_cast<index_t>(cache_.block_table(r.seq).size());
    std::lock_guard lock(m_);
    while (static_cast<index_t>(active_.size()) < o_.max_batch && !waiting_.empty()) {
      auto& w = waiting_.front();
      if (w.blocks > cache_.free_blocks() - owed) break;
      w.seq = cache_.add();
      owed += w.blocks;
      running_.push_back(w.out->id());
      active_.push_back(std::move(w));
      waiting_.pop_front();
    }
    active_n_ = static_cast<index_t>(active_.size());
  }

  /// Each sampled request's next id: one kiln::sample over all rows when every one is
  /// greedy without penalties (no random number, the same argmax as alone), else one a
  /// row with its own options, step and history (row 0 of its own call: the same random
  /// number as the request alone). Reads the ids back once.
  std::vector<std::int32_t> draw(const tensor<float, backend>& logits, const std::vector<std::size_t>& sampled) {
    const bool plain = std::all_of(sampled.begin(), sampled.end(), [&](std::size_t i) { return active_[i].plain_greedy(); });
    if (sampled.empty()) return {};
    if (plain) return sample(logits, sampling_options{}).to_host();
    std::vector<tensor<std::int32_t, backend>> rows;
    for (std::size_t k = 0; k < sampled.size(); ++k) {
      const auto& r = active_[sampled[k]];
      const std::vector<std::int32_t> h(r.recent.begin(), r.recent.end());
      const auto i = static_cast<index_t>(k);
      rows.push_back(sample(slice(logits, 0, i, i + 1), r.req.sampling, r.step, h));
    }
    std::vector<std::int32_t> ids;
    for (const auto& t : rows) ids.push_back(t.to_host().at(0));
    return ids;
  }

  /// Calls r's on_update; false when it threw.
  static bool notify(detail::live_request& r) {
    if (!r.req.on_update) return true;
    try {
      r.req.on_update(*r.out);
      return true;
    } catch (...) {
      return false;
    }
  }

  /// Ends active_[i]: its blocks back to the pool, its stream finished; moved to `ended`
  /// for its callback.
  void end(std::size_t i, finish_reason why, std::vector<detail::live_request>& ended, const std::string& msg = {}) {
    auto& r = active_[i];
    cache_.release(r.seq);
    r.out->finish(why, msg);
    {
      std::lock_guard lock(m_);
      running_.erase(std::find(running_.begin(), running_.end(), r.out->id()));
      switch (why) {
        case finish_reason::cancelled: ++stats_.cancelled; break;
        case finish_reason::error: ++stats_.failed; break;
        default: ++stats_.completed; break;
      }
    }
    ended.push_back(std::move(r));
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void finish_step(step_stats& st, std::chrono::steady_clock::time_point t0, std::vector<detail::live_request>& ended) {
    for (auto& r : ended) notify(r);  // the stream has ended; a throwing callback changes nothing now
    ended.clear();
    st.kv_blocks_used = cache_.used_blocks();
    st.kv_blocks_total = cache_.num_blocks();
    st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard lock(m_);
    active_n_ = static_cast<index_t>(active_.size());
    st.active = active_n_;
    st.queued = static_cast<index_t>(waiting_.size());
    stats_.kv_blocks_used = st.kv_blocks_used;
    if (st.sequences > 0) {
      ++stats_.steps;
      stats_.prompt_tokens += static_cast<std::uint64_t>(st.prefill_rows);
      stats_.generated_tokens += static_cast<std::uint64_t>(st.tokens);
      stats_.last = st;
    }
  }

  Model* model_;
  engine_options o_;
  paged_kv_cache<float, backend> cache_;
  index_t context_ = 0;
  std::vector<detail::live_request> active_;  // the worker's (step's) own

  mutable std::mutex m_;  // guards what follows
  std::condition_variable cv_;
  std::deque<detail::live_request> waiting_;
  std::vector<detail::live_request> dropped_;  // cancelled while waiting: callbacks at the next step
  std::vector<request_id> running_;            // ids of active_
  std::vector<request_id> cancels_;            // running ids to cancel at the next step
  index_t active_n_ = 0;
  request_id last_id_ = 0;
  engine_stats stats_;

  std::mutex step_m_;  // one step at a time
};

}  // namespace kiln::serving
