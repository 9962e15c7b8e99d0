// kiln/core/profiler.hpp — what a profiled context records, and how it is read out: the
// per-kernel records (ctx.profile()), the aggregated table (kiln::profile_table), and a
// Chrome trace-event file (KILN_TRACE=path.json, kiln::write_trace).
//
// Off by default and free when off: a context holds a profile_slot whose `on` flag is the
// only thing a statement looks at (one relaxed load and a well-predicted branch per
// statement, never inside a kernel's loop); the profiler itself is made when profiling is
// first turned on. Backends add what only they know: the CPU backend the threads a
// statement used, the Vulkan backend GPU times from timestamp queries.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>  // std::getenv
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/detail/env.hpp"

namespace kiln {

/// Turns profiling on (or off) for a CPU context: `kiln::context<kiln::cpu<>> ctx{kiln::profiling{}};`
/// (Vulkan: kiln::vulkan::options::profile). KILN_PROFILE=1 turns it on for every context.
struct profiling {
  bool on = true;
};

/// One kernel a profiled context ran: one statement (`y = expr;`) on the CPU; on Vulkan
/// one statement with every dispatch it recorded. Times are microseconds; start times count
/// from when the context's profiler started.
struct profile_record {
  /// The op chain of the kernel, operands lettered in order (`gelu(add(mul(a,b),c))`,
  /// scalars s0, s1, ...); a structural op appears with its inputs (`matmul(a,b)`).
  std::string name;
  /// "elementwise", or the structural op's kernel (kiln::kernel_variant), e.g. "cpu.gemm.packed 6x16".
  std::string variant;
  kiln::shape shape;  ///< the output's
  dtype type = dtype::f32;
  std::uint64_t bytes = 0;  ///< operands read once plus the output written (a lower bound on traffic)
  std::uint64_t flops = 0;  ///< arithmetic where known (0: unknown); an elementwise op counts one per element
  double start_us = 0;      ///< host time the statement began
  double wall_us = 0;       ///< host time in the statement (CPU: the kernel; Vulkan: recording and any submit)
  int threads = 0;          ///< CPU threads the kernel ran on (Vulkan: 0)
  std::uint32_t dispatches = 0;  ///< Vulkan dispatches recorded (CPU: 0)
  /// Vulkan: time on the GPU from timestamp queries (the sum over the statement's
  /// dispatches); -1 where not measured (the CPU backend, or a queue without timestamps).
  double gpu_us = -1;
  double gpu_start_us = -1;  ///< where the device track of a trace places it (aligned to the host clock per batch)
  /// Vulkan: whether this call's GPU time was measured. Every call is, unless the context
  /// samples (vulkan::options::profile_gpu_every: one call in n of each kernel).
  bool gpu_timed = false;
  int thread = 0;            ///< the host thread that ran it (1, 2, ... in order of first use)

  /// The time the table counts: GPU time where measured, else host wall time.
  double time_us() const noexcept { return gpu_us >= 0 ? gpu_us : wall_us; }
};

/// One row of kiln::profile_table: the records of one kernel (name and variant) together.
struct profile_row {
  std::string name, variant;
  std::uint64_t calls = 0;
  std::uint64_t timed = 0;  ///< Vulkan: calls whose GPU time was measured (sampling: fewer than calls)
  /// GPU time where measured (sampling: the timed calls, the others at the mean of the
  /// timed calls after the first), else host wall time
  double total_us = 0;
  double host_us = 0;   ///< host time (Vulkan: recording and submitting)
  std::uint64_t bytes = 0, flops = 0;
  int threads = 0;      ///< most threads one call used (CPU)
  double mean_us() const noexcept { return calls ? total_us / double(calls) : 0; }
  double gb_per_s() const noexcept { return total_us > 0 ? double(bytes) / (total_us * 1e3) : 0; }
  double gflop_per_s() const noexcept { return total_us > 0 ? double(flops) / (total_us * 1e3) : 0; }
};

/// kiln::profile_table's result: rows sorted by total time, printable (`std::cout << t`).
struct profile_report {
  std::string device;            ///< "cpu", "vulkan:0"
  std::string timing;            ///< what the time column measures (and, on Vulkan, why not GPU time)
  std::vector<profile_row> rows;
  double total_us = 0;
  double host_us = 0;
  double submit_us = 0, wait_us = 0;  ///< Vulkan: host time in vkQueueSubmit and in waits

  std::string str() const;
  friend std::ostream& operator<<(std::ostream& os, const profile_report& r) { return os << r.str(); }
};

}  // namespace kiln

