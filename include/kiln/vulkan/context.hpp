// kiln/vulkan/context.hpp — one Vulkan device's state (what context<vulkan> shares with
// its tensors) and a tensor's storage. Every public member locks the context's mutex, so
// a context may be used from several threads; waits on the GPU happen outside the lock.
// A storage destroyed while the GPU may still use it is freed once that work completes.
// Checks a kernel makes on its data (kiln::embedding's ids) are reported at the next
// synchronisation that covers the kernel, never by a wait while recording.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/core/profiler.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/detail/constant_cache.hpp"
#include "kiln/vulkan/codegen/caps.hpp"
#include "kiln/vulkan/device.hpp"
#include "kiln/vulkan/memory.hpp"
#include "kiln/vulkan/profiler.hpp"
#include "kiln/vulkan/sequence.hpp"
#include "kiln/vulkan/shader_cache.hpp"

namespace kiln::detail::vk {

/// Picks a device by its index in kiln::vulkan::devices(): `context<vulkan> gpu{kiln::vulkan::device_index{0}};`
struct device_index {
  int value = 0;
};

/// Everything a Vulkan context can be told at construction; unset fields fall back to the
/// environment (KILN_DEVICE, KILN_VULKAN_VALIDATION, KILN_VULKAN_MEMORY_LIMIT).
struct context_options {
  std::optional<int> device;                 ///< index; default: KILN_DEVICE, else the best device
  std::optional<bool> validation;            ///< Khronos validation layer; default: KILN_VULKAN_VALIDATION
  std::optional<std::size_t> memory_limit;   ///< bytes the pool may reserve; default: KILN_VULKAN_MEMORY_LIMIT
  std::size_t block_size = std::size_t(256) << 20;  ///< pooled block size (clamped to the device's limits)
  bool zero_copy = true;                     ///< on unified memory, tensors live in mapped memory
  std::size_t staging_size = std::size_t(32) << 20;  ///< staging ring (devices without zero-copy)
  std::uint32_t batch_commands = 512;        ///< commands per submitted batch, at most
  /// Generated kernels read contiguous 32-bit inputs through uniform texel buffers (one
  /// view per memory block) instead of storage-buffer loads; default: KILN_VULKAN_TEXEL_READS
  /// (on/off), else on for CPU devices (lavapipe), whose texel fetches are SIMD gathers
  /// while storage-buffer loads go lane by lane: the fused gelu chain runs ~1.8x faster.
  std::optional<bool> texel_reads;
  /// Generated kernels run one step per invocation (no grid-stride loop) where one dispatch
  /// can cover the work; false: always the loop.
  bool single_step = true;
  /// Caps below the device's own limits (0: the device's), so that what kiln does on a
  /// smaller device runs on this one (tests): bytes of push constants, and storage-buffer
  /// and uniform-texel-buffer descriptors one kernel binds. vulkan::device(ctx) reports
  /// the capped values.
  std::uint32_t max_push_constants = 0;
  std::uint32_t max_storage_buffers = 0;
  std::uint32_t max_texel_buffers = 0;
  /// Records every kernel with its GPU time (kiln::profile_table); default: KILN_PROFILE,
  /// or on when KILN_TRACE names a trace file.
  std::optional<bool> profile;
  /// Profiling: GPU timestamps on one call in n of each kernel; default:
  /// KILN_PROFILE_GPU_EVERY, else 1 (every call), but 16 on CPU devices: lavapipe spends
  /// ~25-45 us on each timed dispatch, as long as a small kernel itself, so timing every
  /// call would both slow the program and distort what it measures.
  std::optional<std::uint32_t> profile_gpu_every;
  /// Copies from another Vulkan context (kiln::copy_to) go device to device through memory
  /// both contexts share (VK_KHR_external_memory_fd, opaque fd handles), where both
  /// contexts allow it and both devices can (the extension, and the same deviceUUID and
  /// driverUUID: two contexts on one device, or a device group); false: such copies are
  /// always staged through the host, and the extension is not enabled on the device.
  /// Default: KILN_VULKAN_EXTERNAL_MEMORY (on/off), else on.
  std::optional<bool> external_memory;
  /// Bytes of the memory a pair of contexts shares for those copies, at most (two halves:
  /// the sender fills one while the receiver reads the other). A pair starts at twice the
  /// copy's size rounded up to a power of two (1 MiB at least) and grows with later copies.
  std::size_t peer_buffer_size = std::size_t(64) << 20;
};

/// Copies into one context from another Vulkan context (kiln::copy_to), counted on the
/// receiving context, and the memory it shares with other contexts for them.
struct peer_stats {
  std::uint64_t external_copies = 0;  ///< device to device through shared memory
  std::uint64_t external_bytes = 0;
  std::uint64_t staged_copies = 0;  ///< staged through the host (no shared memory for the pair)
  std::uint64_t staged_bytes = 0;
  std::size_t links = 0;       ///< shared buffers this context holds a side of (sending or receiving)
  std::size_t link_bytes = 0;  ///< their bytes (outside the pool and its memory limit)
};

/// A queue family ownership transfer of [offset, offset + n) of buf (release: to
/// VK_QUEUE_FAMILY_EXTERNAL; acquire: from it). Memory another device uses must change
/// hands this way, or its contents are undefined for the new owner.
KILN_DECL void ownership_barrier(VkCommandBuffer cb, VkBuffer buf, VkDeviceSize offset, VkDeviceSize n,
                                 std::uint32_t from_family, std::uint32_t to_family, VkAccessFlags src_access,
                                 VkAccessFlags dst_access);

/// A transfer buffer of `size` bytes whose memory may be exported or imported as an opaque
/// fd (a shared buffer's side, peer_link). Throws kiln::device_error.
KILN_DECL VkBuffer external_buffer(VkDevice dev, VkDeviceSize size);

/// Memory two contexts share for copies from one (the sender, which allocates and exports
/// it) to the other (the receiver, which imports it): one dedicated allocation that each
/// sees through a VkBuffer of its own, used as two halves. Each context destroys its own
/// side with its own device (the payload lives until both are gone); a link either side
/// let go of is `dead` and is never used again.
struct peer_link {
  struct side {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    access_state access;          ///< guarded by the owning context's mutex
    bool released[2] = {false, false};  ///< half i was released to VK_QUEUE_FAMILY_EXTERNAL
  };
  std::mutex mutex;  ///< one copy at a time through the link
  VkDeviceSize size = 0;
  std::uint32_t memory_type = 0;
  side send, receive;
  std::uint64_t received[2] = {0, 0};  ///< the receiver's timeline value after which it has read half i
  std::atomic<bool> dead{false};
};

/// What device d lets generated kernels use (codegen/caps.hpp); texel_reads: the
/// context's choice. KILN_VULKAN_COOPMAT=0 turns cooperative matrices off.
KILN_DECL device_caps make_device_caps(const device_info& d, bool texel_reads);

/// The state one Vulkan context and all its tensors share.
class context_state {
 public:
  /// One buffer a kernel binds: the allocation, its hazard record, and whether it is written.
  struct binding {
    const allocation* alloc;
    access_state* state;
    bool write;
    bool texel = false;  ///< bound as a uniform texel view of its range (kernel_spec::texel_bindings)
  };

