// tests/ops/linalg/matmul_test.cpp — kiln::matmul and kiln::linear on every backend
// against a float64 reference computed from the operands' logical values (to_host() of
// each view): square and odd shapes, vectors, K = 1 and a long K, batched and broadcast
// batches, transposed and sliced views, f16/bf16 operands, every fused form with its
// kernel count, NaN/Inf, empty dimensions, aliasing, variants and errors.
//
// Tolerance per element (f32 result): (K + 4) * 2^-24 * sum_k |a_ik| |b_kj|, the bound of
// a float dot product of K terms summed in any order (each kernel's longest chain of
// additions is at most K); a half (bf16) result adds its rounding, 2^-11 (2^-8) of |value|.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backends.hpp"
#include "checks.hpp"
#include "random.hpp"
#include "matmul_reference.hpp"

using namespace kiln_test;

template <class B>
class matmul_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(matmul_test, backend_types);

namespace {

using kiln::index_t;

template <class T>
double rounding_of() {
  if constexpr (std::is_same_v<T, kiln::half>) return 0x1p-11;
  else if constexpr (std::is_same_v<T, kiln::bfloat16>) return 0x1p-8;
  else return 0.0;
}

/// y = matmul(a, b) checked against the reference of a's and b's logical values.
template <class B, class TA, class TB>
void check_product(const kiln::tensor<TA, B>& a, const kiln::tensor<TB, B>& b, const std::string& what) {
  using R = typename kiln::detail::matmul_op<TB>::template result_type<TA>;
  kiln::tensor<R, B> y;
  y = kiln::matmul(a, b);
  kiln::shape want_shape;
  const auto ref = ref_matmul(as_doubles(a.to_host()), a.shape(), as_doubles(b.to_host()), b.shape(), want_shape,
                              rounding_of<R>());
  EXPECT_EQ(y.shape(), want_shape) << what;
  EXPECT_TRUE(close(y.to_host(), ref, what + " (" + kiln::kernel_variant(kiln::matmul(a, b)) + ")"));
}

template <class B>
kiln::tensor<float, B> rand_tensor(std::mt19937_64& g, const kiln::shape& s, float lo = -1.0f, float hi = 1.0f) {
  const auto h = uniform(g, static_cast<std::size_t>(s.numel()), lo, hi);
  return kiln::from_host(ctx<B>(), s, std::span<const float>(h));
}

template <class T, class B>
kiln::tensor<T, B> rand_tensor_of(std::mt19937_64& g, const kiln::shape& s) {
  const auto h = uniform(g, static_cast<std::size_t>(s.numel()), -1.0f, 1.0f);
  std::vector<T> t(h.begin(), h.end());
  return kiln::from_host(ctx<B>(), s, std::span<const T>(t));
}

std::string dims(index_t m, index_t n, index_t k) {
  return "M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k);
}

}  // namespace

TYPED_TEST(matmul_test, square_and_odd_shapes) {
  auto g = rng();
  for (index_t n : {1, 3, 17, 63, 127, 255, 513}) {
    check_product(rand_tensor<TypeParam>(g, {n, n}), rand_tensor<TypeParam>(g, {n, n}), "square " + std::to_string(n));
  }
  const index_t shapes[][3] = {{1000, 17, 63}, {3, 1000, 127}, {255, 63, 513}, {17, 255, 1000}, {63, 3, 17}};
  for (const auto& s : shapes) {
    check_product(rand_tensor<TypeParam>(g, {s[0], s[2]}), rand_tensor<TypeParam>(g, {s[2], s[1]}), dims(s[0], s[1], s[2]));
  }
}

