// expect: paged_attention's block tables and lengths must be int32 tensors
// Block ids and lengths are integers.
#include <kiln/kiln.hpp>

void misuse(kiln::context<kiln::cpu<>>& ctx) {
  auto q = kiln::zeros<float>(ctx, {1, 2, 1, 8});
  auto pool = kiln::zeros<float>(ctx, {4, 2, 16, 8});
  auto tables = kiln::zeros<float>(ctx, {1, 1});
  auto lens = kiln::zeros<float>(ctx, {1});
  auto y = kiln::paged_attention(q, pool, pool, tables, lens);
  (void)y;
}
