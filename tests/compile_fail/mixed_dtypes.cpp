// expect: operands have different dtypes
// Adding an f32 tensor to an i8 tensor needs an explicit kiln::cast.
#include <kiln/kiln.hpp>

#include <cstdint>

void misuse(kiln::context<kiln::cpu<>>& ctx) {
  auto a = kiln::zeros<float>(ctx, {4});
  auto b = kiln::zeros<std::int8_t>(ctx, {4});
  auto y = a + b;
  (void)y;
}
