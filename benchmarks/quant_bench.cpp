// benchmarks/quant_bench.cpp — products with quantized weights on the CPU beside kiln's
// f32 product, at 1 and 2 threads, weights an nn.Linear [4096, 4096] rotated over enough
// copies (at least 128 MiB per format, 4x this machine's 32 MiB L3) that every call
// streams its weight from memory, as a model's layers do:
//   BM_matvec/<format>/<T>T   y = kiln::linear(x, w), x [1, 4096]: the decode step
//                             (counter GB: weight bytes per second, codes and scales).
//   BM_gemm/<format>/<T>T     x [512, 4096]: a prefill chunk (counter GFLOPs, 2 M N K).
//   BM_gemm/<format>/<m>/<T>T x [m, 4096] for m = 16 and 128: shorter prefill chunks (the
//                             first rows of the same x).
//   BM_bitlinear/<m>/<T>T     kiln::bitlinear(x, q_ternary) + bias, m = 1 or 512.
// Formats: f32, int8 (per row), int8g (group 128), int4 (group 32), ternary. Each variant
// is checked once before it is timed, against the f32 product with the weight it holds
// dequantized (relative RMS error below 2%: the activations' int8 rounding).
#include <kiln/kiln.hpp>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bench_support.hpp"

namespace {

using kiln_bench::index;
using cpu = kiln::cpu<>;
using ftensor = kiln::tensor<float, cpu>;
namespace q = kiln::quant;

constexpr index D = 4096, GM = 512;
constexpr double rotate_bytes = 128.0 * (1 << 20);

enum class fmt { f32, int8, int8g, int4, ternary };
const char* name(fmt f) {
  switch (f) {
    case fmt::f32: return "f32";
    case fmt::int8: return "int8";
    case fmt::int8g: return "int8g128";
    case fmt::int4: return "int4";
    case fmt::ternary: return "ternary";
  }
  return "?";
}

/// Copies of one quantized weight (the codes and scales cloned: separate memory).
template <class S>
std::vector<kiln::qtensor<S, cpu>> copies(const kiln::qtensor<S, cpu>& q0) {
  const int n = std::max(1, int(std::ceil(rotate_bytes / double(q0.bytes()))));
  std::vector<kiln::qtensor<S, cpu>> v{q0};
  for (int i = 1; i < n; ++i) v.emplace_back(q0.codes().clone(), q0.scales().clone(), q0.layout());
  return v;
}

struct world {
  kiln::context<cpu> ctx;
  ftensor x1, xg, w, bias;
  std::vector<ftensor> wf;
  std::vector<kiln::qtensor<q::int8, cpu>> w8, w8g;
  std::vector<kiln::qtensor<q::int4, cpu>> w4;
  std::vector<kiln::qtensor<q::ternary, cpu>> wt;
  world()
      : ctx(kiln::threads{2}),
        x1(kiln::from_host(ctx, {1, D}, kiln_bench::random_floats(std::size_t(D), -1, 1, 1))),
        xg(kiln::from_host(ctx, {GM, D}, kiln_bench::random_floats(std::size_t(GM * D), -1, 1, 2))),
        w(kiln::from_host(ctx, {D, D}, kiln_bench::random_floats(std::size_t(D * D), -0.05f, 0.05f, 3))),
        bias(kiln::from_host(ctx, {D}, kiln_bench::random_floats(std::size_t(D), -1, 1, 4))) {
    wf.push_back(w);
    while (double(wf.size()) * double(D * D * 4) < rotate_bytes) wf.push_back(w.clone());
    w8 = copies(kiln::quantize<q::int8>(w));
    w8g = copies(kiln::quantize<q::int8>(w, {.group = 128}));
    w4 = copies(kiln::quantize<q::int4>(w));
    wt = copies(kiln::quantize<q::ternary>(w));
  }
};

world& the_world() {
  static world w;
  return w;
}

/// The output of a thread count: its context decides how many threads a statement uses.
ftensor& output(int threads, index m) {
  static std::unique_ptr<kiln::context<cpu>> ctx[3];
  static std::map<index, ftensor> out[3];
  if (!ctx[threads]) ctx[threads] = std::make_unique<kiln::context<cpu>>(kiln::threads{threads});
  ftensor& y = out[threads][m];
  if (!y.defined()) y = kiln::zeros<float>(*ctx[threads], {m, D});
  return y;
}

/// The relative RMS difference of y from x @ dequantize(q)^T (or x @ w^T for f32).
template <class Q>
std::string check(const ftensor& y, const ftensor& x, const Q& q, const std::string& what) {
  ftensor ref, wd;
  if constexpr (std::is_same_v<Q, ftensor>) {
    ref = kiln::linear(x, q);
  } else {
    wd = kiln::dequantize(q);
    ref = kiln::linear(x, wd);
  }
  const auto a = y.to_host(), b = ref.to_host();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  const double rel = std::sqrt(num / std::max(den, 1e-30));
  return rel < 0.02 ? std::string() : what + ": relative RMS error " + std::to_string(rel);
}

template <class V>
void run_product(benchmark::State& state, const V& ws, const ftensor& x, ftensor& y, kiln_bench::verdict& v,
                 const std::string& what, bool bitlinear = false) {
  world& w = the_world();
  std::size_t i = 0;
  auto run = [&] {
    const auto& q = ws[i++ % ws.size()];
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(q)>, kiln::qtensor<q::ternary, cpu>>) {
      if (bitlinear) {
        y = kiln::bitlinear(x, q, w.bias);
        return;
      }
    }
    y = kiln::linear(x, q);
  };
  if (!kiln_bench::verified(state, v, [&] {
        if (bitlinear) return std::string();
        y = kiln::linear(x, ws[0]);
        return check(y, x, ws[0], what);
      }))
    return;
  for (auto _ : state) run();
  double bytes = 0;
  if constexpr (std::is_same_v<typename V::value_type, ftensor>) bytes = double(D * D) * 4;
  else bytes = double(ws[0].bytes());
  kiln_bench::set_bytes(state, bytes);
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * double(x.shape()[0]) * D * D * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void BM_product(benchmark::State& state, fmt f, index m, int threads) {
  world& w = the_world();
  static std::map<index, ftensor> rows;  // x's first m rows
  if (m > 1 && m < GM && !rows.count(m)) rows[m] = kiln::slice(w.xg, 0, 0, m).clone();
  const ftensor& x = m == 1 ? w.x1 : m == GM ? w.xg : rows[m];
  ftensor& y = output(threads, m);
  static std::map<std::tuple<int, index, int>, kiln_bench::verdict> v;
  auto& vd = v[{int(f), m, threads}];
  const std::string what = std::string(name(f)) + " m=" + std::to_string(m);
  switch (f) {
    case fmt::f32: run_product(state, w.wf, x, y, vd, what); break;
    case fmt::int8: run_product(state, w.w8, x, y, vd, what); break;
    case fmt::int8g: run_product(state, w.w8g, x, y, vd, what); break;
    case fmt::int4: run_product(state, w.w4, x, y, vd, what); break;
    case fmt::ternary: run_product(state, w.wt, x, y, vd, what); break;
  }
}

void BM_bitlinear(benchmark::State& state, index m, int threads) {
  world& w = the_world();
  static kiln_bench::verdict v[2][3];
  run_product(state, w.wt, m == 1 ? w.x1 : w.xg, output(threads, m), v[m == 1 ? 0 : 1][threads], "bitlinear", true);
}

void register_all() {
  for (int t : kiln_bench::thread_counts()) {
    for (fmt f : {fmt::f32, fmt::int8, fmt::int8g, fmt::int4, fmt::ternary}) {
      const std::string tt = "/" + std::to_string(t) + "T";
      kiln_bench::configure(benchmark::RegisterBenchmark(("BM_matvec/" + std::string(name(f)) + tt).c_str(), BM_product, f, 1, t));
      kiln_bench::configure(benchmark::RegisterBenchmark(("BM_gemm/" + std::string(name(f)) + tt).c_str(), BM_product, f, GM, t));
      for (index m : {index(16), index(128)}) {
        kiln_bench::configure(benchmark::RegisterBenchmark(
            ("BM_gemm/" + std::string(name(f)) + "/" + std::to_string(m) + tt).c_str(), BM_product, f, m, t));
      }
    }
    for (index m : {index(1), GM}) {
      kiln_bench::configure(benchmark::RegisterBenchmark(
          ("BM_bitlinear/" + std::to_string(m) + "/" + std::to_string(t) + "T").c_str(), BM_bitlinear, m, t));
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, register_all); }