  /// Workgroups of one dispatch along x, y and z.
  struct grid {
    std::uint32_t count[3] = {1, 1, 1};
  };

  explicit context_state(const context_options& opt);

  context_state(const context_state&) = delete;
  context_state& operator=(const context_state&) = delete;

  /// Waits for the GPU, then frees everything (release_device). Never throws: on a lost
  /// device the wait returns VK_ERROR_DEVICE_LOST at once, and a failure here has no one
  /// to report to.
  ~context_state();

  mutable std::atomic<std::uint64_t> kernels_launched{0};
  /// KILN_PROFILE / options::profile (core/profiler.hpp). Declared before the members
  /// that feed it, so it outlives them and writes a KILN_TRACE file last.
  profile_slot profile;
  /// Constants the ops keep on this device (kiln::rope's frequencies; detail/constant_cache.hpp).
  /// Its tensors do not own this state: the destructor empties it before the device goes.
  constant_cache constants;

  const device_info& info() const noexcept { return info_; }
  std::string name() const { return "vulkan:" + std::to_string(info_.index); }
  bool validation() const noexcept { return validation_; }
  /// True when tensors live in mapped device memory (host transfers are plain memcpy).
  bool zero_copy() const noexcept { return zero_copy_; }
  /// True when generated kernels read contiguous 32-bit inputs through texel views.
  bool texel_reads() const noexcept { return texel_reads_; }
  /// Whether generated kernels may run one step per invocation (context_options::single_step).
  bool single_step() const noexcept { return single_step_; }
  /// What the device lets every kernel family use, built once (make_device_caps).
  const device_caps& caps() const noexcept { return caps_; }
  /// Whether a kernel may read allocation a through a uniform texel view.
  bool texel_viewable(const allocation& a) const noexcept { return pool_->texel_viewable(a); }
  VkDevice device() const noexcept { return device_.dev; }
  VkPhysicalDevice physical_device() const noexcept { return physical_; }
  VkQueue queue() const noexcept { return queue_; }
  std::uint32_t tensor_memory_type() const noexcept { return tensor_type_; }
  /// A number no other context of this process has (peer links are keyed by it).
  std::uint64_t serial() const noexcept { return serial_; }
  /// Copies from and to other contexts may go through shared memory (context_options::external_memory
  /// and the device's VK_KHR_external_memory_fd).
  bool external_memory() const noexcept { return external_memory_; }

