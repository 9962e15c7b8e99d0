// kiln/cpu/scheduler.hpp — the CPU backend's threads: one pool per process, where the
// calling thread works too and work is claimed in chunks from an atomic counter, so that
// a worker the OS has not scheduled (a core busy with another process) never stalls a
// statement: the caller waits only for chunks some thread has actually started. A
// thread claims a batch of chunks at a time into a range of its own, and a thread that
// runs out takes half of the largest range left: a worker preempted in the middle of a
// batch holds up only the one chunk it is running.
//
// Also per-thread scratch memory, allocated once and reused, for the kernels that need
// private buffers (GEMM packing).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>  // _mm_pause
#endif

#include "kiln/core/error.hpp"
#include "kiln/core/profiler.hpp"  // profile_kernel_threads
#include "kiln/core/shape.hpp"
#include "kiln/detail/config.hpp"

namespace kiln::detail {

/// The number of cores this process may run on (its affinity mask, so that `taskset` and
/// container CPU sets are respected), at least 1.
KILN_DECL int usable_cores();

inline void cpu_relax() noexcept {
#if defined(__SSE2__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Which nesting level of parallel work this thread is in: 0 outside any, n inside the
/// body of a level-n loop. A loop started at level > 0 runs inline (see parallel_for), and
/// scratch buffers are kept per level so that a nested kernel never overwrites its caller's.
inline thread_local int cpu_nesting = 0;

/// One 64-byte-aligned block per (thread, nesting level), grown on demand, freed when the
/// thread exits.
struct cpu_scratch_block {
  struct free_aligned {
    void operator()(std::byte* p) const noexcept { ::operator delete(p, std::align_val_t{64}); }
  };
  std::unique_ptr<std::byte, free_aligned> ptr;
  std::size_t bytes = 0;
};
inline thread_local std::vector<cpu_scratch_block> cpu_scratch_blocks;

/// The pool. Created on first parallel use; its workers (started as statements ask for
/// them, up to the largest thread count asked for) sleep on a condition variable between
/// jobs after a short spin. One pool per process rather than per context: contexts are
/// cheap and often many (one per test, per library), and several pools would oversubscribe
/// the cores whenever two contexts run at once.
class cpu_scheduler {
 public:
  static cpu_scheduler& instance();

  /// Runs body(begin, end) over [0, n) in chunks of `chunk` elements (the last one may be
  /// shorter; chunk starts are multiples of `chunk`) on at most `threads` threads: the
  /// caller and up to threads - 1 pool workers. Returns when every chunk has run. The first
  /// exception a chunk throws is rethrown here once the chunks already started are done;
  /// chunks not yet started are skipped. Called from inside a body (a nested loop), it runs
  /// inline on the calling thread: the outer loop already occupies the threads.
  template <class F>
  void parallel_for(index_t n, index_t chunk, int threads, F&& body) {
    if (n <= 0) return;
    chunk = std::max<index_t>(chunk, 1);
    index_t chunks = (n - 1) / chunk + 1;
    if (threads <= 1 || chunks <= 1 || cpu_nesting > 0) {
      nesting_guard g;
      body(index_t(0), n);
      return;
    }
    if (chunks > max_chunks) {  // ranges pack two chunk indices into one 64-bit word
      chunk *= (chunks - 1) / max_chunks + 1;  // a multiple of the original: alignment kept
      chunks = (n - 1) / chunk + 1;
    }
    using Fn = std::remove_reference_t<F>;
    const int helpers = static_cast<int>(std::min<index_t>(threads - 1, chunks - 1));
    profile_kernel_threads = std::max(profile_kernel_threads, helpers + 1);  // the profiler's thread count
    auto j = std::make_shared<job>(helpers + 1);
    j->run = [](void* f, index_t b, index_t e) { (*static_cast<Fn*>(f))(b, e); };
    j->body = const_cast<void*>(static_cast<const void*>(std::addressof(body)));
    j->n = n;
    j->chunk = chunk;
    j->chunks = chunks;
    // a few batches per thread: few claims on the shared counter, and stealing evens out
    // the rest
    j->batch = std::clamp<index_t>(chunks / (4 * (helpers + 1)), 1, 64);
    post(j, helpers);
    work(*j, 0);
    retract(j);
    wait(*j);
    if (j->error) std::rethrow_exception(j->error);
  }

  /// This thread's scratch buffer for the current nesting level: at least `bytes` bytes,
  /// 64-byte aligned, the same memory on every call that asks for no more than before
  /// (contents are kept only until the next call that needs it larger). Valid until the
  /// thread exits. Throws kiln::out_of_memory when it cannot be allocated.
  static std::byte* scratch(std::size_t bytes) {
    const auto level = static_cast<std::size_t>(cpu_nesting);
    auto& blocks = cpu_scratch_blocks;
    if (blocks.size() <= level) blocks.resize(level + 1);
    auto& b = blocks[level];
    if (b.bytes < bytes || !b.ptr) {
      const std::size_t want = std::max<std::size_t>((bytes + 63) / 64 * 64, 64);
      auto* p = static_cast<std::byte*>(::operator new(want, std::align_val_t{64}, std::nothrow));
      if (!p) {
        throw out_of_memory("kiln::cpu: allocating " + std::to_string(want) + " bytes of scratch failed", want, 0);
      }
      b.ptr.reset(p);
      b.bytes = want;
    }
    return b.ptr.get();
  }

  /// Workers started so far (tests and benchmarks read it).
  std::size_t workers() const;

  ~cpu_scheduler();

 private:
  /// Chunk indices are packed in pairs into 64-bit words.
  static constexpr index_t max_chunks = index_t(1) << 31;

  /// A range of chunks [begin, end) that one thread works through from the front while
  /// others may take its back half: both ends in one word, so that an owner's claim and a
  /// thief's split are single compare-and-swaps and never overlap.
  struct alignas(64) range {
    std::atomic<std::uint64_t> bounds{0};
    static std::uint64_t pack(index_t b, index_t e) noexcept {
      return std::uint64_t(b) << 32 | std::uint64_t(e);
    }
    static index_t begin(std::uint64_t v) noexcept { return index_t(v >> 32); }
    static index_t end(std::uint64_t v) noexcept { return index_t(v & 0xFFFFFFFFu); }
  };

  struct job {
    explicit job(int participants);
    void (*run)(void*, index_t, index_t) = nullptr;
    void* body = nullptr;  // lives on the caller's stack: touched only for claimed chunks
    index_t n = 0, chunk = 0, chunks = 0, batch = 1;
    std::unique_ptr<range[]> ranges;           // one per participant; the caller's is 0
    int slots = 0;
    alignas(64) std::atomic<index_t> next{0};  // the first chunk no batch has claimed
    alignas(64) std::atomic<index_t> done{0};  // chunks finished (or skipped after an error)
    std::atomic<int> finished{0};              // 1 once done == chunks
    std::atomic<bool> failed{false};
    std::exception_ptr error;  // written by the one thread that set `failed`
    int wanted = 0;            // helpers still to attach (guarded by the pool mutex)
    int attached = 1;          // participants so far, the caller included (same)
  };

  struct nesting_guard {
    nesting_guard() noexcept { ++cpu_nesting; }
    ~nesting_guard() { --cpu_nesting; }
    nesting_guard(const nesting_guard&) = delete;
    nesting_guard& operator=(const nesting_guard&) = delete;
  };

  cpu_scheduler();

  /// Queues j for `helpers` workers, starting workers up to that many if there are fewer.
  void post(const std::shared_ptr<job>& j, int helpers);

  /// Starts workers until there are `count` (fewer if the OS refuses threads: the caller
  /// then does more of the work itself). Called with mutex_ held.
  void grow(std::size_t count);

  /// Takes j out of the queue if helpers were still wanted: no worker attaches after this.
  void retract(const std::shared_ptr<job>& j);

  /// Runs chunks of j as participant `slot` until none is left to claim or take.
  static void work(job& j, int slot);

  /// Works through the front of `own` one chunk at a time until it is empty (thieves may
  /// shrink it from the back meanwhile).
  static void run_own(job& j, range& own);

  static void run_chunk(job& j, index_t c);

  static void finish(job& j, index_t count);

  /// Moves the back half of the largest other range (all of it when one chunk is left)
  /// into slot's own range. False when every range is empty.
  static bool steal(job& j, int slot);

  /// Waits for the chunks other threads have started, taking over what they have not
  /// started yet (a thread descheduled in the middle of its range) while it polls.
  static void wait(job& j);

  void worker_loop();

  /// The workers, their queue and what they sleep on (scheduler.ipp): behind a pointer, so
  /// that this header needs neither <thread> nor <condition_variable>.
  struct pool;
  std::unique_ptr<pool> pool_;
  std::atomic<std::uint64_t> posted_{0};  // jobs ever posted: spinning workers watch it
};

}  // namespace kiln::detail

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/cpu/impl/scheduler.ipp"
#endif
