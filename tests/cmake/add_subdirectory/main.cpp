// A program built with kiln added as a subdirectory: a fused expression with a broadcast
// bias, checked on the host.
#include <kiln/kiln.hpp>

#include <cstdio>
#include <vector>

int main() {
  kiln::context<kiln::cpu<>> ctx;
  std::vector<float> a(4 * 33), bias(33);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.0f;
  for (std::size_t j = 0; j < bias.size(); ++j) bias[j] = static_cast<float>(j) * 0.25f;
  auto x = kiln::from_host(ctx, {4, 33}, a);
  auto b = kiln::from_host(ctx, {33}, bias);
  auto y = kiln::empty<float>(ctx, {4, 33});
  y = kiln::max(x * x - b, 0.0f);
  const std::vector<float> out = y.to_host();
  for (std::size_t i = 0; i < out.size(); ++i) {
    const float v = a[i] * a[i] - bias[i % 33];
    const float want = v > 0.0f ? v : 0.0f;
    if (out[i] != want) {
      std::printf("add_subdirectory consumer: y[%zu] = %g, expected %g\n", i, out[i], want);
      return 1;
    }
  }
  std::printf("add_subdirectory consumer: ok\n");
  return 0;
}