TYPED_TEST(matmul_test, thin_shapes_and_vectors) {
  auto g = rng();
  for (index_t m : {1, 2, 4, 5, 6, 7}) {
    for (index_t n : {1, 9, 33}) {
      for (index_t k : {1, 8, 37}) {
        auto a = rand_tensor<TypeParam>(g, {m, k});
        auto b = rand_tensor<TypeParam>(g, {k, n});
        auto w = rand_tensor<TypeParam>(g, {n, k});
        check_product(a, b, dims(m, n, k));
        check_product(a, kiln::transpose(w), dims(m, n, k) + ", b = transpose(w)");
      }
    }
  }
  // 1-D operands: a row vector, a column vector, a dot product
  check_product(rand_tensor<TypeParam>(g, {37}), rand_tensor<TypeParam>(g, {37, 5}), "[37] @ [37, 5]");
  check_product(rand_tensor<TypeParam>(g, {6, 37}), rand_tensor<TypeParam>(g, {37}), "[6, 37] @ [37]");
  check_product(rand_tensor<TypeParam>(g, {37}), rand_tensor<TypeParam>(g, {37}), "[37] @ [37]");
  check_product(rand_tensor<TypeParam>(g, {37}), rand_tensor<TypeParam>(g, {3, 37, 5}), "[37] @ [3, 37, 5]");
  check_product(rand_tensor<TypeParam>(g, {2, 6, 37}), rand_tensor<TypeParam>(g, {37}), "[2, 6, 37] @ [37]");
}

TYPED_TEST(matmul_test, tall_and_skinny) {
  auto g = rng();
  for (index_t n : {1, 2, 3, 4, 5}) {
    for (index_t k : {1, 37, 513}) {
      check_product(rand_tensor<TypeParam>(g, {1000, k}), rand_tensor<TypeParam>(g, {k, n}), dims(1000, n, k));
    }
  }
  auto x = rand_tensor<TypeParam>(g, {3, 300, 64});
  check_product(x, rand_tensor<TypeParam>(g, {64}), "[3, 300, 64] @ [64]");
  check_product(kiln::transpose(x, 1, 2), rand_tensor<TypeParam>(g, {300, 2}), "transpose(x, 1, 2) @ [300, 2]");
  auto w = rand_tensor<TypeParam>(g, {3, 64});
  check_product(x, kiln::transpose(w), "x @ transpose([3, 64])");
}

TYPED_TEST(matmul_test, long_k) {
  auto g = rng();
  for (auto [m, n] : {std::pair<index_t, index_t>{1, 5}, {3, 5}, {40, 33}}) {
    check_product(rand_tensor<TypeParam>(g, {m, 16384}), rand_tensor<TypeParam>(g, {16384, n}), dims(m, n, 16384));
  }
  auto w = rand_tensor<TypeParam>(g, {7, 16384});
  check_product(rand_tensor<TypeParam>(g, {2, 16384}), kiln::transpose(w), "long K against transpose(w)");
}

TYPED_TEST(matmul_test, batched_and_broadcast) {
  auto g = rng();
  check_product(rand_tensor<TypeParam>(g, {2, 3, 9, 17}), rand_tensor<TypeParam>(g, {3, 17, 11}), "[2,3,9,17] @ [3,17,11]");
  check_product(rand_tensor<TypeParam>(g, {9, 17}), rand_tensor<TypeParam>(g, {4, 17, 11}), "[9,17] @ [4,17,11]");
  check_product(rand_tensor<TypeParam>(g, {4, 1, 9, 17}), rand_tensor<TypeParam>(g, {3, 17, 11}), "[4,1,9,17] @ [3,17,11]");
  check_product(rand_tensor<TypeParam>(g, {5, 70, 33}), rand_tensor<TypeParam>(g, {33, 40}), "[5,70,33] @ [33,40]");
  check_product(rand_tensor<TypeParam>(g, {8, 1, 64}), rand_tensor<TypeParam>(g, {8, 64, 48}), "[8,1,64] @ [8,64,48]");
  check_product(rand_tensor<TypeParam>(g, {3, 2, 64}), rand_tensor<TypeParam>(g, {64, 300}), "[3,2,64] @ [64,300]");
}

