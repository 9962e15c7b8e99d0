// A Vulkan program built with plain g++ and `pkg-config --cflags --libs kiln-vulkan`: one
// fused statement compiled by shaderc at run time (which is what needs glslang and
// SPIRV-Tools on the link line), checked on the host. Without a Vulkan device it says so
// and exits 0: the link itself is what the build checks.
#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

#include <cstdio>
#include <vector>

int main() {
  if (!kiln::vulkan::available()) {
    std::printf("pkg-config vulkan consumer: linked; no Vulkan device on this machine\n");
    return 0;
  }
  kiln::context<kiln::vulkan> ctx;  // the test runs it with KILN_CACHE=off: shaderc compiles
  std::vector<float> host(1000);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) - 500.0f;
  auto x = kiln::from_host(ctx, {1000}, host);
  auto y = kiln::empty<float>(ctx, {1000});
  y = kiln::relu(x * 2.0f + 1.0f);
  const std::vector<float> out = y.to_host();
  for (std::size_t i = 0; i < out.size(); ++i) {
    const float want = host[i] * 2.0f + 1.0f > 0.0f ? host[i] * 2.0f + 1.0f : 0.0f;
    if (out[i] != want) {
      std::printf("pkg-config vulkan consumer: y[%zu] = %g, expected %g\n", i, out[i], want);
      return 1;
    }
  }
  std::printf("pkg-config vulkan consumer: ok\n");
  return 0;
}
