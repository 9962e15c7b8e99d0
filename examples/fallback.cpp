// examples/fallback.cpp — the same templated computation on Vulkan, and on the CPU when the
// GPU is missing or fails: a lost device (kiln::device_error) makes the Vulkan context
// refuse all further work, so the program reruns the computation on context<cpu<>>.
//
//   fallback                     Vulkan if a device works, else the CPU
//   fallback --lose-device       the same, with the GPU's first submit failing as
//                                VK_ERROR_DEVICE_LOST (kiln's test-only fault injection)
#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

#include <cmath>
#include <cstdio>
#include <string_view>
#include <vector>

/// The user's computation, written once for every backend.
template <kiln::backend B>
std::vector<float> softsign_mix(kiln::context<B>& ctx, const std::vector<float>& host) {
  const kiln::shape s{static_cast<kiln::index_t>(host.size())};
  auto x = kiln::from_host(ctx, s, host);
  auto y = kiln::empty<float>(ctx, s);
  y = x / (kiln::abs(x) + 1.0f) + kiln::sigmoid(x) * 0.5f;  // one fused kernel
  return y.to_host();
}

int main(int argc, char** argv) {
  const bool lose_device = argc > 1 && std::string_view(argv[1]) == "--lose-device";
  std::vector<float> host(1 << 16);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = float(i % 200) / 10.0f - 10.0f;

  std::vector<float> out;
  const char* ran_on = "vulkan";
  try {
    kiln::context<kiln::vulkan> gpu;  // throws kiln::device_unavailable without a device
    if (lose_device) kiln::detail::vk::fault_injection::arm(kiln::detail::vk::fault_injection::queue_submit);
    out = softsign_mix(gpu, host);
  } catch (const kiln::device_error& e) {  // device_unavailable and out_of_memory included
    kiln::detail::vk::fault_injection::disarm();
    std::printf("Vulkan failed, running on the CPU instead:\n  %s\n", e.what());
    kiln::context<kiln::cpu<>> cpu;
    out = softsign_mix(cpu, host);
    ran_on = "cpu";
  }

  double worst = 0;
  for (std::size_t i = 0; i < host.size(); ++i) {
    const double x = host[i];
    worst = std::max(worst, std::abs(out[i] - (x / (std::abs(x) + 1) + 0.5 / (1 + std::exp(-x)))));
  }
  std::printf("ran on %s: %zu elements, largest error %.3g\n", ran_on, out.size(), worst);
  return worst < 1e-5 ? 0 : 1;
}
