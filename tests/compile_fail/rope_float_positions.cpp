// expect: rope's positions must be an int32 tensor
// Positions are integers; float positions would hide a rounding of the angle.
#include <kiln/kiln.hpp>

void misuse(kiln::context<kiln::cpu<>>& ctx) {
  auto x = kiln::zeros<float>(ctx, {4, 8});
  auto p = kiln::zeros<float>(ctx, {4});
  auto y = kiln::rope(x, p);
  (void)y;
}