  // ---- copies between contexts ----------------------------------------------------------

  /// "" when copies from this context to `to` go device to device through shared memory;
  /// else why they are staged through the host (naming both devices).
  std::string peer_refusal(const context_state& to) const;

  /// Copies `bytes` from (a, s) at `offset` into (b, bs) at `b_offset` on context `to`
  /// through memory the two share (made on first use, then kept for the pair): this
  /// context copies a chunk into one half and waits for it, `to` copies it out of that
  /// half while this context fills the other; ownership passes through
  /// VK_QUEUE_FAMILY_EXTERNAL each way. Returns once `to` has the copies recorded and
  /// submitted (its later work is ordered after them). False, with nothing done, when
  /// the pair shares no memory (peer_refusal, or making the shared buffer failed): the
  /// caller stages through the host. Throws kiln::device_error when a submit or a wait fails.
  bool copy_to_peer(const allocation& a, access_state& s, std::size_t offset, context_state& to, const allocation& b,
                    access_state& bs, std::size_t b_offset, std::size_t bytes);

  /// Counts a copy from another Vulkan context that was staged through the host.
  void count_staged(std::size_t bytes) noexcept;
  peer_stats peers() const;

  // ---- memory -------------------------------------------------------------------------

  /// A tensor allocation. When the pool is exhausted while freed tensors still wait for
  /// the GPU, waits for that work and retries before giving up with kiln::out_of_memory.
  allocation allocate(std::size_t bytes) { return allocate_in(bytes, tensor_type_); }

  /// Frees `a` now if the GPU is done with it, else once the last use completes.
  void release(const allocation& a, const access_state& s) noexcept;

  memory_stats memory() const;
  /// Gives wholly free blocks back to the device; returns the bytes released.
  std::size_t trim();
  sequence_stats stream() const;
  std::size_t compilations() const;
  cache_stats cache() const;
  /// Waits for the GPU work recorded so far and adds its GPU times to the profile.
  void collect_profile();

  /// Waits for the warm-start thread (the kernels this program used last time, rebuilt in
  /// the background); the number it rebuilt. Takes no context lock: other threads go on.
  std::uint64_t wait_preloaded() const;

  // ---- kernels ------------------------------------------------------------------------

  /// Invocations per workgroup of every kernel (specialisation constant 0).
  std::uint32_t workgroup_size() const noexcept { return workgroup_size_; }

  /// Workgroups for a kernel of the fixed-kernel shape (elements_per_invocation elements
  /// per invocation, grid-stride loop beyond the device's group-count limit).
  std::uint32_t groups_for(std::uint64_t elements) const noexcept;

  /// The compiled pipeline of k (compiling it now if needed): warms the cache, and lets
  /// tools record k themselves. Throws kiln::shader_error.
  const pipeline& prepare(const kernel_spec& k);

  /// Records one dispatch of kernel k over a grid of `groups` workgroups (x, y, z; each at
  /// most the device's maxComputeWorkGroupCount, else kiln::device_error) with the given
  /// buffers; see the one-dimensional overload below.
  void dispatch(const kernel_spec& k, std::span<const binding> buffers, std::span<const std::byte> push,
                const grid& groups);

  /// Records one dispatch of kernel k over `groups` workgroups with the given buffers
  /// (binding i = buffers[i]) and parameters: push constants, or, for a kernel with a
  /// parameter buffer (k.params_bytes), that buffer's contents, which go to a range of the
  /// pool bound after the buffers and freed once the dispatch completes. The barrier
  /// before it, if any, follows from the buffers' hazards. This is the one path every
  /// kernel, fixed or generated, takes to the GPU.
  void dispatch(const kernel_spec& k, std::span<const binding> buffers, std::span<const std::byte> push,
                std::uint32_t groups) {
    dispatch_grid(k, buffers, push, grid{{groups, 1, 1}});
  }

