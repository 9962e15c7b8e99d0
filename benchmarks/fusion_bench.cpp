// benchmarks/fusion_bench.cpp — fused elementwise chains over 16M floats, kiln beside
// its peers in one binary: Eigen array expressions (1 thread, and split in halves over 2
// threads of kiln's pool: kiln_bench::split_range), xtensor with xsimd (1 thread), an eager baseline (one primitive op per pass,
// every intermediate materialised, as an eager array library runs the chain: here each
// pass is one Eigen statement, split over the threads), kiln's own unfused twin (the same
// passes as kiln statements: kiln's kernels, streaming stores), and a STREAM triad with
// non-temporal stores as the in-run bandwidth reference. BM_add3 (y = a + b + c) is the
// gelu chain's memory floor: the same three reads and one write around a body of two
// adds, so kiln_vs_eigen/add3 is the best ratio the memory system allows kiln's traffic
// (streaming stores) against Eigen's (ordinary stores: a write-allocate read of y too),
// measured in the same run as the chains.
//
// Names: BM_<op>/<impl>/<threads>T. Bytes count each input read once and the output
// written once (intermediates and write-allocate traffic are not counted).
// BM_<op>/kiln_vs_eigen/<threads>T times kiln and the Eigen expression as pairs, back to
// back in alternating order: its counter `ratio` (kiln time / Eigen time, median of the
// pairs) is the comparison least disturbed by a noisy shared machine.
#include <kiln/kiln.hpp>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>  // ArrayBase::erf

#if defined(KILN_BENCH_XTENSOR)
#include <xtensor/xadapt.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#endif

#if defined(__SSE2__)
#include <immintrin.h>  // streaming stores for the triad
#endif

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bench_support.hpp"

namespace {

using kiln_bench::index;

constexpr index n = index(1) << 24;
constexpr float inv_sqrt2 = 0.70710678118654752f;
constexpr float triad_scalar = 3.0f;

using ftensor = kiln::tensor<float, kiln::cpu<>>;

/// Everything one thread count works on: a kiln context with that many threads, the
/// inputs, the output, and the eager twin's temporaries. Allocated and touched once, so
/// no variant pays page faults in its timed loop. Every variant of a thread count reads
/// and writes these same buffers (the peers through Eigen::Map / xt::adapt).
struct world {
  int threads;
  kiln::context<kiln::cpu<>> ctx;
  ftensor a, b, c, y;
  std::vector<ftensor> t;

