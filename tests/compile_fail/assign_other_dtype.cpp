// expect: dtype differs
// Assignment never converts silently: an f16 expression into an f32 tensor needs a cast.
#include <kiln/kiln.hpp>

void misuse(kiln::context<kiln::cpu<>>& ctx) {
  auto h = kiln::zeros<kiln::half>(ctx, {4});
  auto y = kiln::empty<float>(ctx, {4});
  y = h * 2.0f;
}
