// benchmarks/matmul_bench.cpp — kiln::matmul on the CPU beside OpenBLAS (CBLAS) and Eigen
// in one binary, at 1 and 2 threads, with the machine's limits measured in the same run:
//   BM_fma_peak/<T>T          a register-resident FMA loop (12 independent chains per
//                             thread): the arithmetic peak GEMM is judged against.
//   BM_gemm/<impl>/<n>/<T>T   square f32 C = A B, row-major (counter GFLOPs).
//   BM_matvec/<impl>/<T>T     [1, 4096] x [4096, 4096]^T: the decode step, W an nn.Linear
//                             weight read as its transpose; kiln_copy copies the same
//                             weight bytes (y = W), the memory floor (counter GB: weight
//                             bytes per second; the copy counts them once too).
//   BM_fused/<impl>/<T>T      gelu(x @ w + bias), x [512, 4096], w [4096, 4096]: kiln as
//                             one kernel, kiln as two statements, OpenBLAS followed by an
//                             Eigen epilogue (vectorised erf).
//   BM_prefill/<w>/<shape>/<S>/<T>T  x [S, K] @ w^T, the projections of a Llama prefill
//                             (hidden 2048, FFN 5632): qkvo w [2048, 2048] (q, o), kv
//                             [512, 2048] (k, v with 8 of 32 heads), gate_up [5632,
//                             2048], down [2048, 5632], S = 128 and 512; w an
//                             nn.Linear weight in f32, f16 or bf16 (kiln converts the 16-bit
//                             ones while it packs them), openblas: sgemm on the f32 weight
//                             (counter GFLOPs, 2 S N K).
// OpenBLAS runs with openblas_set_num_threads(T); Eigen's GEMM with Eigen::setNbThreads(T)
// when built with OpenMP (else 1 thread; its name says so). OpenBLAS's idle workers spin
// for about 2^28 cycles after each call, taking a core from whatever runs next: run with
// OPENBLAS_THREAD_TIMEOUT=4 (read when the library loads) for a fair 2-thread comparison.
#include <kiln/kiln.hpp>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#if defined(KILN_BENCH_OPENBLAS)
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

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
using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using cmap = Eigen::Map<const matrix>;
using mmap = Eigen::Map<matrix>;

