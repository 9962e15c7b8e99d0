// expect: rope needs a floating-point dtype
// RoPE rotates real vectors; an i32 tensor must be cast to float first.
#include <kiln/kiln.hpp>

#include <cstdint>

void misuse(kiln::context<kiln::cpu<>>& ctx) {
  auto x = kiln::zeros<std::int32_t>(ctx, {4, 8});
  auto p = kiln::zeros<std::int32_t>(ctx, {4});
  auto y = kiln::rope(x, p);
  (void)y;
}
