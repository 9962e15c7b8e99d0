// tests/expr/assign_test.cpp — assignment rules: shapes, broadcasting into the target,
// empty targets, scalars, masks, small and large outputs (single- and multi-threaded).
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include "backends.hpp"
#include "eigen_oracle.hpp"
#include "random.hpp"
#include "tolerances.hpp"

template <class B>
class assign : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(assign, kiln_test::backend_types);

TYPED_TEST(assign, shape_mismatch_names_both_sides) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto x = kiln::zeros<float>(ctx, {3, 4});
  auto y = kiln::empty<float>(ctx, {4, 3});
  try {
    y = x + 1.0f;
    FAIL() << "expected kiln::shape_error";
  } catch (const kiln::shape_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("kiln::assign"), std::string::npos) << m;
    EXPECT_NE(m.find("f32[3, 4]"), std::string::npos) << m;
    EXPECT_NE(m.find("f32[4, 3] on " + ctx.device_name()), std::string::npos) << m;
  }
}

TYPED_TEST(assign, expression_broadcasts_into_target) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  std::vector<float> row = {1, 2, 3};
  auto r = kiln::from_host(ctx, {3}, row);
  auto y = kiln::empty<float>(ctx, {2, 3});
  y = r * 2.0f;
  EXPECT_EQ(y.to_host(), (std::vector<float>{2, 4, 6, 2, 4, 6}));
  y = 7.0f;
  EXPECT_EQ(y.to_host(), std::vector<float>(6, 7.0f));
}

TYPED_TEST(assign, empty_target_takes_shape_and_context) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto x = kiln::full(ctx, {2, 5}, 3.0f);
  kiln::tensor<float, TypeParam> y;
  EXPECT_FALSE(y.defined());
  y = x * x;
  ASSERT_TRUE(y.defined());
  EXPECT_EQ(y.shape(), (kiln::shape{2, 5}));
  EXPECT_EQ(y.to_host(), std::vector<float>(10, 9.0f));
  EXPECT_NE(y.storage(), x.storage());
  kiln::tensor<float, TypeParam> z;
  z = x;  // copies values, never shares
  EXPECT_NE(z.storage(), x.storage());
  EXPECT_EQ(z.to_host(), x.to_host());
}

TYPED_TEST(assign, copy_shares_and_assignment_writes) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto x = kiln::full(ctx, {4}, 1.0f);
  auto alias = x;  // a handle: same storage
  EXPECT_EQ(alias.storage(), x.storage());
  auto y = kiln::full(ctx, {4}, 5.0f);
  alias = y;  // writes values into x's storage
  EXPECT_EQ(x.to_host(), std::vector<float>(4, 5.0f));
  auto c = x.clone();
  EXPECT_NE(c.storage(), x.storage());
  using std::swap;
  auto a = kiln::full(ctx, {2}, 1.0f), b = kiln::full(ctx, {3}, 2.0f);
  swap(a, b);  // swaps handles (different shapes are fine)
  EXPECT_EQ(a.to_host(), std::vector<float>(3, 2.0f));
  EXPECT_EQ(b.to_host(), std::vector<float>(2, 1.0f));
}

TYPED_TEST(assign, zero_and_rank_zero_tensors) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto e = kiln::empty<float>(ctx, {0, 5});
  const auto before = ctx.kernels_launched();
  e = kiln::exp(e) + 1.0f;
  EXPECT_EQ(ctx.kernels_launched(), before);
  EXPECT_TRUE(e.to_host().empty());
  auto s = kiln::full(ctx, kiln::shape{}, 4.0f);
  EXPECT_EQ(s.numel(), 1);
  s = kiln::sqrt(s) * 3.0f;
  EXPECT_EQ(s.to_host(), std::vector<float>{6.0f});
}

TYPED_TEST(assign, large_outputs_split_across_threads_match_oracle) {
  // Above the threading and streaming-store thresholds, with odd sizes and offsets.
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto g = kiln_test::rng();
  for (std::size_t n : {(1u << 22) + 5u, (1u << 20) + 3u}) {
    const auto ha = kiln_test::uniform(g, n), hb = kiln_test::uniform(g, n);
    auto a = kiln::from_host(ctx, {kiln::index_t(n)}, ha);
    auto b = kiln::from_host(ctx, {kiln::index_t(n)}, hb);
    auto big = kiln::empty<float>(ctx, {kiln::index_t(n + 1)});
    auto y = kiln::slice(big, 0, 1, kiln::index_t(n + 1));  // misaligned output start
    y = a * b - a;
    const kiln_test::ArrayXd want = kiln_test::as_array(ha).cast<double>() * kiln_test::as_array(hb).cast<double>() -
                                    kiln_test::as_array(ha).cast<double>();
    EXPECT_TRUE(kiln_test::all_close(y.to_host(), want, kiln_test::tol::elementwise, 1e-6)) << "n=" << n;
  }
}

TYPED_TEST(assign, masks_store_as_zero_or_one) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  std::vector<float> h = {-1.0f, 0.0f, 2.0f, std::numeric_limits<float>::quiet_NaN()};
  auto x = kiln::from_host(ctx, {4}, h);
  auto m = kiln::empty<std::uint8_t>(ctx, {4});
  m = x > 0.0f;
  EXPECT_EQ(m.to_host(), (std::vector<std::uint8_t>{0, 0, 1, 0}));
  auto y = kiln::empty<float>(ctx, {4});
  y = kiln::where(m, x, -5.0f);  // an integer tensor works as a mask
  const auto got = y.to_host();
  EXPECT_EQ(got[0], -5.0f);
  EXPECT_EQ(got[2], 2.0f);
  EXPECT_EQ(got[3], -5.0f);
}

TYPED_TEST(assign, multithreaded_rows_with_broadcasts_and_transposed_inputs) {
  // Thread chunks end mid-row; column broadcast (inner stride 0), row broadcast, and a
  // transposed (gathered) input all cross the boundaries.
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto g = kiln_test::rng();
  const kiln::index_t m = 517, n = 263;
  const auto hm = kiln_test::uniform(g, std::size_t(m * n)), ht = kiln_test::uniform(g, std::size_t(m * n));
  const auto hc = kiln_test::uniform(g, std::size_t(m)), hr = kiln_test::uniform(g, std::size_t(n));
  auto a = kiln::from_host(ctx, {m, n}, hm);
  auto t = kiln::from_host(ctx, {n, m}, ht);  // read transposed
  auto col = kiln::from_host(ctx, {m, 1}, hc);
  auto row = kiln::from_host(ctx, {n}, hr);
  auto y = kiln::empty<float>(ctx, {m, n});
  y = a * col + row - kiln::transpose(t);
  const auto got = y.to_host();
  std::vector<double> want(std::size_t(m * n));
  for (kiln::index_t i = 0; i < m; ++i)
    for (kiln::index_t j = 0; j < n; ++j)
      want[std::size_t(i * n + j)] = double(hm[std::size_t(i * n + j)]) * hc[std::size_t(i)] + hr[std::size_t(j)] -
                                     ht[std::size_t(j * m + i)];
  EXPECT_TRUE(kiln_test::all_close(got, want, kiln_test::tol::elementwise, 1e-6));
}
