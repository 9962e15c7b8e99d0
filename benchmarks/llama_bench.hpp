// benchmarks/llama_bench.hpp — the Llama decoder (kiln/models/llama.hpp) with random
// weights made in-process, shared by llama_bench.cpp (CPU) and vulkan_llama_bench.cpp:
// <weights>: f32, f16, or int8 / int4 (f32 model, projections and LM head quantized).
//   BM_llama_prefill/<weights>/<backend>   128 prompt tokens in one forward step (the
//                                          cache rewound each iteration): tokens/s
//   BM_llama_prefill512/<weights>/<backend> the same with 512 tokens (CPU, at the most threads)
//   BM_llama_decode/<weights>/<backend>    one token per iteration after a 128-token
//                                          prompt: tokens/s, and "weights GB/s", the
//                                          weight bytes read per token times tokens/s
//   BM_copy/<backend>                      kiln's copy of a 512 MiB f32 buffer: GB/s counts
//                                          bytes read plus written, as STREAM does
//   BM_read/<backend>                      kiln::sum of the same buffer: GB/s of bytes read
// The decode bound is the copy's GB/s over the weight bytes per token; "weights GB/s"
// over the copy's GB/s is the fraction of that bound reached. A decode step only reads
// (the weights; its writes are a few vectors), and where a core keeps only so many reads
// in flight, reads alone do not reach the copy's rate, whose streaming stores need no
// read slots: on the 2-core Zen 4 machine of the notes BM_read is 0.71-0.78 of BM_copy
// at 2 threads. "weights GB/s" over BM_read is then the share of what reading the
// weights once can reach.
// The default shape is Llama-2-like at 1B size: hidden 2048, intermediate 5632, 16
// layers, 32 query and 8 kv heads of 64, vocabulary 32000 (untied). KILN_LLAMA_BENCH_LAYERS
// changes the layer count (a quick run on a slow device). KILN_PROFILE=1 also prints the
// kernel table (kiln::profile_table) of four decode steps after each decode benchmark and
// of one prefill step after each prefill benchmark.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include <kiln/kiln.hpp>
#include <kiln/models/llama.hpp>

#include "bench_support.hpp"

namespace llama_bench {

using kiln::index_t;

inline kiln::llama::config shape() {
  kiln::llama::config c;
  c.hidden_size = 2048;
  c.intermediate_size = 5632;
  c.num_hidden_layers = 16;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 64;
  c.vocab_size = 32000;
  c.max_position_embeddings = 2048;
  c.rms_norm_eps = 1e-5f;
  if (const char* l = std::getenv("KILN_LLAMA_BENCH_LAYERS")) c.num_hidden_layers = std::max(1, std::atoi(l));
  return c;
}

constexpr index_t prompt_len = 128;
constexpr index_t max_len = 1024;  // room for the GPU check's 512-token prefill

/// A model of shape() with uniform random weights in +-1/sqrt(fan-in) (norm weights 1);
/// Q: the projections and LM head quantized as load_options::quant would.
template <class W, class B, kiln::llama::weight_quant Q = kiln::llama::weight_quant::none>
kiln::llama::model<W, B> make(const kiln::context<B>& ctx) {
  const auto c = shape();
  const index_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const index_t nq = c.num_attention_heads * D, nk = c.num_key_value_heads * D;
  using M = kiln::llama::model<W, B>;
  kiln::llama::load_options o;
  o.max_len = max_len;
  std::uint64_t seed = 1;
  const auto rnd = [&](index_t rows, index_t cols, bool projection = true) {
    const double a = 1.0 / std::sqrt(double(cols));
    auto m = M::weight::build(rows, cols, o.max_block_bytes, [&](index_t r0, index_t r1) {
      return kiln::random<W>(ctx, {r1 - r0, cols}, -a, a, seed++);
    });
    if (projection) m.quantize(Q, "a projection");
    return m;
  };
  std::vector<typename M::layer> layers;
  for (index_t l = 0; l < c.num_hidden_layers; ++l) {
    layers.push_back({kiln::full(ctx, {H}, W(1.0f)), rnd(nq + 2 * nk, H), rnd(H, nq), kiln::full(ctx, {H}, W(1.0f)),
                      rnd(2 * I, H), rnd(H, I)});
  }
  return M(ctx, c, rnd(c.vocab_size, H, false), std::move(layers), kiln::full(ctx, {H}, W(1.0f)), rnd(c.vocab_size, H), o);
}

/// Frees the model cached() holds (whatever its dtype and backend).
inline std::function<void()>& drop_cached() {
  static std::function<void()> f;
  return f;
}

/// One model alive at a time (an f32 one holds 3.4 GB): the last one asked for.
template <class W, class B, kiln::llama::weight_quant Q = kiln::llama::weight_quant::none>
kiln::llama::model<W, B>& cached(const kiln::context<B>& ctx) {
  static std::unique_ptr<kiln::llama::model<W, B>> m;
  static const kiln::context<B>* made_for = nullptr;
  if (!m || made_for != &ctx) {
    if (drop_cached()) drop_cached()();
    m = std::make_unique<kiln::llama::model<W, B>>(make<W, B, Q>(ctx));
    made_for = &ctx;
    drop_cached() = [] { m.reset(); };
  }
  return *m;
}

inline std::vector<std::int32_t> prompt(index_t n = prompt_len) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7919 + 1) % 32000);
  return ids;
}