TYPED_TEST(matmul_test, views_read_in_place) {
  auto g = rng();
  auto a = rand_tensor<TypeParam>(g, {40, 70});
  auto b = rand_tensor<TypeParam>(g, {50, 90});
  check_product(kiln::transpose(a), kiln::slice(b, 0, 0, 40), "transpose(a) @ b[0:40]");
  check_product(kiln::slice(a, 1, 3, 53), kiln::slice(kiln::transpose(b), 0, 10, 60), "a[:, 3:53] @ transpose(b)[10:60]");
  auto big = rand_tensor<TypeParam>(g, {3, 40, 64});
  check_product(kiln::transpose(big, 1, 2), kiln::slice(a, 0, 0, 40), "batched transpose(x, 1, 2) @ a[0:40]");
  auto w = rand_tensor<TypeParam>(g, {96, 64});
  check_product(big, kiln::transpose(w), "x @ transpose(w) (nn.Linear layout)");
  check_product(kiln::slice(big, 1, 0, 1), kiln::transpose(w), "one row @ transpose(w)");
}

TYPED_TEST(matmul_test, half_and_bfloat16) {
  auto g = rng();
  for (index_t n : {5, 63, 130}) {
    check_product(rand_tensor_of<kiln::half, TypeParam>(g, {n, 70}), rand_tensor_of<kiln::half, TypeParam>(g, {70, n}),
                  "f16 @ f16, " + std::to_string(n));
    check_product(rand_tensor_of<kiln::bfloat16, TypeParam>(g, {n, 70}),
                  rand_tensor_of<kiln::bfloat16, TypeParam>(g, {70, n}), "bf16 @ bf16, " + std::to_string(n));
    check_product(rand_tensor<TypeParam>(g, {n, 70}), rand_tensor_of<kiln::half, TypeParam>(g, {70, n}),
                  "f32 @ f16, " + std::to_string(n));
    auto w = rand_tensor_of<kiln::bfloat16, TypeParam>(g, {n, 70});
    check_product(rand_tensor<TypeParam>(g, {1, 70}), kiln::transpose(w), "f32 @ transpose(bf16 w), " + std::to_string(n));
  }
  // K and N multiples of 4 (16-bit b read four elements at a time on Vulkan, one uvec2),
  // on the matrix-vector (m = 1, 4) and tiled (m = 37) kernels, both b layouts; then a view
  // of b at an offset of 2 elements (the unaligned path).
  for (index_t m : {1, 4, 37}) {
    const std::string ms = ", m = " + std::to_string(m);
    auto x = rand_tensor<TypeParam>(g, {m, 72});
    check_product(x, kiln::transpose(rand_tensor_of<kiln::half, TypeParam>(g, {96, 72})), "f32 @ transpose(f16 w)" + ms);
    check_product(x, kiln::transpose(rand_tensor_of<kiln::bfloat16, TypeParam>(g, {96, 72})), "f32 @ transpose(bf16 w)" + ms);
    check_product(x, rand_tensor_of<kiln::half, TypeParam>(g, {72, 96}), "f32 @ f16 [72, 96]" + ms);
    check_product(x, rand_tensor_of<kiln::bfloat16, TypeParam>(g, {72, 96}), "f32 @ bf16 [72, 96]" + ms);
    auto wide = rand_tensor_of<kiln::half, TypeParam>(g, {96, 76});
    check_product(x, kiln::transpose(kiln::slice(wide, 1, 2, 74)), "f32 @ transpose(f16 w at offset 2)" + ms);
  }
}

