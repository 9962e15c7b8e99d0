// kiln/serving/tensor_parallel.hpp — kiln::serving::engine over a tensor-parallel decoder
// (kiln/models/tensor_parallel.hpp): one engine, on rank 0, and ranks that follow its steps.
//
// Rank 0 runs the engine (admission, batching, sampling, the requests' streams) over a
// tp_leader: a model wrapper whose batched step first hands the step's description to every
// rank (a tp_step: the sequences that ended since the last step, then each entry's sequence,
// first position, ids and whether it wants logits), then runs the decoder's step. The other
// ranks run tp_follow: each description they receive becomes the same batched step on their
// shard of the decoder and their own paged KV cache (a pool of the same blocks; rank 0's
// sequences mapped to their own), so the step's all-reduces and all-gather meet rank 0's.
// Sampling happens on rank 0 only, from the logits the step all-gathered there. While the
// engine is idle, tp_leader::heartbeat sends an idle description every so often, so the
// waiting ranks (whose waits are bounded: kiln::dist's timeouts) hear from rank 0; and
// tp_leader::stop sends the stop, with rank 0's exit status, that ends every tp_follow.
//
// No MPI here: the hand-over is a callable that gives every rank rank 0's vector of ints
// (kiln::dist::share_from_root(comm) makes it from a kiln::dist::communicator).
//
//   // rank 0                                           // the other ranks
//   kiln::serving::tp_leader<M> lead(std::move(m), share);  auto code = kiln::serving::tp_follow(m, o, share);
//   kiln::serving::engine eng(lead, o);
//   lead.begin(eng.cache().num_blocks());
//   while (...) if (eng.wait_for_work(50ms)) eng.step(); else lead.heartbeat();
//   lead.stop(0);
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"
#include "kiln/models/batch_entry.hpp"
#include "kiln/serving/engine.hpp"

namespace kiln::serving {

/// Gives every rank of the group rank 0's ints: rank 0's v (its length too) replaces the
/// others'. Every rank calls it at the same point (a collective).
using share_ints = std::function<void(std::vector<std::int32_t>&)>;

/// One message from rank 0 to the ranks that follow its engine.
struct tp_step {
  enum class kind : std::int32_t { begin = 1, step = 2, idle = 3, stop = 4 };
  struct entry {
    std::uint32_t sequence = 0;       ///< rank 0's sequence handle
    index_t start = 0;                ///< its length before the step (the first position it writes)
    bool logits = true;
    std::vector<std::int32_t> ids;
  };
  kind what = kind::idle;
  std::int64_t value = 0;                ///< begin: rank 0's KV blocks; stop: rank 0's exit status
  std::vector<std::uint32_t> released;   ///< step: rank 0's sequences ended since the last step
  std::vector<entry> entries;            ///< step: the batch, in rank 0's order

  /// [kind, value, released count, released..., entries count, (sequence, start, logits,
  /// ids count, ids...)...]
  std::vector<std::int32_t> encode() const {
    std::vector<std::int32_t> v{static_cast<std::int32_t>(what), static_cast<std::int32_t>(value),
                                static_cast<std::int32_t>(released.size())};
    for (std::uint32_t s : released) v.push_back(static_cast<std::int32_t>(s));
    v.push_back(static_cast<std::int32_t>(entries.size()));
    for (const entry& e : entries) {
      v.insert(v.end(), {static_cast<std::int32_t>(e.sequence), static_cast<std::int32_t>(e.start),
                         e.logits ? 1 : 0, static_cast<std::int32_t>(e.ids.size())});
      v.insert(v.end(), e.ids.begin(), e.ids.end());
    }
    return v;
  }

