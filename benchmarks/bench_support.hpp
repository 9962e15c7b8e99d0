// benchmarks/bench_support.hpp — what every kiln benchmark binary shares: the default
// run settings (wall time, 0.5 s, 9 repetitions, medians), the byte-rate counters, the
// two-thread range split used by the peers, and the check that a variant's output is right
// before it is timed.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>  // std::getenv
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include <kiln/cpu/scheduler.hpp>

namespace kiln_bench {

using index = std::int64_t;

/// Per-benchmark settings: wall time, since the work runs on pool threads too. The
/// run length, repetitions and median-only output are defaults of the command line
/// instead (see run_main), so that flags can shorten a smoke run and names stay short.
/// KILN_BENCH_CPU_TIME=1 times by the process's CPU time instead (every thread's CPU
/// seconds added up; rates then per CPU-second, so compare rows of one run, such as a
/// kernel against the FMA loop): on a machine shared with other work, wall time also
/// counts the time other processes hold the cores.
inline benchmark::internal::Benchmark* configure(benchmark::internal::Benchmark* b) {
  if (const char* e = std::getenv("KILN_BENCH_CPU_TIME"); e != nullptr && e[0] == '1') return b->MeasureProcessCPUTime();
  return b->UseRealTime();
}

/// Reports bytes per iteration as Google Benchmark's bytes_per_second (printed in 2^30
/// units) and as counter "GB" (10^9 bytes per second, the unit of shared/baselines.md).
inline void set_bytes(benchmark::State& state, double bytes_per_iteration) {
  const double total = bytes_per_iteration * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(total));
  state.counters["GB"] = benchmark::Counter(total / 1e9, benchmark::Counter::kIsRate);
}

/// Runs f(begin, end) on `threads` threads over [0, n), split into `threads` contiguous
/// parts whose starts are multiples of 64 elements (cache-line and vector aligned), as
/// static-split peers run. The parts go to kiln's thread pool, so that the peers and kiln
/// share one set of threads, as they shared one OpenMP team before kiln had its own pool:
/// two pools in one process would take turns spinning on each other's cores (libgomp's
/// workers spin for milliseconds after each region). The pool gives a part whose thread
/// has not started to a thread that is free, which can only help the peer.
template <class F>
void split_range(index n, int threads, F&& f) {
  if (threads <= 1 || n <= 64) {
    f(index(0), n);
    return;
  }
  const index per = ((n + threads - 1) / threads + 63) / 64 * 64;
  kiln::detail::cpu_scheduler::instance().parallel_for(n, per, threads, f);
}

/// Thread counts to register.
inline std::vector<int> thread_counts() { return {1, 2}; }

