// tests/expr/aliasing_test.cpp — writing to a tensor that the expression also reads.
// Same elements: runs in place (one kernel). Overlapping differently (a transposed or
// shifted view of the output): goes through a temporary (two kernels) and is correct.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include "backends.hpp"
#include "eigen_oracle.hpp"
#include "random.hpp"
#include "tolerances.hpp"

template <class B>
class aliasing : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(aliasing, kiln_test::backend_types);

TYPED_TEST(aliasing, same_view_runs_in_place_in_one_kernel) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto g = kiln_test::rng();
  const auto h = kiln_test::uniform(g, 1025);
  auto x = kiln::from_host(ctx, {1025}, h);
  const auto before = ctx.kernels_launched();
  x = x * 2.0f + x;
  EXPECT_EQ(ctx.kernels_launched() - before, 1u);
  const kiln_test::ArrayXd want = kiln_test::as_array(h).cast<double>() * 3.0;
  EXPECT_TRUE(kiln_test::all_close(x.to_host(), want, kiln_test::tol::elementwise));
}

TYPED_TEST(aliasing, compound_assignment_in_place) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto g = kiln_test::rng();
  const auto h = kiln_test::uniform(g, 77), d = kiln_test::uniform(g, 77);
  auto x = kiln::from_host(ctx, {7, 11}, h);
  auto y = kiln::from_host(ctx, {7, 11}, d);
  const auto before = ctx.kernels_launched();
  x += y;
  x *= 0.5f;
  x -= 1.0f;
  x /= y;
  EXPECT_EQ(ctx.kernels_launched() - before, 4u);
  kiln_test::ArrayXd want = ((kiln_test::as_array(h).cast<double>() + kiln_test::as_array(d).cast<double>()) * 0.5 - 1.0) /
                            kiln_test::as_array(d).cast<double>();
  EXPECT_TRUE(kiln_test::all_close(x.to_host(), want, 1e-5, 1e-6));
}

TYPED_TEST(aliasing, square_transpose_into_itself_uses_a_temporary) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto g = kiln_test::rng();
  for (kiln::index_t n : {1, 7, 33, 130}) {
    const auto h = kiln_test::uniform(g, std::size_t(n * n));
    auto x = kiln::from_host(ctx, {n, n}, h);
    const auto before = ctx.kernels_launched();
    x = kiln::transpose(x);
    EXPECT_EQ(ctx.kernels_launched() - before, n == 1 ? 1u : 2u) << "n=" << n;
    const auto got = x.to_host();
    std::vector<float> want(h.size());
    for (kiln::index_t i = 0; i < n; ++i)
      for (kiln::index_t j = 0; j < n; ++j) want[std::size_t(i * n + j)] = h[std::size_t(j * n + i)];
    EXPECT_TRUE(kiln_test::all_equal(got, want)) << "n=" << n;
  }
}

TYPED_TEST(aliasing, transpose_plus_self_is_symmetric) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto g = kiln_test::rng();
  const kiln::index_t n = 65;
  const auto h = kiln_test::uniform(g, std::size_t(n * n));
  auto x = kiln::from_host(ctx, {n, n}, h);
  x = x + kiln::transpose(x);
  const auto got = x.to_host();
  std::vector<float> want(h.size());
  for (kiln::index_t i = 0; i < n; ++i)
    for (kiln::index_t j = 0; j < n; ++j)
      want[std::size_t(i * n + j)] = h[std::size_t(i * n + j)] + h[std::size_t(j * n + i)];
  EXPECT_TRUE(kiln_test::all_equal(got, want));
}

TYPED_TEST(aliasing, shifted_slice_of_same_buffer) {
  // y[1:] = y[:-1] + 1 must read the old values (a sequential loop would smear y[0]).
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto g = kiln_test::rng();
  const auto h = kiln_test::uniform(g, 4097);
  auto y = kiln::from_host(ctx, {4097}, h);
  kiln::slice(y, 0, 1, 4097) = kiln::slice(y, 0, 0, 4096) + 1.0f;
  const auto got = y.to_host();
  std::vector<float> want(h);
  for (std::size_t i = 1; i < h.size(); ++i) want[i] = h[i - 1] + 1.0f;
  EXPECT_TRUE(kiln_test::all_equal(got, want));
}

TYPED_TEST(aliasing, disjoint_slices_of_same_buffer_need_no_temporary) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto g = kiln_test::rng();
  const auto h = kiln_test::uniform(g, 200);
  auto y = kiln::from_host(ctx, {200}, h);
  const auto before = ctx.kernels_launched();
  kiln::slice(y, 0, 100, 200) = kiln::slice(y, 0, 0, 100) * 3.0f;
  EXPECT_EQ(ctx.kernels_launched() - before, 1u);
  const auto got = y.to_host();
  for (std::size_t i = 0; i < 100; ++i) {
    EXPECT_EQ(got[i], h[i]);
    EXPECT_EQ(got[100 + i], h[i] * 3.0f);
  }
}

TYPED_TEST(aliasing, writing_a_broadcast_view_throws) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto x = kiln::zeros<float>(ctx, {4});
  auto b = kiln::broadcast_to(x, {3, 4});
  EXPECT_THROW(b = b + 1.0f, kiln::shape_error);
  EXPECT_THROW(b = 1.0f, kiln::shape_error);
}