  /// The message encode() wrote. Throws kiln::value_error for anything else.
  static tp_step decode(std::span<const std::int32_t> v) {
    std::size_t at = 0;
    const auto next = [&](const char* what) {
      if (at >= v.size()) {
        throw value_error("kiln::serving::tp_step::decode: the message of " + std::to_string(v.size()) +
                          " ints ends before its " + what);
      }
      return v[at++];
    };
    const auto count = [&](const char* what) {
      const std::int32_t n = next(what);
      if (n < 0 || static_cast<std::size_t>(n) > v.size() - at) {
        throw value_error("kiln::serving::tp_step::decode: " + std::string(what) + " " + std::to_string(n) +
                          " does not fit the message of " + std::to_string(v.size()) + " ints");
      }
      return static_cast<std::size_t>(n);
    };
    tp_step s;
    const std::int32_t k = next("kind");
    if (k < 1 || k > 4) throw value_error("kiln::serving::tp_step::decode: unknown kind " + std::to_string(k));
    s.what = static_cast<kind>(k);
    s.value = next("value");
    for (std::size_t i = count("released count"); i-- > 0;) s.released.push_back(static_cast<std::uint32_t>(next("release")));
    for (std::size_t i = count("entry count"); i-- > 0;) {
      entry e;
      e.sequence = static_cast<std::uint32_t>(next("sequence"));
      e.start = next("start");
      e.logits = next("logits") != 0;
      const std::size_t n = count("ids count");
      e.ids.assign(v.begin() + static_cast<std::ptrdiff_t>(at), v.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
      s.entries.push_back(std::move(e));
    }
    if (at != v.size()) {
      throw value_error("kiln::serving::tp_step::decode: " + std::to_string(v.size() - at) + " ints left after the message");
    }
    return s;
  }
};

/// Rank 0's decoder for kiln::serving::engine in a tensor-parallel group: the model
/// (Model: a tensor-parallel kiln::llama::model or kiln::bitnet::model, loaded with the
/// group's kiln::models::tensor_parallel) whose batched step first tells the other ranks,
/// through `share`, what the step is. Call share's collectives from one thread at a time
/// (the engine's worker: forward, begin, heartbeat and stop).
template <class Model>
class tp_leader {
 public:
  using backend = typename Model::backend;
  using clock = std::chrono::steady_clock;

  /// heartbeat: how long an idle engine waits before heartbeat() sends an idle message
  /// (well under the group's timeout).
  tp_leader(Model m, share_ints share, std::chrono::milliseconds heartbeat = std::chrono::seconds(1))
      : m_(std::move(m)), share_(std::move(share)), every_(heartbeat), last_(clock::now()) {}
  tp_leader(const tp_leader&) = delete;
  tp_leader& operator=(const tp_leader&) = delete;
  /// Stops the group with status 1 when stop() was not called (rank 0 failed).
  ~tp_leader() {
    try {
      stop(1);
    } catch (...) {  // the group is gone already: nothing more to tell it
    }
  }

  // --- what kiln::serving::engine uses --------------------------------------------------
  decltype(auto) cfg() const noexcept { return m_.cfg(); }
  index_t capacity() const noexcept { return m_.capacity(); }
  paged_kv_cache<float, backend> make_paged_cache(index_t block_size, index_t blocks, std::size_t bytes = 0) const {
    return m_.make_paged_cache(block_size, blocks, bytes);
  }
  /// The step's description to every rank, then the decoder's step (the same on every rank).
  tensor<float, backend> forward(paged_kv_cache<float, backend>& cache, std::span<const models::batch_entry> batch) {
    if (stopped_) throw error("kiln::serving::tp_leader::forward: the group was stopped");
    tp_step s;
    s.what = tp_step::kind::step;
    // sequences the others hold that have ended since (or ended and were started again:
    // shorter than they were)
    for (auto it = held_.begin(); it != held_.end();) {
      if (!live(cache, it->first) || cache.length(it->first) < it->second) {
        s.released.push_back(it->first);
        it = held_.erase(it);
      } else {
        ++it;
      }
    }
    for (const auto& e : batch) {
      s.entries.push_back({e.sequence, cache.length(e.sequence), e.logits, {e.ids.begin(), e.ids.end()}});
    }
    send(s);
    for (const auto& e : s.entries) held_[e.sequence] = e.start + static_cast<index_t>(e.ids.size());
    return m_.forward(cache, batch);
  }