  /// What a kernel's index check reports: the message of kiln::index_error for the first
  /// failing position (flattened) and the value found there.
  using check_report = std::function<std::string(std::uint64_t position, std::int64_t value)>;

  /// Word 0 of a check buffer while no failure is recorded.
  static constexpr std::uint32_t check_none = 0xFFFFFFFFu;

  /// dispatch, with a check buffer of `words` 32-bit words (host-visible; word 0 set to
  /// check_none) bound after `buffers`: the kernel lowers word 0 to each position it finds
  /// out of range (atomicMin, so the first wins) and writes the value there to word
  /// 1 + position (one writer a position: no race). Recording never waits for the GPU;
  /// the next synchronisation that covers the dispatch (synchronize, read, wait) reads
  /// the buffer and throws kiln::index_error(report(position, value)) when it holds a
  /// failure. Each check is reported once; the context stays usable after the throw.
  void dispatch_checked(const kernel_spec& k, std::span<const binding> buffers, std::span<const std::byte> push,
                        const grid& groups, std::uint64_t words, check_report report);

  /// Workgroups a kernel needs for `count` workgroup-sized tasks (rows, tiles), laid out
  /// as x * y with x at most the device's maxComputeWorkGroupCount[0]: a kernel numbers
  /// its task gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x and skips numbers
  /// from count on. Throws kiln::device_error beyond x * y (2^32 tasks on most devices).
  grid grid_for(std::uint64_t count) const;

 private:
  /// A check in flight (dispatch_checked): its buffer, the batch that writes it, its report.
  struct pending_check {
    allocation buffer;
    std::uint64_t words = 0;
    std::uint64_t value = 0;
    check_report report;
  };

  /// Throws kiln::device_error for a grid past the device's maxComputeWorkGroupCount.
  void check_groups(const kernel_spec& k, const grid& groups) const;

  /// `check`, when set, is the check whose buffer is the last of `buffers`: kept in
  /// checks_ once the dispatch is recorded, freed if it is not.
  void dispatch_grid(const kernel_spec& k, std::span<const binding> buffers, std::span<const std::byte> push,
                     const grid& groups, pending_check* check = nullptr);

 public:
  // ---- host transfers -----------------------------------------------------------------

  /// Host -> device. Zero-copy: waits for the GPU's last use of the buffer, then memcpy.
  /// Otherwise: memcpy into the staging ring and a recorded copy (returns at once).
  void write(const allocation& a, access_state& s, std::size_t offset, const void* src, std::size_t bytes);

  /// Device -> host: waits only for the work that writes this buffer. Throws
  /// kiln::index_error for a failed check that the wait covers (dispatch_checked).
  void read(const allocation& a, access_state& s, std::size_t offset, void* dst, std::size_t bytes);

  /// Starts a device -> host copy into host-visible memory and returns the timeline value
  /// after which `readback` holds the bytes (readback is a.mapped() itself on zero-copy).
  std::uint64_t read_begin(const allocation& a, access_state& s, std::size_t offset, std::size_t bytes,
                           allocation& readback, access_state& readback_state);

  /// Frees a readback allocation from read_begin.
  void release_readback(const allocation& a, const access_state& s) noexcept { release(a, s); }

  // ---- the sides of a peer link (copy_to_peer) ------------------------------------------

  /// Receiver: imports `fd` (owned by this call: Vulkan takes it, or it is closed) as the
  /// receive side of `link`. Throws kiln::device_error.
  void import_side(const std::shared_ptr<peer_link>& link, int fd);

  /// Receiver: records (acquire, copy out of half h into b, release) and submits; the
  /// timeline value after which the half is read.
  std::uint64_t receive_half(peer_link& link, int h, const allocation& b, access_state& bs, std::size_t b_offset,
                             std::size_t n);

  // ---- synchronisation ----------------------------------------------------------------

  /// Submits what is recorded (work starts without anyone waiting).
  void flush();

  /// Blocks until timeline value v is complete (submitting it first if needed). Throws
  /// kiln::index_error for a failed check that the wait covers (dispatch_checked).
  void wait(std::uint64_t v);

  /// True when timeline value v is complete (never blocks).
  bool done(std::uint64_t v);

  /// Waits for everything recorded so far. Throws kiln::index_error for a failed check
  /// (dispatch_checked): the first recorded of those the wait covers.
  void synchronize();

