// kiln/vulkan/memory.hpp — the device-memory sub-allocator.
// One pool per memory type: blocks (default 256 MiB, never above maxMemoryAllocationSize
// or maxBufferSize) each backed by one VkBuffer, carved into ranges rounded to size
// classes; large requests get a dedicated allocation. Out of memory (the device's, or the
// KILN_VULKAN_MEMORY_LIMIT budget): free blocks are trimmed, the request retried once,
// then kiln::out_of_memory names requested and available bytes.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <bit>  // std::bit_floor
#include <climits>  // ULLONG_MAX
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <new>  // std::bad_alloc
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/vulkan/device.hpp"

namespace kiln::detail::vk {

/// Counters of one context's device memory (bytes unless named otherwise).
struct memory_stats {
  std::size_t in_use = 0;            ///< held by live allocations (size classes, incl. deferred frees)
  std::size_t reserved = 0;          ///< obtained from vkAllocateMemory (blocks + dedicated)
  std::size_t peak = 0;              ///< highest in_use so far
  std::size_t hits = 0;              ///< allocations served from memory already reserved
  std::size_t misses = 0;            ///< allocations that needed vkAllocateMemory
  std::size_t live_allocations = 0;  ///< allocations not yet freed
  std::size_t blocks = 0;            ///< pooled blocks currently reserved
  std::size_t dedicated = 0;         ///< dedicated allocations currently reserved
  std::size_t block_size = 0;        ///< size of a new block
  std::size_t limit = 0;             ///< KILN_VULKAN_MEMORY_LIMIT / options::memory_limit (0: none)
};

/// "8M", "512MiB", "2G", "1048576" -> bytes; throws kiln::error on anything else.
inline std::size_t parse_bytes(const std::string& s, const char* what) {
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

/// One VkDeviceMemory with one VkBuffer over all of it, persistently mapped when
/// host-visible. A pooled block hands out ranges; a dedicated one is a single allocation.
struct block {
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize size = 0;      ///< usable bytes (the buffer's size)
  VkDeviceSize reserved = 0;  ///< bytes vkAllocateMemory gave (>= size)
  std::byte* mapped = nullptr;
  /// With texel views on: the R32G32B32A32_UINT uniform texel views of its ranges, by offset,
  /// made on first use (memory_pool::texel_view); each lives while its range is handed out
  /// or waits in its size class, and goes when the range coalesces or the block goes.
  std::map<VkDeviceSize, VkBufferView> texel_views;
  std::uint32_t type = 0;
  bool dedicated = false;
  VkDeviceSize used = 0;
  std::map<VkDeviceSize, VkDeviceSize> free;  ///< offset -> size, coalesced
};

/// A range of a block: what a tensor's storage owns.
struct allocation {
  block* blk = nullptr;
  VkDeviceSize offset = 0;
  VkDeviceSize size = 0;  ///< the size class (>= the bytes asked for)

  explicit operator bool() const noexcept { return blk != nullptr; }
  VkBuffer buffer() const noexcept { return blk->buffer; }
  std::byte* mapped() const noexcept { return blk->mapped ? blk->mapped + offset : nullptr; }
};

/// The sub-allocator of one device. Not thread-safe: the context's mutex guards it.
class memory_pool {
 public:
  static constexpr VkBufferUsageFlags storage_usage =
      VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;

  /// texel_views: allocations may be read through uniform texel views (texel_view), where
  /// the device has them.
  memory_pool(VkDevice dev, const device_info& info, std::size_t block_size, std::size_t limit, bool texel_views = false)
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

  memory_pool(const memory_pool&) = delete;
  memory_pool& operator=(const memory_pool&) = delete;
  ~memory_pool() {
    for (auto& b : blocks_) destroy(*b);
  }

  /// A memory type for storage buffers with the needed properties (host-visible means
  /// coherent too), preferring the wanted ones; nullopt when none fits.
  std::optional<std::uint32_t> find_type(bool need_device_local, bool need_host_visible, bool want_device_local,
                                         bool want_cached) const {
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

  /// Size class of a request: multiples of a quarter of its power of two up to 1 MiB
  /// (<= 25% waste, few distinct sizes to recycle), then 64 KiB granules.
  VkDeviceSize size_class(std::size_t bytes) const noexcept {
    const VkDeviceSize n = std::max<VkDeviceSize>(bytes, 1);
    VkDeviceSize step;
    if (n <= (VkDeviceSize(1) << 20)) step = std::max<VkDeviceSize>(alignment_, std::bit_floor(n) / 4);
    else step = std::max<VkDeviceSize>(alignment_, VkDeviceSize(64) << 10);
    return align_up(n, step);
  }

  /// A range of at least `bytes` in memory type `type`. Throws kiln::out_of_memory.
  allocation allocate(std::size_t bytes, std::uint32_t type) {
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

  /// Returns a range (the GPU must be done with it). Dedicated allocations go back to
  /// the device at once; pooled ranges wait in their size class for the next request of
  /// that class (no tree work on the hot path) until a miss, a trim or the cap coalesces them.
  void free(const allocation& a) noexcept {
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

  /// Gives every wholly free block back to the device; returns the bytes released.
  std::size_t trim() noexcept {
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

  memory_stats stats() const noexcept {
    memory_stats s = stats_;
    s.block_size = block_size_;
    s.limit = limit_;
    for (const auto& b : blocks_) (b->dedicated ? s.dedicated : s.blocks) += 1;
    return s;
  }
  VkDeviceSize alignment() const noexcept { return alignment_; }

  /// Whether allocation a can be read through a uniform texel view.
  bool texel_viewable(const allocation& a) const noexcept {
    return texel_views_ && a && a.size / 16 <= info_.max_texel_buffer_elements;
  }

  /// The uniform texel view (R32G32B32A32_UINT) of allocation a's range, made on first use.
  /// Requires texel_viewable(a). Throws kiln::out_of_memory, or device_error.
  VkBufferView texel_view(const allocation& a) {
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

 private:
  static constexpr VkDeviceSize granule = VkDeviceSize(64) << 10;

  VkBufferUsageFlags usage() const noexcept {
    return storage_usage | (texel_views_ ? VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT : 0);
  }

  static VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) noexcept { return (v + a - 1) / a * a; }
  static std::uint64_t recycle_key(VkDeviceSize size, std::uint32_t type) noexcept {
    return (std::uint64_t(type) << 48) | size;
  }

  void flush_recycled() noexcept {
    for (auto& [key, ranges] : recycled_) {
      for (const auto& a : ranges) coalesce(a);
      ranges.clear();
    }
    recycled_bytes_ = 0;
  }

  /// Puts a pooled range back into its block's free map, merged with its neighbours.
  void coalesce(const allocation& a) noexcept {
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

  VkDeviceSize block_size_for(VkDeviceSize size, std::uint32_t type) const noexcept {
    // A block takes at most a quarter of its heap (a 256 MiB BAR heap gets 64 MiB blocks).
    const VkDeviceSize heap = info_.heaps[info_.memory_types[type].heap].size;
    VkDeviceSize b = std::min<VkDeviceSize>(block_size_, std::max<VkDeviceSize>(heap / 4 / granule * granule, granule));
    // Under a budget, a last block may be smaller than usual rather than fail.
    if (limit_ && stats_.reserved + b > limit_ && limit_ > stats_.reserved) {
      b = std::max<VkDeviceSize>(size, (limit_ - stats_.reserved) / alignment_ * alignment_);
    }
    return std::max(b, size);
  }

  /// Best fit among the free ranges of `type`'s blocks; empty when none is large enough.
  allocation carve(VkDeviceSize size, std::uint32_t type) {
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

  /// A new block (pooled or dedicated) of `size` bytes. Over the budget or out of device
  /// memory: trim and retry once (a pooled block then also shrinks to `least`, the
  /// request's own size), then kiln::out_of_memory.
  block* acquire(VkDeviceSize size, std::uint32_t type, bool dedicated, std::size_t requested, VkDeviceSize least) {
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

  /// All-or-nothing: buffer, memory, bind, map. nullptr (and r set) on allocation failure.
  block* try_create(VkDeviceSize size, std::uint32_t type, bool dedicated, VkResult& r) {
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

  void destroy(block& b) noexcept {
    for (const auto& [off, view] : b.texel_views) vkDestroyBufferView(dev_, view, nullptr);
    vkDestroyBuffer(dev_, b.buffer, nullptr);
    vkFreeMemory(dev_, b.memory, nullptr);  // unmaps implicitly
  }

  void release_block(block* b) noexcept {
    stats_.reserved -= b->reserved;
    destroy(*b);
    auto it = std::find_if(blocks_.begin(), blocks_.end(), [&](const auto& p) { return p.get() == b; });
    if (it != blocks_.end()) blocks_.erase(it);
  }

  VkDevice dev_;
  const device_info& info_;
  std::size_t limit_ = 0;
  bool texel_views_ = false;
  VkDeviceSize block_size_ = 0;
  VkDeviceSize alignment_ = 256;
  std::uint32_t type_bits_ = 0;
  std::vector<std::unique_ptr<block>> blocks_;
  std::set<std::tuple<VkDeviceSize, block*, VkDeviceSize>> free_sizes_;  ///< (size, block, offset)
  std::unordered_map<std::uint64_t, std::vector<allocation>> recycled_;  ///< (type, class) -> freed ranges
  VkDeviceSize recycled_bytes_ = 0;
  memory_stats stats_;
};

}  // namespace kiln::detail::vk
