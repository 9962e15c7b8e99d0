// benchmarks/scheduler_bench.cpp — the CPU scheduler's acceptance measurement: kiln's
// fused gelu chain y = gelu(a * b + c) on one thread and on two, on a quiet pair of cores
// and with another process keeping one of the two busy.
//
// The binary pins itself to two cores (the first two it may run on) before any kiln
// statement runs, so that kiln's pool workers inherit the pair. A "busy" benchmark forks
// a competitor that spins on the second core of the pair (its own affinity, started and
// running before the timed loop, SIGKILLed after it, and bounded in time in any case: it
// exits by itself after busy_limit and dies with this process).
//
// Sizes: 16M and 4M floats (memory-bound: 256 and 64 MiB in all) and 1M (16 MiB in
// all: cache-resident on a large L3, where the arithmetic, not DRAM, sets the time).
//
// Names: BM_gelu_chain/<size>/<quiet|busy>. Every iteration runs the chain on a 1-thread
// context and on a 2-thread context back to back, alternating which goes first, so that
// both see the same machine state. Counters (per repetition): t1_ms and t2_ms, the
// median times of the two, and t2_over_t1, the median of the per-pair ratios. Targets
// (issue 12): busy t2_over_t1 <= 1.25; quiet t2_over_t1 <= 1 / 1.6 = 0.625.
#include <kiln/kiln.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sched.h>       // sched_setaffinity
#include <sys/prctl.h>   // PR_SET_PDEATHSIG
#include <sys/wait.h>    // waitpid
#include <unistd.h>      // fork, pipe
#define KILN_BENCH_CAN_PIN 1
#endif

#include "bench_support.hpp"

namespace {

using kiln_bench::index;
using ftensor = kiln::tensor<float, kiln::cpu<>>;

/// The competitor never outlives this: it exits by itself after this long.
constexpr int busy_limit_s = 60;

/// The two cores this process runs on, and whether pinning worked.
struct core_pair {
  int first = -1, second = -1;
  bool ok = false;
  std::string why;
};

core_pair& cores() {
  static core_pair p;
  return p;
}

#if defined(KILN_BENCH_CAN_PIN)
void pin_to_two_cores() {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (::sched_getaffinity(0, sizeof mine, &mine) != 0) {
    cores().why = std::string("sched_getaffinity: ") + std::strerror(errno);
    return;
  }
  std::vector<int> ids;
  for (int c = 0; c < CPU_SETSIZE && ids.size() < 2; ++c) {
    if (CPU_ISSET(c, &mine)) ids.push_back(c);
  }
  if (ids.size() < 2) {
    cores().why = "this process may run on one core only";
    return;
  }
  cpu_set_t pair;
  CPU_ZERO(&pair);
  CPU_SET(ids[0], &pair);
  CPU_SET(ids[1], &pair);
  if (::sched_setaffinity(0, sizeof pair, &pair) != 0) {
    cores().why = std::string("sched_setaffinity: ") + std::strerror(errno);
    return;
  }
  cores() = {ids[0], ids[1], true, ""};
}

/// A process spinning on one core for as long as this object lives (at most busy_limit_s).
class competitor {
 public:
  explicit competitor(int core) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      // the child of a threaded process: async-signal-safe calls only
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(0);
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(core, &one);
      const bool pinned = ::sched_setaffinity(0, sizeof one, &one) == 0;
      const char ready = pinned ? 'y' : 'n';
      (void)!::write(fds[1], &ready, 1);
      if (!pinned) ::_exit(1);
      timespec start{}, now{};
      ::clock_gettime(CLOCK_MONOTONIC, &start);
      volatile unsigned long spin = 0;
      for (;;) {
        for (int i = 0; i < (1 << 20); ++i) spin = spin + 1;
        ::clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= busy_limit_s) ::_exit(0);
      }
    }
    ::close(fds[1]);
    char ready = 0;
    running_ = pid_ > 0 && ::read(fds[0], &ready, 1) == 1 && ready == 'y';
    ::close(fds[0]);
  }
  competitor(const competitor&) = delete;
  competitor& operator=(const competitor&) = delete;
  ~competitor() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool running() const { return running_; }

 private:
  pid_t pid_ = -1;
  bool running_ = false;
};
#endif

