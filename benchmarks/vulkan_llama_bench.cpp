// benchmarks/vulkan_llama_bench.cpp — the Llama decoder on the Vulkan backend (lavapipe in
// CI's image, any device here), f32 and f16 weights, beside kiln's copy bandwidth on the
// same device (see llama_bench.hpp for what is measured). Skips when no device exists.
#include <kiln/vulkan.hpp>

#include "llama_bench.hpp"

namespace {

using B = kiln::vulkan;

const kiln::context<B>* gpu() {
  static std::unique_ptr<kiln::context<B>> c;
  if (!c && kiln::vulkan::available()) c = std::make_unique<kiln::context<B>>();
  return c.get();
}

template <class F>
void on_gpu(benchmark::State& s, F&& f) {
  if (!gpu()) {
    s.SkipWithError("no Vulkan device");
    return;
  }
  const auto before = kiln::vulkan::cache(*gpu());
  f(*gpu());
  const auto after = kiln::vulkan::cache(*gpu());
  // kernels built while measuring (0 once every shape of a step has been seen)
  s.counters["pipelines"] = double(after.memory_misses - before.memory_misses);
  s.counters["compile_s"] = after.compile_seconds - before.compile_seconds + after.pipeline_seconds - before.pipeline_seconds;
}

template <class W>
void register_weights(const char* w) {
  kiln_bench::configure(benchmark::RegisterBenchmark(("BM_llama_decode/" + std::string(w) + "/vulkan").c_str(),
                                                     [](benchmark::State& s) {
                                                       on_gpu(s, [&](const auto& c) { llama_bench::decode<W>(s, c); });
                                                     }))
      ->Unit(benchmark::kMillisecond);
  kiln_bench::configure(benchmark::RegisterBenchmark(("BM_llama_prefill/" + std::string(w) + "/vulkan").c_str(),
                                                     [](benchmark::State& s) {
                                                       on_gpu(s, [&](const auto& c) { llama_bench::prefill<W>(s, c); });
                                                     }))
      ->Unit(benchmark::kMillisecond);
}

void register_all() {
  kiln_bench::configure(benchmark::RegisterBenchmark("BM_copy/vulkan", [](benchmark::State& s) {
    on_gpu(s, [&](const auto& c) { llama_bench::copy(s, c); });
  }))->Unit(benchmark::kMillisecond);
  register_weights<kiln::half>("f16");
  register_weights<float>("f32");
}

}  // namespace

int main(int argc, char** argv) { return llama_bench::run_main(argc, argv, register_all); }