template <class W, class B, kiln::llama::weight_quant Q = kiln::llama::weight_quant::none>
void prefill(benchmark::State& state, const kiln::context<B>& ctx, index_t n = prompt_len) {
  auto& m = cached<W, B, Q>(ctx);
  const auto ids = prompt(n);
  for (auto _ : state) {
    m.reset();
    auto logits = m.forward(ids);
    benchmark::DoNotOptimize(logits.to_host());  // waits for the step
  }
  state.counters["tok/s"] = benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate);
  if (ctx.profiling()) {  // KILN_PROFILE=1: where one prefill step's time goes, on stderr
    ctx.clear_profile();
    m.reset();
    m.forward(ids).to_host();
    const char* quant = Q == kiln::llama::weight_quant::int8   ? ", int8 projections"
                        : Q == kiln::llama::weight_quant::int4 ? ", int4 projections"
                                                               : "";
    std::cerr << "prefill, " << kiln::dtype_name_v<W> << " weights" << quant << ", " << n << " tokens, one step:\n"
              << kiln::profile_table(ctx) << "\n";
  }
}

template <class W, class B, kiln::llama::weight_quant Q = kiln::llama::weight_quant::none>
void decode(benchmark::State& state, const kiln::context<B>& ctx) {
  auto& m = cached<W, B, Q>(ctx);
  m.reset();
  m.forward(prompt()).to_host();  // the prefill done before the clock starts
  std::int32_t next = 1;
  const auto step = [&] {
    if (m.position() == m.capacity()) m.rewind(prompt_len);
    auto logits = m.forward(std::span<const std::int32_t>(&next, 1));
    next = kiln::llama::argmax_row(logits, 0);  // waits for the step, as greedy decoding does
  };
  for (auto _ : state) step();
  state.counters["tok/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  if (ctx.profiling()) {  // KILN_PROFILE=1: where four decode steps' time goes, on stderr
    ctx.clear_profile();
    for (int i = 0; i < 4; ++i) step();
    std::cerr << "decode, " << kiln::dtype_name_v<W> << " weights, four steps:\n" << kiln::profile_table(ctx) << "\n";
  }
  kiln_bench::set_bytes(state, m.weight_bytes_per_token());
  state.SetLabel(std::to_string(m.weight_bytes_per_token() / 1e9).substr(0, 5) + " GB of weights per token, " +
                 std::to_string(m.cfg().num_hidden_layers) + " layers");
}

template <class B>
void copy(benchmark::State& state, const kiln::context<B>& ctx) {
  // 512 MiB of f32 (128 MiB on Vulkan, the most a kernel may bind on lavapipe)
  const index_t n = std::is_same_v<B, kiln::cpu<>> ? index_t(128) << 20 : index_t(32) << 20;
  auto a = kiln::full(ctx, {n}, 1.0f);
  auto b = kiln::empty<float>(ctx, {n});
  b = a;
  ctx.synchronize();  // the fill and the first touch of both buffers before the clock starts
  for (auto _ : state) {
    b = a;
    ctx.synchronize();
  }
  kiln_bench::set_bytes(state, 2.0 * 4.0 * double(n));
}

/// kiln::sum of the copy's buffer: the rate at which kiln reads memory that it does not
/// write (bytes read).
template <class B>
void read(benchmark::State& state, const kiln::context<B>& ctx) {
  const index_t n = std::is_same_v<B, kiln::cpu<>> ? index_t(128) << 20 : index_t(32) << 20;
  auto a = kiln::full(ctx, {n}, 1.0f);
  auto s = kiln::empty<float>(ctx, {});
  s = kiln::sum(a);
  ctx.synchronize();
  for (auto _ : state) {
    s = kiln::sum(a);
    ctx.synchronize();
  }
  kiln_bench::set_bytes(state, 4.0 * double(n));
}

/// kiln_bench::run_main without random interleaving (each switch of model would rebuild
/// one of several GB) and with 5 repetitions; flags given on the command line still win.
inline int run_main(int argc, char** argv, void (*register_all)()) {
  static char interleave[] = "--benchmark_enable_random_interleaving=false";
  static char repetitions[] = "--benchmark_repetitions=5";
  std::vector<char*> args{argv[0], interleave, repetitions};
  args.insert(args.end(), argv + 1, argv + argc);
  return kiln_bench::run_main(static_cast<int>(args.size()), args.data(), register_all);
}

}  // namespace llama_bench