void set_flops(benchmark::State& state, double flops) {
  state.counters["GFLOPs"] = benchmark::Counter(flops * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void set_threads(int threads) {
#if defined(KILN_BENCH_OPENBLAS)
  openblas_set_num_threads(threads);
#endif
#if defined(EIGEN_HAS_OPENMP) || defined(_OPENMP)
  Eigen::setNbThreads(threads);
#endif
}

// ---- FMA peak -----------------------------------------------------------------------------

using vf = xsimd::batch<float>;

__attribute__((noinline)) float fma_loop(index iters) {
  vf a0(1.0f), a1(1.1f), a2(1.2f), a3(1.3f), a4(1.4f), a5(1.5f), a6(1.6f), a7(1.7f), a8(1.8f), a9(1.9f),
      a10(2.0f), a11(2.1f);
  const vf m(0.999999f), c(1e-7f);
  for (index i = 0; i < iters; ++i) {
    a0 = xsimd::fma(a0, m, c), a1 = xsimd::fma(a1, m, c), a2 = xsimd::fma(a2, m, c), a3 = xsimd::fma(a3, m, c);
    a4 = xsimd::fma(a4, m, c), a5 = xsimd::fma(a5, m, c), a6 = xsimd::fma(a6, m, c), a7 = xsimd::fma(a7, m, c);
    a8 = xsimd::fma(a8, m, c), a9 = xsimd::fma(a9, m, c), a10 = xsimd::fma(a10, m, c), a11 = xsimd::fma(a11, m, c);
  }
  return xsimd::hadd(a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11);
}

void BM_fma_peak(benchmark::State& state, int threads) {
  constexpr index iters = 1 << 20;
  volatile float sink = 0;
  for (auto _ : state) {
    kiln_bench::split_range(threads * 64, threads, [&](index, index) { sink = sink + fma_loop(iters); });
  }
  set_flops(state, double(threads) * double(iters) * 12 * vf::size * 2);
}

// ---- GEMM ---------------------------------------------------------------------------------

enum class impl { kiln, kiln_unfused, openblas, eigen, kiln_copy };

struct square {
  kiln::context<cpu> ctx;
  ftensor a, b, c;
  square(int threads, index n)
      : ctx(kiln::threads{threads}),
        a(kiln::from_host(ctx, {n, n}, kiln_bench::random_floats(std::size_t(n * n), -1, 1, 1))),
        b(kiln::from_host(ctx, {n, n}, kiln_bench::random_floats(std::size_t(n * n), -1, 1, 2))),
        c(kiln::zeros<float>(ctx, {n, n})) {}
};

void BM_gemm(benchmark::State& state, impl which, index n, int threads) {
  static std::unique_ptr<square> w;
  static std::pair<index, int> key{};
  if (!w || key != std::pair{n, threads}) w = std::make_unique<square>(threads, n), key = {n, threads};
  set_threads(threads);
  square& s = *w;
  const float* A = s.a.data();
  const float* B = s.b.data();
  float* C = s.c.data();
  auto run = [&] {
    switch (which) {
      case impl::kiln: s.c = kiln::matmul(s.a, s.b); break;
#if defined(KILN_BENCH_OPENBLAS)
      case impl::openblas:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.0f, A, int(n), B, int(n), 0.0f,
                    C, int(n));
        break;
#endif
      default: mmap(C, n, n).noalias() = cmap(A, n, n) * cmap(B, n, n); break;
    }
  };
  static kiln_bench::verdict v[5];
  if (!kiln_bench::verified(state, v[int(which)], [&] {
        return kiln_bench::check_output(C, n * n, run, [&](index i) {
          double acc = 0;
          for (index k = 0; k < n; ++k) acc += double(A[(i / n) * n + k]) * B[k * n + i % n];
          return acc;
        }, 1e-4 * std::sqrt(double(n)), 1e-4);
      }))
    return;
  for (auto _ : state) run();
  set_flops(state, 2.0 * double(n) * double(n) * double(n));
}

// ---- matrix-vector ------------------------------------------------------------------------

constexpr index D = 4096;

struct decode {
  kiln::context<cpu> ctx;
  ftensor x, w, y, wcopy;
  explicit decode(int threads)
      : ctx(kiln::threads{threads}),
        x(kiln::from_host(ctx, {1, D}, kiln_bench::random_floats(std::size_t(D), -1, 1, 3))),
        w(kiln::from_host(ctx, {D, D}, kiln_bench::random_floats(std::size_t(D * D), -1, 1, 4))),
        y(kiln::zeros<float>(ctx, {1, D})),
        wcopy(kiln::zeros<float>(ctx, {D, D})) {}
};

void BM_matvec(benchmark::State& state, impl which, int threads) {
  static std::unique_ptr<decode> worlds[3];
  if (!worlds[threads]) worlds[threads] = std::make_unique<decode>(threads);
  decode& s = *worlds[threads];
  set_threads(threads);
  const float* X = s.x.data();
  const float* W = s.w.data();
  float* Y = s.y.data();
  auto run = [&] {
    switch (which) {
      case impl::kiln: s.y = kiln::linear(s.x, s.w); break;
      case impl::kiln_copy: s.wcopy = s.w; break;
#if defined(KILN_BENCH_OPENBLAS)
      case impl::openblas: cblas_sgemv(CblasRowMajor, CblasNoTrans, int(D), int(D), 1.0f, W, int(D), X, 1, 0.0f, Y, 1); break;
#endif
      default: mmap(Y, 1, D).noalias() = cmap(X, 1, D) * cmap(W, D, D).transpose(); break;
    }
  };
  static kiln_bench::verdict v[5];
  if (which != impl::kiln_copy &&
      !kiln_bench::verified(state, v[int(which)], [&] {
        return kiln_bench::check_output(Y, D, run, [&](index i) {
          double acc = 0;
          for (index k = 0; k < D; ++k) acc += double(X[k]) * W[i * D + k];
          return acc;
        }, 1e-3, 1e-4);
      }))
    return;
  for (auto _ : state) run();
  kiln_bench::set_bytes(state, double(D * D) * sizeof(float));
}

// ---- fused epilogue -----------------------------------------------------------------------

constexpr index FM = 512;

struct fused_world {
  kiln::context<cpu> ctx;
  ftensor x, w, bias, y;
  explicit fused_world(int threads)
      : ctx(kiln::threads{threads}),
        x(kiln::from_host(ctx, {FM, D}, kiln_bench::random_floats(std::size_t(FM * D), -1, 1, 5))),
        w(kiln::from_host(ctx, {D, D}, kiln_bench::random_floats(std::size_t(D * D), -0.05f, 0.05f, 6))),
        bias(kiln::from_host(ctx, {D}, kiln_bench::random_floats(std::size_t(D), -1, 1, 7))),
        y(kiln::zeros<float>(ctx, {FM, D})) {}
};

void BM_fused(benchmark::State& state, impl which, int threads) {
  static std::unique_ptr<fused_world> worlds[3];
  if (!worlds[threads]) worlds[threads] = std::make_unique<fused_world>(threads);
  fused_world& s = *worlds[threads];
  set_threads(threads);
  const float* X = s.x.data();
  const float* W = s.w.data();
  const float* Bv = s.bias.data();
  float* Y = s.y.data();
  auto run = [&] {
    switch (which) {
      case impl::kiln: s.y = kiln::gelu(kiln::matmul(s.x, s.w) + s.bias); break;
      case impl::kiln_unfused:
        s.y = kiln::matmul(s.x, s.w);
        s.y = kiln::gelu(s.y + s.bias);
        break;
#if defined(KILN_BENCH_OPENBLAS)
      case impl::openblas:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(FM), int(D), int(D), 1.0f, X, int(D), W, int(D), 0.0f,
                    Y, int(D));
        kiln_bench::split_range(FM, threads, [&](index r0, index r1) {
          auto y = mmap(Y + r0 * D, r1 - r0, D).array();
          const auto b = Eigen::Map<const Eigen::Array<float, 1, Eigen::Dynamic>>(Bv, D);
          y.rowwise() += b;
          y = 0.5f * y * (1.0f + (y * float(M_SQRT1_2)).erf());
        });
        break;
#endif
      default: break;
    }
  };
  static kiln_bench::verdict v[5];
  if (!kiln_bench::verified(state, v[int(which)], [&] {
        return kiln_bench::check_output(Y, FM * D, run, [&](index i) {
          double acc = Bv[i % D];
          for (index k = 0; k < D; ++k) acc += double(X[(i / D) * D + k]) * W[k * D + i % D];
          return 0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0)));
        }, 1e-4, 1e-3);
      }))
    return;
  for (auto _ : state) run();
  set_flops(state, 2.0 * double(FM) * double(D) * double(D));
}

