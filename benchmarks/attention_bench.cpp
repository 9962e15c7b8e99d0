// benchmarks/attention_bench.cpp — kiln::attention on the CPU (cpu/attention/flash.hpp)
// against the materialised way in the same binary, 1 and 2 threads:
//   BM_attention/<impl>/<S>/<D>/<causal>/<T>T   B=1, H=32, Sq = Skv = S, f32, where impl is
//     kiln      one flash kernel (the S x S scores never stored)
//     composed  kiln's own ops: s = (q k^T) * scale (+ causal mask), p = softmax(s), y = p v
//     eigen     Eigen per head: the same three steps on Eigen matrices (heads split over
//               the threads)
//   (S = 512, 2048, 8192 with D = 128, and S = 512 with D = 64; the materialised peers
//   only up to 2048: at 8192 the composition's scores and probabilities take 8.6 GB each)
//   BM_decode/<impl>/<Skv>/<Hq>/<T>T           B=1, Hkv=8, D=128, Sq = 1 (a decode step),
//     Skv = 4096, 16384, 32768:
//     kiln      attention over the cache, GB/s of K and V read
//     copy      kiln's copy of the same K and V bytes (the memory-bound ceiling)
// GFLOP/s: 4 * H * Sq * Skv * D per call, halved for causal (the visible half) for every
// impl; the materialised ones compute all S^2 scores. Each impl's output is checked
// against kiln's flash result before it is timed.
#include <benchmark/benchmark.h>

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <kiln/kiln.hpp>

#include "bench_support.hpp"

