// expect: floating-point scalar with an integer tensor
// A float literal would be truncated silently into i32 arithmetic.
#include <kiln/kiln.hpp>

#include <cstdint>

void misuse(kiln::context<kiln::cpu<>>& ctx) {
  auto x = kiln::zeros<std::int32_t>(ctx, {4});
  auto y = x * 0.5f;
  (void)y;
}
