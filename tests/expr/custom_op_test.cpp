// tests/expr/custom_op_test.cpp — users' fused ops: (a) a template over expressions,
// (b) a new primitive struct with a run-time parameter. Both fuse into one kernel.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include "backends.hpp"
#include "eigen_oracle.hpp"
#include "random.hpp"
#include "tolerances.hpp"

namespace {

// (a) Any template over expressions fuses: SwiGLU's gate.
template <kiln::expression A, kiln::expression B>
auto swiglu(A&& a, B&& b) {
  return kiln::silu(std::forward<A>(a)) * std::forward<B>(b);
}

// (b) A new primitive: softplus with a sharpness beta, log(1 + e^(beta x)) / beta.
struct softplus_beta_op {
  static constexpr std::string_view name = "softplus_beta";
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& x, const V& beta) {
    using std::exp, std::log1p;
    return log1p(exp(beta * x)) / beta;
  }
  static constexpr std::string_view glsl = "(log(1.0 + exp({1} * {0})) / {1})";
};

template <kiln::expression X>
auto softplus_beta(X&& x, float beta) {
  return kiln::map<softplus_beta_op>(std::forward<X>(x), beta);
}

}  // namespace

template <class B>
class custom_op : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(custom_op, kiln_test::backend_types);

TYPED_TEST(custom_op, swiglu_template_fuses) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto g = kiln_test::rng();
  for (std::size_t n : {0u, 1u, 17u, 1025u, (1u << 20) + 3u}) {
    const auto ha = kiln_test::uniform(g, n), hb = kiln_test::uniform(g, n);
    auto a = kiln::from_host(ctx, {kiln::index_t(n)}, ha);
    auto b = kiln::from_host(ctx, {kiln::index_t(n)}, hb);
    auto y = kiln::empty<float>(ctx, {kiln::index_t(n)});
    const auto before = ctx.kernels_launched();
    y = swiglu(a, b);
    EXPECT_EQ(ctx.kernels_launched() - before, n ? 1u : 0u);
    const kiln_test::ArrayXd x = kiln_test::as_array(ha).cast<double>();
    const kiln_test::ArrayXd want = x / (1.0 + (-x).exp()) * kiln_test::as_array(hb).cast<double>();
    EXPECT_TRUE(kiln_test::all_close(y.to_host(), want, kiln_test::tol::transcendental, kiln_test::tol::transcendental_abs))
        << "n=" << n;
  }
}

TYPED_TEST(custom_op, primitive_with_runtime_parameter) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto g = kiln_test::rng();
  const std::size_t n = 1023;
  const auto hx = kiln_test::uniform(g, n, -3.0f, 3.0f);
  auto x = kiln::from_host(ctx, {kiln::index_t(n)}, hx);
  auto y = kiln::empty<float>(ctx, {kiln::index_t(n)});
  for (float beta : {0.5f, 1.0f, 4.0f}) {
    const auto before = ctx.kernels_launched();
    y = softplus_beta(x * 2.0f, beta) - 1.0f;  // still one kernel
    EXPECT_EQ(ctx.kernels_launched() - before, 1u);
    const kiln_test::ArrayXd v = kiln_test::as_array(hx).cast<double>() * 2.0;
    const kiln_test::ArrayXd want = (1.0 + (beta * v).exp()).log() / beta - 1.0;
    EXPECT_TRUE(kiln_test::all_close(y.to_host(), want, kiln_test::tol::transcendental, 1e-6)) << "beta=" << beta;
  }
}

TYPED_TEST(custom_op, stored_expression_cannot_dangle) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto y = kiln::empty<float>(ctx, {5});
  auto expr = [&] {
    auto t = kiln::full(ctx, {5}, 2.0f);   // dies at the end of the lambda...
    return kiln::relu(std::move(t) - 1.0f);  // ...but the node holds it
  }();
  y = expr;
  for (float v : y.to_host()) EXPECT_EQ(v, 1.0f);
}
