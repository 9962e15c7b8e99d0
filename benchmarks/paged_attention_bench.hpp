// benchmarks/paged_attention_bench.hpp — paged against contiguous decode attention on one
// backend (paged_attention_bench.cpp: the CPU; vulkan_paged_attention_bench.cpp: Vulkan),
// both in one binary so their ratio comes from one run:
//   BM_paged_decode/<backend>/<B>/<L>/<D>       kiln::paged_attention: B sequences of L
//                                               positions each in a pool of blocks of 16
//                                               (shuffled: a sequence's blocks are not
//                                               neighbours), Sq = 1, causal
//   BM_contiguous_decode/<backend>/<B>/<L>/<D>  kiln::attention over the same keys and
//                                               values as [B, Hkv, L, D] tensors
// Hq = 32, Hkv = 8 (grouped-query, as Llama 3), f32. GB/s counts K and V read once per
// iteration (B * Hkv * L * 2D floats); each iteration waits for the device.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <kiln/kiln.hpp>

#include "bench_support.hpp"

namespace kiln_paged_bench {

using kiln::index_t;

inline constexpr index_t hq = 32, hkv = 8, block = 16;

/// The benchmark's data on a context: pools, tables, lengths, and the contiguous copy.
template <class B>
struct data {
  kiln::tensor<float, B> q, kpool, vpool, k, v, y;
  kiln::tensor<std::int32_t, B> tables, lens;

  data(const kiln::context<B>& ctx, index_t nb, index_t L, index_t D) {
    const index_t per = (L + block - 1) / block, blocks = nb * per;
    std::mt19937_64 g(42);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), g);
    std::vector<std::int32_t> ln(static_cast<std::size_t>(nb), static_cast<std::int32_t>(L));
    q = kiln::random<float>(ctx, {nb, hq, 1, D}, -1, 1, 1);
    kpool = kiln::random<float>(ctx, {blocks, hkv, block, D}, -1, 1, 2);
    vpool = kiln::random<float>(ctx, {blocks, hkv, block, D}, -1, 1, 3);
    tables = kiln::from_host(ctx, {nb, per}, std::span<const std::int32_t>(ids));
    lens = kiln::from_host(ctx, {nb}, std::span<const std::int32_t>(ln));
    k = kiln::random<float>(ctx, {nb, hkv, L, D}, -1, 1, 4);
    v = kiln::random<float>(ctx, {nb, hkv, L, D}, -1, 1, 5);
    y = kiln::empty<float>(ctx, {nb, hq, 1, D});
  }
};

inline void counters(benchmark::State& state, index_t nb, index_t L, index_t D) {
  state.counters["GB/s"] = benchmark::Counter(double(nb) * double(hkv) * double(L) * 2.0 * double(D) * 4.0,
                                              benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

template <class B>
void paged(benchmark::State& state, kiln::context<B>& ctx) {
  const index_t nb = state.range(0), L = state.range(1), D = state.range(2);
  data<B> x(ctx, nb, L, D);
  kiln::attention_options o;
  o.causal = true;
  state.SetLabel(kiln::kernel_variant(kiln::paged_attention(x.q, x.kpool, x.vpool, x.tables, x.lens, o)));
  x.y = kiln::paged_attention(x.q, x.kpool, x.vpool, x.tables, x.lens, o);  // compile before timing
  ctx.synchronize();
  for (auto _ : state) {
    x.y = kiln::paged_attention(x.q, x.kpool, x.vpool, x.tables, x.lens, o);
    ctx.synchronize();
  }
  counters(state, nb, L, D);
}

template <class B>
void contiguous(benchmark::State& state, kiln::context<B>& ctx) {
  const index_t nb = state.range(0), L = state.range(1), D = state.range(2);
  data<B> x(ctx, nb, L, D);
  kiln::attention_options o;
  o.causal = true;
  state.SetLabel(kiln::kernel_variant(kiln::attention(x.q, x.k, x.v, o)));
  x.y = kiln::attention(x.q, x.k, x.v, o);
  ctx.synchronize();
  for (auto _ : state) {
    x.y = kiln::attention(x.q, x.k, x.v, o);
    ctx.synchronize();
  }
  counters(state, nb, L, D);
}

/// Registers both benchmarks for backend name `backend` over B 1, 4, 16, L 512, 2048, D 64, 128.
template <class F, class G>
void register_all(const std::string& backend, F paged_fn, G contiguous_fn) {
  for (auto [name, fn] : {std::pair<std::string, void (*)(benchmark::State&)>{"BM_paged_decode/", paged_fn},
                          std::pair<std::string, void (*)(benchmark::State&)>{"BM_contiguous_decode/", contiguous_fn}}) {
    auto* b = benchmark::RegisterBenchmark((name + backend).c_str(), fn);
    for (index_t nb : {1, 4, 16})
      for (index_t L : {512, 2048})
        for (index_t D : {64, 128}) b->Args({nb, L, D});
    b->ArgNames({"B", "L", "D"})->Unit(benchmark::kMillisecond);
    kiln_bench::configure(b);
  }
}

}  // namespace kiln_paged_bench
