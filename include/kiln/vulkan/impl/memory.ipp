// kiln/vulkan/impl/memory.ipp — definitions of kiln/vulkan/memory.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/memory.hpp"

namespace kiln::detail::vk {

KILN_DECL std::size_t parse_bytes(const std::string& s, const char* what) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  std::string unit = lower(end ? std::string(end) : std::string());
  std::size_t mul = 1;
  if (unit == "" || unit == "b") mul = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") mul = std::size_t(1) << 10;
  else if (unit == "m" || unit == "mb" || unit == "mib") mul = std::size_t(1) << 20;
  else if (unit == "g" || unit == "gb" || unit == "gib") mul = std::size_t(1) << 30;
  else mul = 0;
  if (end == s.c_str() || mul == 0 || s.empty() || s[0] == '-') {
    throw error(std::string("kiln::vulkan: ") + what + "='" + s + "' is not a byte count (e.g. 512M, 2G, 1048576)");
  }
  // strtoull saturates at ULLONG_MAX on overflow; the unit must not wrap either
  if (v == ULLONG_MAX || v > std::numeric_limits<std::size_t>::max() / mul) {
    throw error(std::string("kiln::vulkan: ") + what + "='" + s + "' is beyond a 64-bit byte count");
  }
  return static_cast<std::size_t>(v) * mul;
}

KILN_DECL memory_pool::memory_pool(VkDevice dev, const device_info& info, std::size_t block_size, std::size_t limit, bool texel_views)
    : dev_(dev), info_(info), limit_(limit), texel_views_(texel_views && info.max_texel_buffer_elements > 0) {
  VkDeviceSize b = std::min<VkDeviceSize>(block_size, std::min(info.max_allocation_size, info.max_buffer_size));
  if (limit_) b = std::min<VkDeviceSize>(b, limit_);
  block_size_ = std::max<VkDeviceSize>(b / granule * granule, granule);
  alignment_ = std::max<VkDeviceSize>({VkDeviceSize(256), info.min_storage_buffer_offset_alignment, info.non_coherent_atom_size,
                                       texel_views_ ? info.min_texel_buffer_offset_alignment : 0});
  // Which memory types a storage buffer may live in (the same for every size here).
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = granule;
  bi.usage = usage();
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer probe = VK_NULL_HANDLE;
  check(vkCreateBuffer(dev_, &bi, nullptr, &probe), "vkCreateBuffer");
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(dev_, probe, &req);
  vkDestroyBuffer(dev_, probe, nullptr);
  type_bits_ = req.memoryTypeBits;
  alignment_ = std::max<VkDeviceSize>(alignment_, req.alignment);
}

KILN_DECL memory_pool::~memory_pool() {
  for (auto& b : blocks_) destroy(*b);
}

KILN_DECL std::optional<std::uint32_t> memory_pool::find_type(bool need_device_local, bool need_host_visible,
                                                              bool want_device_local, bool want_cached) const {
  std::optional<std::uint32_t> found;
  int found_score = -1;
  for (std::uint32_t i = 0; i < info_.memory_types.size(); ++i) {
    const auto& t = info_.memory_types[i];
    if (!(type_bits_ & (1u << i))) continue;
    if (need_device_local && !t.device_local) continue;
    if (need_host_visible && !(t.host_visible && t.host_coherent)) continue;
    // Host-visible memory the host need not see costs BAR space on a discrete GPU.
    const int score = (t.device_local == want_device_local ? 4 : 0) + (want_cached && t.host_cached ? 2 : 0) +
                      (!need_host_visible && !t.host_visible ? 1 : 0);
    if (score > found_score) {
      found = i;
      found_score = score;
    }
  }
  return found;
}

KILN_DECL VkDeviceSize memory_pool::size_class(std::size_t bytes) const noexcept {
  const VkDeviceSize n = std::max<VkDeviceSize>(bytes, 1);
  VkDeviceSize step;
  if (n <= (VkDeviceSize(1) << 20)) step = std::max<VkDeviceSize>(alignment_, std::bit_floor(n) / 4);
  else step = std::max<VkDeviceSize>(alignment_, VkDeviceSize(64) << 10);
  return align_up(n, step);
}

