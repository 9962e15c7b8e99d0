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
#include "kiln/detail/config.hpp"
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

  gpu_timer(VkDevice dev, const device_info& info, profiler& prof);
  gpu_timer(const gpu_timer&) = delete;
  gpu_timer& operator=(const gpu_timer&) = delete;
  /// The device must be idle (the context waits before destroying this).
  ~gpu_timer();

  bool available() const noexcept { return period_ns_ > 0; }
  /// Why GPU times are missing ("" when they are measured).
  const std::string& note() const noexcept { return note_; }
  bool pending() const noexcept { return !active_.empty(); }

  /// Records the timestamp before a dispatch of record h into cb, which belongs to the
  /// batch that will signal `batch`.
  void before(VkCommandBuffer cb, std::uint64_t batch, profiler::handle h);
  /// The timestamp after it (same cb, right after the dispatch).
  void after(VkCommandBuffer cb);

  /// The host time (profiler clock) at which `batch` was submitted: the device track of a
  /// trace starts each batch no earlier than that.
  void submitted(std::uint64_t batch, double host_us);

  /// Reads the pools of batches up to `completed` and adds their times to the records.
  /// Throws kiln::device_error when the driver fails the read.
  void collect(std::uint64_t completed);

 private:
  struct query_pool {
    VkQueryPool pool = VK_NULL_HANDLE;
    std::uint64_t batch = 0;
    std::vector<profiler::handle> entries;  ///< the record of each timestamp pair
  };

  void open(VkCommandBuffer cb, std::uint64_t batch);

  /// The offset that maps ticks of `batch` (whose first timestamp is t0) to the host
  /// clock: its first dispatch starts when it was submitted, or when the device finished
  /// the previous batch, whichever is later. (Exact clock correlation needs
  /// VK_EXT_calibrated_timestamps; the durations do not depend on it.)
  double align(std::uint64_t batch, std::uint64_t t0);

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
KILN_DECL std::string stats_report(const memory_stats& m, const sequence_stats& q, const cache_stats& c);

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/impl/profiler.ipp"
#endif
