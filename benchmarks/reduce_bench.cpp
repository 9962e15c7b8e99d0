// benchmarks/reduce_bench.cpp — row ops over a 4096 x 4096 float matrix, kiln beside its
// peers in one binary, at 1 and 2 threads: Eigen per row (rows split over the threads of
// kiln's pool, kiln_bench::split_range), a plain two-pass loop per row (what a user writes
// by hand; the compiler vectorises it), kiln's own unfused version (separate statements:
// softmax(x * s + mask) as t = x * s + mask, then softmax(t)), and kiln's copy of the
// same bytes (y = x: one read and one write, the floor of a row op).
//
// BM_cumsum (y = cumsum(x, -1)) has no Eigen form: kiln against the plain running-sum loop.
//
// Names: BM_<op>/<impl>/<threads>T; bytes count each input read once and the output
// written once (the row sum: its input only).
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
using rows_map = Eigen::Map<Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
using crows_map = Eigen::Map<const Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

constexpr index R = 4096, N = 4096;
constexpr float scale = 0.125f;

struct world {
  int threads;
  kiln::context<kiln::cpu<>> ctx;
  ftensor x, mask, w, b, y, t, s;

  explicit world(int nt)
      : threads(nt),
        ctx(kiln::threads{nt}),
        x(kiln::from_host(ctx, {R, N}, kiln_bench::random_floats(std::size_t(R * N), -4.0f, 4.0f, 1))),
        mask(kiln::from_host(ctx, {R, N}, kiln_bench::random_floats(std::size_t(R * N), -2.0f, 0.0f, 2))),
        w(kiln::from_host(ctx, {N}, kiln_bench::random_floats(std::size_t(N), -2.0f, 2.0f, 3))),
        b(kiln::from_host(ctx, {N}, kiln_bench::random_floats(std::size_t(N), -1.0f, 1.0f, 4))),
        y(kiln::zeros<float>(ctx, {R, N})),
        t(kiln::zeros<float>(ctx, {R, N})),
        s(kiln::zeros<float>(ctx, {R})) {}
};

world& get_world(int threads) {
  static std::unique_ptr<world> worlds[3];
  auto& w = worlds[threads];
  if (!w) w = std::make_unique<world>(threads);
  return *w;
}

enum class op { softmax, softmax_mask, layer_norm, rms_norm, row_sum, cumsum };
enum class impl { kiln, kiln_unfused, eigen, loop, kiln_copy };

/// One row of op by the plain loops (two passes over the row and one to write).
void loop_row(op o, const float* x, const float* m, const float* w, const float* b, float* y) {
  switch (o) {
    case op::softmax:
    case op::softmax_mask: {
      float mx = -INFINITY;
      for (index j = 0; j < N; ++j) {
        const float v = o == op::softmax ? x[j] : x[j] * scale + m[j];
        y[j] = v;
        mx = std::max(mx, v);
      }
      float sum = 0;
      for (index j = 0; j < N; ++j) sum += (y[j] = std::exp(y[j] - mx));
      const float inv = 1.0f / sum;
      for (index j = 0; j < N; ++j) y[j] *= inv;
      return;
    }
    case op::layer_norm: {
      float mean = 0, var = 0;
      for (index j = 0; j < N; ++j) mean += x[j];
      mean /= float(N);
      for (index j = 0; j < N; ++j) var += (x[j] - mean) * (x[j] - mean);
      const float r = 1.0f / std::sqrt(var / float(N) + 1e-5f);
      for (index j = 0; j < N; ++j) y[j] = (x[j] - mean) * r * w[j] + b[j];
      return;
    }
    case op::rms_norm: {
      float ss = 0;
      for (index j = 0; j < N; ++j) ss += x[j] * x[j];
      const float r = 1.0f / std::sqrt(ss / float(N) + 1e-6f);
      for (index j = 0; j < N; ++j) y[j] = x[j] * r * w[j];
      return;
    }
    case op::row_sum: {
      float sum = 0;
      for (index j = 0; j < N; ++j) sum += x[j];
      y[0] = sum;
      return;
    }
    case op::cumsum: {
      float sum = 0;
      for (index j = 0; j < N; ++j) y[j] = sum += x[j];
      return;
    }
  }
}

/// Rows [r0, r1) of op with Eigen array expressions.
void eigen_rows(op o, world& wd, index r0, index r1) {
  crows_map X(wd.x.data(), R, N), M(wd.mask.data(), R, N);
  rows_map Y(wd.y.data(), R, N);
  Eigen::Map<const Eigen::Array<float, 1, Eigen::Dynamic>> W(wd.w.data(), N), Bv(wd.b.data(), N);
  for (index i = r0; i < r1; ++i) {
    switch (o) {
      case op::softmax:
      case op::softmax_mask: {
        if (o == op::softmax) Y.row(i) = X.row(i);
        else Y.row(i) = X.row(i) * scale + M.row(i);
        const float mx = Y.row(i).maxCoeff();
        Y.row(i) = (Y.row(i) - mx).exp();
        Y.row(i) /= Y.row(i).sum();
        break;
      }
      case op::layer_norm: {
        const float mean = X.row(i).mean();
        const float var = (X.row(i) - mean).square().mean();
        Y.row(i) = (X.row(i) - mean) * (1.0f / std::sqrt(var + 1e-5f)) * W + Bv;
        break;
      }
      case op::rms_norm: {
        const float r = 1.0f / std::sqrt(X.row(i).square().mean() + 1e-6f);
        Y.row(i) = X.row(i) * r * W;
        break;
      }
      case op::row_sum: wd.s.data()[i] = X.row(i).sum(); break;
      case op::cumsum: break;  // (no Eigen form; not registered)
    }
  }
}

