// benchmarks/rope_bench.cpp — kiln::rope on a Llama-shape q, [1, 32, 512, 128] float
// (8 MiB in, 8 MiB out), and kiln::embedding gathering 4096 rows of a [32000, 512] float
// table, at 1 and 2 threads, beside kiln's copy of the same bytes (y = x: the floor of any
// op that reads its input once and writes its output once) and a plain loop over a
// precomputed cos/sin table (what a user writes by hand).
//
// Names: BM_<op>/<impl>/<threads>T; bytes: the input read once and the output written
// once (embedding: the gathered rows and the output).
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_support.hpp"

namespace {

using kiln_bench::index;
using ftensor = kiln::tensor<float, kiln::cpu<>>;
using itensor = kiln::tensor<std::int32_t, kiln::cpu<>>;

constexpr index B = 1, H = 32, S = 512, D = 128;
constexpr index V = 32000, E = 512, NIDS = 4096;

struct world {
  kiln::context<kiln::cpu<>> ctx;
  ftensor x, y, table, g;
  itensor pos, ids;
  std::vector<float> cs, sn;  // the loop's [S, D/2] table

  explicit world(int nt)
      : ctx(kiln::threads{nt}),
        x(kiln::from_host(ctx, {B, H, S, D}, kiln_bench::random_floats(std::size_t(B * H * S * D), -2.0f, 2.0f, 1))),
        y(kiln::zeros<float>(ctx, {B, H, S, D})),
        table(kiln::from_host(ctx, {V, E}, kiln_bench::random_floats(std::size_t(V * E), -1.0f, 1.0f, 2))),
        g(kiln::zeros<float>(ctx, {NIDS, E})) {
    std::vector<std::int32_t> hp(S), hi(NIDS);
    for (index s = 0; s < S; ++s) hp[s] = static_cast<std::int32_t>(s);
    std::mt19937 gen(3);
    for (auto& v : hi) v = static_cast<std::int32_t>(gen() % V);
    pos = kiln::from_host(ctx, {S}, std::span<const std::int32_t>(hp));
    ids = kiln::from_host(ctx, {NIDS}, std::span<const std::int32_t>(hi));
    cs.resize(std::size_t(S * D / 2));
    sn.resize(cs.size());
    for (index s = 0; s < S; ++s)
      for (index i = 0; i < D / 2; ++i) {
        const float a = float(s) * (1.0f / std::pow(10000.0f, float(2 * i) / float(D)));
        cs[s * D / 2 + i] = std::cos(a);
        sn[s * D / 2 + i] = std::sin(a);
      }
  }
};

world& get_world(int threads) {
  static std::unique_ptr<world> worlds[3];
  auto& w = worlds[threads];
  if (!w) w = std::make_unique<world>(threads);
  return *w;
}

enum class impl { rope, rope_interleaved, rope_loop, copy, embedding };

void run(world& w, impl m, int threads) {
  switch (m) {
    case impl::rope: w.y = kiln::rope(w.x, w.pos); break;
    case impl::rope_interleaved: w.y = kiln::rope(w.x, w.pos, {10000.0f, true}); break;
    case impl::copy: w.y = w.x; break;
    case impl::embedding: w.g = kiln::embedding(w.table, w.ids); break;
    case impl::rope_loop: {
      const float* x = w.x.data();
      float* y = w.y.data();
      const index rows = B * H * S, h = D / 2;
      kiln_bench::split_range(rows, threads, [&](index b, index e) {
        for (index r = b; r < e; ++r) {
          const float* c = w.cs.data() + (r % S) * h;
          const float* s = w.sn.data() + (r % S) * h;
          const float* xr = x + r * D;
          float* yr = y + r * D;
          for (index i = 0; i < h; ++i) {
            yr[i] = xr[i] * c[i] - xr[i + h] * s[i];
            yr[i + h] = xr[i + h] * c[i] + xr[i] * s[i];
          }
        }
      });
      break;
    }
  }
}

/// The output against a double-precision rope / the table rows at a few places.
void check(world& w, impl m) {
  if (m == impl::embedding) {
    const auto ids = w.ids.to_host();
    for (index k : {index(0), NIDS / 2, NIDS - 1})
      for (index d : {index(0), E - 1})
        if (w.g.data()[k * E + d] != w.table.data()[ids[k] * E + d]) {
          std::fprintf(stderr, "rope_bench: embedding row %lld is wrong\n", static_cast<long long>(k));
          std::abort();
        }
    return;
  }
  if (m == impl::copy) return;
  const bool il = m == impl::rope_interleaved;
  for (index r : {index(0), index(1), S - 1, B * H * S - 1})
    for (index i : {index(0), index(5), D / 2 - 1}) {
      const index s = r % S;
      const float inv = 1.0f / std::pow(10000.0f, float(2 * i) / float(D));
      const double a = double(float(s) * inv);
      const index j0 = r * D + (il ? 2 * i : i), j1 = il ? j0 + 1 : j0 + D / 2;
      const double want = double(w.x.data()[j0]) * std::cos(a) - double(w.x.data()[j1]) * std::sin(a);
      if (std::abs(w.y.data()[j0] - want) > 1e-5) {
        std::fprintf(stderr, "rope_bench: row %lld pair %lld is %g, want %g\n", static_cast<long long>(r),
                     static_cast<long long>(i), w.y.data()[j0], want);
        std::abort();
      }
    }
}

void bench(benchmark::State& state, impl m, int threads) {
  world& w = get_world(threads);
  run(w, m, threads);
  check(w, m);
  for (auto _ : state) {
    run(w, m, threads);
    benchmark::ClobberMemory();
  }
  const double bytes = m == impl::embedding ? 2.0 * NIDS * E * 4 : 2.0 * B * H * S * D * 4;
  kiln_bench::set_bytes(state, bytes);
}

void register_all() {
  const std::pair<impl, const char*> impls[] = {{impl::rope, "BM_rope/kiln"},
                                                {impl::rope_interleaved, "BM_rope_interleaved/kiln"},
                                                {impl::rope_loop, "BM_rope/loop"},
                                                {impl::copy, "BM_copy/kiln"},
                                                {impl::embedding, "BM_embedding/kiln"}};
  for (int t : kiln_bench::thread_counts()) {
    for (const auto& [m, name] : impls) {
      const std::string n = std::string(name) + "/" + std::to_string(t) + "T";
      kiln_bench::configure(
          benchmark::RegisterBenchmark(n.c_str(), [m = m, t](benchmark::State& s) { bench(s, m, t); }));
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, register_all); }