KILN_DECL allocation memory_pool::allocate(std::size_t bytes, std::uint32_t type) {
  const VkDeviceSize size = size_class(bytes);
  const VkDeviceSize max_single = std::min(info_.max_allocation_size, info_.max_buffer_size);
  if (size > max_single) {
    throw out_of_memory("kiln::vulkan: an allocation of " + std::to_string(bytes) + " bytes exceeds " + info_.label() +
                            "'s per-allocation limit of " + std::to_string(max_single) +
                            " bytes (maxMemoryAllocationSize / maxBufferSize); split the tensor",
                        bytes, static_cast<std::size_t>(max_single));
  }
  allocation a;
  if (size > block_size_ / 2) {
    block* b = acquire(size, type, true, bytes, size);
    b->used = size;
    a = allocation{b, 0, size};
  } else if (auto it = recycled_.find(recycle_key(size, type)); it != recycled_.end() && !it->second.empty()) {
    a = it->second.back();  // the common case: a range of this class was freed before
    it->second.pop_back();
    recycled_bytes_ -= size;
    ++stats_.hits;
  } else {
    a = carve(size, type);
    if (!a && recycled_bytes_) {
      flush_recycled();  // coalesce what the classes hold before asking the device
      a = carve(size, type);
    }
    if (a) {
      ++stats_.hits;
    } else {
      block* b = acquire(block_size_for(size, type), type, false, bytes, size);
      b->free.emplace(0, b->size);
      free_sizes_.emplace(b->size, b, 0);
      a = carve(size, type);
      KILN_ASSERT(a);
    }
  }
  stats_.in_use += size;
  stats_.peak = std::max(stats_.peak, stats_.in_use);
  ++stats_.live_allocations;
  return a;
}

KILN_DECL void memory_pool::free(const allocation& a) noexcept {
  if (!a) return;
  stats_.in_use -= a.size;
  --stats_.live_allocations;
  if (a.blk->dedicated) {
    release_block(a.blk);
    return;
  }
  if (recycled_bytes_ + a.size <= block_size_) {
    try {
      recycled_[recycle_key(a.size, a.blk->type)].push_back(a);
      recycled_bytes_ += a.size;
      return;
    } catch (const std::bad_alloc&) {
      // no room to remember it: coalesce it right away instead
    }
  }
  coalesce(a);
}

KILN_DECL std::size_t memory_pool::trim() noexcept {
  flush_recycled();
  std::size_t released = 0;
  std::vector<block*> idle;
  for (auto& b : blocks_) {
    if (!b->dedicated && b->used == 0) idle.push_back(b.get());
  }
  for (block* b : idle) {
    free_sizes_.erase({b->size, b, 0});
    released += b->reserved;
    release_block(b);
  }
  return released;
}

KILN_DECL memory_stats memory_pool::stats() const noexcept {
  memory_stats s = stats_;
  s.block_size = block_size_;
  s.limit = limit_;
  for (const auto& b : blocks_) (b->dedicated ? s.dedicated : s.blocks) += 1;
  return s;
}

KILN_DECL VkBufferView memory_pool::texel_view(const allocation& a) {
  KILN_ASSERT(texel_viewable(a));
  auto [it, fresh] = a.blk->texel_views.try_emplace(a.offset, VK_NULL_HANDLE);
  if (!fresh) return it->second;
  VkBufferViewCreateInfo vi{};
  vi.sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO;
  vi.buffer = a.blk->buffer;
  vi.format = VK_FORMAT_R32G32B32A32_UINT;
  vi.offset = a.offset;
  vi.range = a.size / 16 * 16;
  const VkResult r = vkCreateBufferView(dev_, &vi, nullptr, &it->second);
  if (r != VK_SUCCESS) {
    a.blk->texel_views.erase(it);
    if (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY) {
      throw out_of_memory("kiln::vulkan: cannot create a texel view of " + std::to_string(a.size) + " bytes on " +
                              info_.label() + ": " + call_failed("vkCreateBufferView", r),
                          0, 0);
    }
    check(r, "vkCreateBufferView");
  }
  return it->second;
}

KILN_DECL void memory_pool::flush_recycled() noexcept {
  for (auto& [key, ranges] : recycled_) {
    for (const auto& a : ranges) coalesce(a);
    ranges.clear();
  }
  recycled_bytes_ = 0;
}

KILN_DECL void memory_pool::coalesce(const allocation& a) noexcept {
  block* b = a.blk;
  if (auto v = b->texel_views.find(a.offset); v != b->texel_views.end()) {
    vkDestroyBufferView(dev_, v->second, nullptr);  // the range may come back in another size
    b->texel_views.erase(v);
  }
  b->used -= a.size;
  VkDeviceSize off = a.offset, size = a.size;
  auto next = b->free.lower_bound(off);
  if (next != b->free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      free_sizes_.erase({prev->second, b, prev->first});
      off = prev->first;
      size += prev->second;
      b->free.erase(prev);
    }
  }
  if (next != b->free.end() && off + size == next->first) {
    free_sizes_.erase({next->second, b, next->first});
    size += next->second;
    b->free.erase(next);
  }
  b->free.emplace(off, size);
  free_sizes_.emplace(size, b, off);
}

KILN_DECL VkDeviceSize memory_pool::block_size_for(VkDeviceSize size, std::uint32_t type) const noexcept {
  // A block takes at most a quarter of its heap (a 256 MiB BAR heap gets 64 MiB blocks).
  const VkDeviceSize heap = info_.heaps[info_.memory_types[type].heap].size;
  VkDeviceSize b = std::min<VkDeviceSize>(block_size_, std::max<VkDeviceSize>(heap / 4 / granule * granule, granule));
  // Under a budget, a last block may be smaller than usual rather than fail.
  if (limit_ && stats_.reserved + b > limit_ && limit_ > stats_.reserved) {
    b = std::max<VkDeviceSize>(size, (limit_ - stats_.reserved) / alignment_ * alignment_);
  }
  return std::max(b, size);
}