/// Inputs and output of one size on a context with one thread count, allocated and
/// touched once.
struct world {
  kiln::context<kiln::cpu<>> ctx;
  ftensor a, b, c, y;
  world(index n, int threads)
      : ctx(kiln::threads{threads}),
        a(kiln::from_host(ctx, {n}, kiln_bench::random_floats(n, -2.0f, 2.0f, 1))),
        b(kiln::from_host(ctx, {n}, kiln_bench::random_floats(n, -2.0f, 2.0f, 2))),
        c(kiln::from_host(ctx, {n}, kiln_bench::random_floats(n, -2.0f, 2.0f, 3))),
        y(kiln::zeros<float>(ctx, {n})) {}
  void run() { y = kiln::gelu(a * b + c); }
  double reference(index i) const {
    const double x = double(a.data()[i]) * b.data()[i] + c.data()[i];
    return 0.5 * x * (1.0 + std::erf(x * 0.70710678118654752));
  }
};

world& get_world(index n, int threads) {
  static std::vector<std::unique_ptr<world>> worlds;
  static std::vector<std::pair<index, int>> keys;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == std::pair(n, threads)) return *worlds[i];
  }
  keys.emplace_back(n, threads);
  worlds.push_back(std::make_unique<world>(n, threads));
  return *worlds.back();
}

void gelu_pair(benchmark::State& state, index n, bool busy) {
  if (!cores().ok) {
    state.SkipWithError(("needs two cores to pin to: " + cores().why).c_str());
    return;
  }
  world& one = get_world(n, 1);
  world& two = get_world(n, 2);
  static std::map<index, std::pair<kiln_bench::verdict, kiln_bench::verdict>> verdicts;  // per size
  auto& [v1, v2] = verdicts[n];
  const bool ok = kiln_bench::verified(state, v1, [&] {
    return kiln_bench::check_output(one.y.data(), n, [&] { one.run(); }, [&](index i) { return one.reference(i); });
  }) && kiln_bench::verified(state, v2, [&] {
    return kiln_bench::check_output(two.y.data(), n, [&] { two.run(); }, [&](index i) { return two.reference(i); });
  });
  if (!ok) return;

#if defined(KILN_BENCH_CAN_PIN)
  std::unique_ptr<competitor> hog;
  if (busy) {
    hog = std::make_unique<competitor>(cores().second);
    if (!hog->running()) {
      state.SkipWithError("could not start the competing process on the second core");
      return;
    }
    two.run();  // one untimed pair with the competitor running: let the scheduler settle
    one.run();
  }
#endif

  using clock = std::chrono::steady_clock;
  auto seconds = [](world& w) {
    const auto t0 = clock::now();
    w.run();
    benchmark::ClobberMemory();
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  std::vector<double> t1, t2, r;
  bool one_first = true;
  for (auto _ : state) {
    double a = 0, b = 0;
    if (one_first) {
      a = seconds(one);
      b = seconds(two);
    } else {
      b = seconds(two);
      a = seconds(one);
    }
    one_first = !one_first;
    t1.push_back(a);
    t2.push_back(b);
    r.push_back(b / a);
    state.SetIterationTime(a + b);
  }
  state.counters["t1_ms"] = kiln_bench::median(t1) * 1e3;
  state.counters["t2_ms"] = kiln_bench::median(t2) * 1e3;
  state.counters["t2_over_t1"] = kiln_bench::median(r);
}

void register_all() {
#if defined(KILN_BENCH_CAN_PIN)
  pin_to_two_cores();
#else
  cores().why = "pinning is implemented for Linux only";
#endif
  if (cores().ok) {
    benchmark::AddCustomContext("kiln_cores", std::to_string(cores().first) + "," + std::to_string(cores().second));
    benchmark::AddCustomContext("kiln_busy_core", std::to_string(cores().second));
  }
  const struct {
    const char* label;
    index n;
  } sizes[] = {{"16M", index(1) << 24}, {"4M", index(1) << 22}, {"1M", index(1) << 20}};
  for (const auto& s : sizes) {
    for (const bool busy : {false, true}) {
      const std::string name = std::string("BM_gelu_chain/") + s.label + (busy ? "/busy" : "/quiet");
      const index n = s.n;
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { gelu_pair(st, n, busy); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, register_all); }
