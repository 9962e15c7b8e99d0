// expect: embedding's ids must be an int32 tensor
// Token ids are integers.
#include <kiln/kiln.hpp>

void misuse(kiln::context<kiln::cpu<>>& ctx) {
  auto t = kiln::zeros<float>(ctx, {10, 8});
  auto ids = kiln::zeros<float>(ctx, {4});
  auto y = kiln::embedding(t, ids);
  (void)y;
}
