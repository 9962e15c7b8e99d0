// benchmarks/dist_bench.cpp — kiln::dist's all-reduce against a bare MPI_Allreduce on the
// same buffers and sizes (4 KiB to 64 MiB of f32), as algorithm bandwidth (bytes of the
// tensor / time, counter GB, 10^9 B/s). Run under MPI, e.g.
//   mpirun -np 2 build/release/benchmarks/dist_bench
// kiln's variants: CPU tensors; Vulkan tensors on a zero-copy context (mapped memory: MPI
// reads and writes the storage) and on a staged one (zero_copy = false: a download and an
// upload around the MPI call), a few sizes. Every rank runs the same benchmarks with fixed
// iteration counts (Google Benchmark's adaptive counts would differ between ranks and the
// collectives would not pair up); rank 0 prints each run, then a table of medians side by side.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>  // std::getenv, std::atoi
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_support.hpp"

#include <kiln/dist/dist.hpp>
#include <kiln/kiln.hpp>
#if defined(KILN_BENCH_VULKAN)
#include <kiln/vulkan.hpp>
#endif

namespace {

using cpu = kiln::cpu<>;

kiln::dist::communicator& comm() {
  static kiln::dist::communicator c = kiln::dist::communicator::world();
  return c;
}

kiln::context<cpu>& cpu_ctx() {
  static kiln::context<cpu> c;
  return c;
}

/// One zeroed f32 tensor per size, shared by kiln's variant and the bare MPI one (zeros: the
/// sums stay 0, so no variant times infinities or denormals).
kiln::tensor<float, cpu>& cpu_buffer(std::int64_t bytes) {
  static std::map<std::int64_t, kiln::tensor<float, cpu>> buffers;
  auto it = buffers.find(bytes);
  if (it == buffers.end()) it = buffers.emplace(bytes, kiln::zeros<float>(cpu_ctx(), {bytes / 4})).first;
  return it->second;
}

/// About 256 MiB moved per repetition, between 5 and 5000 calls.
std::int64_t iterations_for(std::int64_t bytes) { return std::clamp<std::int64_t>((std::int64_t(256) << 20) / bytes, 5, 5000); }

void set_rate(benchmark::State& state, std::int64_t bytes) {
  const double total = double(bytes) * double(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(total));
  state.counters["GB"] = benchmark::Counter(total / 1e9, benchmark::Counter::kIsRate);
}

void BM_all_reduce_kiln_cpu(benchmark::State& state) {
  const std::int64_t bytes = state.range(0);
  auto& t = cpu_buffer(bytes);
  comm().all_reduce_sum(t);  // one call outside the timing, as every variant makes
  MPI_Barrier(comm().native());
  for (auto _ : state) comm().all_reduce_sum(t);
  set_rate(state, bytes);
}

void BM_all_reduce_mpi(benchmark::State& state) {
  const std::int64_t bytes = state.range(0);
  auto& t = cpu_buffer(bytes);
  const auto bare = [&] {
    MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.numel()), MPI_FLOAT, MPI_SUM, comm().native());
  };
  bare();  // one call outside the timing, as every variant makes
  MPI_Barrier(comm().native());
  for (auto _ : state) bare();
  set_rate(state, bytes);
}

/// kiln and bare MPI call by call, alternating (in pairs whose order alternates too), each
/// call started from a barrier and timed on its own (the slowest rank's time): the medians of the per-call times compare the two under the same
/// machine state even while other work comes and goes (a load spike lands on a few calls of
/// both, not on one variant's round). kiln reduces `t` (a CPU tensor, or a Vulkan one), the
/// bare MPI_Allreduce the CPU buffer of the same size. Counters: kiln_GB and mpi_GB (tensor
/// bytes / median call time), kiln_vs_mpi; kiln_best_GB and mpi_best_GB (fastest call).
template <class B>
void paired(benchmark::State& state, const kiln::tensor<float, B>& t) {
  const std::int64_t bytes = state.range(0);
  auto& host = cpu_buffer(bytes);
  const auto bare = [&] {
    MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(host.numel()), MPI_FLOAT, MPI_SUM, comm().native());
  };
  comm().all_reduce_sum(t);  // one call of each outside the timing
  bare();
  std::vector<double> k, m;
  MPI_Barrier(comm().native());
  // Each call starts from a barrier and is timed alone on every rank, and its time is the
  // slowest rank's (below): timed on one rank, a call that found the other already inside
  // looks shorter than one both started together, which favours whichever variant the
  // skew happens to land on. Which goes first in a pair alternates too.
  const auto timed = [&](auto&& call) {
    MPI_Barrier(comm().native());
    const double t0 = MPI_Wtime();
    call();
    return MPI_Wtime() - t0;
  };
  bool kiln_first = true;
  for (auto _ : state) {
    if (kiln_first) {
      k.push_back(timed([&] { comm().all_reduce_sum(t); }));
      m.push_back(timed(bare));
    } else {
      m.push_back(timed(bare));
      k.push_back(timed([&] { comm().all_reduce_sum(t); }));
    }
    kiln_first = !kiln_first;
  }
  // a call lasts until its slowest rank is done: each call's time is the largest of the ranks'
  MPI_Allreduce(MPI_IN_PLACE, k.data(), static_cast<int>(k.size()), MPI_DOUBLE, MPI_MAX, comm().native());
  MPI_Allreduce(MPI_IN_PLACE, m.data(), static_cast<int>(m.size()), MPI_DOUBLE, MPI_MAX, comm().native());
  std::sort(k.begin(), k.end());
  std::sort(m.begin(), m.end());
  const double kg = double(bytes) / k[k.size() / 2] / 1e9, mg = double(bytes) / m[m.size() / 2] / 1e9;
  state.counters["kiln_GB"] = kg;
  state.counters["mpi_GB"] = mg;
  state.counters["kiln_vs_mpi"] = kg / mg;
  // the fastest call of each: what the call costs when nothing else on the machine interferes
  state.counters["kiln_best_GB"] = double(bytes) / k.front() / 1e9;
  state.counters["mpi_best_GB"] = double(bytes) / m.front() / 1e9;
}

