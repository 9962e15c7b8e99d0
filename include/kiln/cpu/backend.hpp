// kiln/cpu/backend.hpp — kiln::cpu<Arch>: host memory, xsimd loops, kiln's thread pool.
// The context holds the thread count (KILN_NUM_THREADS, default: every core this process
// may run on) and counts
// the fused loops it runs; storage is 64-byte-aligned host memory, and a large block is
// 2 MiB-aligned and backed by transparent huge pages where Linux offers them on request
// (KILN_HUGE_PAGES=off turns that off): a streaming loop over many large operands then
// takes few TLB misses (kiln's fused gelu chain over 16M floats runs ~13% faster).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>  // madvise(MADV_HUGEPAGE)
#endif

#include <xsimd/xsimd.hpp>

#include "kiln/core/backend.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/profiler.hpp"
#include "kiln/cpu/scheduler.hpp"
#include "kiln/detail/constant_cache.hpp"
#include "kiln/detail/env.hpp"


namespace kiln {

/// The CPU backend; Arch is an xsimd architecture tag (default: the best this build
/// targets, e.g. xsimd::avx512bw under -march=native). Example: `kiln::context<kiln::cpu<>> ctx;`
template <class Arch = xsimd::default_arch>
struct cpu {
  using arch = Arch;
};

/// Thread count for a CPU context: `kiln::context<kiln::cpu<>> ctx{kiln::threads{2}};`
struct threads {
  int count;
};

namespace detail {

struct cpu_state {
  int num_threads = 1;
  bool huge_pages = true;  // large blocks on transparent huge pages (KILN_HUGE_PAGES)
  mutable std::atomic<std::uint64_t> kernels_launched{0};
  // Tensor memory, for kiln::memory_report (an allocation is rare next to statements).
  std::atomic<std::size_t> bytes_in_use{0}, bytes_peak{0}, allocations{0};
  profile_slot profile;  // KILN_PROFILE / kiln::profiling (core/profiler.hpp)

  void count_allocation(std::size_t bytes) noexcept {
    const std::size_t now = bytes_in_use.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    allocations.fetch_add(1, std::memory_order_relaxed);
    std::size_t peak = bytes_peak.load(std::memory_order_relaxed);
    while (now > peak && !bytes_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    if (profile.on.load(std::memory_order_relaxed)) [[unlikely]] {
      if (profiler* p = profile.get()) p->counter("host tensors", "bytes", double(now), nullptr, 0);
    }
  }
  void count_free(std::size_t bytes) noexcept { bytes_in_use.fetch_sub(bytes, std::memory_order_relaxed); }

  // Constants the ops keep per context (kiln::rope's frequencies). Last, so destroyed
  // first: its tensors do not own this state, and their storage reports its free to
  // the counters above.
  constant_cache constants;
};

/// One host allocation: 64-byte-aligned; from huge_page_bytes up (when the context allows
/// it), aligned to huge_page_bytes with its whole huge pages advised to the kernel as
/// MADV_HUGEPAGE. The advice is a hint: where THP is off it changes nothing.
class cpu_storage {
 public:
  static constexpr std::size_t alignment = 64;
  static constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

  cpu_storage(std::shared_ptr<cpu_state> c, std::size_t bytes) : ctx(std::move(c)), bytes_(bytes) {
    if (!bytes_) return;
    // round up so that full-vector loads of the last elements stay inside the block
    const std::size_t padded = (bytes_ + alignment - 1) / alignment * alignment;
    const bool huge = ctx && ctx->huge_pages && padded >= huge_page_bytes;
    align_ = huge ? huge_page_bytes : alignment;
    ptr_ = static_cast<std::byte*>(::operator new(padded, std::align_val_t{align_}, std::nothrow));
    if (!ptr_) {
      throw out_of_memory("kiln::cpu: allocating " + std::to_string(bytes_) + " bytes failed", bytes_, 0);
    }
#if defined(MADV_HUGEPAGE)
    if (huge) ::madvise(ptr_, padded / huge_page_bytes * huge_page_bytes, MADV_HUGEPAGE);
#endif
    if (ctx) ctx->count_allocation(bytes_);
  }
  cpu_storage(const cpu_storage&) = delete;
  cpu_storage& operator=(const cpu_storage&) = delete;
  ~cpu_storage() {
    if (ptr_) ::operator delete(ptr_, std::align_val_t{align_});
    if (ptr_ && ctx) ctx->count_free(bytes_);
  }

