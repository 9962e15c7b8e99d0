// kiln/vulkan/profiler.hpp — GPU times for a profiling context: a timestamp before and
// after each dispatch, in query pools that belong to the batch (command buffer) they were
// recorded in, read back once that batch's timeline value completes.
//
// Both timestamps are written at BOTTOM_OF_PIPE: "when every earlier command is done".
// Dispatches that a GPU overlaps are then measured one after the other, so the times of a
// batch add up to its span instead of counting overlap twice. A queue family without
// timestamps (timestampValidBits = 0) gets no queries at all (writing one would be invalid);
// the profiler says so instead of reporting zeros.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/profiler.hpp"
#include "kiln/vulkan/device.hpp"
#include "kiln/vulkan/memory.hpp"
#include "kiln/vulkan/sequence.hpp"
#include "kiln/vulkan/shader_cache.hpp"

namespace kiln::detail::vk {

/// Timestamp queries of one context. Not thread-safe: the context's mutex guards it.
class gpu_timer {
 public:
  /// Dispatches one query pool times (a batch holds at most batch_commands commands; a
  /// batch with more dispatches than this takes a second pool).
  static constexpr std::uint32_t pairs_per_pool = 256;

  gpu_timer(VkDevice dev, const device_info& info, profiler& prof) : dev_(dev), prof_(prof) {
    if (info.timestamp_valid_bits == 0) {
      note_ = "queue family " + std::to_string(info.compute_queue_family) + " of " + info.label() +
              " has no timestamps (timestampValidBits = 0)";
    } else if (!(info.timestamp_period > 0)) {
      note_ = info.label() + " reports timestampPeriod = 0";
    } else {
      period_ns_ = info.timestamp_period;
      mask_ = info.timestamp_valid_bits >= 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << info.timestamp_valid_bits) - 1;
    }
    prof_.set_timing_note(note_);
  }
  gpu_timer(const gpu_timer&) = delete;
  gpu_timer& operator=(const gpu_timer&) = delete;
  /// The device must be idle (the context waits before destroying this).
  ~gpu_timer() {
    for (auto& p : active_) vkDestroyQueryPool(dev_, p.pool, nullptr);
    for (auto& p : idle_) vkDestroyQueryPool(dev_, p.pool, nullptr);
  }

  bool available() const noexcept { return period_ns_ > 0; }
  /// Why GPU times are missing ("" when they are measured).
  const std::string& note() const noexcept { return note_; }
  bool pending() const noexcept { return !active_.empty(); }

