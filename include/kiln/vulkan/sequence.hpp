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

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/error.hpp"
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
  sequence(VkDevice dev, VkQueue queue, std::uint32_t family, std::uint32_t batch_commands)
      : dev_(dev), queue_(queue), batch_commands_(batch_commands) {
    VkSemaphoreTypeCreateInfo type{};
    type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
    type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    type.initialValue = 0;
    VkSemaphoreCreateInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
    si.pNext = &type;
    check(vkCreateSemaphore(dev_, &si, nullptr, &timeline_), "vkCreateSemaphore");
    VkCommandPoolCreateInfo pi{};
    pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT | VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
    pi.queueFamilyIndex = family;
    if (VkResult r = vkCreateCommandPool(dev_, &pi, nullptr, &commands_); r != VK_SUCCESS) {
      vkDestroySemaphore(dev_, timeline_, nullptr);
      check(r, "vkCreateCommandPool");
    }
  }

  sequence(const sequence&) = delete;
  sequence& operator=(const sequence&) = delete;

  /// The device must be idle (or lost): the context waits before destroying this.
  ~sequence() {
    auto destroy = [&](batch& b) { vkDestroyDescriptorPool(dev_, b.descriptors, nullptr); };
    if (current_) destroy(*current_);
    for (auto& b : in_flight_) destroy(*b);
    for (auto& b : idle_) destroy(*b);
    vkDestroyCommandPool(dev_, commands_, nullptr);  // frees every command buffer
    vkDestroySemaphore(dev_, timeline_, nullptr);
  }

  /// Opens a command in the current batch (starting one, or submitting a full one first):
  /// records the barrier its hazards need, marks its buffers, and returns the command
  /// buffer to record into. `descriptors` is how many storage-buffer descriptors the
  /// command will allocate from this batch (see allocate_set).
  VkCommandBuffer begin_command(std::span<const buffer_access> uses, std::uint32_t descriptors) {
    if (current_ && (current_->commands >= batch_commands_ ||
                     current_->descriptors_used + descriptors > descriptor_capacity())) {
      submit();
    }
    if (!current_) open_batch();
    batch& b = *current_;
    bool hazard = false;
    for (const auto& u : uses) {
      const access_state& s = *u.state;
      hazard = hazard || s.write_epoch == epoch_ || (u.write && s.read_epoch == epoch_);
    }
    if (hazard) {
      VkMemoryBarrier mb{};
      mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
      mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT;
      constexpr VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
      vkCmdPipelineBarrier(b.cmd, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
      ++epoch_;
      ++stats_.barriers;
    }
    const std::uint64_t value = recording_value();
    for (const auto& u : uses) {
      access_state& s = *u.state;
      if (u.write) {
        s.write_epoch = epoch_;
        s.write_value = value;
      } else {
        s.read_epoch = epoch_;
        s.read_value = value;
      }
    }
    ++b.commands;
    b.descriptors_used += descriptors;
    return b.cmd;
  }

  /// A descriptor set from the current batch's pool (call right after begin_command).
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout) {
    VkDescriptorSetAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    ai.descriptorPool = current_->descriptors;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    check(vkAllocateDescriptorSets(dev_, &ai, &set), "vkAllocateDescriptorSets");
    return set;
  }

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
  void submit() {
    if (!has_recorded()) return;
    batch& b = *current_;
    // Make this batch's writes visible to host reads once its value is signalled.
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(b.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    check(vkEndCommandBuffer(b.cmd), "vkEndCommandBuffer");
    const std::uint64_t wait = submitted_, signal = submitted_ + 1;
    VkTimelineSemaphoreSubmitInfo ts{};
    ts.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
    ts.waitSemaphoreValueCount = wait ? 1 : 0;
    ts.pWaitSemaphoreValues = &wait;
    ts.signalSemaphoreValueCount = 1;
    ts.pSignalSemaphoreValues = &signal;
    const VkPipelineStageFlags wait_stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.pNext = &ts;
    si.waitSemaphoreCount = wait ? 1 : 0;
    si.pWaitSemaphores = &timeline_;
    si.pWaitDstStageMask = &wait_stage;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &b.cmd;
    si.signalSemaphoreCount = 1;
    si.pSignalSemaphores = &timeline_;
    check(fault_injection::fail(fault_injection::queue_submit) ? VK_ERROR_DEVICE_LOST
                                                                 : vkQueueSubmit(queue_, 1, &si, VK_NULL_HANDLE),
          "vkQueueSubmit");
    b.value = signal;
    submitted_ = signal;
    ++epoch_;  // the semaphore orders this batch before the next one
    ++stats_.submits;
    in_flight_.push_back(std::move(current_));
  }

  /// Reads the semaphore and recycles finished batches; returns the completed value.
  std::uint64_t poll() {
    std::uint64_t v = 0;
    check(vkGetSemaphoreCounterValue(dev_, timeline_, &v), "vkGetSemaphoreCounterValue");
    completed_ = std::max(completed_, v);
    while (!in_flight_.empty() && in_flight_.front()->value <= completed_) {
      auto b = std::move(in_flight_.front());
      in_flight_.pop_front();
      check(vkResetCommandBuffer(b->cmd, 0), "vkResetCommandBuffer");
      check(vkResetDescriptorPool(dev_, b->descriptors, 0), "vkResetDescriptorPool");
      b->commands = 0;
      b->descriptors_used = 0;
      idle_.push_back(std::move(b));
    }
    return completed_;
  }

  /// Blocks until the timeline reaches v (which must have been submitted). Safe to call
  /// without the context's mutex: it touches only the semaphore. Waits in slices and
  /// gives up with kiln::device_error once `lost` is set: when another call has found the
  /// device lost, a value it will never signal must not hold this thread forever.
  void wait(std::uint64_t v, const std::atomic<bool>* lost = nullptr) const {
    VkSemaphoreWaitInfo wi{};
    wi.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
    wi.semaphoreCount = 1;
    wi.pSemaphores = &timeline_;
    wi.pValues = &v;
    constexpr std::uint64_t slice_ns = 100'000'000;
    for (;;) {
      const VkResult r = fault_injection::fail(fault_injection::semaphore_wait)
                             ? VK_ERROR_DEVICE_LOST
                             : vkWaitSemaphores(dev_, &wi, lost ? slice_ns : UINT64_MAX);
      if (r != VK_TIMEOUT) return check(r, "vkWaitSemaphores");
      if (lost->load(std::memory_order_relaxed)) {
        throw device_error("kiln::vulkan: vkWaitSemaphores: abandoned, the device was lost meanwhile");
      }
    }
  }

 private:
  struct batch {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkDescriptorPool descriptors = VK_NULL_HANDLE;
    std::uint64_t value = 0;
    std::uint32_t commands = 0;
    std::uint32_t descriptors_used = 0;
  };

  std::uint32_t descriptor_capacity() const noexcept { return batch_commands_ * max_bindings; }

  void open_batch() {
    if (!idle_.empty()) {
      current_ = std::move(idle_.back());
      idle_.pop_back();
    } else {
      auto b = std::make_unique<batch>();
      // each binding a storage buffer or (generated kernels' inputs) a uniform texel buffer
      const VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptor_capacity()},
                                             {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, descriptor_capacity()}};
      VkDescriptorPoolCreateInfo dp{};
      dp.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
      dp.maxSets = batch_commands_;
      dp.poolSizeCount = 2;
      dp.pPoolSizes = sizes;
      check(vkCreateDescriptorPool(dev_, &dp, nullptr, &b->descriptors), "vkCreateDescriptorPool");
      VkCommandBufferAllocateInfo ai{};
      ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
      ai.commandPool = commands_;
      ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      ai.commandBufferCount = 1;
      if (VkResult r = vkAllocateCommandBuffers(dev_, &ai, &b->cmd); r != VK_SUCCESS) {
        vkDestroyDescriptorPool(dev_, b->descriptors, nullptr);
        check(r, "vkAllocateCommandBuffers");
      }
      current_ = std::move(b);
    }
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    if (VkResult r = vkBeginCommandBuffer(current_->cmd, &bi); r != VK_SUCCESS) {
      idle_.push_back(std::move(current_));
      check(r, "vkBeginCommandBuffer");
    }
  }

 public:
  /// Most storage buffers one command binds (descriptor-pool sizing).
  static constexpr std::uint32_t max_bindings = 8;

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