// ---- prefill projections ------------------------------------------------------------------

struct projection {
  const char* name;
  index N, K;
};
constexpr projection projections[] = {{"qkvo", 2048, 2048}, {"kv", 512, 2048}, {"gate_up", 5632, 2048}, {"down", 2048, 5632}};

enum class wtype { f32, f16, bf16, openblas };
const char* wname(wtype t) {
  switch (t) {
    case wtype::f32: return "f32";
    case wtype::f16: return "f16";
    case wtype::bf16: return "bf16";
    case wtype::openblas: return "openblas";
  }
  return "?";
}

struct prefill_world {
  kiln::context<cpu> ctx;
  ftensor x, w, y;
  kiln::tensor<kiln::half, cpu> wh;
  kiln::tensor<kiln::bfloat16, cpu> wb;
  prefill_world(int threads, index S, index N, index K)
      : ctx(kiln::threads{threads}),
        x(kiln::from_host(ctx, {S, K}, kiln_bench::random_floats(std::size_t(S * K), -1, 1, 8))),
        w(kiln::from_host(ctx, {N, K}, kiln_bench::random_floats(std::size_t(N * K), -1, 1, 9))),
        y(kiln::zeros<float>(ctx, {S, N})),
        wh(kiln::empty<kiln::half>(ctx, {N, K})),
        wb(kiln::empty<kiln::bfloat16>(ctx, {N, K})) {
    wh = kiln::cast<kiln::half>(w);
    wb = kiln::cast<kiln::bfloat16>(w);
  }
};

