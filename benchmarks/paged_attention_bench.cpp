// benchmarks/paged_attention_bench.cpp — paged against contiguous decode attention on the
// CPU (what is measured: paged_attention_bench.hpp). Vulkan: vulkan_paged_attention_bench.cpp.
#include "paged_attention_bench.hpp"

namespace {

kiln::context<kiln::cpu<>>& cpu() {
  static kiln::context<kiln::cpu<>> c;
  return c;
}
void BM_paged(benchmark::State& s) { kiln_paged_bench::paged(s, cpu()); }
void BM_contiguous(benchmark::State& s) { kiln_paged_bench::contiguous(s, cpu()); }

}  // namespace

int main(int argc, char** argv) {
  return kiln_bench::run_main(argc, argv, [] { kiln_paged_bench::register_all("cpu", BM_paged, BM_contiguous); });
}
