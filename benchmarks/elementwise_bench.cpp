// benchmarks/elementwise_bench.cpp — one line per elementwise op: y = op(a) (or op(a, b)),
// kiln on two threads, at 1M floats (4 MiB per array: cache-resident) and 16M floats
// (64 MiB: memory-bound), with an Eigen array-expression peer (same two threads, the range
// split in halves) for a few ops; and on one thread at 16 and 4K floats, where the cost of
// a statement itself (building the expression, checks, layout) shows beside Eigen's.
//
// Names: BM_<op>/<impl>/<size>/<threads>T. Bytes count each input read once and the
// output written once. To add an op: one line in kiln_ops[] (optionally one in eigen_ops[]).
#include <kiln/kiln.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bench_support.hpp"

namespace {

using kiln_bench::index;
using ftensor = kiln::tensor<float, kiln::cpu<>>;

/// Inputs and output of one size, on a context with the benchmark's thread count;
/// allocated and touched once.
struct world {
  index n;
  int threads;
  kiln::context<kiln::cpu<>> ctx;
  ftensor a, b, y;

  world(index size, int nt)
      : n(size),
        threads(nt),
        ctx(kiln::threads{nt}),
        a(kiln::from_host(ctx, {size}, kiln_bench::random_floats(size, -4.0f, 4.0f, 11))),
        b(kiln::from_host(ctx, {size}, kiln_bench::random_floats(size, -4.0f, 4.0f, 12))),
        y(kiln::zeros<float>(ctx, {size})) {}
};

world& get_world(index size, int threads) {
  static std::vector<std::unique_ptr<world>> worlds;
  for (auto& w : worlds) {
    if (w->n == size && w->threads == threads) return *w;
  }
  worlds.push_back(std::make_unique<world>(size, threads));
  return *worlds.back();
}

struct kiln_case {
  const char* op;
  int arrays;  // inputs + output
  void (*run)(ftensor& y, const ftensor& a, const ftensor& b);
  double (*reference)(double a, double b);
};

const kiln_case kiln_ops[] = {
    {"relu", 2, [](ftensor& y, const ftensor& a, const ftensor&) { y = kiln::relu(a); },
     [](double a, double) { return std::max(a, 0.0); }},
    {"exp", 2, [](ftensor& y, const ftensor& a, const ftensor&) { y = kiln::exp(a); },
     [](double a, double) { return std::exp(a); }},
    {"tanh", 2, [](ftensor& y, const ftensor& a, const ftensor&) { y = kiln::tanh(a); },
     [](double a, double) { return std::tanh(a); }},
    {"sigmoid", 2, [](ftensor& y, const ftensor& a, const ftensor&) { y = kiln::sigmoid(a); },
     [](double a, double) { return 1.0 / (1.0 + std::exp(-a)); }},
    {"gelu", 2, [](ftensor& y, const ftensor& a, const ftensor&) { y = kiln::gelu(a); },
     [](double a, double) { return 0.5 * a * (1.0 + std::erf(a * 0.70710678118654752)); }},
    {"gelu_tanh", 2, [](ftensor& y, const ftensor& a, const ftensor&) { y = kiln::gelu_tanh(a); },
     [](double a, double) {
       return 0.5 * a * (1.0 + std::tanh(0.79788456080286536 * (a + 0.044715 * a * a * a)));
     }},
    {"silu", 2, [](ftensor& y, const ftensor& a, const ftensor&) { y = kiln::silu(a); },
     [](double a, double) { return a / (1.0 + std::exp(-a)); }},
    {"softplus", 2, [](ftensor& y, const ftensor& a, const ftensor&) { y = kiln::softplus(a); },
     [](double a, double) { return std::max(a, 0.0) + std::log1p(std::exp(-std::abs(a))); }},
    {"add", 3, [](ftensor& y, const ftensor& a, const ftensor& b) { y = a + b; },
     [](double a, double b) { return a + b; }},
    {"mul", 3, [](ftensor& y, const ftensor& a, const ftensor& b) { y = a * b; },
     [](double a, double b) { return a * b; }},
    {"where", 3, [](ftensor& y, const ftensor& a, const ftensor& b) { y = kiln::where(a > b, a, b); },
     [](double a, double b) { return a > b ? a : b; }},
};

using emap = Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64>;
using cemap = Eigen::Map<const Eigen::ArrayXf, Eigen::Aligned64>;

struct eigen_case {
  const char* op;
  void (*run)(emap y, cemap a, cemap b);
};

const eigen_case eigen_ops[] = {
    {"relu", [](emap y, cemap a, cemap) { y = a.max(0.0f); }},
    {"exp", [](emap y, cemap a, cemap) { y = a.exp(); }},
    {"tanh", [](emap y, cemap a, cemap) { y = a.tanh(); }},
    {"sigmoid", [](emap y, cemap a, cemap) { y = 1.0f / (1.0f + (-a).exp()); }},
    {"silu", [](emap y, cemap a, cemap) { y = a / (1.0f + (-a).exp()); }},
    {"add", [](emap y, cemap a, cemap b) { y = a + b; }},
};

template <class Run>
void add(const std::string& name, index size, int threads, const kiln_case& k, Run run) {
  auto v = std::make_shared<kiln_bench::verdict>();
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    world& w = get_world(size, threads);
    const float* a = w.a.data();
    const float* bb = w.b.data();
    const bool ok = kiln_bench::verified(state, *v, [&] {
      return kiln_bench::check_output(w.y.data(), size, [&] { run(w); },
                                      [&](index i) { return k.reference(a[i], bb[i]); });
    });
    if (!ok) return;
    for (auto _ : state) {
      run(w);
      benchmark::ClobberMemory();
    }
    kiln_bench::set_bytes(state, double(k.arrays) * sizeof(float) * double(size));
  });
  kiln_bench::configure(b);
}

void register_all() {
  const int many = kiln_bench::thread_counts().back();
  const struct {
    index n;
    const char* label;
    int threads;
  } sizes[] = {{16, "16", 1}, {4096, "4K", 1}, {index(1) << 20, "1M", many}, {index(1) << 24, "16M", many}};

  for (const auto& k : kiln_ops) {
    for (const auto& s : sizes) {
      add(std::string("BM_") + k.op + "/kiln/" + s.label + "/" + std::to_string(s.threads) + "T", s.n, s.threads, k,
          [run = k.run](world& w) { run(w.y, w.a, w.b); });
    }
    for (const auto& e : eigen_ops) {
      if (std::string(e.op) != k.op) continue;
      for (const auto& s : sizes) {
        add(std::string("BM_") + k.op + "/eigen/" + s.label + "/" + std::to_string(s.threads) + "T", s.n, s.threads,
            k, [run = e.run](world& w) {
              kiln_bench::split_range(w.n, w.threads, [&](index lo, index hi) {
                run(emap(w.y.data() + lo, hi - lo), cemap(w.a.data() + lo, hi - lo),
                    cemap(w.b.data() + lo, hi - lo));
              });
            });
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, register_all); }
