// A program built against an installed kiln: one fused expression, checked on the host.
#include <kiln/kiln.hpp>

#include <cstdio>
#include <vector>

int main() {
  kiln::context<kiln::cpu<>> ctx;
  std::vector<float> host(1000);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) - 500.0f;
  auto x = kiln::from_host(ctx, {10, 100}, host);
  auto y = kiln::empty<float>(ctx, {10, 100});
  const auto before = ctx.kernels_launched();
  y = kiln::relu(x * 2.0f + 1.0f);
  const auto kernels = ctx.kernels_launched() - before;
  const std::vector<float> out = y.to_host();
  for (std::size_t i = 0; i < out.size(); ++i) {
    const float want = host[i] * 2.0f + 1.0f > 0.0f ? host[i] * 2.0f + 1.0f : 0.0f;
    if (out[i] != want) {
      std::printf("find_package consumer: y[%zu] = %g, expected %g\n", i, out[i], want);
      return 1;
    }
  }
  if (kernels != 1) {
    std::printf("find_package consumer: %llu kernels for one statement\n", static_cast<unsigned long long>(kernels));
    return 1;
  }
  std::printf("find_package consumer: ok\n");
  return 0;
}
