// benchmarks/bitnet_bench.cpp — the BitNet b1.58 decoder (kiln/models/bitnet.hpp) on the
// CPU at 1 and 2 threads, at the shape of microsoft/bitnet-b1.58-2B-4T (hidden 2560, FFN
// 6912, 30 layers, 20 query and 5 kv heads of 128, vocabulary 128256, tied table) with
// random ternary codes (a scale per row) and a random table, beside kiln's copy bandwidth:
//   BM_copy/<t>T                     kiln's copy of 512 MiB: GB/s of bytes read plus written
//                                    (STREAM's count); runs first, its median is the bound's
//   BM_bitnet_decode/<table>/<t>T    one token per iteration after a 128-token prompt:
//                                    tok/s; "GB", the weight bytes read per token (ternary
//                                    codes + scales, LM head, norms) times tok/s; and the
//                                    weight-streaming bound of that run: "copy_GB/s", the
//                                    median of BM_copy/<t>T's repetitions run before it
//                                    (the filter must keep it), "bound_ms", those bytes
//                                    over it, "bound_share", bound_ms over the measured
//                                    time per token (1: at the bound); likewise
//                                    "read_GB/s", "read_bound_ms", "read_share" against
//   BM_read/<t>T                     kiln::sum of 512 MiB: GB/s of bytes read. A decode
//                                    step only reads its weights; where a core keeps only
//                                    so many reads in flight, reading alone does not reach
//                                    the copy's rate (its streaming stores take no read
//                                    slots): on the 2-core Zen 4 of the notes BM_read/2T
//                                    is 0.71-0.78 of BM_copy/2T, so read_share is the
//                                    share of what reading the weights once can reach
//   BM_bitnet_prefill/<table>/<t>T   128 prompt tokens in one forward step: tok/s
// <table>: the embedding / LM head kept as bf16 or int8. The label splits the bytes per
// token into the packed codes (+ scales) and the LM head. KILN_BITNET_BENCH_LAYERS changes
// the layer count (a quick run); KILN_PROFILE=1 also prints the kernel table
// (kiln::profile_table) of four decode steps after each decode benchmark.
#include "llama_bench.hpp"

#include <kiln/models/bitnet.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using B = kiln::cpu<>;
using kiln::index_t;
using table_dtype = kiln::bitnet::table_dtype;

const kiln::context<B>& ctx(int threads) {
  static std::map<int, std::unique_ptr<kiln::context<B>>> ctxs;
  auto& c = ctxs[threads];
  if (!c) c = std::make_unique<kiln::context<B>>(kiln::threads{threads});
  return *c;
}

kiln::bitnet::config shape() {
  kiln::bitnet::config c;
  c.hidden_size = 2560;
  c.intermediate_size = 6912;
  c.num_hidden_layers = 30;
  c.num_attention_heads = 20;
  c.num_key_value_heads = 5;
  c.head_dim = 128;
  c.vocab_size = 128256;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.tie_word_embeddings = true;
  if (const char* l = std::getenv("KILN_BITNET_BENCH_LAYERS")) c.num_hidden_layers = std::max(1, std::atoi(l));
  return c;
}

constexpr index_t prompt_len = 128;

/// A [rows, cols] ternary matrix of random codes (-1, 0, 1 equally likely), one block, a
/// scale of 1/sqrt(cols) per row.
kiln::bitnet::ternary_matrix<B> random_ternary(const kiln::context<B>& c, index_t rows, index_t cols, std::uint64_t& seed) {
  const index_t chunks = kiln::detail::chunks_for<kiln::quant::ternary>(cols), words = chunks * 8;
  std::vector<std::uint8_t> valid;  // bytes whose four 2-bit fields are 0, 1 or 2 (code + 1)
  for (unsigned b = 0; b < 256; ++b) {
    if ((b & 3) != 3 && ((b >> 2) & 3) != 3 && ((b >> 4) & 3) != 3 && ((b >> 6) & 3) != 3) valid.push_back(std::uint8_t(b));
  }
  std::vector<std::int32_t> host(static_cast<std::size_t>(rows * words));
  auto* bytes = reinterpret_cast<std::uint8_t*>(host.data());
  std::uint64_t x = 0x9E3779B97F4A7C15ull * ++seed;
  for (std::size_t i = 0; i < host.size() * 4; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    bytes[i] = valid[(x >> 32) % valid.size()];
  }
  kiln::detail::quant_layout l;
  l.N = rows;
  l.K = cols;
  l.group = cols;
  l.groups = 1;
  l.chunks = chunks;
  l.words = words;
  kiln::bitnet::ternary_matrix<B> m;
  m.blocks.emplace_back(kiln::from_host(c, kiln::shape{rows, words}, std::span<const std::int32_t>(host)),
                        kiln::full(c, {rows, 1}, float(1.0 / std::sqrt(double(cols)))), l);
  return m;
}

