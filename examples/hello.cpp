// examples/hello.cpp — the smallest kiln program: one fused expression on the CPU.
#include <kiln/kiln.hpp>

#include <cstdio>
#include <span>
#include <vector>

int main() {
  std::vector<float> host(4096, 1.0f);
  kiln::context<kiln::cpu<>> ctx;  // best xsimd arch of this build
  auto x = kiln::from_host(ctx, {4096}, std::span(host));
  auto w = kiln::full(ctx, {4096}, 0.5f);
  auto y = kiln::empty<float>(ctx, {4096});

  y = kiln::relu(w * x + 1.0f);  // lazy tree; `=` runs ONE fused loop
  std::vector<float> out = y.to_host();
  std::printf("y[0] = %g (expected 1.5), kernels run: %llu\n", out[0],
              static_cast<unsigned long long>(ctx.kernels_launched()));
  return out[0] == 1.5f ? 0 : 1;
}