  std::byte* data() const noexcept { return ptr_; }
  std::size_t bytes() const noexcept { return bytes_; }

  std::shared_ptr<cpu_state> ctx;

 private:
  std::size_t bytes_ = 0;
  std::size_t align_ = alignment;
  std::byte* ptr_ = nullptr;
};

inline int default_thread_count() {
  if (const char* env = std::getenv("KILN_NUM_THREADS"); env && *env) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end != '\0' || v < 1 || v > 4096) {
      throw error(std::string("kiln::cpu: KILN_NUM_THREADS='") + env + "' is not a thread count (1..4096)");
    }
    return static_cast<int>(v);
  }
  return usable_cores();
}

template <class Arch, class T, class N>
void cpu_evaluate(const cpu_state& state, const tensor<T, cpu<Arch>>& out, const N& n);

template <class Op>
struct cpu_structural_kernel;  // cpu/structural.hpp

}  // namespace detail

template <class Arch>
struct backend_traits<cpu<Arch>> {
 private:
  static std::shared_ptr<detail::cpu_state> make(threads t, std::optional<bool> profile) {
    if (t.count < 1) throw error("kiln::cpu: thread count " + std::to_string(t.count) + " must be >= 1");
    auto s = std::make_shared<detail::cpu_state>();
    s->num_threads = t.count;
    s->huge_pages = !detail::env_off("KILN_HUGE_PAGES");
    s->profile.configure(profile, "cpu");
    return s;
  }

 public:
  using context_state = detail::cpu_state;
  using storage = detail::cpu_storage;
  static constexpr bool asynchronous = false;

  static std::shared_ptr<context_state> create() { return create(threads{detail::default_thread_count()}); }
  static std::shared_ptr<context_state> create(threads t) { return make(t, std::nullopt); }
  static std::shared_ptr<context_state> create(profiling p) { return make(threads{detail::default_thread_count()}, p.on); }
  static std::shared_ptr<context_state> create(threads t, profiling p) { return make(t, p.on); }

  static std::shared_ptr<storage> allocate(const std::shared_ptr<context_state>& ctx, std::size_t bytes) {
    return std::make_shared<storage>(ctx, bytes);
  }
  static void upload(storage& s, std::size_t offset, const void* src, std::size_t bytes) {
    std::memcpy(s.data() + offset, src, bytes);
  }
  static void download(const storage& s, std::size_t offset, void* dst, std::size_t bytes) {
    std::memcpy(dst, s.data() + offset, bytes);
  }
  static void synchronize(const context_state&) noexcept {}
  static std::string device_name(const context_state&) { return "cpu"; }

  /// Runs n into out (shapes and aliasing already checked) as one fused loop.
  template <class T, class N>
  static void evaluate(const tensor<T, cpu<Arch>>& out, const N& n) {
    detail::cpu_evaluate<Arch>(*out.storage()->ctx, out, n);
  }

  /// Tensor memory of a context (kiln::memory_report).
  static std::string memory_report(const context_state& s) {
    auto mib = [](std::size_t b) { return std::to_string(b >> 20) + "." + std::to_string(((b & ((1u << 20) - 1)) * 10) >> 20) + " MiB"; };
    return "cpu memory: " + mib(s.bytes_in_use.load()) + " in use by tensors, peak " + mib(s.bytes_peak.load()) + ", " +
           std::to_string(s.allocations.load()) + " allocations (one per tensor; no pool)\n" +
           "cpu kernels: " + std::to_string(s.kernels_launched.load()) + " fused loops run on up to " +
           std::to_string(s.num_threads) + " threads\n";
  }

  /// The kernel variant a structural node runs (kiln::kernel_variant), for ops whose
  /// kernel has several.
  template <class S>
    requires requires(const S& s) { detail::cpu_structural_kernel<typename S::op_type>::template variant<Arch>(s); }
  static std::string kernel_variant(const S& s) {
    return detail::cpu_structural_kernel<typename S::op_type>::template variant<Arch>(s);
  }
};

}  // namespace kiln
