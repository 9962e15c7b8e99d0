// kiln/vulkan/backend.hpp — kiln::vulkan, the GPU backend tag, and its backend_traits:
// context creation, allocation, host transfers and evaluate (expression -> one dispatch).
// Evaluate runs copies of any view, fills and f32 <-> f16 casts on the fixed kernels, and
// every other elementwise expression as one generated kernel (ops/elementwise.hpp).
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/backend.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/convert.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/device.hpp"
#include "kiln/vulkan/ops/copy.hpp"
#include "kiln/vulkan/ops/elementwise.hpp"

namespace kiln::detail::vk {

/// out = n for a planned tree holding one structural node (expr/plan.hpp): the kernel of
/// its op with n's prologue and epilogue spliced in (vulkan/ops/structural.hpp: the op's
/// vk_structural_kernel, specialised in its family's header).
template <class T, class B, class N>
void record_structural_kernel(const tensor<T, B>& out, const N& n);

/// The kernel a structural node runs, e.g. "vulkan.gemm.tiled 64x64" (vulkan/ops/structural.hpp).
template <class S>
std::string structural_variant(const S& s);

}  // namespace kiln::detail::vk

namespace kiln {

template <class T>
class host_read;

/// The Vulkan backend tag. Example: `kiln::context<kiln::vulkan> gpu{kiln::vulkan::device_index{0}};`
/// Constructing a context without a usable device throws kiln::device_unavailable with
/// the reason; kiln::vulkan::available() asks without throwing.
struct vulkan {
  using device_index = detail::vk::device_index;
  using options = detail::vk::context_options;
  using device_info = detail::vk::device_info;
  using device_type = detail::vk::device_type;
  using memory_stats = detail::vk::memory_stats;
  using stream_stats = detail::vk::sequence_stats;

  /// Every physical device the Vulkan loader reports, usable or not (empty when there is
  /// no loader, no driver or no device). Never throws for a missing device.
  static std::vector<device_info> devices();

  /// True when a context<vulkan> can be created with the default selection. Never throws.
  static bool available() noexcept;

  /// The device a context runs on.
  static const device_info& device(const context<vulkan>& ctx);
  /// Memory-pool counters of a context.
  static memory_stats memory(const context<vulkan>& ctx);
  /// Returns wholly free pool blocks to the device; the bytes released.
  static std::size_t trim(const context<vulkan>& ctx);
  /// Dispatch / barrier / submit counters of a context.
  static stream_stats stream(const context<vulkan>& ctx);
  using cache_stats = detail::vk::cache_stats;
  /// Kernel-cache counters of a context: hits and misses per level (memory, disk),
  /// shaderc compilations and the time they took, where the disk cache lives.
  static cache_stats cache(const context<vulkan>& ctx);
  /// Waits until the context's warm start is done: the kernels this program used in its
  /// last run, rebuilt from the disk cache on a background thread when the context opened
  /// (KILN_CACHE_PRELOAD=off disables it). Returns how many were rebuilt. Statements never
  /// need to call this; it is for tools and tests that want the warm state settled.
  static std::uint64_t wait_preloaded(const context<vulkan>& ctx);

  using peer_stats = detail::vk::peer_stats;
  /// Copies into ctx from other Vulkan contexts (kiln::copy_to): how many went device to
  /// device through shared memory and how many were staged through the host, their bytes,
  /// and the shared buffers ctx holds a side of.
  static peer_stats peers(const context<vulkan>& ctx);
  /// How kiln::copy_to(to, t) copies a tensor t of `from`: "" when device to device through
  /// memory the two share (VK_KHR_external_memory_fd on both, the same deviceUUID and
  /// driverUUID, neither context's options::external_memory off, and the shared buffer
  /// made, which happens on the first copy); else why it is staged through the host.
  /// Example: `if (auto why = kiln::vulkan::peer_refusal(gpu0, gpu1); !why.empty()) std::cerr << why;`
  static std::string peer_refusal(const context<vulkan>& from, const context<vulkan>& to);

  /// Validation-layer messages of this process so far (contexts created with validation).
  static std::vector<std::string> validation_messages();

  /// Starts copying t to the host and returns a handle to wait on; the GPU work that t
  /// depends on is submitted now. Example: `auto h = kiln::vulkan::read_async(y); ...; auto v = h.get();`
  template <class T>
  static host_read<T> read_async(const tensor<T, vulkan>& t);
};

/// A device -> host copy in flight (from kiln::vulkan::read_async).
template <class T>
class host_read {
 public:
  host_read(const host_read&) = delete;
  host_read& operator=(const host_read&) = delete;
  host_read(host_read&& o) noexcept
      : src_(std::move(o.src_)), ctx_(std::move(o.ctx_)), readback_(o.readback_), readback_state_(o.readback_state_),
        value_(o.value_), count_(o.count_) {
    o.readback_ = {};
  }
  ~host_read() {
    if (readback_) ctx_->release_readback(readback_, readback_state_);
  }

  /// True once the data is on its way no further (never blocks).
  bool ready() const { return count_ == 0 || ctx_->done(value_); }
  /// Blocks until the data can be read.
  void wait() const {
    if (count_) ctx_->wait(value_);
  }
  /// Waits, then returns the elements (row-major).
  std::vector<T> get() const {
    std::vector<T> out(count_);
    if (!count_) return out;
    wait();
    if (readback_) std::memcpy(out.data(), readback_.mapped(), count_ * sizeof(T));
    else src_.copy_to(std::span<T>(out));  // zero-copy: a memcpy from mapped memory
    return out;
  }

 private:
  friend struct vulkan;
  host_read() = default;

