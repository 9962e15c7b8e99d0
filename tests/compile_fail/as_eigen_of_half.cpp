// expect: Eigen has no scalar type for kiln::half
// Eigen cannot map binary16 storage; convert to a float tensor first.
#include <kiln/eigen.hpp>
#include <kiln/kiln.hpp>

void misuse(kiln::context<kiln::cpu<>>& ctx) {
  auto h = kiln::zeros<kiln::half>(ctx, {2, 2});
  auto m = kiln::as_eigen(h);
  (void)m;
}