namespace {

using kiln::index_t;
using B = kiln::cpu<>;
using tensor = kiln::tensor<float, B>;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr index_t H = 32;

kiln::context<B>& ctx(int threads) {
  static std::map<int, std::unique_ptr<kiln::context<B>>> ctxs;
  auto& c = ctxs[threads];
  if (!c) c = std::make_unique<kiln::context<B>>(kiln::threads{threads});
  return *c;
}

tensor random(kiln::context<B>& c, const kiln::shape& s, std::uint64_t seed) {
  const auto h = kiln_bench::random_floats(static_cast<std::size_t>(s.numel()), -1.0f, 1.0f, seed);
  return kiln::from_host(c, s, std::span<const float>(h));
}

void flops(benchmark::State& state, double h, double sq, double skv, double d, bool causal) {
  const double f = 4.0 * h * sq * skv * d * (causal ? 0.5 : 1.0);
  state.counters["GFLOP/s"] =
      benchmark::Counter(f, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

enum impl { flash = 0, composed = 1, eigen = 2 };

/// Largest |a - b| over all elements.
double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = a.size() == b.size() ? 0.0 : std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return std::isnan(m) ? std::numeric_limits<double>::infinity() : m;
}

void BM_attention(benchmark::State& state, impl m, index_t S, index_t D, bool causal, int threads) {
  auto& c = ctx(threads);
  tensor q = random(c, {1, H, S, D}, 1), k = random(c, {1, H, S, D}, 2), v = random(c, {1, H, S, D}, 3);
  tensor y = kiln::empty<float>(c, {1, H, S, D});
  kiln::attention_options o;
  o.causal = causal;
  const float scale = 1.0f / std::sqrt(float(D));
  tensor want = kiln::empty<float>(c, {1, H, S, D});
  want = kiln::attention(q, k, v, o);

  std::function<void()> run;
  tensor s, p, mask;
  std::vector<float> qh, kh, vh, yh;
  if (m == flash) {
    state.SetLabel(kiln::kernel_variant(kiln::attention(q, k, v, o)));
    run = [&] { y = kiln::attention(q, k, v, o); };
  } else if (m == composed) {
    s = kiln::empty<float>(c, {1, H, S, S});
    p = kiln::empty<float>(c, {1, H, S, S});
    std::vector<float> mh(static_cast<std::size_t>(S * S), 0.0f);
    if (causal) {
      for (index_t i = 0; i < S; ++i)
        for (index_t j = i + 1; j < S; ++j) mh[static_cast<std::size_t>(i * S + j)] = -std::numeric_limits<float>::infinity();
    }
    mask = kiln::from_host(c, {S, S}, std::span<const float>(mh));
    run = [&] {
      s = kiln::matmul(q, kiln::transpose(k, 2, 3)) * scale + mask;
      p = kiln::softmax(s);
      y = kiln::matmul(p, v);
    };
  } else {
    qh = q.to_host(), kh = k.to_host(), vh = v.to_host();
    yh.assign(qh.size(), 0.0f);
    run = [&] {
      // heads over the threads (kiln's pool, as the peers in every kiln benchmark)
      kiln::detail::cpu_scheduler::instance().parallel_for(H, (H + threads - 1) / threads, threads, [&](index_t h0, index_t h1) {
        RowMat sc(S, S);
        for (index_t h = h0; h < h1; ++h) {
          const std::size_t off = static_cast<std::size_t>(h * S * D);
          Eigen::Map<const RowMat> qm(qh.data() + off, S, D), km(kh.data() + off, S, D), vm(vh.data() + off, S, D);
          Eigen::Map<RowMat> ym(yh.data() + off, S, D);
          sc.noalias() = (qm * km.transpose()) * scale;
          if (causal) {
            for (index_t i = 0; i < S; ++i) sc.row(i).tail(S - i - 1).setConstant(-std::numeric_limits<float>::infinity());
          }
          const Eigen::VectorXf mx = sc.rowwise().maxCoeff();
          sc = (sc.colwise() - mx).array().exp().matrix();
          const Eigen::VectorXf sum = sc.rowwise().sum();
          sc.array().colwise() /= sum.array();
          ym.noalias() = sc * vm;
        }
      });
    };
  }
  run();
  const double err = max_diff(m == eigen ? yh : y.to_host(), want.to_host());
  if (!(err <= 1e-4)) {
    state.SkipWithError(("output differs from kiln's flash result by " + std::to_string(err)).c_str());
    return;
  }
  for (auto _ : state) run();
  flops(state, double(H), double(S), double(S), double(D), causal);
}

void BM_decode(benchmark::State& state, bool copy, index_t Skv, index_t Hq, int threads) {
  const index_t Hkv = 8, D = 128;
  auto& c = ctx(threads);
  tensor q = random(c, {1, Hq, 1, D}, 1), k = random(c, {1, Hkv, Skv, D}, 2), v = random(c, {1, Hkv, Skv, D}, 3);
  tensor y = kiln::empty<float>(c, {1, Hq, 1, D});
  tensor k2 = kiln::empty<float>(c, {1, Hkv, Skv, D}), v2 = kiln::empty<float>(c, {1, Hkv, Skv, D});
  k2 = k;  // first touch of the destination pages before timing
  v2 = v;
  if (copy) {
    for (auto _ : state) {
      k2 = k;
      v2 = v;
    }
  } else {
    state.SetLabel(kiln::kernel_variant(kiln::attention(q, k, v)));
    for (auto _ : state) y = kiln::attention(q, k, v);
  }
  // K and V read once (the copy also writes them: its GB/s counts the bytes read)
  kiln_bench::set_bytes(state, 2.0 * 4.0 * double(Hkv) * double(Skv) * double(D));
}

void register_all() {
  const char* names[] = {"kiln", "composed", "eigen"};
  for (int m : {flash, composed, eigen}) {
    for (int t : kiln_bench::thread_counts()) {
      for (auto [S, D] : {std::pair<index_t, index_t>{512, 64}, {512, 128}, {2048, 128}, {8192, 128}}) {
        if (m != flash && S > 2048) continue;
        for (int causal : {1, 0}) {
          kiln_bench::configure(benchmark::RegisterBenchmark(
              ("BM_attention/" + std::string(names[m]) + "/" + std::to_string(S) + "/" + std::to_string(D) + "/" +
               (causal ? "causal" : "full") + "/" + std::to_string(t) + "T").c_str(),
              [=](benchmark::State& s) { BM_attention(s, impl(m), S, D, causal != 0, t); })
              ->Unit(benchmark::kMillisecond));
        }
      }
    }
  }
  for (bool copy : {false, true}) {
    for (int t : kiln_bench::thread_counts()) {
      for (index_t skv : {4096, 16384, 32768}) {
        for (index_t hq : {8, 32}) {
          if (copy && hq != 8) continue;
          kiln_bench::configure(benchmark::RegisterBenchmark(
              ("BM_decode/" + std::string(copy ? "copy" : "kiln") + "/" + std::to_string(skv) + "/" + std::to_string(hq) +
               "/" + std::to_string(t) + "T").c_str(),
              [=](benchmark::State& s) { BM_decode(s, copy, skv, hq, t); })
              ->Unit(benchmark::kMicrosecond));
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, register_all); }