  /// Records the timestamp before a dispatch of record h into cb, which belongs to the
  /// batch that will signal `batch`.
  void before(VkCommandBuffer cb, std::uint64_t batch, profiler::handle h) {
    if (!available()) return;
    if (active_.empty() || active_.back().batch != batch || active_.back().entries.size() == pairs_per_pool) {
      open(cb, batch);
    }
    query_pool& p = active_.back();
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p.pool, 2 * std::uint32_t(p.entries.size()));
    p.entries.push_back(h);
  }
  /// The timestamp after it (same cb, right after the dispatch).
  void after(VkCommandBuffer cb) {
    if (!available()) return;
    query_pool& p = active_.back();
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p.pool, 2 * std::uint32_t(p.entries.size()) - 1);
  }

  /// The host time (profiler clock) at which `batch` was submitted: the device track of a
  /// trace starts each batch no earlier than that.
  void submitted(std::uint64_t batch, double host_us) {
    if (!available()) return;
    if (!active_.empty() && active_.back().batch >= batch) submits_.emplace_back(batch, host_us);
  }

  /// Reads the pools of batches up to `completed` and adds their times to the records.
  /// Throws kiln::device_error when the driver fails the read.
  void collect(std::uint64_t completed) {
    std::vector<std::uint64_t> ticks;
    while (!active_.empty() && active_.front().batch <= completed) {
      query_pool& p = active_.front();
      const auto n = 2 * static_cast<std::uint32_t>(p.entries.size());
      ticks.assign(n, 0);
      const VkResult r = vkGetQueryPoolResults(dev_, p.pool, 0, n, n * sizeof(std::uint64_t), ticks.data(),
                                               sizeof(std::uint64_t), VK_QUERY_RESULT_64_BIT);
      if (r == VK_NOT_READY) break;  // complete by the timeline, not yet by the queries: later
      check(r, "vkGetQueryPoolResults");
      const double offset = align(p.batch, n ? ticks[0] & mask_ : 0);
      for (std::size_t i = 0; i < p.entries.size(); ++i) {
        const std::uint64_t b = ticks[2 * i] & mask_, e = ticks[2 * i + 1] & mask_;
        const double dur_us = double((e - b) & mask_) * period_ns_ / 1e3;
        const double start_us = offset + double(b) * period_ns_ / 1e3;
        prof_.add_gpu(p.entries[i], start_us, dur_us);
        last_end_us_ = std::max(last_end_us_, start_us + dur_us);
      }
      p.entries.clear();
      idle_.push_back(p);
      active_.pop_front();
    }
    while (!submits_.empty() && submits_.front().first <= completed &&
           (active_.empty() || active_.front().batch > submits_.front().first)) {
      submits_.pop_front();
    }
  }

 private:
  struct query_pool {
    VkQueryPool pool = VK_NULL_HANDLE;
    std::uint64_t batch = 0;
    std::vector<profiler::handle> entries;  ///< the record of each timestamp pair
  };

  void open(VkCommandBuffer cb, std::uint64_t batch) {
    query_pool p;
    if (!idle_.empty()) {
      p = std::move(idle_.back());
      idle_.pop_back();
    } else {
      VkQueryPoolCreateInfo qi{};
      qi.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
      qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qi.queryCount = 2 * pairs_per_pool;
      check(vkCreateQueryPool(dev_, &qi, nullptr, &p.pool), "vkCreateQueryPool");
      p.entries.reserve(pairs_per_pool);
    }
    // Queries must be reset before they are written; the reset runs on the GPU in order
    // with the batch, so a pool is reusable as soon as its results were read.
    vkCmdResetQueryPool(cb, p.pool, 0, 2 * pairs_per_pool);
    p.batch = batch;
    active_.push_back(std::move(p));
  }

  /// The offset that maps ticks of `batch` (whose first timestamp is t0) to the host
  /// clock: its first dispatch starts when it was submitted, or when the device finished
  /// the previous batch, whichever is later. (Exact clock correlation needs
  /// VK_EXT_calibrated_timestamps; the durations do not depend on it.)
  double align(std::uint64_t batch, std::uint64_t t0) {
    if (batch == aligned_batch_) return aligned_offset_;
    double host = last_end_us_;
    for (const auto& [b, at] : submits_) {
      if (b == batch) host = std::max(host, at);
    }
    aligned_batch_ = batch;
    aligned_offset_ = host - double(t0) * period_ns_ / 1e3;
    return aligned_offset_;
  }

  VkDevice dev_;
  profiler& prof_;
  std::string note_;
  double period_ns_ = 0;
  std::uint64_t mask_ = 0;
  std::deque<query_pool> active_;  ///< in recording order (batches ascending)
  std::vector<query_pool> idle_;
  std::deque<std::pair<std::uint64_t, double>> submits_;  ///< (batch, host submit time)
  double last_end_us_ = 0;
  std::uint64_t aligned_batch_ = 0;
  double aligned_offset_ = 0;
};

/// kiln::memory_report's text for a Vulkan context.
inline std::string stats_report(const memory_stats& m, const sequence_stats& q, const cache_stats& c) {
  auto mib = [](double b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
    return std::string(buf);
  };
  auto pct = [](double a, double b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", b > 0 ? 100.0 * a / b : 0.0);
    return std::string(buf);
  };
  auto secs = [](double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f s", s);
    return std::string(buf);
  };
  std::string r = "vulkan memory pool: " + mib(double(m.in_use)) + " in use, " + mib(double(m.reserved)) + " reserved, peak " +
                  mib(double(m.peak)) + "; " + std::to_string(m.blocks) + " blocks of " + mib(double(m.block_size)) + " + " +
                  std::to_string(m.dedicated) + " dedicated; " + std::to_string(m.live_allocations) + " live allocations; hit rate " +
                  pct(double(m.hits), double(m.hits + m.misses)) + " (" + std::to_string(m.hits) + " hits, " +
                  std::to_string(m.misses) + " misses)" + (m.limit ? "; limit " + mib(double(m.limit)) : std::string()) + "\n";
  r += "vulkan stream: " + std::to_string(q.dispatches) + " dispatches, " + std::to_string(q.transfers) + " transfers, " +
       std::to_string(q.barriers) + " barriers, " + std::to_string(q.submits) + " submits\n";
  const std::uint64_t lookups = c.memory_hits + c.memory_misses;
  r += "vulkan kernel cache: memory " + std::to_string(c.memory_hits) + " hits / " + std::to_string(c.memory_misses) +
       " misses (hit rate " + pct(double(c.memory_hits), double(lookups)) + "); disk " + std::to_string(c.disk_hits) + " hits / " +
       std::to_string(c.disk_misses) + " misses, " + std::to_string(c.disk_rejected) + " rejected; " +
       std::to_string(c.compilations) + " shaderc compilations (" + secs(c.compile_seconds) + "), pipelines " +
       secs(c.pipeline_seconds) + ", " + std::to_string(c.preloaded) + " preloaded; " +
       (c.directory.empty() ? std::string("disk cache off") : "directory " + c.directory) + "\n";
  return r;
}

}  // namespace kiln::detail::vk