// The matrix-vector product against an nn.Linear weight (the decode step): on the CPU a
// short row of a (up to a quarter of the L1) takes b's rows one after the other, a longer
// one takes 8 (f32) or 12 (16-bit, AVX-512) side by side with a tail; both sides of that
// line for every weight dtype, row counts around the group sizes and a weight view with
// a row stride longer than K. Large enough that the CPU splits them over its threads.
TYPED_TEST(matmul_test, matrix_vector_on_both_row_layouts) {
  auto g = rng();
  for (index_t k : {64, 1000, 2048, 2100, 4099}) {
    for (index_t n : {1, 11, 12, 13, 25, 301}) {
      const std::string what = "[1, " + std::to_string(k) + "] @ transpose([" + std::to_string(n) + ", " + std::to_string(k) + "])";
      auto x = rand_tensor<TypeParam>(g, {1, k});
      check_product(x, kiln::transpose(rand_tensor<TypeParam>(g, {n, k})), what + " f32");
      check_product(x, kiln::transpose(rand_tensor_of<kiln::half, TypeParam>(g, {n, k})), what + " f16");
      check_product(x, kiln::transpose(rand_tensor_of<kiln::bfloat16, TypeParam>(g, {n, k})), what + " bf16");
    }
  }
  for (index_t k : {1000, 4099}) {
    auto x = rand_tensor<TypeParam>(g, {1, k});
    auto wide = rand_tensor_of<kiln::half, TypeParam>(g, {777, k + 5});
    check_product(x, kiln::transpose(kiln::slice(wide, 1, 3, k + 3)), "f32 @ transpose(f16 w view), K = " + std::to_string(k));
    auto w = rand_tensor<TypeParam>(g, {3001, k});
    check_product(x, kiln::transpose(w), "[1, K] @ transpose([3001, K]), K = " + std::to_string(k));
    check_product(rand_tensor<TypeParam>(g, {3, k}), kiln::transpose(w), "[3, K] @ transpose([3001, K]), K = " + std::to_string(k));
  }
}

