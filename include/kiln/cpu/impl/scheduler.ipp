// kiln/cpu/impl/scheduler.ipp — definitions of kiln/cpu/scheduler.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

#include "kiln/cpu/scheduler.hpp"

#if defined(__linux__)
#include <sched.h>  // sched_getaffinity: the cores this process may run on
#endif

namespace kiln::detail {

KILN_DECL int usable_cores() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

/// How long an idle worker polls for the next job before it sleeps. Back-to-back
/// statements then skip the futex wake; short, because on a machine shared with other
/// processes a spinning worker takes their time. Measured (gelu chain, 2 threads against
/// 1, statements back to back): no spin, 262K floats 1.12x slower; 50 us, 1.4x faster;
/// 200 us, 1.56x faster, but each idle worker burns four times as long after a statement.
inline constexpr std::chrono::microseconds scheduler_worker_spin{50};
/// How long a caller with nothing left to claim polls (taking over any chunks a stalled
/// thread has not started) before it sleeps: a chunk is a few microseconds of work.
inline constexpr std::chrono::microseconds scheduler_caller_spin{100};

struct cpu_scheduler::pool {
  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::shared_ptr<job>> jobs;  // jobs that still want helpers, oldest first
  std::vector<std::thread> threads;
  int sleeping = 0;
  bool stop = false;
};

KILN_DECL cpu_scheduler::cpu_scheduler() : pool_(std::make_unique<pool>()) {}

KILN_DECL cpu_scheduler& cpu_scheduler::instance() {
  static cpu_scheduler pool;
  return pool;
}

KILN_DECL std::size_t cpu_scheduler::workers() const {
  std::lock_guard lk(pool_->mutex);
  return pool_->threads.size();
}

KILN_DECL cpu_scheduler::~cpu_scheduler() {
  {
    std::lock_guard lk(pool_->mutex);
    pool_->stop = true;
  }
  pool_->wake.notify_all();
  for (auto& t : pool_->threads) t.join();
}

KILN_DECL cpu_scheduler::job::job(int participants)
    : ranges(new range[static_cast<std::size_t>(participants)]), slots(participants) {}

KILN_DECL void cpu_scheduler::post(const std::shared_ptr<job>& j, int helpers) {
  int sleeping = 0;
  {
    std::lock_guard lk(pool_->mutex);
    grow(static_cast<std::size_t>(helpers));
    helpers = std::min<int>(helpers, static_cast<int>(pool_->threads.size()));
    if (helpers <= 0) return;
    j->wanted = helpers;
    pool_->jobs.push_back(j);
    posted_.fetch_add(1, std::memory_order_release);
    sleeping = pool_->sleeping;
  }
  if (sleeping == 0) return;  // every worker is spinning or busy: they will see posted_
  if (helpers == 1) pool_->wake.notify_one();
  else pool_->wake.notify_all();
}

KILN_DECL void cpu_scheduler::grow(std::size_t count) {
  while (pool_->threads.size() < count && !pool_->stop) {
    try {
      pool_->threads.emplace_back([this] { worker_loop(); });
    } catch (const std::system_error&) {
      return;
    }
  }
}

KILN_DECL void cpu_scheduler::retract(const std::shared_ptr<job>& j) {
  std::lock_guard lk(pool_->mutex);
  if (j->wanted > 0) {
    j->wanted = 0;
    if (auto it = std::find(pool_->jobs.begin(), pool_->jobs.end(), j); it != pool_->jobs.end()) pool_->jobs.erase(it);
  }
}

KILN_DECL void cpu_scheduler::work(job& j, int slot) {
  range& own = j.ranges[static_cast<std::size_t>(slot)];
  for (;;) {
    run_own(j, own);
    const index_t c = j.next.fetch_add(j.batch, std::memory_order_relaxed);
    if (c < j.chunks) {
      own.bounds.store(range::pack(c, std::min(c + j.batch, j.chunks)), std::memory_order_release);
      continue;
    }
    if (!steal(j, slot)) return;
  }
}

KILN_DECL void cpu_scheduler::run_own(job& j, range& own) {
  index_t finished_here = 0;
  std::uint64_t v = own.bounds.load(std::memory_order_acquire);
  for (;;) {
    const index_t b = range::begin(v), e = range::end(v);
    if (b >= e) break;
    if (!own.bounds.compare_exchange_weak(v, range::pack(b + 1, e), std::memory_order_acq_rel)) continue;
    run_chunk(j, b);
    ++finished_here;
    v = own.bounds.load(std::memory_order_acquire);
  }
  if (finished_here) finish(j, finished_here);
}

KILN_DECL void cpu_scheduler::run_chunk(job& j, index_t c) {
  if (j.failed.load(std::memory_order_relaxed)) return;  // after an error: skipped, still counted
  const index_t b = c * j.chunk;
  const index_t e = std::min(j.n, b + j.chunk);
  try {
    nesting_guard g;
    j.run(j.body, b, e);
  } catch (...) {
    if (!j.failed.exchange(true, std::memory_order_relaxed)) j.error = std::current_exception();
  }
}

KILN_DECL void cpu_scheduler::finish(job& j, index_t count) {
  // acq_rel: these chunks' writes (and the error) reach whoever sees the final count
  if (j.done.fetch_add(count, std::memory_order_acq_rel) + count == j.chunks) {
    j.finished.store(1, std::memory_order_release);
    j.finished.notify_all();
  }
}

KILN_DECL bool cpu_scheduler::steal(job& j, int slot) {
  range& own = j.ranges[static_cast<std::size_t>(slot)];
  for (;;) {
    int victim = -1;
    index_t most = 0;
    std::uint64_t seen = 0;
    for (int s = 0; s < j.slots; ++s) {
      if (s == slot) continue;
      const std::uint64_t v = j.ranges[static_cast<std::size_t>(s)].bounds.load(std::memory_order_acquire);
      const index_t left = range::end(v) - range::begin(v);
      if (left > most) {
        most = left;
        victim = s;
        seen = v;
      }
    }
    if (victim < 0) return false;
    const index_t b = range::begin(seen), e = range::end(seen);
    const index_t mid = b + (e - b) / 2;
    if (j.ranges[static_cast<std::size_t>(victim)].bounds.compare_exchange_strong(seen, range::pack(b, mid),
                                                                                  std::memory_order_acq_rel)) {
      own.bounds.store(range::pack(mid, e), std::memory_order_release);
      return true;
    }
  }
}

KILN_DECL void cpu_scheduler::wait(job& j) {
  if (j.finished.load(std::memory_order_acquire)) return;
  const auto until = std::chrono::steady_clock::now() + scheduler_caller_spin;
  for (int i = 0; !j.finished.load(std::memory_order_acquire); ++i) {
    if (steal(j, 0)) {
      run_own(j, j.ranges[0]);
      continue;
    }
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) {
      j.finished.wait(0, std::memory_order_acquire);
    }
  }
}

KILN_DECL void cpu_scheduler::worker_loop() {
  std::uint64_t seen = 0;  // a job posted before this worker started is taken at once
  for (;;) {
    // poll a little before sleeping: the next statement often follows at once
    const auto until = std::chrono::steady_clock::now() + scheduler_worker_spin;
    for (int i = 0; posted_.load(std::memory_order_acquire) == seen; ++i) {
      cpu_relax();
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
    }
    std::shared_ptr<job> j;
    int slot = 0;
    {
      std::unique_lock lk(pool_->mutex);
      ++pool_->sleeping;
      pool_->wake.wait(lk, [&] { return pool_->stop || !pool_->jobs.empty(); });
      --pool_->sleeping;
      if (pool_->stop) return;
      j = pool_->jobs.front();
      slot = j->attached++;
      if (--j->wanted == 0) pool_->jobs.pop_front();
      seen = posted_.load(std::memory_order_relaxed);
    }
    work(*j, slot);
  }
}

}  // namespace kiln::detail
