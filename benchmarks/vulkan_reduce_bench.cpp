// benchmarks/vulkan_reduce_bench.cpp — structural kernels on Vulkan (lavapipe in CI) over
// 4096 x 4096 f32 rows, against kiln's own Vulkan copy of the same bytes in the same run:
//   BM_softmax/vulkan/4096x4096        y = softmax(x, -1): one dispatch (on CPU devices a subgroup a line, vec4
//                                      steps; on GPUs a workgroup a line cached in shared memory)
//   BM_log_softmax/vulkan/4096x4096    y = log_softmax(x, -1)
//   BM_softmax_masked/vulkan/4096x4096 y = softmax(x * 0.125 + mask), mask [4096] broadcast: one dispatch
//   BM_layer_norm/vulkan/4096x4096     y = layer_norm(x, w, b)
//   BM_rms_norm/vulkan/4096x4096       y = rms_norm(x, w)
//   BM_row_sum/vulkan/4096x4096        r = sum(x, -1) (reads 64 MiB, writes 16 KiB)
//   BM_cumsum/vulkan/4096x4096         y = cumsum(x, -1): one dispatch, a workgroup (CPU devices: a subgroup) a line
//   BM_copy/vulkan/4096x4096           y = x (a generated copy kernel): the memory floor of 1 read + 1 write
// GB/s: bytes read once plus bytes written once (row sum: its read; a norm's w/b are
// negligible). Each iteration waits for the device.
#include <benchmark/benchmark.h>

#include <memory>

#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

#include "bench_support.hpp"

namespace {

constexpr kiln::index_t rows = 4096, cols = 4096;

kiln::context<kiln::vulkan>* gpu() {
  static std::unique_ptr<kiln::context<kiln::vulkan>> c;
  if (!c && kiln::vulkan::available()) c = std::make_unique<kiln::context<kiln::vulkan>>();
  return c.get();
}

struct operands {
  kiln::tensor<float, kiln::vulkan> x, y, w, b, mask, r;
  explicit operands(kiln::context<kiln::vulkan>& ctx)
      : x(kiln::random<float>(ctx, {rows, cols}, -3, 3, 1)),
        y(kiln::empty<float>(ctx, {rows, cols})),
        w(kiln::random<float>(ctx, {cols}, -1, 1, 2)),
        b(kiln::random<float>(ctx, {cols}, -1, 1, 3)),
        mask(kiln::random<float>(ctx, {cols}, -1, 1, 4)),
        r(kiln::empty<float>(ctx, {rows})) {}
};

template <class Run>
void run_bench(benchmark::State& state, double bytes_per_iteration, Run run) {
  auto* g = gpu();
  if (!g) return state.SkipWithError("no Vulkan device");
  operands o(*g);
  run(o);  // compile before timing
  g->synchronize();
  for (auto _ : state) {
    run(o);
    g->synchronize();
  }
  state.counters["GB/s"] = benchmark::Counter(bytes_per_iteration, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}

constexpr double matrix_bytes = 4.0 * double(rows) * double(cols);

void BM_softmax(benchmark::State& s) { run_bench(s, 2 * matrix_bytes, [](operands& o) { o.y = kiln::softmax(o.x, -1); }); }
void BM_log_softmax(benchmark::State& s) {
  run_bench(s, 2 * matrix_bytes, [](operands& o) { o.y = kiln::log_softmax(o.x, -1); });
}
void BM_softmax_masked(benchmark::State& s) {
  run_bench(s, 2 * matrix_bytes, [](operands& o) { o.y = kiln::softmax(o.x * 0.125f + o.mask, -1); });
}
void BM_layer_norm(benchmark::State& s) {
  run_bench(s, 2 * matrix_bytes, [](operands& o) { o.y = kiln::layer_norm(o.x, o.w, o.b); });
}
void BM_rms_norm(benchmark::State& s) { run_bench(s, 2 * matrix_bytes, [](operands& o) { o.y = kiln::rms_norm(o.x, o.w); }); }
void BM_row_sum(benchmark::State& s) { run_bench(s, matrix_bytes, [](operands& o) { o.r = kiln::sum(o.x, -1); }); }
void BM_cumsum(benchmark::State& s) { run_bench(s, 2 * matrix_bytes, [](operands& o) { o.y = kiln::cumsum(o.x, -1); }); }
void BM_copy(benchmark::State& s) { run_bench(s, 2 * matrix_bytes, [](operands& o) { o.y = o.x; }); }

}  // namespace

BENCHMARK(BM_copy)->Name("BM_copy/vulkan/4096x4096")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_softmax)->Name("BM_softmax/vulkan/4096x4096")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_log_softmax)->Name("BM_log_softmax/vulkan/4096x4096")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_softmax_masked)->Name("BM_softmax_masked/vulkan/4096x4096")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_layer_norm)->Name("BM_layer_norm/vulkan/4096x4096")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_rms_norm)->Name("BM_rms_norm/vulkan/4096x4096")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_row_sum)->Name("BM_row_sum/vulkan/4096x4096")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cumsum)->Name("BM_cumsum/vulkan/4096x4096")->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, [] {}); }