TYPED_TEST(matmul_test, fused_epilogues_and_prologues_are_one_kernel) {
  auto g = rng();
  const index_t M = 37, K = 70, N = 45;
  auto x = rand_tensor<TypeParam>(g, {M, K});
  auto w = rand_tensor<TypeParam>(g, {K, N});
  auto wt = rand_tensor<TypeParam>(g, {N, K});
  auto bias = rand_tensor<TypeParam>(g, {N});
  auto res = rand_tensor<TypeParam>(g, {M, N});
  auto gate = rand_tensor<TypeParam>(g, {M, K});
  auto up = rand_tensor<TypeParam>(g, {M, K});
  const auto hx = as_doubles(x.to_host()), hw = as_doubles(w.to_host()), hb = as_doubles(bias.to_host());
  const auto hr = as_doubles(res.to_host()), hg = as_doubles(gate.to_host()), hu = as_doubles(up.to_host());
  kiln::shape s;
  const auto base = ref_matmul(hx, {M, K}, hw, {K, N}, s);
  auto y = kiln::empty<float>(ctx<TypeParam>(), {M, N});

  EXPECT_EQ(kernels_of<TypeParam>([&] { y = kiln::gelu(kiln::matmul(x, w) + bias); }), 1u);
  reference r = base;
  for (std::size_t i = 0; i < r.value.size(); ++i) {
    const double v = base.value[i] + hb[i % N];
    r.value[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    r.tol[i] = base.tol[i] * 1.2 + 2e-6 * std::fabs(v) + 1e-6;
  }
  EXPECT_TRUE(close(y.to_host(), r, "gelu(x @ w + bias)"));

  EXPECT_EQ(kernels_of<TypeParam>([&] { y = kiln::matmul(x, w) * 0.25f; }), 1u);
  r = base;
  for (std::size_t i = 0; i < r.value.size(); ++i) r.value[i] *= 0.25, r.tol[i] *= 0.25;
  EXPECT_TRUE(close(y.to_host(), r, "(x @ w) * 0.25"));

  EXPECT_EQ(kernels_of<TypeParam>([&] { y = res + kiln::matmul(kiln::silu(gate) * up, w); }), 1u);
  std::vector<double> act(hg.size());
  for (std::size_t i = 0; i < act.size(); ++i) act[i] = hg[i] / (1.0 + std::exp(-hg[i])) * hu[i];
  r = ref_matmul(act, {M, K}, hw, {K, N}, s);
  for (std::size_t i = 0; i < r.value.size(); ++i) {
    r.value[i] += hr[i];
    r.tol[i] = r.tol[i] * 2 + 4e-7 * (std::fabs(r.value[i]) + 1.0);  // silu's own rounding, carried through K
  }
  EXPECT_TRUE(close(y.to_host(), r, "res + (silu(gate) * up) @ w"));

  EXPECT_EQ(kernels_of<TypeParam>([&] { y = kiln::linear(x, wt, bias); }), 1u);
  r = ref_matmul(hx, {M, K}, as_doubles(kiln::transpose(wt).to_host()), {K, N}, s);
  for (std::size_t i = 0; i < r.value.size(); ++i) r.value[i] += hb[i % N];
  EXPECT_TRUE(close(y.to_host(), r, "linear(x, w, bias)"));

  // five buffers (output, bias, residual, a, b: b at binding 4) with K and N multiples of
  // 4, so that b is read four at a time: the generated buffer names must not collide
  // with the kernel template's own functions
  {
    const index_t K4 = 72, N4 = 44;
    auto x4 = rand_tensor<TypeParam>(g, {M, K4});
    auto w4 = rand_tensor<TypeParam>(g, {K4, N4});
    auto wt4 = rand_tensor<TypeParam>(g, {N4, K4});
    auto b4 = rand_tensor<TypeParam>(g, {N4});
    auto r4 = rand_tensor<TypeParam>(g, {M, N4});
    const auto hx4 = as_doubles(x4.to_host()), hb4 = as_doubles(b4.to_host()), hr4 = as_doubles(r4.to_host());
    auto y4 = kiln::empty<float>(ctx<TypeParam>(), {M, N4});
    EXPECT_EQ(kernels_of<TypeParam>([&] { y4 = kiln::matmul(x4, w4) + b4 + r4; }), 1u);
    auto r5 = ref_matmul(hx4, {M, K4}, as_doubles(w4.to_host()), {K4, N4}, s);
    for (std::size_t i = 0; i < r5.value.size(); ++i) r5.value[i] += hb4[i % N4] + hr4[i];
    EXPECT_TRUE(close(y4.to_host(), r5, "x @ w + bias + res (five buffers)"));
    EXPECT_EQ(kernels_of<TypeParam>([&] { y4 = kiln::linear(x4, wt4, b4) + r4; }), 1u);
    r5 = ref_matmul(hx4, {M, K4}, as_doubles(kiln::transpose(wt4).to_host()), {K4, N4}, s);
    for (std::size_t i = 0; i < r5.value.size(); ++i) r5.value[i] += hb4[i % N4] + hr4[i];
    EXPECT_TRUE(close(y4.to_host(), r5, "linear(x, w, bias) + res (five buffers)"));
  }

  // the output read by the epilogue itself: y = y + x @ w
  auto acc = kiln::empty<float>(ctx<TypeParam>(), {M, N});
  acc = res;
  acc = acc + kiln::matmul(x, w);
  r = base;
  for (std::size_t i = 0; i < r.value.size(); ++i) r.value[i] += hr[i];
  EXPECT_TRUE(close(acc.to_host(), r, "y = y + x @ w"));
}

TYPED_TEST(matmul_test, nan_and_inf_propagate) {
  auto g = rng();
  const index_t M = 20, K = 33, N = 40;
  auto ha = uniform(g, std::size_t(M * K), -1.0f, 1.0f);
  auto hb = uniform(g, std::size_t(K * N), -1.0f, 1.0f);
  ha[3 * K + 5] = std::numeric_limits<float>::quiet_NaN();
  ha[7 * K + 2] = std::numeric_limits<float>::infinity();
  hb[4 * N + 11] = -std::numeric_limits<float>::infinity();
  auto a = kiln::from_host(ctx<TypeParam>(), {M, K}, std::span<const float>(ha));
  auto b = kiln::from_host(ctx<TypeParam>(), {K, N}, std::span<const float>(hb));
  check_product(a, b, "NaN and infinities");
  check_product(kiln::slice(a, 0, 3, 4), b, "a NaN row alone (matrix-vector path)");
}

TYPED_TEST(matmul_test, empty_dimensions) {
  auto g = rng();
  kiln::tensor<float, TypeParam> y;
  y = kiln::matmul(rand_tensor<TypeParam>(g, {5, 0}), rand_tensor<TypeParam>(g, {0, 7}));
  EXPECT_EQ(y.shape(), (kiln::shape{5, 7}));
  for (float v : y.to_host()) EXPECT_EQ(v, 0.0f);
  y = kiln::matmul(rand_tensor<TypeParam>(g, {5, 0}), rand_tensor<TypeParam>(g, {0, 7})) + 1.5f;
  for (float v : y.to_host()) EXPECT_EQ(v, 1.5f);
  kiln::tensor<float, TypeParam> e1, e2, one;  // (a defined target keeps its shape: new ones)
  e1 = kiln::matmul(rand_tensor<TypeParam>(g, {0, 4}), rand_tensor<TypeParam>(g, {4, 7}));
  EXPECT_EQ(e1.shape(), (kiln::shape{0, 7}));
  e2 = kiln::matmul(rand_tensor<TypeParam>(g, {0, 3, 4}), rand_tensor<TypeParam>(g, {4, 7}));
  EXPECT_EQ(e2.shape(), (kiln::shape{0, 3, 7}));
  one = kiln::matmul(kiln::full(ctx<TypeParam>(), {1, 1}, 3.0f), kiln::full(ctx<TypeParam>(), {1, 1}, -2.0f));
  EXPECT_EQ(one.shape(), (kiln::shape{1, 1}));
  EXPECT_EQ(one.to_host()[0], -6.0f);
}

TYPED_TEST(matmul_test, operands_overlapping_the_output) {
  auto g = rng();
  auto x = rand_tensor<TypeParam>(g, {24, 24});
  auto w = rand_tensor<TypeParam>(g, {24, 24});
  const auto hx = as_doubles(x.to_host()), hw = as_doubles(w.to_host());
  kiln::shape s;
  const auto r = ref_matmul(hx, {24, 24}, hw, {24, 24}, s);
  x = kiln::matmul(x, w);  // reads x while writing it: goes through a temporary
  EXPECT_TRUE(close(x.to_host(), r, "x = x @ w"));
}

TYPED_TEST(matmul_test, variants_follow_the_shape) {
  auto g = rng();
  auto w = rand_tensor<TypeParam>(g, {256, 256});
  const std::string decode = kiln::kernel_variant(kiln::matmul(rand_tensor<TypeParam>(g, {1, 256}), kiln::transpose(w)));
  const std::string big = kiln::kernel_variant(kiln::matmul(rand_tensor<TypeParam>(g, {256, 256}), w));
  EXPECT_FALSE(decode.empty());
  EXPECT_FALSE(big.empty());
  EXPECT_NE(decode, big) << "one row and 256 rows pick the same kernel";
  EXPECT_EQ(kiln::kernel_variant(w + 1.0f), "elementwise");
}

TYPED_TEST(matmul_test, errors_name_both_operands) {
  auto g = rng();
  auto a = rand_tensor<TypeParam>(g, {4, 5});
  auto b = rand_tensor<TypeParam>(g, {6, 7});
  const std::string msg = shape_error_of([&] { (void)kiln::matmul(a, b); });
  EXPECT_TRUE(has(msg, "kiln::matmul"));
  EXPECT_TRUE(has(msg, "f32[4, 5]"));
  EXPECT_TRUE(has(msg, "f32[6, 7]"));
  EXPECT_TRUE(has(msg, "inner dimensions"));
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::matmul(rand_tensor<TypeParam>(g, {2, 3, 4}), rand_tensor<TypeParam>(g, {5, 4, 2})); }),
                  "batch dimensions"));
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::matmul(kiln::full(ctx<TypeParam>(), {}, 1.0f), b); }), "at least one"));
  kiln::tensor<float, TypeParam> empty;
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::matmul(a, empty); }), "empty"));
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::linear(a, rand_tensor<TypeParam>(g, {3, 5}), rand_tensor<TypeParam>(g, {4})); }),
                  "kiln::linear: the bias"));
  EXPECT_TRUE(has(shape_error_of([&] { (void)kiln::linear(a, rand_tensor<TypeParam>(g, {3, 6})); }), "kiln::linear"));
}