kiln::bitnet::model<B> make(const kiln::context<B>& c, table_dtype t) {
  const auto cfg = shape();
  const index_t H = cfg.hidden_size, I = cfg.intermediate_size, D = cfg.head_dim, V = cfg.vocab_size;
  const index_t nq = cfg.num_attention_heads * D, nk = cfg.num_key_value_heads * D;
  kiln::bitnet::load_options o;
  o.max_len = 1024;
  o.lm_head = t;
  std::uint64_t seed = 1;
  std::vector<kiln::bitnet::model<B>::layer> layers;
  for (index_t l = 0; l < cfg.num_hidden_layers; ++l) {
    layers.push_back({kiln::full(c, {H}, 1.0f), kiln::full(c, {nq}, 1.0f), random_ternary(c, nq + 2 * nk, H, seed),
                      random_ternary(c, H, nq, seed), kiln::full(c, {H}, 1.0f), kiln::full(c, {I}, 1.0f),
                      random_ternary(c, 2 * I, H, seed), random_ternary(c, H, I, seed)});
  }
  kiln::bitnet::table<B> table;
  table.dtype = t;
  table.t16b = kiln::models::matrix<kiln::bfloat16, B>::build(V, H, o.max_block_bytes, [&](index_t r0, index_t r1) {
    return kiln::random<kiln::bfloat16>(c, {r1 - r0, H}, -1.0, 1.0, seed++);
  });
  if (t == table_dtype::int8) table.t16b.quantize(kiln::models::weight_quant::int8, "the table");
  return kiln::bitnet::model<B>(c, cfg, table, std::move(layers), kiln::full(c, {H}, 1.0f), table, o);
}

/// One model alive at a time: the last one asked for.
kiln::bitnet::model<B>& cached(int threads, table_dtype t) {
  static std::unique_ptr<kiln::bitnet::model<B>> m;
  static std::pair<int, table_dtype> made_for{0, table_dtype::bf16};
  if (!m || made_for != std::pair{threads, t}) {
    m.reset();
    m = std::make_unique<kiln::bitnet::model<B>>(make(ctx(threads), t));
    made_for = {threads, t};
  }
  return *m;
}

std::vector<std::int32_t> prompt() {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(prompt_len));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7919 + 1) % 128256);
  return ids;
}

/// GB/s of each run of BM_copy/<t>T (bytes read plus written) or BM_read/<t>T (bytes
/// read), by thread count, with its iteration count: Google Benchmark's first runs of a
/// benchmark only size the iteration count, and the repetitions are the runs with the most
/// iterations.
using rate_runs = std::map<int, std::vector<std::pair<benchmark::IterationCount, double>>>;
rate_runs& copy_rates() {
  static rate_runs r;
  return r;
}
rate_runs& read_rates() {
  static rate_runs r;
  return r;
}

