// kiln/vulkan/sequence.hpp — command recording, hazard tracking and the timeline semaphore.
// Commands are recorded into a batch (one command buffer + one descriptor pool); a
// barrier is inserted only when a command touches a buffer that an earlier command of the
// same batch wrote (RAW, WAW) or read (WAR) since the last barrier. Batches are
// submitted in order, each waiting on the previous one's timeline value, so hazards never
// span batches; every value marks when a batch's work, host-visible, is complete.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/vulkan/device.hpp"

namespace kiln::detail::vk {

/// What the GPU last did with one buffer (an allocation). Epochs order accesses within
/// the batch being recorded (a barrier or a submit starts a new epoch); values are the
/// timeline values after which the last read / write is complete.
struct access_state {
  std::uint64_t read_epoch = 0;
  std::uint64_t write_epoch = 0;
  std::uint64_t read_value = 0;
  std::uint64_t write_value = 0;

  std::uint64_t last_use() const noexcept { return read_value > write_value ? read_value : write_value; }
};

/// One buffer a command uses, and how.
struct buffer_access {
  access_state* state;
  bool write;
};

/// Descriptors one command's set holds, by type (see sequence::allocate_set).
struct descriptor_counts {
  std::uint32_t storage = 0;  ///< storage buffers
  std::uint32_t texel = 0;    ///< uniform texel buffers
};

/// Counters for tests and benchmarks.
struct sequence_stats {
  std::uint64_t dispatches = 0;
  std::uint64_t transfers = 0;  ///< vkCmdCopyBuffer (staging) commands
  std::uint64_t barriers = 0;
  std::uint64_t submits = 0;
};

/// The recording stream of one context. Not thread-safe: the context's mutex guards every
/// call except wait(), which only blocks on the semaphore.
class sequence {
 public:
  sequence(VkDevice dev, VkQueue queue, std::uint32_t family, std::uint32_t batch_commands);

  sequence(const sequence&) = delete;
  sequence& operator=(const sequence&) = delete;

  /// The device must be idle (or lost): the context waits before destroying this.
  ~sequence();

  /// Opens a command in the current batch (starting one, or submitting a full one first):
  /// records the barrier its hazards need, marks its buffers, and returns the command
  /// buffer to record into.
  VkCommandBuffer begin_command(std::span<const buffer_access> uses);

  /// A descriptor set of `layout`, which holds `need` descriptors, from the current
  /// batch's pools (call right after begin_command). A batch's first pool has room for
  /// batch_commands sets of 8 descriptors of each type; a set that does not fit in what
  /// is left goes to the batch's next pool, made on demand at least as large as the set,
  /// so a kernel of any descriptor count the device allows gets its set.
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout, descriptor_counts need);

  void count_dispatch() noexcept { ++stats_.dispatches; }
  void count_transfer() noexcept { ++stats_.transfers; }

  /// Timeline value the batch being recorded will signal.
  std::uint64_t recording_value() const noexcept { return submitted_ + 1; }
  std::uint64_t submitted() const noexcept { return submitted_; }
  std::uint64_t completed() const noexcept { return completed_; }
  bool has_recorded() const noexcept { return current_ && current_->commands > 0; }
  const sequence_stats& stats() const noexcept { return stats_; }

  /// Submits the current batch, if it holds commands. A failed submit leaves recorded
  /// work that will never complete, so it is fatal for the context: the caller marks it
  /// lost. Throws kiln::device_error naming the call.
  void submit();

  /// Reads the semaphore and recycles finished batches; returns the completed value.
  std::uint64_t poll();

  /// Blocks until the timeline reaches v (which must have been submitted). Safe to call
  /// without the context's mutex: it touches only the semaphore. Waits in slices and
  /// gives up with kiln::device_error once `lost` is set: when another call has found the
  /// device lost, a value it will never signal must not hold this thread forever.
  void wait(std::uint64_t v, const std::atomic<bool>* lost = nullptr) const;

 private:
  /// One descriptor pool of a batch and the room left in it.
  struct descriptor_pool {
    VkDescriptorPool pool = VK_NULL_HANDLE;
    descriptor_counts size, left;
    std::uint32_t sets = 0, sets_left = 0;
  };

  struct batch {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    std::vector<descriptor_pool> pools;  ///< kept across reuses of the batch
    std::size_t pool_at = 0;             ///< the pool sets come from now; earlier ones are full
    std::uint64_t value = 0;
    std::uint32_t commands = 0;
  };

  /// Appends a pool to b: room for batch_commands sets of 8 descriptors of each type, or
  /// for `need` if one set needs more.
  void add_pool(batch& b, descriptor_counts need);

  void open_batch();

 private:
  VkDevice dev_;
  VkQueue queue_;
  std::uint32_t batch_commands_;
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  VkCommandPool commands_ = VK_NULL_HANDLE;
  std::unique_ptr<batch> current_;
  std::deque<std::unique_ptr<batch>> in_flight_;
  std::vector<std::unique_ptr<batch>> idle_;
  std::uint64_t submitted_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t epoch_ = 1;
  sequence_stats stats_;
};

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/impl/sequence.ipp"
#endif
