// benchmarks/sampling_bench.cpp — kiln::sample on the CPU over one row of logits of a real
// vocabulary (32000: Llama 2; 128256: Llama 3), per option set, beside two peers on the
// same row: the textbook sampler (softmax, a full sort, the cumulative sum, top-k / top-p /
// min-p cuts, a draw; what a short host loop does) and kiln::argmax (the least any id
// choice costs: one read of the row). Time per row; GB = the row's logits bytes over it.
//   BM_sample/cpu/<V>/<options>, BM_sort_sampler/<V>/<options>, BM_argmax/cpu/<V>
// options: greedy; llama (llama.cpp's defaults: top-k 40, top-p 0.95, min-p 0.05, t 0.8);
// top_p (top-p 0.95 alone over the whole vocabulary, t 1).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_support.hpp"

#include <kiln/sampling.hpp>

namespace {

using B = kiln::cpu<>;

kiln::context<B>& ctx() {
  static kiln::context<B> c(kiln::threads{1});  // one row: one thread, as a decode loop samples
  return c;
}

struct option_set {
  const char* name;
  kiln::sampling_options opt;
};
const option_set sets[] = {
    {"greedy", {}},
    {"llama", {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 1}},
    {"top_p", {.temperature = 1.0f, .top_p = 0.95f, .seed = 1}},
};

std::vector<float> logits_row(std::int64_t V) {
  // a language model's shape: a few likely ids, a long tail (a scaled normal)
  std::mt19937 g(42);
  std::normal_distribution<float> d(0.0f, 2.5f);
  std::vector<float> x(static_cast<std::size_t>(V));
  for (float& v : x) v = d(g);
  return x;
}

void BM_sample(benchmark::State& state, std::int64_t V, kiln::sampling_options o) {
  const auto host = logits_row(V);
  auto x = kiln::from_host(ctx(), {1, V}, std::span<const float>(host));
  const std::vector<std::int32_t> history = {1, 5, 9, 200, 3000};
  std::uint64_t step = 0;
  for (auto _ : state) {
    auto id = kiln::sample(x, o, step++, history);
    benchmark::DoNotOptimize(id.data()[0]);
  }
  kiln_bench::set_bytes(state, double(V) * 4.0);
}

/// The textbook sampler on the host: softmax, sort, cumulative sum, cuts, draw.
std::int32_t sort_sample(const std::vector<float>& x, const kiln::sampling_options& o, std::vector<std::int32_t>& idx,
                         std::vector<float>& p, std::mt19937& g) {
  const std::size_t V = x.size();
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](std::int32_t a, std::int32_t b) { return x[std::size_t(a)] > x[std::size_t(b)]; });
  if (o.temperature == 0.0f) return idx[0];
  std::size_t n = o.top_k > 0 ? std::min<std::size_t>(V, std::size_t(o.top_k)) : V;
  const float m = x[std::size_t(idx[0])];
  float z = 0.0f;
  for (std::size_t j = 0; j < n; ++j) z += p[j] = std::exp(x[std::size_t(idx[j])] - m);
  float cum = 0.0f;
  std::size_t keep = 0;
  while (keep < n && cum < o.top_p * z && p[keep] >= o.min_p) cum += p[keep++];
  float w = 0.0f;
  for (std::size_t j = 0; j < keep; ++j) w += p[j] = std::exp((x[std::size_t(idx[j])] - m) / o.temperature);
  const float target = std::uniform_real_distribution<float>(0.0f, w)(g);
  float run = 0.0f;
  for (std::size_t j = 0; j < keep; ++j)
    if ((run += p[j]) > target) return idx[j];
  return idx[keep ? keep - 1 : 0];
}

void BM_sort_sampler(benchmark::State& state, std::int64_t V, kiln::sampling_options o) {
  const auto host = logits_row(V);
  std::vector<std::int32_t> idx(static_cast<std::size_t>(V));
  std::vector<float> p(static_cast<std::size_t>(V));
  std::mt19937 g(1);
  for (auto _ : state) benchmark::DoNotOptimize(sort_sample(host, o, idx, p, g));
  kiln_bench::set_bytes(state, double(V) * 4.0);
}

void BM_argmax(benchmark::State& state, std::int64_t V) {
  const auto host = logits_row(V);
  auto x = kiln::from_host(ctx(), {1, V}, std::span<const float>(host));
  auto id = kiln::empty<std::int32_t>(ctx(), {1});
  for (auto _ : state) {
    id = kiln::argmax(x, -1);
    benchmark::DoNotOptimize(id.data()[0]);
  }
  kiln_bench::set_bytes(state, double(V) * 4.0);
}

void register_all() {
  for (std::int64_t V : {32000, 128256}) {
    const std::string v = std::to_string(V);
    for (const option_set& s : sets) {
      kiln_bench::configure(benchmark::RegisterBenchmark(("BM_sample/cpu/" + v + "/" + s.name).c_str(), BM_sample, V, s.opt));
      kiln_bench::configure(benchmark::RegisterBenchmark(("BM_sort_sampler/" + v + "/" + s.name).c_str(), BM_sort_sampler, V, s.opt));
    }
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_argmax/cpu/" + v).c_str(), BM_argmax, V));
  }
}

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, register_all); }
