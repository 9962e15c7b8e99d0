// expect: compiles
// The control: the fixed spelling of every misuse in this folder must compile, so that a
// broken harness (wrong include paths, wrong flags) cannot pass the other checks silently.
#include <kiln/eigen.hpp>
#include <kiln/kiln.hpp>

#include <cstdint>

void correct_use(kiln::context<kiln::cpu<>>& ctx) {
  auto a = kiln::zeros<float>(ctx, {4});
  auto b = kiln::zeros<std::int8_t>(ctx, {4});
  auto sum = a + kiln::cast<float>(b);
  auto i = kiln::zeros<std::int32_t>(ctx, {4});
  auto e = kiln::exp(kiln::cast<float>(i));
  auto h = kiln::zeros<kiln::half>(ctx, {4});
  auto y = kiln::empty<float>(ctx, {4});
  y = kiln::cast<float>(h * 2.0f);
  y = sum + e;
  auto scaled = kiln::cast<float>(i) * 0.5f;
  auto twice = i * 2;
  auto m = kiln::as_eigen(y);
  (void)scaled;
  (void)twice;
  (void)m;
}