  explicit world(int nt)
      : threads(nt),
        ctx(kiln::threads{nt}),
        a(kiln::from_host(ctx, {n}, kiln_bench::random_floats(n, -2.0f, 2.0f, 1))),
        b(kiln::from_host(ctx, {n}, kiln_bench::random_floats(n, -2.0f, 2.0f, 2))),
        c(kiln::from_host(ctx, {n}, kiln_bench::random_floats(n, -2.0f, 2.0f, 3))),
        y(kiln::zeros<float>(ctx, {n})) {
    t.reserve(6);
    for (int i = 0; i < 6; ++i) t.push_back(kiln::zeros<float>(ctx, {n}));
  }
};

world& get_world(int threads) {
  static std::unique_ptr<world> worlds[3];
  auto& w = worlds[threads];
  if (!w) w = std::make_unique<world>(threads);
  return *w;
}

// ---- y = gelu(a*b + c), erf form ------------------------------------------------------

double gelu_reference(const world& w, index i) {
  const double x = double(w.a.data()[i]) * w.b.data()[i] + w.c.data()[i];
  return 0.5 * x * (1.0 + std::erf(x * 0.70710678118654752));
}

void gelu_kiln(world& w) { w.y = kiln::gelu(w.a * w.b + w.c); }

/// The same chain, one primitive op per kiln statement: seven passes over memory.
void gelu_unfused(world& w) {
  auto& t = w.t;
  t[0] = w.a * w.b;
  t[1] = t[0] + w.c;
  t[2] = t[1] * inv_sqrt2;
  t[3] = kiln::erf(t[2]);  // the erf gelu_op uses, in a pass of its own
  t[4] = t[3] + 1.0f;
  t[5] = t[4] * t[1];
  w.y = t[5] * 0.5f;
}

template <class Y, class A, class B, class C>
void gelu_eigen_expr(Y&& y, const A& a, const B& b, const C& c) {
  const auto x = a * b + c;  // an expression: Eigen evaluates it at each use (two FMAs)
  y = 0.5f * x * (1.0f + (x * inv_sqrt2).erf());
}

// ---- y = silu(a) * b -------------------------------------------------------------------

double silu_reference(const world& w, index i) {
  const double x = w.a.data()[i];
  return x / (1.0 + std::exp(-x)) * w.b.data()[i];
}

void silu_kiln(world& w) { w.y = kiln::silu(w.a) * w.b; }

/// silu(a) * b as primitive ops: five passes.
void silu_unfused(world& w) {
  auto& t = w.t;
  t[0] = -w.a;
  t[1] = kiln::exp(t[0]);
  t[2] = t[1] + 1.0f;
  t[3] = w.a / t[2];
  w.y = t[3] * w.b;
}

template <class Y, class A, class B>
void silu_eigen_expr(Y&& y, const A& a, const B& b) {
  y = a / (1.0f + (-a).exp()) * b;
}

// ---- y = a + b + c: the gelu chain's traffic with (almost) no arithmetic ----------------

double add3_reference(const world& w, index i) {
  return double(w.a.data()[i]) + w.b.data()[i] + w.c.data()[i];
}

void add3_kiln(world& w) { w.y = w.a + w.b + w.c; }

/// a + b + c as primitive ops: two passes.
void add3_unfused(world& w) {
  w.t[0] = w.a + w.b;
  w.y = w.t[0] + w.c;
}

template <class Y, class A, class B, class C>
void add3_eigen_expr(Y&& y, const A& a, const B& b, const C& c) {
  y = a + b + c;
}

// ---- Eigen: the whole range on one thread, or two halves (segments) on two ---------------

using emap = Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64>;

/// One eager pass: out = f(ins...) over the whole range, split over the threads.
template <class F, class... T>
void eager_pass(const world& w, F&& f, const ftensor& out, const T&... in) {
  kiln_bench::split_range(n, w.threads, [&](index lo, index hi) {
    const index len = hi - lo;
    emap(out.data() + lo, len) = f(emap(in.data() + lo, len)...);
  });
}

/// gelu(a*b + c) as an eager library runs it: the same seven passes as gelu_unfused.
void gelu_eager(world& w) {
  auto& t = w.t;
  eager_pass(w, [](const auto& a, const auto& b) { return a * b; }, t[0], w.a, w.b);
  eager_pass(w, [](const auto& x, const auto& c) { return x + c; }, t[1], t[0], w.c);
  eager_pass(w, [](const auto& x) { return x * inv_sqrt2; }, t[2], t[1]);
  eager_pass(w, [](const auto& x) { return x.erf(); }, t[3], t[2]);
  eager_pass(w, [](const auto& x) { return x + 1.0f; }, t[4], t[3]);
  eager_pass(w, [](const auto& x, const auto& y) { return x * y; }, t[5], t[4], t[1]);
  eager_pass(w, [](const auto& x) { return x * 0.5f; }, w.y, t[5]);
}

/// silu(a) * b as an eager library runs it: the same five passes as silu_unfused.
void silu_eager(world& w) {
  auto& t = w.t;
  eager_pass(w, [](const auto& a) { return -a; }, t[0], w.a);
  eager_pass(w, [](const auto& x) { return x.exp(); }, t[1], t[0]);
  eager_pass(w, [](const auto& x) { return x + 1.0f; }, t[2], t[1]);
  eager_pass(w, [](const auto& a, const auto& x) { return a / x; }, t[3], w.a, t[2]);
  eager_pass(w, [](const auto& x, const auto& b) { return x * b; }, w.y, t[3], w.b);
}

/// a + b + c as an eager library runs it: the same two passes as add3_unfused.
void add3_eager(world& w) {
  eager_pass(w, [](const auto& a, const auto& b) { return a + b; }, w.t[0], w.a, w.b);
  eager_pass(w, [](const auto& x, const auto& c) { return x + c; }, w.y, w.t[0], w.c);
}

/// Runs expr(y, a, b, c) on Eigen maps of the world's buffers: over the whole range on one
/// thread, or over each thread's segment (kiln_bench::split_range) on several.
template <class Expr>
void eigen_run(world& w, Expr&& expr) {
  emap y(w.y.data(), n), a(w.a.data(), n), b(w.b.data(), n), c(w.c.data(), n);
  if (w.threads == 1) {
    expr(y, a, b, c);
    return;
  }
  kiln_bench::split_range(n, w.threads, [&](index lo, index hi) {
    const index len = hi - lo;
    expr(y.segment(lo, len), a.segment(lo, len), b.segment(lo, len), c.segment(lo, len));
  });
}

void gelu_eigen(world& w) {
  eigen_run(w, [](auto&& y, const auto& a, const auto& b, const auto& c) { gelu_eigen_expr(y, a, b, c); });
}

void silu_eigen(world& w) {
  eigen_run(w, [](auto&& y, const auto& a, const auto& b, const auto&) { silu_eigen_expr(y, a, b); });
}

void add3_eigen(world& w) {
  eigen_run(w, [](auto&& y, const auto& a, const auto& b, const auto& c) { add3_eigen_expr(y, a, b, c); });
}

// ---- xtensor (xsimd), one thread --------------------------------------------------------

#if defined(KILN_BENCH_XTENSOR)
auto xt_view(const ftensor& t) {
  const auto len = static_cast<std::size_t>(n);
  return xt::adapt(t.data(), len, xt::no_ownership(), std::array<std::size_t, 1>{len});
}

void gelu_xtensor(world& w) {
  auto y = xt_view(w.y);
  auto a = xt_view(w.a), b = xt_view(w.b), c = xt_view(w.c);
  auto x = a * b + c;
  xt::noalias(y) = 0.5f * x * (1.0f + xt::erf(x * inv_sqrt2));
}

void silu_xtensor(world& w) {
  auto y = xt_view(w.y);
  auto a = xt_view(w.a), b = xt_view(w.b);
  xt::noalias(y) = a / (1.0f + xt::exp(-a)) * b;
}

void add3_xtensor(world& w) {
  auto y = xt_view(w.y);
  auto a = xt_view(w.a), b = xt_view(w.b), c = xt_view(w.c);
  xt::noalias(y) = a + b + c;
}
#endif

// ---- STREAM triad, non-temporal stores: y = b + s*c --------------------------------------

double triad_reference(const world& w, index i) {
  return double(w.b.data()[i]) + double(triad_scalar) * w.c.data()[i];
}

void triad_nt(world& w) {
  float* out = w.y.data();
  const float* b = w.b.data();
  const float* c = w.c.data();
  // Chunk starts are multiples of 64 elements of 64-byte-aligned buffers: aligned stores.
  kiln_bench::split_range(w.y.numel(), w.threads, [&](index lo, index hi) {
    index i = lo;
#if defined(__AVX512F__)
    const __m512 s = _mm512_set1_ps(triad_scalar);
    for (; i + 16 <= hi; i += 16) {
      _mm512_stream_ps(out + i, _mm512_fmadd_ps(s, _mm512_load_ps(c + i), _mm512_load_ps(b + i)));
    }
#elif defined(__AVX__)
    const __m256 s = _mm256_set1_ps(triad_scalar);
    for (; i + 8 <= hi; i += 8) {
      _mm256_stream_ps(out + i, _mm256_add_ps(_mm256_load_ps(b + i), _mm256_mul_ps(s, _mm256_load_ps(c + i))));
    }
#elif defined(__SSE2__)
    const __m128 s = _mm_set1_ps(triad_scalar);
    for (; i + 4 <= hi; i += 4) {
      _mm_stream_ps(out + i, _mm_add_ps(_mm_load_ps(b + i), _mm_mul_ps(s, _mm_load_ps(c + i))));
    }
#endif
    for (; i < hi; ++i) out[i] = b[i] + triad_scalar * c[i];
#if defined(__SSE2__)
    _mm_sfence();  // streaming stores are weakly ordered: publish them before the region ends
#endif
  });
}

// ---- registration -------------------------------------------------------------------------

using run_fn = void (*)(world&);
using ref_fn = double (*)(const world&, index);

void add(const std::string& op, const char* impl, int threads, int arrays, run_fn run, ref_fn ref) {
  const std::string name = "BM_" + op + "/" + impl + "/" + std::to_string(threads) + "T";
  auto v = std::make_shared<kiln_bench::verdict>();
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    world& w = get_world(threads);
    const bool ok = kiln_bench::verified(state, *v, [&] {
      return kiln_bench::check_output(w.y.data(), n, [&] { run(w); }, [&](index i) { return ref(w, i); });
    });
    if (!ok) return;
    for (auto _ : state) {
      run(w);
      benchmark::ClobberMemory();
    }
    kiln_bench::set_bytes(state, double(arrays) * sizeof(float) * double(n));
  });
  kiln_bench::configure(b);
}