/// The median GB/s of the repetitions in runs (copy_rates() or read_rates()) at `threads`
/// in this run (0 when that benchmark did not run).
double median_rate(rate_runs& rates, int threads) {
  const auto& runs = rates[threads];
  benchmark::IterationCount most = 0;
  for (const auto& [n, r] : runs) most = std::max(most, n);
  std::vector<double> v;
  for (const auto& [n, r] : runs) {
    if (n == most) v.push_back(r);
  }
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// Runs body() (one pass over `bytes` of memory) once untimed, then once an iteration,
/// timed here: the run's GB/s goes to rates for decode's bounds.
template <class F>
void stream_rate(benchmark::State& state, int threads, double bytes, rate_runs& rates, F&& body) {
  const auto& c = ctx(threads);
  body();
  c.synchronize();  // the first touch of the buffers before the clock starts
  double seconds = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    c.synchronize();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  kiln_bench::set_bytes(state, bytes);
  if (seconds > 0.0) rates[threads].emplace_back(state.iterations(), bytes * double(state.iterations()) / seconds / 1e9);
}

/// kiln::sum of 512 MiB of f32 (llama_bench::read): GB/s of bytes read, to read_rates().
void read(benchmark::State& state, int threads) {
  const index_t n = index_t(128) << 20;
  auto a = kiln::full(ctx(threads), {n}, 1.0f);
  auto s = kiln::empty<float>(ctx(threads), {});
  stream_rate(state, threads, 4.0 * double(n), read_rates(), [&] { s = kiln::sum(a); });
}

/// llama_bench::copy's copy of 512 MiB of f32 (kiln's `b = a`): GB/s of bytes read plus
/// written, to copy_rates().
void copy(benchmark::State& state, int threads) {
  const index_t n = index_t(128) << 20;
  auto a = kiln::full(ctx(threads), {n}, 1.0f);
  auto b = kiln::empty<float>(ctx(threads), {n});
  stream_rate(state, threads, 2.0 * 4.0 * double(n), copy_rates(), [&] { b = a; });
}

void decode(benchmark::State& state, int threads, table_dtype t) {
  auto& m = cached(threads, t);
  m.reset();
  m.forward(prompt()).to_host();  // the prefill done before the clock starts
  std::int32_t next = 1;
  const auto step = [&] {
    if (m.position() == m.capacity()) m.rewind(prompt_len);
    auto logits = m.forward(std::span<const std::int32_t>(&next, 1));
    next = kiln::bitnet::argmax_row(logits, 0);  // waits for the step, as greedy decoding does
  };
  double seconds = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double bytes = m.weight_bytes_per_token();
  double codes = 0.0;
  for (const auto& L : m.layers()) codes += L.wqkv.bytes() + L.wo.bytes() + L.wgu.bytes() + L.wdown.bytes();
  const double head = m.lm_head().bytes();
  state.counters["tok/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  kiln_bench::set_bytes(state, bytes);
  // the bound of each rate measured before (copy: read plus written; read: read only)
  const auto bound_counters = [&](rate_runs& rates, const char* rate, const char* bound_ms, const char* share) {
    const double gbs = median_rate(rates, threads);
    if (gbs <= 0.0 || state.iterations() == 0) return;
    const double bound = bytes / (gbs * 1e9), per_token = seconds / double(state.iterations());
    state.counters[rate] = gbs;
    state.counters[bound_ms] = bound * 1e3;
    state.counters[share] = bound / per_token;
  };
  bound_counters(copy_rates(), "copy_GB/s", "bound_ms", "bound_share");
  bound_counters(read_rates(), "read_GB/s", "read_bound_ms", "read_share");
  if (ctx(threads).profiling()) {  // KILN_PROFILE=1: where four decode steps' time goes, on stderr
    ctx(threads).clear_profile();
    for (int i = 0; i < 4; ++i) step();
    std::cerr << "decode, " << kiln::bitnet::to_string(t) << " table, " << threads << " threads, four steps:\n"
              << kiln::profile_table(ctx(threads)) << "\n";
  }
  state.SetLabel(std::to_string(codes / 1e9).substr(0, 5) + " GB codes + " + std::to_string(head / 1e9).substr(0, 5) +
                 " GB LM head (" + std::to_string(bytes / 1e9).substr(0, 5) + " GB weights) per token, " +
                 std::to_string(m.cfg().num_hidden_layers) + " layers");
}

void prefill(benchmark::State& state, int threads, table_dtype t) {
  auto& m = cached(threads, t);
  const auto ids = prompt();
  for (auto _ : state) {
    m.reset();
    benchmark::DoNotOptimize(m.forward(ids).to_host());  // waits for the step
  }
  state.counters["tok/s"] = benchmark::Counter(double(prompt_len), benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  for (int t : kiln_bench::thread_counts()) {
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_copy/" + std::to_string(t) + "T").c_str(),
                                                       [t](benchmark::State& s) { copy(s, t); }))
        ->Unit(benchmark::kMillisecond);
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_read/" + std::to_string(t) + "T").c_str(),
                                                       [t](benchmark::State& s) { read(s, t); }))
        ->Unit(benchmark::kMillisecond);
  }
  for (table_dtype d : {table_dtype::bf16, table_dtype::int8}) {
    for (int t : kiln_bench::thread_counts()) {
      const std::string tail = std::string(kiln::bitnet::to_string(d)) + "/" + std::to_string(t) + "T";
      kiln_bench::configure(benchmark::RegisterBenchmark(("BM_bitnet_decode/" + tail).c_str(),
                                                         [t, d](benchmark::State& s) { decode(s, t, d); }))
          ->Unit(benchmark::kMillisecond);
      kiln_bench::configure(benchmark::RegisterBenchmark(("BM_bitnet_prefill/" + tail).c_str(),
                                                         [t, d](benchmark::State& s) { prefill(s, t, d); }))
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return llama_bench::run_main(argc, argv, register_all); }