  // --- the group --------------------------------------------------------------------------
  /// The first message: rank 0's pool of `kv_blocks` blocks (a follower checks its own).
  void begin(index_t kv_blocks) {
    tp_step s;
    s.what = tp_step::kind::begin;
    s.value = kv_blocks;
    send(s);
  }
  /// An idle message when nothing was sent for the heartbeat interval; else nothing.
  void heartbeat() {
    if (stopped_ || clock::now() - last_ < every_) return;
    send(tp_step{});
  }
  /// The stop: every rank's tp_follow returns `code`. The first call sends it; later ones
  /// do nothing.
  void stop(int code) {
    if (stopped_) return;
    stopped_ = true;
    tp_step s;
    s.what = tp_step::kind::stop;
    s.value = code;
    auto v = s.encode();
    share_(v);
  }
  bool stopped() const noexcept { return stopped_; }

  Model& model() noexcept { return m_; }
  const Model& model() const noexcept { return m_; }

 private:
  static bool live(const paged_kv_cache<float, backend>& cache, std::uint32_t s) {
    try {
      (void)cache.length(s);
      return true;
    } catch (const index_error&) {
      return false;
    }
  }
  void send(const tp_step& s) {
    auto v = s.encode();
    share_(v);
    last_ = clock::now();
  }

  Model m_;
  share_ints share_;
  std::chrono::milliseconds every_;
  clock::time_point last_;
  bool stopped_ = false;
  std::unordered_map<std::uint32_t, index_t> held_;  // rank 0's sequences the others hold: their length
};

/// A rank other than 0 of a tensor-parallel group whose rank 0 runs kiln::serving::engine
/// over a tp_leader: takes rank 0's messages through `share` and runs each step on m (this
/// rank's shard) and a paged KV cache of its own (made as the engine makes it, from o),
/// until rank 0's stop; returns the status rank 0 sent with it (0: a clean stop). Throws
/// what a step throws, and kiln::error when rank 0's pool differs from this rank's or a
/// message does not fit the sequences this rank holds (the ranks are out of step).
template <class Model>
int tp_follow(Model& m, const engine_options& o, const share_ints& share) {
  auto cache = m.make_paged_cache(o.block_size, o.kv_blocks, o.kv_bytes);
  std::unordered_map<std::uint32_t, std::uint32_t> mine;  // rank 0's sequence -> this rank's
  std::vector<models::batch_entry> batch;
  for (std::vector<std::int32_t> v;;) {
    share(v);
    const tp_step s = tp_step::decode(v);
    switch (s.what) {
      case tp_step::kind::stop: return static_cast<int>(s.value);
      case tp_step::kind::idle: continue;
      case tp_step::kind::begin:
        if (s.value != cache.num_blocks()) {
          throw error("kiln::serving::tp_follow: rank 0's KV pool holds " + std::to_string(s.value) +
                      " blocks, this rank's " + std::to_string(cache.num_blocks()) +
                      " (every rank must be started with the same engine options)");
        }
        continue;
      case tp_step::kind::step: break;
    }
    for (std::uint32_t r : s.released) {
      if (const auto it = mine.find(r); it != mine.end()) {
        cache.release(it->second);
        mine.erase(it);
      }
    }
    batch.clear();
    for (const auto& e : s.entries) {
      auto [it, fresh] = mine.try_emplace(e.sequence, 0u);
      if (fresh) it->second = cache.add();
      if (cache.length(it->second) != e.start) {
        throw error("kiln::serving::tp_follow: out of step with rank 0: its sequence " + std::to_string(e.sequence) +
                    " starts this step at position " + std::to_string(e.start) + ", this rank holds " +
                    std::to_string(cache.length(it->second)) + " positions of it");
      }
      batch.push_back({it->second, std::span<const std::int32_t>(e.ids), e.logits});
    }
    (void)m.forward(cache, batch);
  }
}

}  // namespace kiln::serving
