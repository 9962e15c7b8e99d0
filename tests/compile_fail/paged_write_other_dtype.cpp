// expect: paged_write's rows must have the pool's dtype
// A paged pool holds one dtype; rows of another are converted explicitly.
#include <kiln/kiln.hpp>

void misuse(kiln::context<kiln::cpu<>>& ctx) {
  auto pool = kiln::zeros<kiln::half>(ctx, {4, 2, 16, 8});
  auto rows = kiln::zeros<float>(ctx, {1, 2, 1, 8});
  auto tables = kiln::zeros<std::int32_t>(ctx, {1, 1});
  auto starts = kiln::zeros<std::int32_t>(ctx, {1});
  kiln::paged_write(pool, rows, tables, starts);
}