KILN_DECL allocation memory_pool::carve(VkDeviceSize size, std::uint32_t type) {
  for (auto it = free_sizes_.lower_bound({size, nullptr, 0}); it != free_sizes_.end(); ++it) {
    auto [fsize, b, off] = *it;
    if (b->type != type) continue;
    free_sizes_.erase(it);
    b->free.erase(off);
    if (fsize > size) {
      b->free.emplace(off + size, fsize - size);
      free_sizes_.emplace(fsize - size, b, off + size);
    }
    b->used += size;
    return allocation{b, off, size};
  }
  return {};
}

KILN_DECL block* memory_pool::acquire(VkDeviceSize size, std::uint32_t type, bool dedicated, std::size_t requested,
                                      VkDeviceSize least) {
  for (int attempt = 0;; ++attempt) {
    const bool over_budget = limit_ && stats_.reserved + size > limit_;
    VkResult r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
    block* b = nullptr;
    if (!over_budget) b = try_create(size, type, dedicated, r);
    if (b) {
      ++stats_.misses;
      return b;
    }
    if (attempt == 0) {
      const bool trimmed = trim() > 0;
      if (trimmed || size > least) {
        if (!trimmed) size = least;
        continue;
      }
    } else if (attempt == 1 && size > least) {
      size = least;
      continue;
    }
    const std::size_t heap = info_.heaps[info_.memory_types[type].heap].size;
    const std::size_t cap = limit_ ? std::min<std::size_t>(limit_, heap) : heap;
    const std::size_t available = cap > stats_.in_use ? cap - stats_.in_use : 0;
    std::string why = over_budget ? "the memory limit of " + std::to_string(limit_) + " bytes (KILN_VULKAN_MEMORY_LIMIT) is reached"
                                  : "the device has no memory left (" + std::string(result_name(r)) + ")";
    throw out_of_memory("kiln::vulkan: cannot allocate " + std::to_string(requested) + " bytes on " + info_.label() +
                            ": " + why + "; " + std::to_string(stats_.in_use) + " bytes in use, about " +
                            std::to_string(available) + " available after trimming the pool",
                        requested, available);
  }
}

KILN_DECL block* memory_pool::try_create(VkDeviceSize size, std::uint32_t type, bool dedicated, VkResult& r) {
  auto b = std::make_unique<block>();
  b->size = size;
  b->type = type;
  b->dedicated = dedicated;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = size;
  bi.usage = usage();
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  r = vkCreateBuffer(dev_, &bi, nullptr, &b->buffer);
  if (r != VK_SUCCESS) {
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) return nullptr;
    check(r, "vkCreateBuffer");
  }
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(dev_, b->buffer, &req);
  VkMemoryDedicatedAllocateInfo ded{};
  ded.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO;
  ded.buffer = b->buffer;
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.pNext = dedicated ? &ded : nullptr;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  if (req.size > info_.max_allocation_size || fault_injection::fail(fault_injection::memory_allocation)) {
    r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  } else {
    r = vkAllocateMemory(dev_, &ai, nullptr, &b->memory);
  }
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(dev_, b->buffer, nullptr);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) return nullptr;
    check(r, "vkAllocateMemory");
  }
  b->reserved = req.size;
  const char* call = "vkBindBufferMemory";
  VkResult br = vkBindBufferMemory(dev_, b->buffer, b->memory, 0);
  if (br == VK_SUCCESS && info_.memory_types[type].host_visible) {
    void* p = nullptr;
    call = "vkMapMemory";
    br = vkMapMemory(dev_, b->memory, 0, VK_WHOLE_SIZE, 0, &p);
    b->mapped = static_cast<std::byte*>(p);
  }
  if (br != VK_SUCCESS) {
    vkDestroyBuffer(dev_, b->buffer, nullptr);
    vkFreeMemory(dev_, b->memory, nullptr);
    check(br, call);
  }
  stats_.reserved += b->reserved;
  blocks_.push_back(std::move(b));
  return blocks_.back().get();
}

KILN_DECL void memory_pool::destroy(block& b) noexcept {
  for (const auto& [off, view] : b.texel_views) vkDestroyBufferView(dev_, view, nullptr);
  vkDestroyBuffer(dev_, b.buffer, nullptr);
  vkFreeMemory(dev_, b.memory, nullptr);  // unmaps implicitly
}

KILN_DECL void memory_pool::release_block(block* b) noexcept {
  stats_.reserved -= b->reserved;
  destroy(*b);
  auto it = std::find_if(blocks_.begin(), blocks_.end(), [&](const auto& p) { return p.get() == b; });
  if (it != blocks_.end()) blocks_.erase(it);
}

}  // namespace kiln::detail::vk
