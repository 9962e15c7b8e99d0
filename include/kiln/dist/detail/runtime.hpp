// kiln/dist/detail/runtime.hpp — what every kiln::dist operation shares: MPI return codes
// turned into exceptions, the per-process watchdog that aborts the job when a blocking
// transfer overruns its deadline (or after a failure was thrown), and polled waits.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kiln/dist/error.hpp"

namespace kiln::dist::detail {

using clock = std::chrono::steady_clock;

/// "rank 1", "ranks 1 and 3", "ranks 1, 2 and 3"
inline std::string rank_list(std::span<const int> ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += i + 1 == ranks.size() ? " and " : ", ";
    s += std::to_string(ranks[i]);
  }
  return s;
}

/// "2 s", "0.5 s"
inline std::string seconds_text(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  std::string s = std::to_string(ms / 1000) + ".";
  std::string frac = std::to_string(ms % 1000);
  s += std::string(3 - frac.size(), '0') + frac;
  while (s.back() == '0') s.pop_back();
  return s + " s";
}

/// Seconds from an environment variable (KILN_DIST_TIMEOUT=60, =2.5); fallback when unset.
inline std::chrono::milliseconds env_seconds(const char* name, std::chrono::milliseconds fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(s > 0) || s > 1e7) {
    throw error(std::string("kiln::dist: ") + name + "=\"" + v + "\" is not a positive number of seconds");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000.0 + 0.5));
}

/// The process's watchdog: one thread, started on first use, that calls MPI_Abort when an
/// armed deadline passes. A blocking MPI transfer cannot be interrupted to throw, so a
/// stalled one (a peer that died mid-transfer) ends the job from here, with a message; after
/// a thrown timeout_error the same thread aborts the job once the grace period is over,
/// whether or not the exception was caught (the other ranks must not wait for ever).
class watchdog {
 public:
  static watchdog& instance() {
    static watchdog w;
    return w;
  }

  /// Abort the job (message on stderr first) unless disarm() comes before `deadline`.
  void arm(clock::time_point deadline, std::string message) {
    std::lock_guard lock(mutex_);
    start_locked();
    deadline_ = deadline;
    message_ = std::move(message);
    armed_ = true;
  }
  void disarm() noexcept {
    std::lock_guard lock(mutex_);
    armed_ = false;
  }
  /// Abort the job at `when` whatever happens next (no message: the exception carries it).
  void abort_at(clock::time_point when) {
    std::lock_guard lock(mutex_);
    start_locked();
    if (!abort_pending_ || when < abort_when_) abort_when_ = when;
    abort_pending_ = true;
    cv_.notify_all();
  }
  /// True once a failure scheduled an abort (kiln::dist::environment then aborts at exit
  /// instead of calling MPI_Finalize, which would wait for the failed peers).
  bool failed() const noexcept {
    std::lock_guard lock(mutex_);
    return abort_pending_;
  }

  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;
  ~watchdog() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  watchdog() = default;

  void start_locked() {
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }

  void run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      // 50 ms steps: arm/disarm stay a store under a lock, never a wake-up on the hot path
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      const auto now = clock::now();
      if (abort_pending_ && now >= abort_when_) {
        lock.unlock();
        std::fflush(nullptr);
        MPI_Abort(MPI_COMM_WORLD, 1);
        std::_Exit(1);  // MPI_Abort does not return; should it, the job still ends
      }
      if (armed_ && now >= deadline_) {
        const std::string m = message_;
        lock.unlock();
        std::fprintf(stderr, "%s\n", m.c_str());
        std::fflush(nullptr);
        MPI_Abort(MPI_COMM_WORLD, 1);
        std::_Exit(1);
      }
    }
  }

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::thread thread_;
  bool stop_ = false;
  bool armed_ = false;
  clock::time_point deadline_{};
  std::string message_;
  bool abort_pending_ = false;
  clock::time_point abort_when_{};
};

/// Disarms the watchdog when a guarded blocking call returns (or throws).
class watch_guard {
 public:
  watch_guard(clock::time_point deadline, std::string message) { watchdog::instance().arm(deadline, std::move(message)); }
  ~watch_guard() { watchdog::instance().disarm(); }
  watch_guard(const watch_guard&) = delete;
  watch_guard& operator=(const watch_guard&) = delete;
};

/// The error handler kiln::dist installs on its communicators: it records MPI's own text of
/// the error and returns, so that the call returns the code and check() throws with it
/// (an exception must not unwind through MPI's C frames).
inline thread_local std::string last_mpi_error;

inline void record_mpi_error(MPI_Comm*, int* code, ...) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(*code, text, &len) != MPI_SUCCESS) len = 0;
  last_mpi_error.assign(text, static_cast<std::size_t>(len));
}

inline MPI_Errhandler error_handler() {
  static MPI_Errhandler h = [] {
    MPI_Errhandler e = MPI_ERRHANDLER_NULL;
    MPI_Comm_create_errhandler(&record_mpi_error, &e);
    return e;
  }();
  return h;
}

/// Throws kiln::dist::error for an MPI failure: "<where>: MPI_Allreduce failed: <MPI's text>".
/// fatal: the failure leaves the ranks out of step (a transfer), so the job is aborted
/// after `grace` too.
inline void check(int rc, const std::string& where, const char* call, bool fatal = false,
                  std::chrono::milliseconds grace = std::chrono::milliseconds(2000)) {
  if (rc == MPI_SUCCESS) return;
  std::string text = last_mpi_error;
  if (text.empty()) {
    char buf[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) == MPI_SUCCESS) text.assign(buf, static_cast<std::size_t>(len));
  }
  last_mpi_error.clear();
  if (fatal) {
    watchdog::instance().abort_at(clock::now() + grace);
    throw error(where + ": " + call + " failed: " + text + "; the job is being aborted (MPI_Abort)");
  }
  throw error(where + ": " + call + " failed: " + text);
}

/// Polls requests with MPI_Testsome until all are done or the deadline passes. Returns the
/// indices of those still pending (empty: all done). Spins first (a shared-memory transfer
/// completes in microseconds), then yields, then sleeps briefly, so that ranks sharing
/// cores (mpirun --oversubscribe) let each other run.
inline std::vector<int> wait_all(std::span<MPI_Request> reqs, clock::time_point deadline, const std::string& where) {
  std::vector<int> done(reqs.size());
  std::vector<MPI_Status> statuses(reqs.size());
  const auto start = clock::now();
  for (std::uint64_t polls = 0;; ++polls) {
    int outcount = 0;
    check(MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &outcount, done.data(), statuses.data()), where,
          "MPI_Testsome", true);
    if (outcount == MPI_UNDEFINED) return {};  // every request is MPI_REQUEST_NULL
    if (outcount > 0) continue;
    if (polls % 64 == 0) {
      const auto now = clock::now();
      if (now >= deadline) break;
      if (now - start > std::chrono::milliseconds(100)) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      } else if (polls > 4096) {
        std::this_thread::yield();
      }
    }
  }
  std::vector<int> pending;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i] != MPI_REQUEST_NULL) pending.push_back(static_cast<int>(i));
  }
  return pending;
}

}  // namespace kiln::dist::detail
