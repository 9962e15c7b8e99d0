// benchmarks/llama_bench.cpp — the Llama decoder on the CPU at 1 and 2 threads, f32 and
// f16 weights and int8 / int4 projections, beside kiln's copy and read bandwidth (see
// llama_bench.hpp for what is measured).
#include "llama_bench.hpp"

namespace {

using B = kiln::cpu<>;

const kiln::context<B>& ctx(int threads) {
  static std::map<int, std::unique_ptr<kiln::context<B>>> ctxs;
  auto& c = ctxs[threads];
  if (!c) c = std::make_unique<kiln::context<B>>(kiln::threads{threads});
  return *c;
}

template <class W, kiln::llama::weight_quant Q = kiln::llama::weight_quant::none>
void register_weights(const char* w) {
  for (int t : kiln_bench::thread_counts()) {
    const std::string tail = std::string(w) + "/" + std::to_string(t) + "T";
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_llama_decode/" + tail).c_str(), [t](benchmark::State& s) {
      llama_bench::decode<W, B, Q>(s, ctx(t));
    }))->Unit(benchmark::kMillisecond);
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_llama_prefill/" + tail).c_str(), [t](benchmark::State& s) {
      llama_bench::prefill<W, B, Q>(s, ctx(t));
    }))->Unit(benchmark::kMillisecond);
    if (t == kiln_bench::thread_counts().back()) {  // the long prompt at the most threads only (seconds a step)
      kiln_bench::configure(benchmark::RegisterBenchmark(("BM_llama_prefill512/" + tail).c_str(), [t](benchmark::State& s) {
        llama_bench::prefill<W, B, Q>(s, ctx(t), 512);
      }))->Unit(benchmark::kMillisecond);
    }
  }
}

void register_all() {
  for (int t : kiln_bench::thread_counts()) {
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_copy/" + std::to_string(t) + "T").c_str(),
                                                       [t](benchmark::State& s) { llama_bench::copy(s, ctx(t)); }))
        ->Unit(benchmark::kMillisecond);
  }
  register_weights<kiln::half>("f16");
  register_weights<float>("f32");
  register_weights<float, kiln::llama::weight_quant::int8>("int8");
  register_weights<float, kiln::llama::weight_quant::int4>("int4");
  // last: registered before the models, the f32 decode runs after it were slower in 5 of
  // 5 runs on the shared 2-core machine (27-39 GB/s against 40-46 without it; the cause
  // was not found), so that it cannot disturb them
  for (int t : kiln_bench::thread_counts()) {
    kiln_bench::configure(benchmark::RegisterBenchmark(("BM_read/" + std::to_string(t) + "T").c_str(),
                                                       [t](benchmark::State& s) { llama_bench::read(s, ctx(t)); }))
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) { return llama_bench::run_main(argc, argv, register_all); }
