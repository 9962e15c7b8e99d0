// benchmarks/vulkan_paged_attention_bench.cpp — paged against contiguous decode attention
// on Vulkan (lavapipe in CI; what is measured: paged_attention_bench.hpp). CPU:
// paged_attention_bench.cpp.
#include <memory>

#include <kiln/vulkan.hpp>

#include "paged_attention_bench.hpp"

namespace {

kiln::context<kiln::vulkan>* gpu() {
  static std::unique_ptr<kiln::context<kiln::vulkan>> c;
  if (!c && kiln::vulkan::available()) c = std::make_unique<kiln::context<kiln::vulkan>>();
  return c.get();
}
void BM_paged(benchmark::State& s) {
  if (!gpu()) return s.SkipWithError("no Vulkan device");
  kiln_paged_bench::paged(s, *gpu());
}
void BM_contiguous(benchmark::State& s) {
  if (!gpu()) return s.SkipWithError("no Vulkan device");
  kiln_paged_bench::contiguous(s, *gpu());
}

}  // namespace

int main(int argc, char** argv) {
  return kiln_bench::run_main(argc, argv, [] { kiln_paged_bench::register_all("vulkan", BM_paged, BM_contiguous); });
}