  /// Marks the device lost: later work is refused with `why` in the message; tensors can
  /// still be destroyed and the context destructs without waiting on the GPU.
  void mark_lost(const std::string& why) noexcept;
  bool lost() const noexcept { return lost_; }

  /// Waits for the GPU, then frees the device and everything on it, the instance last.
  /// The destructor's work, which release_at_exit also does for every live context.
  /// Afterwards the context refuses new work (ensure_alive, once marked lost), and
  /// destroying it or its tensors calls no Vulkan function. Idempotent; never throws.
  void release_device() noexcept;

 private:
  struct device_owner {
    VkDevice dev = VK_NULL_HANDLE;
    device_owner() = default;
    device_owner(const device_owner&) = delete;
    device_owner& operator=(const device_owner&) = delete;
    ~device_owner();
    void destroy() noexcept;
  };

  // ---- contexts still alive at exit ----------------------------------------------------
  //
  // A context that outlives main (held by a static, or leaked) would otherwise free its
  // device in a static destructor. When that static was constructed before the driver was
  // loaded, its destructor runs after the driver's own exit handlers (they run in reverse
  // order of registration), and the NVIDIA driver then crashes the process in
  // vkDeviceWaitIdle / vkDestroyDevice (measured on an H200). So each context enlists
  // here, and an exit handler registered after the device was opened (hence after the
  // driver registered its own) releases every context still alive while the driver is
  // loaded; their destructors later find nothing to free. The handler is registered
  // again whenever a context is created with no other alive: the loader unloads the
  // driver with the last instance, and a reloaded driver registers its handlers anew.

  struct live_contexts {
    std::mutex mutex;
    std::vector<context_state*> states;
  };
  /// Never destroyed: a context may outlive every other static.
  static live_contexts& registry();
  static void enlist(context_state* s);
  static void delist(context_state* s) noexcept;
  static void release_at_exit() noexcept;

  /// A ring of host-visible memory for staged transfers; each range is reusable once the
  /// timeline value of the copy that used it completes.
  struct staging_ring {
    allocation alloc;
    VkDeviceSize head = 0;
    struct range {
      VkDeviceSize begin, end;
      std::uint64_t value;
    };
    std::deque<range> in_use;
  };

  void ensure_alive() const;

  /// Runs f; a kiln::device_error from it leaves recorded or submitted work in an unknown
  /// state, so the context is marked lost before the error propagates.
  template <class F>
  void fatal_on_failure(F&& f) {
    try {
      f();
    } catch (const device_error& e) {
      mark_lost(e.what());
      throw;
    }
  }

  allocation allocate_in(std::size_t bytes, std::uint32_t type);

  /// The link to `to` (links_mutex_ held) holding at least `bytes` (or the largest allowed),
  /// made or grown now; nullptr when the pair cannot share memory (the reason goes to
  /// link_failures_).
  std::shared_ptr<peer_link> link_to(context_state& to, std::size_t bytes);

  /// Sender: a new link of `size` bytes, its send side made and exported to `to`.
  std::shared_ptr<peer_link> make_link(context_state& to, VkDeviceSize size);

  /// Sender: records (acquire, copy a into half h, release), submits and waits for it.
  void send_half(peer_link& link, int h, const allocation& a, access_state& s, std::size_t offset, std::size_t n);

  /// Destroys one side of a link (lock held; the GPU done with it).
  void destroy_side(peer_link::side& d) noexcept;

  /// (lock held) Frees the sides of dead links whose GPU work is complete.
  void sweep_links_locked() noexcept;

  /// Profiling: the pool's size after an allocation, for the trace's counter track (lock held).
  allocation count_memory(allocation a);

  void submit_locked();

  void poll_locked();

  /// (lock held) Takes every check the completed work covers; the message of the first
  /// recorded that failed, if one did.
  std::optional<std::string> take_failed_checks_locked();

  /// (lock held) Throws kiln::index_error for the first failed check the completed work
  /// covers (take_failed_checks_locked).
  void report_failed_checks_locked();

  /// Waits for v with the lock released during the wait (other threads keep recording).
  void wait_locked(std::unique_lock<std::mutex>& lock, std::uint64_t v);

  /// A ring range of n bytes (lock held), waiting for the copies that last used it.
  VkDeviceSize ring_reserve(std::unique_lock<std::mutex>& lock, std::size_t n);

  /// Marks ring bytes [at, at + n) busy until the batch that just recorded their copy
  /// completes (recorded first: recording may have submitted a full batch and opened the next).
  void ring_commit(VkDeviceSize at, std::size_t n);