  tensor<T, vulkan> src_;
  std::shared_ptr<detail::vk::context_state> ctx_;
  detail::vk::allocation readback_;
  detail::vk::access_state readback_state_;
  std::uint64_t value_ = 0;
  std::size_t count_ = 0;
};

template <>
struct backend_traits<vulkan> {
  using context_state = detail::vk::context_state;
  using storage = detail::vk::storage;
  static constexpr bool asynchronous = true;

  static std::shared_ptr<context_state> create() { return create(vulkan::options{}); }
  static std::shared_ptr<context_state> create(vulkan::device_index d) {
    vulkan::options o;
    o.device = d.value;
    return create(o);
  }
  static std::shared_ptr<context_state> create(const vulkan::options& o) { return std::make_shared<context_state>(o); }

  static std::shared_ptr<storage> allocate(const std::shared_ptr<context_state>& ctx, std::size_t bytes) {
    return std::make_shared<storage>(ctx, bytes);
  }
  static void upload(storage& s, std::size_t offset, const void* src, std::size_t bytes) {
    if (bytes) s.ctx->write(s.alloc(), s.access(), offset, src, bytes);
  }
  static void download(const storage& s, std::size_t offset, void* dst, std::size_t bytes) {
    if (bytes) s.ctx->read(s.alloc(), s.access(), offset, dst, bytes);
  }
  static void synchronize(context_state& s) { s.synchronize(); }

  /// kiln::copy_to between two Vulkan contexts: copies `bytes` of src from src_offset to
  /// dst (from 0) device to device through memory the two contexts share, and returns
  /// true; false (and nothing done) when they share none, so that copy_to stages through
  /// the host. A failure throws the error's type with `what()` (the op, the tensor, both
  /// devices) in front of its message.
  template <class Describe>
  static bool copy_between(const storage& src, std::size_t src_offset, storage& dst, std::size_t bytes,
                           Describe&& what) {
    if (src.ctx == dst.ctx) return false;
    try {
      if (src.ctx->copy_to_peer(src.alloc(), src.access(), src_offset, *dst.ctx, dst.alloc(), dst.access(), 0, bytes)) {
        return true;
      }
    } catch (const out_of_memory& e) {
      throw out_of_memory(what() + ": " + e.what(), e.requested(), e.available());
    } catch (const device_unavailable& e) {
      throw device_unavailable(what() + ": " + e.what());
    } catch (const device_error& e) {
      throw device_error(what() + ": " + e.what());
    }
    dst.ctx->count_staged(bytes);
    return false;
  }
  static std::string device_name(const context_state& s) { return s.name(); }
  /// Profiling: waits for recorded work and reads its GPU times (context::profile()).
  static void collect_profile(context_state& s) { s.collect_profile(); }
  /// Pool, stream and kernel-cache statistics (kiln::memory_report).
  static std::string memory_report(const context_state& s) { return detail::vk::stats_report(s.memory(), s.stream(), s.cache()); }

  /// The kernel `out = e` runs for e's structural node s (kiln::kernel_variant): the
  /// variant the recording code picks, from the same selection.
  template <class S>
  static std::string kernel_variant(const S& s) {
    return detail::vk::structural_variant(s);
  }

  /// Runs n into out (shapes and aliasing already checked) as one dispatch.
  template <class T, class N>
  static void evaluate(const tensor<T, vulkan>& out, const N& n) {
    using detail::vk::record_copy_kernel;
    if constexpr (detail::contains_structural_v<N>) {
      detail::vk::record_structural_kernel(out, n);  // one structural kernel with its prologue and epilogue
    } else if constexpr (detail::kind_of_v<N> == detail::node_kind::leaf) {
      // Dense copies of 32/16-bit elements go through the generated kernel, whose vec4
      // loads and stores run several times faster than the element-wise copy.comp;
      // copy.comp materialises every other view, for every dtype.
      if (sizeof(T) >= 2 && out.is_contiguous() && n.t.is_contiguous() && n.t.shape() == out.shape() &&
          out.offset() % 4 == 0 && n.t.offset() % 4 == 0 && !std::is_same_v<T, bfloat16>) {
        detail::vk::record_elementwise_kernel(out, n);
      } else {
        record_copy_kernel(out, n.t);
      }
    } else if constexpr (detail::kind_of_v<N> == detail::node_kind::scalar) {
      detail::vk::record_fill_kernel(out, detail::to_storage<T>(static_cast<compute_t<T>>(n.value)));
    } else if constexpr (is_cast_of_leaf<N>::value) {
      record_copy_kernel(out, n.arg.t);
    } else {
      detail::vk::record_elementwise_kernel(out, n);  // one generated kernel
    }
  }

 private:
  template <class N>
  struct is_cast_of_leaf : std::false_type {};
  template <class To, class From>
  struct is_cast_of_leaf<detail::cast_node<To, detail::leaf_node<From, vulkan>>>
      : std::bool_constant<(std::is_same_v<To, half> && std::is_same_v<From, float>) ||
                           (std::is_same_v<To, float> && std::is_same_v<From, half>)> {};
};

template <class T>
host_read<T> vulkan::read_async(const tensor<T, vulkan>& t) {
  host_read<T> h;
  h.count_ = static_cast<std::size_t>(t.numel());
  if (!h.count_) return h;
  tensor<T, vulkan> src = t.is_contiguous() ? t : t.clone();  // a handle (tensor `=` would copy values)
  swap(h.src_, src);
  h.ctx_ = h.src_.storage()->ctx;
  const auto& s = *h.src_.storage();
  h.value_ = h.ctx_->read_begin(s.alloc(), s.access(), static_cast<std::size_t>(h.src_.offset()) * sizeof(T),
                                h.count_ * sizeof(T), h.readback_, h.readback_state_);
  return h;
}

}  // namespace kiln

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/impl/backend.ipp"
#endif