/// n floats, uniform in [lo, hi), reproducible per seed.
inline std::vector<float> random_floats(std::size_t n, float lo, float hi, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

/// Indices a check samples: both ends, both sides of the two-thread split point, and a
/// stride that lands in every vector lane position and every thread's chunk.
inline std::vector<index> sample_indices(index n) {
  std::vector<index> idx;
  const index half = ((n + 1) / 2 + 63) / 64 * 64;
  for (index i : {index(0), index(1), index(15), index(16), half - 1, half, half + 1, n - 2, n - 1}) {
    if (i >= 0 && i < n) idx.push_back(i);
  }
  for (index i = 7; i < n; i += 4093) idx.push_back(i);
  return idx;
}

/// The result of checking one variant, shared by every call of its benchmark function
/// (Google Benchmark calls it once per repetition and per iteration-count probe).
struct verdict {
  bool checked = false;
  std::string error;  // empty: correct
};

/// Poisons out with NaN, runs the variant once, and compares sampled elements with a
/// double-precision reference: |got - ref| <= abs_tol + rel_tol * |ref|. Returns an error
/// message naming the first wrong element, or "" when all agree.
template <class Run, class Ref>
std::string check_output(float* out, index n, Run&& run, Ref&& reference, double abs_tol = 2e-6,
                         double rel_tol = 2e-5) {
  std::fill_n(out, n, std::nanf(""));
  run();
  for (index i : sample_indices(n)) {
    const double want = reference(i);
    const double got = out[i];
    if (!(std::abs(got - want) <= abs_tol + rel_tol * std::abs(want))) {
      char msg[160];
      std::snprintf(msg, sizeof msg, "wrong result at element %lld of %lld: got %.9g, expected %.9g",
                    static_cast<long long>(i), static_cast<long long>(n), got, want);
      return msg;
    }
  }
  return {};
}

/// The median of v (v is reordered).
inline double median(std::vector<double>& v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

/// A paired comparison: every iteration runs `mine` and `peer` back to back, alternating
/// which goes first, so a slow spell of a shared machine hits both sides of a pair alike.
/// Counters (per repetition): mine_ms and peer_ms, the medians of their times, and
/// `ratio`, the median of the per-pair ratios mine/peer. Register with UseManualTime:
/// an iteration's time is the pair's.
template <class Mine, class Peer>
void paired(benchmark::State& state, Mine&& mine, Peer&& peer) {
  using clock = std::chrono::steady_clock;
  auto seconds = [](auto&& f) {
    const auto t0 = clock::now();
    f();
    benchmark::ClobberMemory();
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  std::vector<double> tm, tp, r;
  bool mine_first = true;
  for (auto _ : state) {
    double a = 0, b = 0;
    if (mine_first) {
      a = seconds(mine);
      b = seconds(peer);
    } else {
      b = seconds(peer);
      a = seconds(mine);
    }
    mine_first = !mine_first;
    tm.push_back(a);
    tp.push_back(b);
    r.push_back(a / b);
    state.SetIterationTime(a + b);
  }
  state.counters["mine_ms"] = median(tm) * 1e3;
  state.counters["peer_ms"] = median(tp) * 1e3;
  state.counters["ratio"] = median(r);
}

/// Checks a variant once (the first time its benchmark runs); afterwards reports the
/// stored verdict. Returns false, after SkipWithError, when the variant is wrong.
template <class Check>
bool verified(benchmark::State& state, verdict& v, Check&& check) {
  if (!v.checked) {
    v.error = check();
    v.checked = true;
  }
  if (!v.error.empty()) {
    state.SkipWithError(v.error.c_str());
    return false;
  }
  return true;
}

/// Says in the benchmark context how this binary was compiled. A build with
/// KILN_PROGRAM_OPTIMIZE (the ci preset: -Og, compiled to check that it builds and runs)
/// is marked `kiln_build: check build` and warned about on stderr: no figure from it may
/// be quoted; measure with the release preset.
inline void describe_build() {
#if defined(KILN_PROGRAM_OPTIMIZE)
  benchmark::AddCustomContext("kiln_build", "check build (" KILN_PROGRAM_OPTIMIZE "): not for timing");
  std::fprintf(stderr, "kiln: this benchmark was compiled with %s for a check build; its timings are not kiln's "
                       "(build it with the release preset to measure)\n", KILN_PROGRAM_OPTIMIZE);
#else
  benchmark::AddCustomContext("kiln_build", "release");
#endif
}

/// Parses Google Benchmark's flags with `defaults` in front of the user's (so that a later
/// flag wins, e.g. --benchmark_repetitions=1 for a smoke run) and describes the build.
/// False when a flag is not recognised (it is reported).
inline bool initialize(int argc, char** argv, std::initializer_list<const char*> defaults) {
  // static: Google Benchmark may keep pointers into the argument list it parsed
  static std::vector<std::string> flags;
  static std::vector<char*> args;
  flags.assign(defaults.begin(), defaults.end());
  args.assign({argv[0]});
  for (auto& f : flags) args.push_back(f.data());
  args.insert(args.end(), argv + 1, argv + argc);
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return false;
  describe_build();
  return true;
}

/// main() for a benchmark binary. A measurement by default: at least 0.5 s per
/// repetition, 9 repetitions run in random interleaved order (so a noisy spell on a
/// shared machine spreads over every variant instead of hitting one), only the
/// aggregates (mean, median, stddev, cv) printed.
inline int run_main(int argc, char** argv, void (*register_all)()) {
  if (!initialize(argc, argv,
                  {"--benchmark_min_time=0.5", "--benchmark_repetitions=9", "--benchmark_report_aggregates_only=true",
                   "--benchmark_enable_random_interleaving=true"})) {
    return 1;
  }
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace kiln_bench
