// expect: needs a floating-point dtype
// exp is defined for floating dtypes only; an i32 tensor must be cast to float first.
#include <kiln/kiln.hpp>

#include <cstdint>

void misuse(kiln::context<kiln::cpu<>>& ctx) {
  auto x = kiln::zeros<std::int32_t>(ctx, {4});
  auto y = kiln::exp(x);
  (void)y;
}
