// kiln/core/profile.hpp — reading a context's profile and statistics: the aggregated
// kernel table, the trace file, and the memory and kernel-cache report.
#pragma once

#include <string>

#include "kiln/core/context.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/profiler.hpp"

namespace kiln {

/// The kernels a profiling context ran, one row per kernel (op chain and variant): calls,
/// total and mean time, GB/s and GFLOP/s, share of the time; sorted by total time. Time is
/// GPU time on Vulkan (timestamp queries; host wall time where the queue has none, as the
/// report says), wall time on the CPU. Empty when profiling was never on.
/// Example: `std::cout << kiln::profile_table(ctx);`
template <class B>
profile_report profile_table(const context<B>& ctx) {
  (void)ctx.profile();  // on Vulkan: waits for, and collects, the GPU times
  if (const auto* p = ctx.state()->profile.get()) return p->report();
  profile_report r;
  r.device = ctx.device_name();
  r.timing = "profiling is off (KILN_PROFILE=1 or ctx.set_profiling(true))";
  return r;
}

/// Writes a Chrome trace-event file (Perfetto, chrome://tracing) of what a profiling
/// context recorded: kernels on a device track, host-side recording, submits and waits on
/// thread tracks, memory as a counter track. KILN_TRACE=path writes one when the context
/// goes. Throws kiln::error when profiling was never on or the file cannot be written.
template <class B>
void write_trace(const context<B>& ctx, const std::string& path) {
  (void)ctx.profile();
  const auto* p = ctx.state()->profile.get();
  if (!p) throw error("kiln::write_trace: " + ctx.device_name() + " was not profiling; turn it on with KILN_PROFILE=1 or ctx.set_profiling(true)");
  p->write_trace(path);
}

/// The context's memory and kernel statistics as text: on Vulkan the pool (in use,
/// reserved, peak, blocks, hit rate), the command stream and the kernel cache (hits and
/// misses per level, compilations); on the CPU the tensor bytes and kernels run.
/// Example: `std::cout << kiln::memory_report(ctx);`
template <class B>
std::string memory_report(const context<B>& ctx) {
  return backend_traits<B>::memory_report(*ctx.state());
}

}  // namespace kiln
