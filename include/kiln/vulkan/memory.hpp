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
#include "kiln/detail/config.hpp"
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
KILN_DECL std::size_t parse_bytes(const std::string& s, const char* what);

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
  memory_pool(VkDevice dev, const device_info& info, std::size_t block_size, std::size_t limit, bool texel_views = false);

  memory_pool(const memory_pool&) = delete;
  memory_pool& operator=(const memory_pool&) = delete;
  ~memory_pool();

  /// A memory type for storage buffers with the needed properties (host-visible means
  /// coherent too), preferring the wanted ones; nullopt when none fits.
  std::optional<std::uint32_t> find_type(bool need_device_local, bool need_host_visible, bool want_device_local,
                                         bool want_cached) const;

  /// Size class of a request: multiples of a quarter of its power of two up to 1 MiB
  /// (<= 25% waste, few distinct sizes to recycle), then 64 KiB granules.
  VkDeviceSize size_class(std::size_t bytes) const noexcept;

  /// A range of at least `bytes` in memory type `type`. Throws kiln::out_of_memory.
  allocation allocate(std::size_t bytes, std::uint32_t type);

  /// Returns a range (the GPU must be done with it). Dedicated allocations go back to
  /// the device at once; pooled ranges wait in their size class for the next request of
  /// that class (no tree work on the hot path) until a miss, a trim or the cap coalesces them.
  void free(const allocation& a) noexcept;

  /// Gives every wholly free block back to the device; returns the bytes released.
  std::size_t trim() noexcept;

  memory_stats stats() const noexcept;
  VkDeviceSize alignment() const noexcept { return alignment_; }

  /// Whether allocation a can be read through a uniform texel view.
  bool texel_viewable(const allocation& a) const noexcept {
    return texel_views_ && a && a.size / 16 <= info_.max_texel_buffer_elements;
  }

  /// The uniform texel view (R32G32B32A32_UINT) of allocation a's range, made on first use.
  /// Requires texel_viewable(a). Throws kiln::out_of_memory, or device_error.
  VkBufferView texel_view(const allocation& a);

 private:
  static constexpr VkDeviceSize granule = VkDeviceSize(64) << 10;

  VkBufferUsageFlags usage() const noexcept {
    return storage_usage | (texel_views_ ? VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT : 0);
  }

  static VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) noexcept { return (v + a - 1) / a * a; }
  static std::uint64_t recycle_key(VkDeviceSize size, std::uint32_t type) noexcept {
    return (std::uint64_t(type) << 48) | size;
  }

  void flush_recycled() noexcept;

  /// Puts a pooled range back into its block's free map, merged with its neighbours.
  void coalesce(const allocation& a) noexcept;

  VkDeviceSize block_size_for(VkDeviceSize size, std::uint32_t type) const noexcept;

  /// Best fit among the free ranges of `type`'s blocks; empty when none is large enough.
  allocation carve(VkDeviceSize size, std::uint32_t type);

  /// A new block (pooled or dedicated) of `size` bytes. Over the budget or out of device
  /// memory: trim and retry once (a pooled block then also shrinks to `least`, the
  /// request's own size), then kiln::out_of_memory.
  block* acquire(VkDeviceSize size, std::uint32_t type, bool dedicated, std::size_t requested, VkDeviceSize least);

  /// All-or-nothing: buffer, memory, bind, map. nullptr (and r set) on allocation failure.
  block* try_create(VkDeviceSize size, std::uint32_t type, bool dedicated, VkResult& r);

  void destroy(block& b) noexcept;

  void release_block(block* b) noexcept;

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

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/impl/memory.ipp"
#endif