namespace kiln::detail {

/// Threads the last kernel on this thread ran on: the CPU backend's pool raises it in
/// parallel_for, the profiler resets it around a statement.
inline thread_local int profile_kernel_threads = 1;

/// This thread's number in traces (1, 2, ... in order of first use).
KILN_DECL int profile_thread_number();

/// Escapes s for a JSON string.
KILN_DECL void json_escape(std::string& out, std::string_view s);

KILN_DECL std::string json_number(double v);

/// The records and events of one context. Every member locks; statements from several
/// threads may record at once.
class profiler {
 public:
  /// A span on a host thread's track of the trace (recording, submitting, waiting).
  struct host_span {
    const char* name;
    int thread;
    double start_us, dur_us;
  };
  /// A sample of a counter track (memory).
  struct counter_sample {
    const char* name;
    double at_us;
    double values[2];
    const char* keys[2];
  };

  explicit profiler(std::string device);
  profiler(const profiler&) = delete;
  profiler& operator=(const profiler&) = delete;
  /// Writes the trace when one was asked for (KILN_TRACE). A destructor has no one to
  /// report a failure to: an unwritable path loses the trace (kiln::write_trace throws).
  ~profiler();

  /// Microseconds since the profiler started.
  double now_us() const noexcept {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - epoch_).count();
  }

  /// A record's place: its index (records are never reordered) in a generation (clear()
  /// starts a new one, so late GPU times of cleared records go nowhere).
  struct handle {
    std::size_t index = 0;
    std::uint64_t generation = 0;
    bool time_gpu = true;  ///< this call is one the GPU timer measures (see set_gpu_sampling)
  };

  /// Opens a record.
  handle begin(profile_record r);

  /// GPU timestamps for one call in `every` of each kernel (1: every call), where a
  /// timestamp costs much next to a small kernel (lavapipe); the table counts the calls
  /// not timed at the mean of the timed calls after the first.
  void set_gpu_sampling(std::uint32_t every);
  std::uint32_t gpu_sampling() const;
  /// Closes record i: host wall time and threads.
  void end(handle h, double wall_us, int threads);
  void count_dispatch(handle h);
  /// Adds one dispatch's GPU time to a record (its first placed at start_us on the device track).
  void add_gpu(handle h, double start_us, double dur_us);

  void span(const char* name, double start_us, double end_us);
  void counter(const char* name, const char* k0, double v0, const char* k1, double v1);

  std::vector<profile_record> records() const;
  void clear();

  /// What the GPU-time column can say on this device (set by a backend that times the GPU).
  void set_timing_note(std::string s);
  void set_trace_path(std::string p);

  profile_report report() const;
  void write_trace(const std::string& path) const;
  const std::string& device() const noexcept { return device_; }

 private:
  std::string device_;
  std::chrono::steady_clock::time_point epoch_;
  mutable std::mutex mutex_;
  std::vector<profile_record> records_;
  std::vector<host_span> spans_;
  std::vector<counter_sample> counters_;
  double submit_us_ = 0, wait_us_ = 0;
  std::uint64_t generation_ = 0;
  std::uint32_t gpu_every_ = 1;
  std::unordered_map<std::string, std::uint64_t> sampled_;  ///< calls per kernel, for sampling
  std::string timing_note_;
  std::string trace_path_;
};

/// A context's profiling switch and, once it has been on, its profiler. The switch is
/// the one thing a statement reads when profiling is off.
struct profile_slot {
  std::atomic<bool> on{false};
  std::uint32_t gpu_every = 1;  ///< the profiler's GPU sampling when it is made (set by the backend first)

  /// The profiler (nullptr until profiling was first turned on). Once made it lives as
  /// long as the context, so a statement that saw `on` may use it without a lock.
  profiler* get() const noexcept { return made_.load(std::memory_order_acquire); }

  /// Turns profiling on or off; the first time on, makes the profiler for `device`.
  void enable(bool v, const std::string& device);

  /// Reads KILN_PROFILE and KILN_TRACE (a trace needs the records, so it turns profiling
  /// on too); `option` (a context option) overrides KILN_PROFILE.
  void configure(std::optional<bool> option, const std::string& device);

 private:
  std::mutex mutex_;
  std::unique_ptr<profiler> owner_;
  std::atomic<profiler*> made_{nullptr};
};

/// The statement whose kernels this thread is recording (Vulkan attributes dispatches
/// and their GPU time to it).
struct profile_statement {
  profiler* prof = nullptr;
  profiler::handle record;
};
inline thread_local profile_statement current_profile_statement{};

}  // namespace kiln::detail

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/core/impl/profiler.ipp"
#endif
