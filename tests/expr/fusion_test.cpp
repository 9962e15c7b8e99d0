// tests/expr/fusion_test.cpp — a chain of elementwise ops is ONE kernel.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include "backends.hpp"
#include "eigen_oracle.hpp"
#include "random.hpp"
#include "tolerances.hpp"

template <class B>
class fusion : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(fusion, kiln_test::backend_types);

TYPED_TEST(fusion, chain_of_ops_launches_one_kernel) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto g = kiln_test::rng();
  const auto ha = kiln_test::uniform(g, 1025), hb = kiln_test::uniform(g, 1025), hc = kiln_test::uniform(g, 1025);
  auto a = kiln::from_host(ctx, {1025}, ha);
  auto b = kiln::from_host(ctx, {1025}, hb);
  auto c = kiln::from_host(ctx, {1025}, hc);
  auto y = kiln::empty<float>(ctx, {1025});
  const auto before = ctx.kernels_launched();
  y = kiln::gelu(a * b + c);
  EXPECT_EQ(ctx.kernels_launched() - before, 1u);

  using kiln_test::as_array;
  const kiln_test::ArrayXd x = (as_array(ha).cast<double>() * as_array(hb).cast<double>() + as_array(hc).cast<double>());
  const kiln_test::ArrayXd want = 0.5 * x * (1.0 + (x / std::sqrt(2.0)).erf());
  EXPECT_TRUE(kiln_test::all_close(y.to_host(), want, kiln_test::tol::transcendental, kiln_test::tol::gelu_abs));
}