  /// Records a buffer copy; `to_tensor` says which side is the tracked tensor buffer.
  void record_copy(const allocation& src, VkDeviceSize src_offset, const allocation& dst, access_state& s,
                   VkDeviceSize dst_offset, std::size_t bytes, bool to_tensor);

  /// dispatch's recording (lock held): `params`, when set, is bound after the buffers.
  void record_dispatch(const kernel_spec& k, std::span<const binding> buffers, std::span<const std::byte> push,
                       const grid& groups, const allocation& params, access_state& params_state);

  /// Profiling (lock held): the timestamp before a dispatch of k into cb (batch `batch`),
  /// attributed to the statement this thread is running (or, outside one, to a record of
  /// its own). Returns the timer, whose after() follows the dispatch.
  gpu_timer* profiled_dispatch(const kernel_spec& k, VkCommandBuffer cb, std::uint64_t batch);

  /// What the batch being recorded last bound (see dispatch).
  struct bound_state {
    std::uint64_t batch = 0;
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    std::vector<VkDescriptorBufferInfo> infos;  ///< one a binding
  };

  device_info info_;
  bool validation_ = false;
  bool texel_reads_ = false;
  bool single_step_ = true;
  device_caps caps_;
  bool zero_copy_ = false;
  std::unique_ptr<instance> instance_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  device_owner device_;
  VkQueue queue_ = VK_NULL_HANDLE;
  std::unique_ptr<memory_pool> pool_;
  std::unique_ptr<sequence> seq_;
  std::unique_ptr<shader_cache> kernels_;
  std::unique_ptr<gpu_timer> timer_;  ///< made when a profiled dispatch is first recorded
  std::uint32_t tensor_type_ = 0;
  std::uint32_t staging_type_ = 0;
  std::size_t staging_size_ = 0;
  staging_ring ring_;
  std::vector<std::pair<std::uint64_t, allocation>> deferred_;  ///< (last use, range) awaiting the GPU
  std::vector<pending_check> checks_;  ///< in recording order; passed ones are dropped as they complete
  bound_state bound_;
  mutable std::mutex mutex_;
  mutable std::mutex lost_mutex_;
  std::atomic<bool> lost_{false};
  bool drained_ = false;  ///< lost, and the device idled since (mutex_)
  std::string lost_reason_;
  std::uint32_t workgroup_size_ = 0;  ///< shader_cache's, kept: it outlives release_device
  // copies between contexts
  static inline constinit std::atomic<std::uint64_t> next_serial_{1};
  std::uint64_t serial_ = 0;
  bool external_memory_ = false;
  std::size_t peer_buffer_size_ = 0;
  PFN_vkGetMemoryFdKHR get_memory_fd_ = nullptr;
  mutable std::mutex links_mutex_;  ///< making links (taken before mutex_ and the receiver's; never inside them)
  std::map<std::uint64_t, std::shared_ptr<peer_link>> links_out_;  ///< as sender, by the receiver's serial (links_mutex_)
  std::map<std::uint64_t, std::string> link_failures_;             ///< receivers no link could be made to, and why (links_mutex_)
  std::vector<std::shared_ptr<peer_link>> links_in_;               ///< as receiver (mutex_)
  peer_stats peer_stats_;                                          ///< counters (mutex_)
  std::uint32_t elements_per_invocation_ = 0;
};

/// One tensor allocation on a Vulkan device. Keeps its context alive; when destroyed
/// while the GPU may still use it, the range returns to the pool after that work.
class storage {
 public:
  storage(std::shared_ptr<context_state> c, std::size_t bytes);
  storage(const storage&) = delete;
  storage& operator=(const storage&) = delete;
  ~storage();

  std::size_t bytes() const noexcept { return bytes_; }
  /// Host pointer to the bytes on zero-copy contexts, else nullptr. Reading or writing it
  /// does not wait for the GPU: use kiln's transfers unless you synchronised yourself.
  std::byte* mapped() const noexcept { return ctx->zero_copy() ? alloc_.mapped() : nullptr; }
  const allocation& alloc() const noexcept { return alloc_; }
  /// The buffer's hazard record; the context's mutex guards it.
  access_state& access() const noexcept { return access_; }

  std::shared_ptr<context_state> ctx;

 private:
  std::size_t bytes_;
  allocation alloc_;
  mutable access_state access_;
};

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/impl/context.ipp"
#endif