void run(op o, impl m, world& wd) {
  switch (m) {
    case impl::kiln:
      switch (o) {
        case op::softmax: wd.y = kiln::softmax(wd.x); break;
        case op::softmax_mask: wd.y = kiln::softmax(wd.x * scale + wd.mask); break;
        case op::layer_norm: wd.y = kiln::layer_norm(wd.x, wd.w, wd.b); break;
        case op::rms_norm: wd.y = kiln::rms_norm(wd.x, wd.w); break;
        case op::row_sum: wd.s = kiln::sum(wd.x, -1); break;
        case op::cumsum: wd.y = kiln::cumsum(wd.x, -1); break;
      }
      return;
    case impl::kiln_unfused:  // only softmax(x * s + mask) has an unfused form
      wd.t = wd.x * scale + wd.mask;
      wd.y = kiln::softmax(wd.t);
      return;
    case impl::kiln_copy: wd.y = wd.x; return;
    case impl::eigen:
      kiln_bench::split_range(R, wd.threads, [&](index r0, index r1) { eigen_rows(o, wd, r0, r1); });
      return;
    case impl::loop:
      kiln_bench::split_range(R, wd.threads, [&](index r0, index r1) {
        for (index i = r0; i < r1; ++i) {
          float* y = o == op::row_sum ? wd.s.data() + i : wd.y.data() + i * N;
          loop_row(o, wd.x.data() + i * N, wd.mask.data() + i * N, wd.w.data(), wd.b.data(), y);
        }
      });
      return;
  }
}

/// Checks sampled rows of a variant against the plain loop in double-checked float.
std::string check(op o, impl m, world& wd) {
  if (m == impl::kiln_copy) return {};
  run(o, m, wd);
  std::vector<float> ref(N);
  for (index i : {index(0), index(1), R / 2, R - 1}) {
    loop_row(o, wd.x.data() + i * N, wd.mask.data() + i * N, wd.w.data(), wd.b.data(), ref.data());
    const index cols = o == op::row_sum ? 1 : N;
    for (index j = 0; j < cols; ++j) {
      const float got = o == op::row_sum ? wd.s.data()[i] : wd.y.data()[i * N + j];
      // (a running sum's rounding grows along the row: its partial sums reach ~100)
      const float tol = o == op::cumsum ? 2e-3f : 1e-4f;
      if (!(std::fabs(got - ref[j]) <= tol + 1e-4f * std::fabs(ref[j]))) {
        return "wrong result at row " + std::to_string(i) + ", column " + std::to_string(j) + ": " +
               std::to_string(got) + " vs " + std::to_string(ref[j]);
      }
    }
  }
  return {};
}

void bench(benchmark::State& state, op o, impl m, int threads) {
  world& wd = get_world(threads);
  static kiln_bench::verdict verdicts[6][5][3];
  if (!kiln_bench::verified(state, verdicts[int(o)][int(m)][threads], [&] { return check(o, m, wd); })) return;
  for (auto _ : state) {
    run(o, m, wd);
    benchmark::ClobberMemory();
  }
  const double reads = o == op::softmax_mask && m != impl::kiln_copy ? 2.0 : 1.0;
  const double writes = o == op::row_sum && m != impl::kiln_copy ? 0.0 : 1.0;
  kiln_bench::set_bytes(state, double(R * N) * 4.0 * (reads + writes));
}

void register_all() {
  const std::pair<op, const char*> ops[] = {{op::softmax, "softmax"},
                                            {op::softmax_mask, "softmax_scale_mask"},
                                            {op::layer_norm, "layer_norm"},
                                            {op::rms_norm, "rms_norm"},
                                            {op::row_sum, "row_sum"},
                                            {op::cumsum, "cumsum"}};
  const std::pair<impl, const char*> impls[] = {
      {impl::kiln, "kiln"}, {impl::eigen, "eigen"}, {impl::loop, "loop"}, {impl::kiln_unfused, "kiln_unfused"}};
  for (int t : kiln_bench::thread_counts()) {
    for (const auto& [o, on] : ops) {
      for (const auto& [m, mn] : impls) {
        if (m == impl::kiln_unfused && o != op::softmax_mask) continue;
        if (m == impl::eigen && o == op::cumsum) continue;
        const std::string name = std::string("BM_") + on + "/" + mn + "/" + std::to_string(t) + "T";
        kiln_bench::configure(benchmark::RegisterBenchmark(name.c_str(), [o = o, m = m, t](benchmark::State& s) {
          bench(s, o, m, t);
        }));
      }
    }
    const std::string copy = "BM_copy/kiln/" + std::to_string(t) + "T";
    kiln_bench::configure(benchmark::RegisterBenchmark(copy.c_str(), [t](benchmark::State& s) {
      bench(s, op::softmax, impl::kiln_copy, t);
    }));
  }
}

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, register_all); }
