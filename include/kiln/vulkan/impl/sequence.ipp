// kiln/vulkan/impl/sequence.ipp — definitions of kiln/vulkan/sequence.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/sequence.hpp"

namespace kiln::detail::vk {

KILN_DECL sequence::sequence(VkDevice dev, VkQueue queue, std::uint32_t family, std::uint32_t batch_commands)
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

KILN_DECL sequence::~sequence() {
  auto destroy = [&](batch& b) {
    for (const auto& p : b.pools) vkDestroyDescriptorPool(dev_, p.pool, nullptr);
  };
  if (current_) destroy(*current_);
  for (auto& b : in_flight_) destroy(*b);
  for (auto& b : idle_) destroy(*b);
  vkDestroyCommandPool(dev_, commands_, nullptr);  // frees every command buffer
  vkDestroySemaphore(dev_, timeline_, nullptr);
}

KILN_DECL VkCommandBuffer sequence::begin_command(std::span<const buffer_access> uses) {
  if (current_ && current_->commands >= batch_commands_) submit();
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
  return b.cmd;
}

KILN_DECL VkDescriptorSet sequence::allocate_set(VkDescriptorSetLayout layout, descriptor_counts need) {
  batch& b = *current_;
  VkDescriptorSetAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  for (;; ++b.pool_at) {
    if (b.pool_at == b.pools.size()) add_pool(b, need);
    descriptor_pool& p = b.pools[b.pool_at];
    if (p.sets_left == 0 || p.left.storage < need.storage || p.left.texel < need.texel) continue;
    ai.descriptorPool = p.pool;
    const VkResult r = vkAllocateDescriptorSets(dev_, &ai, &set);
    // The counted room should suffice; should a driver still run out, the set goes to
    // the next pool (a fresh pool that fails is an error).
    if ((r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL) && p.sets_left < p.sets) {
      p.sets_left = 0;
      continue;
    }
    check(r, "vkAllocateDescriptorSets");
    --p.sets_left;
    p.left.storage -= need.storage;
    p.left.texel -= need.texel;
    return set;
  }
}

KILN_DECL void sequence::submit() {
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

KILN_DECL std::uint64_t sequence::poll() {
  std::uint64_t v = 0;
  check(vkGetSemaphoreCounterValue(dev_, timeline_, &v), "vkGetSemaphoreCounterValue");
  completed_ = std::max(completed_, v);
  while (!in_flight_.empty() && in_flight_.front()->value <= completed_) {
    auto b = std::move(in_flight_.front());
    in_flight_.pop_front();
    check(vkResetCommandBuffer(b->cmd, 0), "vkResetCommandBuffer");
    for (auto& p : b->pools) {
      check(vkResetDescriptorPool(dev_, p.pool, 0), "vkResetDescriptorPool");
      p.left = p.size;
      p.sets_left = p.sets;
    }
    b->pool_at = 0;
    b->commands = 0;
    idle_.push_back(std::move(b));
  }
  return completed_;
}

KILN_DECL void sequence::wait(std::uint64_t v, const std::atomic<bool>* lost) const {
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

KILN_DECL void sequence::add_pool(batch& b, descriptor_counts need) {
  const std::uint32_t base = batch_commands_ * 8;
  descriptor_pool p;
  p.size = {std::max(base, need.storage), std::max(base, need.texel)};
  p.left = p.size;
  p.sets = p.sets_left = batch_commands_;
  // each binding a storage buffer or (generated kernels' inputs) a uniform texel buffer
  const VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, p.size.storage},
                                         {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, p.size.texel}};
  VkDescriptorPoolCreateInfo dp{};
  dp.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  dp.maxSets = p.sets;
  dp.poolSizeCount = 2;
  dp.pPoolSizes = sizes;
  b.pools.reserve(b.pools.size() + 1);  // first: the push_back below cannot throw and leak the pool
  check(vkCreateDescriptorPool(dev_, &dp, nullptr, &p.pool), "vkCreateDescriptorPool");
  b.pools.push_back(p);
}

KILN_DECL void sequence::open_batch() {
  if (!idle_.empty()) {
    current_ = std::move(idle_.back());
    idle_.pop_back();
  } else {
    auto b = std::make_unique<batch>();
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = commands_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(dev_, &ai, &b->cmd), "vkAllocateCommandBuffers");
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

}  // namespace kiln::detail::vk