void BM_prefill(benchmark::State& state, wtype which, projection p, index S, int threads) {
  static std::unique_ptr<prefill_world> w;
  static std::tuple<index, index, index, int> key{};
  if (!w || key != std::tuple{S, p.N, p.K, threads}) {
    w.reset();
    w = std::make_unique<prefill_world>(threads, S, p.N, p.K), key = {S, p.N, p.K, threads};
  }
  set_threads(threads);
  prefill_world& s = *w;
  const index N = p.N, K = p.K;
  auto run = [&] {
    switch (which) {
      case wtype::f32: s.y = kiln::matmul(s.x, kiln::transpose(s.w)); break;
      case wtype::f16: s.y = kiln::matmul(s.x, kiln::transpose(s.wh)); break;
      case wtype::bf16: s.y = kiln::matmul(s.x, kiln::transpose(s.wb)); break;
      case wtype::openblas:
#if defined(KILN_BENCH_OPENBLAS)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(S), int(N), int(K), 1.0f, s.x.data(), int(K),
                    s.w.data(), int(K), 0.0f, s.y.data(), int(N));
#endif
        break;
    }
  };
  static std::map<std::string, kiln_bench::verdict> verdicts;  // per benchmark: each has its own weight
  if (!kiln_bench::verified(state, verdicts[std::string(wname(which)) + p.name + std::to_string(S) + "/" + std::to_string(threads)], [&] {
        // the reference multiplies with the weight as stored (16-bit weights rounded)
        std::vector<float> wf;
        if (which == wtype::f16) for (auto v : s.wh.to_host()) wf.push_back(float(v));
        else if (which == wtype::bf16) for (auto v : s.wb.to_host()) wf.push_back(float(v));
        else wf = s.w.to_host();
        const float* X = s.x.data();
        return kiln_bench::check_output(s.y.data(), S * N, run, [&](index i) {
          double acc = 0;
          for (index k = 0; k < K; ++k) acc += double(X[(i / N) * K + k]) * wf[std::size_t((i % N) * K + k)];
          return acc;
        }, 1e-4 * std::sqrt(double(K)), 1e-4);
      }))
    return;
  for (auto _ : state) run();
  set_flops(state, 2.0 * double(S) * double(N) * double(K));
}

void register_all() {
  for (int t : kiln_bench::thread_counts()) {
    const std::string ts = "/" + std::to_string(t) + "T";
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_fma_peak" + ts).c_str(), BM_fma_peak, t));
    for (index n : {256, 512, 1024, 2048}) {
      const std::string ns = "/" + std::to_string(n);
      kiln_bench::configure(benchmark::RegisterBenchmark(("BM_gemm/kiln" + ns + ts).c_str(), BM_gemm, impl::kiln, n, t));
#if defined(KILN_BENCH_OPENBLAS)
      kiln_bench::configure(
          benchmark::RegisterBenchmark(("BM_gemm/openblas" + ns + ts).c_str(), BM_gemm, impl::openblas, n, t));
#endif
#if defined(_OPENMP)
      const std::string eigen = "BM_gemm/eigen";
#else
      const std::string eigen = "BM_gemm/eigen_1thread";
#endif
      kiln_bench::configure(benchmark::RegisterBenchmark((eigen + ns + ts).c_str(), BM_gemm, impl::eigen, n, t));
    }
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_matvec/kiln" + ts).c_str(), BM_matvec, impl::kiln, t));
    kiln_bench::configure(
        benchmark::RegisterBenchmark(("BM_matvec/kiln_copy" + ts).c_str(), BM_matvec, impl::kiln_copy, t));
#if defined(KILN_BENCH_OPENBLAS)
    kiln_bench::configure(
        benchmark::RegisterBenchmark(("BM_matvec/openblas" + ts).c_str(), BM_matvec, impl::openblas, t));
#endif
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_fused/kiln" + ts).c_str(), BM_fused, impl::kiln, t));
    kiln_bench::configure(
        benchmark::RegisterBenchmark(("BM_fused/kiln_unfused" + ts).c_str(), BM_fused, impl::kiln_unfused, t));
#if defined(KILN_BENCH_OPENBLAS)
    kiln_bench::configure(
        benchmark::RegisterBenchmark(("BM_fused/openblas_eigen" + ts).c_str(), BM_fused, impl::openblas, t));
#endif
    for (const projection& p : projections) {
      for (index S : {128, 512}) {
        for (wtype wt : {wtype::f32, wtype::f16, wtype::bf16, wtype::openblas}) {
#if !defined(KILN_BENCH_OPENBLAS)
          if (wt == wtype::openblas) continue;
#endif
          const std::string n = std::string("BM_prefill/") + wname(wt) + "/" + p.name + "/" + std::to_string(S) + ts;
          kiln_bench::configure(benchmark::RegisterBenchmark(n.c_str(), BM_prefill, wt, p, S, t));
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, register_all); }