/// kiln against the Eigen expression, timed in alternating pairs (see kiln_bench::paired).
/// Both variants are checked against the reference by their own benchmarks.
void add_paired(const std::string& op, int threads, run_fn mine, run_fn eigen) {
  const std::string name = "BM_" + op + "/kiln_vs_eigen/" + std::to_string(threads) + "T";
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    world& w = get_world(threads);
    kiln_bench::paired(state, [&] { mine(w); }, [&] { eigen(w); });
  });
  b->UseManualTime()->Unit(benchmark::kMillisecond);
}

void register_all() {
  const auto counts = kiln_bench::thread_counts();
  const struct {
    const char* op;
    int arrays;  // inputs + output
    ref_fn ref;
    run_fn kiln_run, unfused_run, eager_run, eigen_run, xtensor_run;
  } chains[] = {
      {"gelu_chain", 4, gelu_reference, gelu_kiln, gelu_unfused, gelu_eager, gelu_eigen,
#if defined(KILN_BENCH_XTENSOR)
       gelu_xtensor
#else
       nullptr
#endif
      },
      {"silu_mul", 3, silu_reference, silu_kiln, silu_unfused, silu_eager, silu_eigen,
#if defined(KILN_BENCH_XTENSOR)
       silu_xtensor
#else
       nullptr
#endif
      },
      {"add3", 4, add3_reference, add3_kiln, add3_unfused, add3_eager, add3_eigen,
#if defined(KILN_BENCH_XTENSOR)
       add3_xtensor
#else
       nullptr
#endif
      },
  };
  for (const auto& ch : chains) {
    for (int t : counts) add(ch.op, "kiln", t, ch.arrays, ch.kiln_run, ch.ref);
    for (int t : counts) add_paired(ch.op, t, ch.kiln_run, ch.eigen_run);
    for (int t : counts) add(ch.op, "eigen", t, ch.arrays, ch.eigen_run, ch.ref);
    if (ch.xtensor_run) add(ch.op, "xtensor", 1, ch.arrays, ch.xtensor_run, ch.ref);
    for (int t : counts) add(ch.op, "eager", t, ch.arrays, ch.eager_run, ch.ref);
    for (int t : counts) add(ch.op, "unfused", t, ch.arrays, ch.unfused_run, ch.ref);
  }
  for (int t : counts) add("triad", "stream_nt", t, 3, triad_nt, triad_reference);
}

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, register_all); }