void BM_all_reduce_paired(benchmark::State& state) { paired(state, cpu_buffer(state.range(0))); }

#if defined(KILN_BENCH_VULKAN)
kiln::context<kiln::vulkan>& vk_ctx(bool zero_copy) {
  static auto make = [](bool zc) {
    kiln::vulkan::options o;
    o.zero_copy = zc;
    return std::make_unique<kiln::context<kiln::vulkan>>(o);
  };
  static auto mapped = make(true);
  static auto staged = make(false);
  return zero_copy ? *mapped : *staged;
}

/// A Vulkan tensor on a zero-copy context (MPI works on the mapped storage) or a staged one
/// (a download before and an upload after each call), against bare MPI on the CPU buffer.
void BM_all_reduce_paired_vulkan(benchmark::State& state, bool zero_copy) {
  paired(state, kiln::zeros<float>(vk_ctx(zero_copy), {state.range(0) / 4}));
}
#endif

/// Console output on rank 0, plus each variant's rates per size for the table at the end.
class table_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      for (const char* c : {"GB", "kiln_GB", "mpi_GB", "kiln_best_GB", "mpi_best_GB"}) {
        auto it = r.counters.find(c);
        if (it == r.counters.end()) continue;
        const std::string name = std::string(c) == "GB" ? r.run_name.function_name : r.run_name.function_name + "/" + c;
        rates[name][r.run_name.args].push_back(it->second.value);
      }
    }
  }
  /// The median rate of a variant at a size (0 when it did not run).
  double median(const std::string& name, const std::string& args) const {
    auto f = rates.find(name);
    if (f == rates.end()) return 0.0;
    auto a = f->second.find(args);
    if (a == f->second.end() || a->second.empty()) return 0.0;
    auto v = a->second;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  }
  std::map<std::string, std::map<std::string, std::vector<double>>> rates;
};

class silent_reporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

/// Rounds per size (KILN_DIST_BENCH_ROUNDS, default 5): kiln and bare MPI alternate within
/// each size, round after round, so that both see the same machine state (other work on
/// the machine comes and goes); the table gives each variant's median over the rounds.
int rounds() {
  const char* v = std::getenv("KILN_DIST_BENCH_ROUNDS");
  return v && std::atoi(v) > 0 ? std::atoi(v) : 5;
}

void register_all() {
  const std::vector<std::int64_t> sizes{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  for (auto bytes : sizes) {
    benchmark::RegisterBenchmark("BM_all_reduce_paired", BM_all_reduce_paired)
        ->Arg(bytes)->Iterations(std::clamp<std::int64_t>((std::int64_t(1) << 30) / bytes, 41, 4001))->UseRealTime();
    for (int r = 0; r < rounds(); ++r) {
      benchmark::RegisterBenchmark("BM_all_reduce/kiln_cpu", BM_all_reduce_kiln_cpu)->Arg(bytes)->Iterations(iterations_for(bytes))->UseRealTime();
      benchmark::RegisterBenchmark("BM_all_reduce/mpi", BM_all_reduce_mpi)->Arg(bytes)->Iterations(iterations_for(bytes))->UseRealTime();
    }
  }
#if defined(KILN_BENCH_VULKAN)
  // on every rank or on none: the ranks must register the same benchmarks
  int here = kiln::vulkan::available() ? 1 : 0, everywhere = 0;
  MPI_Allreduce(&here, &everywhere, 1, MPI_INT, MPI_MIN, comm().native());
  if (everywhere) {
    for (std::int64_t bytes : {std::int64_t(64) << 10, std::int64_t(1) << 20, std::int64_t(16) << 20}) {
      for (bool zero_copy : {true, false}) {
        benchmark::RegisterBenchmark(zero_copy ? "BM_all_reduce_paired/vulkan_mapped" : "BM_all_reduce_paired/vulkan_staged",
                                     BM_all_reduce_paired_vulkan, zero_copy)
            ->Arg(bytes)->Iterations(std::clamp<std::int64_t>((std::int64_t(1) << 28) / bytes, 41, 1001))->UseRealTime();
      }
    }
  }
#endif
}

std::string size_text(const std::string& bytes) {
  const long long b = std::stoll(bytes);
  return b >= (1 << 20) ? std::to_string(b >> 20) + " MiB" : std::to_string(b >> 10) + " KiB";
}

}  // namespace

int main(int argc, char** argv) {
  kiln::dist::environment env(argc, argv);
  // the order registered (kiln and MPI alternating, round after round), one run each;
  // flags given on the command line still win
  if (!kiln_bench::initialize(argc, argv, {"--benchmark_enable_random_interleaving=false", "--benchmark_repetitions=1"})) {
    return 1;
  }
  register_all();
  if (comm().rank() != 0) {
    silent_reporter quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
    benchmark::Shutdown();
    return 0;
  }
  table_reporter report;
  benchmark::RunSpecifiedBenchmarks(&report);
  benchmark::Shutdown();

  const auto& rates = report.rates;
  if (!rates.count("BM_all_reduce/mpi")) return 0;
  const bool vk = rates.count("BM_all_reduce_paired/vulkan_mapped/kiln_GB") != 0;
  std::printf("\nall-reduce of f32 on CPU tensors, %d ranks, algorithm bandwidth (GB/s = tensor bytes / time);\n"
              "rounds: kiln and MPI alternate, %d rounds each per size\n",
              comm().size(), rounds());
  std::printf("%-8s | %-29s | %-29s | %-29s", "", "call by call: median call", "call by call: fastest call", "rounds: median round");
  if (vk) std::printf(" | Vulkan tensors: median call, kiln/MPI");
  std::printf("\n%-8s | %8s %8s %9s  | %8s %8s %9s  | %8s %8s %9s ", "size", "kiln", "MPI", "kiln/MPI", "kiln", "MPI",
              "kiln/MPI", "kiln", "MPI", "kiln/MPI");
  if (vk) std::printf(" | %8s %9s %8s %9s", "mapped", "", "staged", "");
  std::printf("\n");
  std::vector<std::pair<long long, std::string>> sizes;
  for (const auto& [a, v] : rates.at("BM_all_reduce/mpi")) sizes.emplace_back(std::stoll(a), a);
  std::sort(sizes.begin(), sizes.end());
  for (const auto& [bytes, a] : sizes) {
    const double pk = report.median("BM_all_reduce_paired/kiln_GB", a), pm = report.median("BM_all_reduce_paired/mpi_GB", a);
    const double bk = report.median("BM_all_reduce_paired/kiln_best_GB", a), bm = report.median("BM_all_reduce_paired/mpi_best_GB", a);
    const double k = report.median("BM_all_reduce/kiln_cpu", a), m = report.median("BM_all_reduce/mpi", a);
    const auto pct = [](double x, double y) { return y > 0 ? 100.0 * x / y : 0.0; };
    std::printf("%-8s | %8.3f %8.3f %8.1f%%  | %8.3f %8.3f %8.1f%%  | %8.3f %8.3f %8.1f%% ", size_text(a).c_str(), pk, pm,
                pct(pk, pm), bk, bm, pct(bk, bm), k, m, pct(k, m));
    if (vk && report.median("BM_all_reduce_paired/vulkan_mapped/kiln_GB", a) > 0) {
      std::printf(" | %8.3f %8.1f%% %8.3f %8.1f%%", report.median("BM_all_reduce_paired/vulkan_mapped/kiln_GB", a),
                  pct(report.median("BM_all_reduce_paired/vulkan_mapped/kiln_GB", a), report.median("BM_all_reduce_paired/vulkan_mapped/mpi_GB", a)),
                  report.median("BM_all_reduce_paired/vulkan_staged/kiln_GB", a),
                  pct(report.median("BM_all_reduce_paired/vulkan_staged/kiln_GB", a), report.median("BM_all_reduce_paired/vulkan_staged/mpi_GB", a)));
    }
    std::printf("\n");
  }
  return 0;
}
