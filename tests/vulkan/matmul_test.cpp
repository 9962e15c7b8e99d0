// tests/vulkan/matmul_test.cpp — kiln::matmul on Vulkan (kernels/gemm/*.comp with the
// statement's prologue and epilogue spliced in) against a float64 reference of the
// operands' logical values: square and odd shapes, M / N / K = 1, a long K, batched and
// broadcast batches, transposed and sliced views of both operands, f16 / bf16 operands,
// the fused forms as one dispatch, NaN / Inf, K = 0 and empty outputs, every variant
// forced (KILN_VULKAN_GEMM) and chosen by shape, with the name kiln::kernel_variant gives.
//
// Tolerance per element: tol = (K + 4) * 2^-24 * sum_k |a_ik| * |b_kj|  (+ 2^-11 |c| for
// an f16 result, 2^-8 |c| for bf16), the bound of a float32 dot product of K terms summed
// in any order (tiles, subgroup sums and split-K chunks only reorder the sum), plus
// the result's own rounding. Operands are rounded to their dtype before the reference.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "matmul_reference.hpp"
#include "random.hpp"
#include "scoped_env.hpp"
#include "vulkan_fixture.hpp"

namespace {

using matmul = kiln_test::vulkan_test;
using kiln::index_t;
using kiln_test::inf;
using kiln_test::qnan;

template <class T>
std::vector<double> doubles(const std::vector<T>& v) {
  return kiln_test::as_doubles(v);
}

struct reference : kiln_test::reference {
  kiln::shape shape;
};

/// The float64 product of logical row-major a (shape sa) and b (shape sb), NumPy rules
/// (tests/support/matmul_reference.hpp), with the result's shape.
reference ref_matmul(const std::vector<double>& a, const kiln::shape& sa, const std::vector<double>& b,
                     const kiln::shape& sb, double round = 0.0) {
  reference ref;
  static_cast<kiln_test::reference&>(ref) = kiln_test::ref_matmul(a, sa, b, sb, ref.shape, round);
  return ref;
}

/// got within ref's tolerance; NaN where the reference is NaN, infinities exact.
template <class T>
void expect_close(const std::vector<T>& got_t, const reference& ref, const std::string& what) {
  ASSERT_EQ(got_t.size(), ref.value.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < got_t.size() && bad < 5; ++i) {
    const double g = static_cast<double>(static_cast<float>(got_t[i])), w = ref.value[i];
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::fabs(g - w) <= ref.tol[i];
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", want " << w << " (tol " << ref.tol[i] << ")";
    }
  }
}

template <class T>
double rounding_of() {
  if constexpr (std::is_same_v<T, kiln::half>) return 0x1p-11;
  else if constexpr (std::is_same_v<T, kiln::bfloat16>) return 0x1p-8;
  else return 0.0;
}

template <class T = float>
kiln::tensor<T, kiln::vulkan> rand_tensor(std::mt19937_64& g, const kiln::shape& s, float lo = -1.0f, float hi = 1.0f) {
  const auto h = kiln_test::uniform(g, static_cast<std::size_t>(s.numel()), lo, hi);
  std::vector<T> t(h.begin(), h.end());
  return kiln::from_host(kiln_test::gpu(), s, std::span<const T>(t));
}

/// y = matmul(a, b) checked against the reference, in `dispatches` dispatches (0: any).
template <class TA, class TB>
std::string check_product(const kiln::tensor<TA, kiln::vulkan>& a, const kiln::tensor<TB, kiln::vulkan>& b,
                          const std::string& what, int dispatches = 0) {
  using R = typename kiln::detail::matmul_op<TB>::template result_type<TA>;
  auto& ctx = kiln_test::gpu();
  const std::string variant = kiln::kernel_variant(kiln::matmul(a, b));
  kiln::tensor<R, kiln::vulkan> y;
  const std::uint64_t before = ctx.kernels_launched();
  y = kiln::matmul(a, b);
  const std::uint64_t launched = ctx.kernels_launched() - before;
  if (dispatches) {
    EXPECT_EQ(launched, std::uint64_t(dispatches)) << what << " (" << variant << ")";
  }
  EXPECT_EQ(launched, variant.find("splitk") != std::string::npos ? 2u : 1u) << what << " (" << variant << ")";
  const auto ref = ref_matmul(doubles(a.to_host()), a.shape(), doubles(b.to_host()), b.shape(), rounding_of<R>());
  EXPECT_EQ(y.shape(), ref.shape) << what;
  expect_close(y.to_host(), ref, what + " (" + variant + ")");
  return variant;
}

std::string dims(index_t m, index_t n, index_t k) {
  return "M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k);
}

}  // namespace

TEST_F(matmul, square_and_odd_shapes) {
  auto g = kiln_test::rng();
  for (index_t n : {1, 3, 17, 63, 127, 255, 513}) {
    check_product(rand_tensor(g, {n, n}), rand_tensor(g, {n, n}), "square " + std::to_string(n));
  }
  const index_t shapes[][3] = {{1000, 17, 63}, {5, 1000, 127}, {255, 63, 513}, {17, 255, 1000}, {63, 3, 17}};
  for (const auto& s : shapes) check_product(rand_tensor(g, {s[0], s[2]}), rand_tensor(g, {s[2], s[1]}), dims(s[0], s[1], s[2]));
}

TEST_F(matmul, unit_dimensions_and_vectors) {
  auto g = kiln_test::rng();
  for (index_t m : {1, 2, 4, 5, 9}) {
    for (index_t n : {1, 9, 33}) {
      for (index_t k : {1, 8, 37}) {
        auto a = rand_tensor(g, {m, k});
        check_product(a, rand_tensor(g, {k, n}), dims(m, n, k));
        check_product(a, kiln::transpose(rand_tensor(g, {n, k})), dims(m, n, k) + ", b = transpose(w)");
      }
    }
  }
  check_product(rand_tensor(g, {37}), rand_tensor(g, {37, 5}), "[37] @ [37, 5]");
  check_product(rand_tensor(g, {6, 37}), rand_tensor(g, {37}), "[6, 37] @ [37]");
  check_product(rand_tensor(g, {37}), rand_tensor(g, {37}), "[37] @ [37]");
  check_product(rand_tensor(g, {37}), rand_tensor(g, {3, 37, 5}), "[37] @ [3, 37, 5]");
  check_product(rand_tensor(g, {2, 6, 37}), rand_tensor(g, {37}), "[2, 6, 37] @ [37]");
}

TEST_F(matmul, long_k) {
  auto g = kiln_test::rng();
  EXPECT_EQ(check_product(rand_tensor(g, {1, 16384}), rand_tensor(g, {16384, 5}), dims(1, 5, 16384)),
            "vulkan.gemm.matvec n-columns");
  EXPECT_EQ(check_product(rand_tensor(g, {3, 16384}), kiln::transpose(rand_tensor(g, {7, 16384})), dims(3, 7, 16384)),
            "vulkan.gemm.matvec k-reduce");
  const std::string v = check_product(rand_tensor(g, {40, 16384}), rand_tensor(g, {16384, 33}), dims(40, 33, 16384), 2);
  EXPECT_EQ(v.rfind("vulkan.gemm.splitk", 0), 0u) << v;
  check_product(rand_tensor(g, {17, 16384}), kiln::transpose(rand_tensor(g, {9, 16384})), "split-K against transpose(w)", 2);
}

TEST_F(matmul, batched_and_broadcast) {
  auto g = kiln_test::rng();
  check_product(rand_tensor(g, {2, 3, 9, 17}), rand_tensor(g, {3, 17, 11}), "[2,3,9,17] @ [3,17,11]");
  check_product(rand_tensor(g, {9, 17}), rand_tensor(g, {4, 17, 11}), "[9,17] @ [4,17,11]");
  check_product(rand_tensor(g, {4, 1, 9, 17}), rand_tensor(g, {3, 17, 11}), "[4,1,9,17] @ [3,17,11]");
  check_product(rand_tensor(g, {5, 70, 33}), rand_tensor(g, {33, 40}), "[5,70,33] @ [33,40]");
  check_product(rand_tensor(g, {8, 1, 64}), rand_tensor(g, {8, 64, 48}), "[8,1,64] @ [8,64,48]");
  check_product(rand_tensor(g, {3, 2, 64}), rand_tensor(g, {64, 300}), "[3,2,64] @ [64,300]");
  check_product(rand_tensor(g, {2, 1, 70, 64}), kiln::transpose(rand_tensor(g, {3, 80, 64}), 1, 2), "[2,1,70,64] @ [3,64,80]^T");
}

TEST_F(matmul, views_read_in_place) {
  auto g = kiln_test::rng();
  auto a = rand_tensor(g, {40, 70});
  auto b = rand_tensor(g, {50, 90});
  check_product(kiln::transpose(a), kiln::slice(b, 0, 0, 40), "transpose(a) @ b[0:40]");
  check_product(kiln::slice(a, 1, 3, 53), kiln::slice(kiln::transpose(b), 0, 10, 60), "a[:, 3:53] @ transpose(b)[10:60]");
  auto c = rand_tensor(g, {71, 90});
  check_product(kiln::slice(a, 0, 1, 39), kiln::slice(kiln::slice(c, 0, 1, 71), 1, 1, 81),
                "a[1:39] @ c[1:71, 1:81] (unaligned offsets)");
  auto big = rand_tensor(g, {3, 40, 64});
  check_product(kiln::transpose(big, 1, 2), kiln::slice(a, 0, 0, 40), "batched transpose(x, 1, 2) @ a[0:40]");
  auto w = rand_tensor(g, {96, 64});
  check_product(big, kiln::transpose(w), "x @ transpose(w) (nn.Linear layout)");
  check_product(kiln::slice(big, 1, 0, 1), kiln::transpose(w), "one row @ transpose(w)");
}

TEST_F(matmul, half_and_bfloat16) {
  auto g = kiln_test::rng();
  for (index_t n : {1, 5, 63, 130}) {
    check_product(rand_tensor<kiln::half>(g, {n, 70}), rand_tensor<kiln::half>(g, {70, n}), "f16 @ f16, " + std::to_string(n));
    // K % 4 == 0: a read four halves at a time as one uvec2
    check_product(rand_tensor<kiln::half>(g, {n, 72}), rand_tensor<kiln::half>(g, {72, n}), "f16 @ f16 (K 72), " + std::to_string(n));
    check_product(rand_tensor<kiln::bfloat16>(g, {n, 70}), rand_tensor<kiln::bfloat16>(g, {70, n}),
                  "bf16 @ bf16, " + std::to_string(n));
    check_product(rand_tensor(g, {n, 72}), rand_tensor<kiln::half>(g, {72, n}), "f32 @ f16, " + std::to_string(n));
    auto w = rand_tensor<kiln::bfloat16>(g, {n, 72});
    check_product(rand_tensor(g, {1, 72}), kiln::transpose(w), "f32 @ transpose(bf16 w), " + std::to_string(n));
    check_product(rand_tensor(g, {n, 72}), kiln::transpose(w), "f32 [n, 72] @ transpose(bf16 w), " + std::to_string(n));
  }
}

// The cooperative-matrix kernel (f16 a and b, f32 accumulators), forced, on a device that
// has cooperative matrices (an NVIDIA GPU; skipped on lavapipe): tails in every dimension,
// K not a multiple of the matrix depth, batches, both staging layouts of b, both tile
// sizes, a fused epilogue, NaN and infinity carried through.
TEST_F(matmul, cooperative_matrix_f16) {
  auto& ctx = kiln_test::gpu();
  const auto& info = kiln::vulkan::device(ctx);
  if (!info.cooperative_matrix || !info.cooperative_matrix_nv) {
    GTEST_SKIP() << info.label() << " has no cooperative matrices kiln uses";
  }
  kiln_test::scoped_env force("KILN_VULKAN_GEMM", "coopmat");
  auto g = kiln_test::rng();
  const auto cm = [&](const auto& a, const auto& b, const std::string& what) {
    EXPECT_NE(check_product(a, b, what).find("coopmat"), std::string::npos) << what;
  };
  for (const auto& s : std::vector<std::array<index_t, 3>>{{16, 16, 16}, {37, 19, 33}, {130, 70, 96}, {64, 64, 70}, {200, 129, 256}}) {
    cm(rand_tensor<kiln::half>(g, {s[0], s[2]}), rand_tensor<kiln::half>(g, {s[2], s[1]}), dims(s[0], s[1], s[2]) + ", f16");
    auto w = rand_tensor<kiln::half>(g, {s[1], s[2]});
    cm(rand_tensor<kiln::half>(g, {s[0], s[2]}), kiln::transpose(w), dims(s[0], s[1], s[2]) + ", f16 @ transpose(w)");
  }
  cm(rand_tensor<kiln::half>(g, {3, 130, 72}), rand_tensor<kiln::half>(g, {72, 96}), "batched [3, 130, 72] @ [72, 96]");
  cm(rand_tensor<kiln::half>(g, {2, 65, 40}), rand_tensor<kiln::half>(g, {2, 40, 33}), "batched both");
  const auto big = check_product(rand_tensor<kiln::half>(g, {1024, 64}), rand_tensor<kiln::half>(g, {64, 1024}), "1024 x 1024 x 64");
  EXPECT_NE(big.find("coopmat 128x128"), std::string::npos) << big;

  // NaN and infinity in a reach exactly the outputs of their rows
  std::vector<kiln::half> ha(48 * 40, kiln::half(0.5f));
  ha[3 * 40 + 7] = kiln::half(std::numeric_limits<float>::quiet_NaN());
  ha[5 * 40 + 1] = kiln::half(std::numeric_limits<float>::infinity());
  auto a = kiln::from_host(ctx, {48, 40}, std::span<const kiln::half>(ha));
  std::vector<kiln::half> hb(40 * 24, kiln::half(0.25f));
  auto b = kiln::from_host(ctx, {40, 24}, std::span<const kiln::half>(hb));
  cm(a, b, "NaN and infinity in a");

  // a fused epilogue: gelu(a @ b + bias), f16 out
  auto x = rand_tensor<kiln::half>(g, {100, 72}), w = rand_tensor<kiln::half>(g, {72, 45}), bias = rand_tensor<kiln::half>(g, {45});
  kiln::tensor<kiln::half, kiln::vulkan> y;
  EXPECT_NE(kiln::kernel_variant(kiln::gelu(kiln::matmul(x, w) + bias)).find("coopmat"), std::string::npos);
  y = kiln::gelu(kiln::matmul(x, w) + bias);
  const auto hx = doubles(x.to_host()), hw = doubles(w.to_host()), hbias = doubles(bias.to_host());
  reference r = ref_matmul(hx, {100, 72}, hw, {72, 45}, 0x1p-11);
  for (std::size_t i = 0; i < r.value.size(); ++i) {
    const double v = r.value[i] + hbias[i % 45];
    r.value[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    r.tol[i] = r.tol[i] * 1.2 + 0x1p-10 * std::fabs(v) + 1e-5;  // f16 rounding of the sum before gelu
  }
  expect_close(y.to_host(), r, "gelu(x @ w + bias), f16");
}

TEST_F(matmul, fused_epilogues_and_prologues_are_one_dispatch) {
  auto g = kiln_test::rng();
  auto& ctx = kiln_test::gpu();
  for (index_t M : {1, 37, 130}) {
    const index_t K = 72, N = 45;
    const std::string at = " (M = " + std::to_string(M) + ")";
    auto x = rand_tensor(g, {M, K});
    auto w = rand_tensor(g, {K, N});
    auto bias = rand_tensor(g, {N});
    auto res = rand_tensor(g, {M, N});
    auto gate = rand_tensor(g, {M, K});
    auto up = rand_tensor(g, {M, K});
    const auto hx = doubles(x.to_host()), hw = doubles(w.to_host()), hb = doubles(bias.to_host());
    const auto hr = doubles(res.to_host()), hg = doubles(gate.to_host()), hu = doubles(up.to_host());
    const auto base = ref_matmul(hx, {M, K}, hw, {K, N});
    auto y = kiln::empty<float>(ctx, {M, N});
    auto count = [&](auto stmt) {
      const std::uint64_t before = ctx.kernels_launched();
      stmt();
      return ctx.kernels_launched() - before;
    };

    EXPECT_EQ(count([&] { y = kiln::gelu(kiln::matmul(x, w) + bias); }), 1u) << at;
    reference r = base;
    for (std::size_t i = 0; i < r.value.size(); ++i) {
      const double v = base.value[i] + hb[i % N];
      r.value[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      r.tol[i] = base.tol[i] * 1.2 + 2e-6 * std::fabs(v) + 1e-6;  // gelu's erf in float
    }
    expect_close(y.to_host(), r, "gelu(x @ w + bias)" + at);

    EXPECT_EQ(count([&] { y = kiln::matmul(x, w) * 0.25f; }), 1u) << at;
    r = base;
    for (std::size_t i = 0; i < r.value.size(); ++i) r.value[i] *= 0.25, r.tol[i] *= 0.25;
    expect_close(y.to_host(), r, "(x @ w) * 0.25" + at);

    EXPECT_EQ(count([&] { y = res + kiln::matmul(kiln::silu(gate) * up, w); }), 1u) << at;
    std::vector<double> act(hg.size());
    for (std::size_t i = 0; i < act.size(); ++i) act[i] = hg[i] / (1.0 + std::exp(-hg[i])) * hu[i];
    r = ref_matmul(act, {M, K}, hw, {K, N});
    for (std::size_t i = 0; i < r.value.size(); ++i) {
      r.value[i] += hr[i];
      r.tol[i] = r.tol[i] * 2 + 4e-7 * (std::fabs(r.value[i]) + 1.0);  // silu's own rounding, carried through K
    }
    expect_close(y.to_host(), r, "res + (silu(gate) * up) @ w" + at);

    // the output read by the epilogue itself: y = y + x @ w
    y = res;
    EXPECT_EQ(count([&] { y = y + kiln::matmul(x, w); }), 1u) << at;
    r = base;
    for (std::size_t i = 0; i < r.value.size(); ++i) r.value[i] += hr[i];
    expect_close(y.to_host(), r, "y = y + x @ w" + at);
  }
}

TEST_F(matmul, nan_and_inf_propagate) {
  auto g = kiln_test::rng();
  const index_t M = 20, K = 36, N = 40;
  auto ha = kiln_test::uniform(g, std::size_t(M * K), -1.0f, 1.0f);
  auto hb = kiln_test::uniform(g, std::size_t(K * N), -1.0f, 1.0f);
  ha[3 * K + 5] = qnan;
  ha[7 * K + 2] = inf;
  hb[4 * N + 11] = -inf;
  auto a = kiln::from_host(ctx(), {M, K}, std::span<const float>(ha));
  auto b = kiln::from_host(ctx(), {K, N}, std::span<const float>(hb));
  for (const char* v : {"naive", "tiled", "matvec", "splitk"}) {
    kiln_test::scoped_env force("KILN_VULKAN_GEMM", v);
    check_product(a, b, std::string("NaN and infinities, ") + v);
    check_product(kiln::slice(a, 0, 3, 4), b, std::string("a NaN row alone, ") + v);
    check_product(a, kiln::transpose(kiln::transpose(b).clone()), std::string("NaN and infinities, b = transpose, ") + v);
  }
}

TEST_F(matmul, k_zero_gives_zeros_and_empty_outputs_dispatch_nothing) {
  auto g = kiln_test::rng();
  auto& c = ctx();
  for (const char* v : {"naive", "tiled", "matvec", "splitk"}) {
    kiln_test::scoped_env force("KILN_VULKAN_GEMM", v);
    kiln::tensor<float, kiln::vulkan> y;
    y = kiln::matmul(rand_tensor(g, {5, 0}), rand_tensor(g, {0, 7}));
    EXPECT_EQ(y.shape(), (kiln::shape{5, 7}));
    for (float e : y.to_host()) EXPECT_EQ(e, 0.0f) << v;
    auto z = kiln::empty<float>(c, {5, 7});
    z = kiln::matmul(rand_tensor(g, {5, 0}), rand_tensor(g, {0, 7})) + 1.5f;  // through the epilogue
    for (float e : z.to_host()) EXPECT_EQ(e, 1.5f) << v;
    auto e1 = kiln::empty<float>(c, {0, 7});
    auto e2 = kiln::empty<float>(c, {2, 3, 0});
    auto a0 = rand_tensor(g, {0, 4}), b0 = rand_tensor(g, {4, 7}), a1 = rand_tensor(g, {2, 3, 4}), b1 = rand_tensor(g, {4, 0});
    const std::uint64_t before = c.kernels_launched();
    e1 = kiln::matmul(a0, b0);
    e2 = kiln::gelu(kiln::matmul(a1, b1));
    EXPECT_EQ(c.kernels_launched(), before) << "an empty product dispatched a kernel (" << v << ")";
  }
}

TEST_F(matmul, every_variant_forced_matches_the_reference) {
  auto g = kiln_test::rng();
  const index_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 64}, {63, 65, 100}, {130, 70, 257}, {4, 256, 512}};
  const char* names[] = {"vulkan.gemm.naive", "vulkan.gemm.tiled", "vulkan.gemm.matvec", "vulkan.gemm.splitk"};
  const char* forced[] = {"naive", "tiled", "matvec", "splitk"};
  for (int v = 0; v < 4; ++v) {
    kiln_test::scoped_env force("KILN_VULKAN_GEMM", forced[v]);
    for (const auto& s : shapes) {
      auto a = rand_tensor(g, {s[0], s[2]});
      const std::string w = std::string(forced[v]) + ", " + dims(s[0], s[1], s[2]);
      std::string got = check_product(a, rand_tensor(g, {s[2], s[1]}), w);
      EXPECT_EQ(got.rfind(names[v], 0), 0u) << got;
      got = check_product(a, kiln::transpose(rand_tensor(g, {s[1], s[2]})), w + ", b = transpose(w)");
      EXPECT_EQ(got.rfind(names[v], 0), 0u) << got;
      check_product(kiln::transpose(rand_tensor(g, {s[2], s[0]})), rand_tensor(g, {s[2], s[1]}), w + ", a = transpose");
      check_product(rand_tensor<kiln::half>(g, {s[0], s[2]}), rand_tensor<kiln::half>(g, {s[2], s[1]}), w + ", f16");
      check_product(rand_tensor(g, {2, s[0], s[2]}), rand_tensor<kiln::bfloat16>(g, {s[2], s[1]}), w + ", batched, bf16 b");
    }
  }
}

// The tiled kernel's large-product tile (128 x 64, 8 x 4 an invocation: a GPU's choice for
// many tiles) forced on whatever device runs the tests, on shapes that are no multiple of
// it, with a fused prologue and epilogue.
TEST_F(matmul, the_large_tiled_tile_matches_the_reference) {
  auto g = kiln_test::rng();
  kiln_test::scoped_env tile("KILN_VULKAN_TILED_TILE", "128x64x16/8x4");
  for (const auto& s : std::vector<std::array<index_t, 3>>{{130, 70, 33}, {257, 129, 64}, {5, 65, 17}}) {
    const std::string w = std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
    EXPECT_EQ(check_product(rand_tensor(g, {s[0], s[2]}), rand_tensor(g, {s[2], s[1]}), w), "vulkan.gemm.tiled 128x64") << w;
    EXPECT_EQ(check_product(rand_tensor(g, {s[0], s[2]}), kiln::transpose(rand_tensor(g, {s[1], s[2]})), w + ", b = w^T"),
              "vulkan.gemm.tiled 128x64")
        << w;
  }
}

TEST_F(matmul, the_variant_follows_the_shape) {
  auto g = kiln_test::rng();
  auto w = rand_tensor(g, {256, 256});
  const std::string decode = kiln::kernel_variant(kiln::matmul(rand_tensor(g, {1, 256}), kiln::transpose(w)));
  const std::string big = kiln::kernel_variant(kiln::matmul(rand_tensor(g, {256, 256}), w));
  const std::string small = kiln::kernel_variant(kiln::matmul(rand_tensor(g, {40, 256}), w));
  const std::string longk = kiln::kernel_variant(kiln::matmul(rand_tensor(g, {40, 8192}), rand_tensor(g, {8192, 40})));
  EXPECT_EQ(decode, "vulkan.gemm.matvec k-reduce");
  EXPECT_EQ(kiln::kernel_variant(kiln::matmul(rand_tensor(g, {2, 256}), w)), "vulkan.gemm.matvec n-columns");
  EXPECT_EQ(big, "vulkan.gemm.tiled 64x64");
  EXPECT_EQ(small, "vulkan.gemm.tiled 32x32");
  // split-K's tiles: 32x32 on a GPU, 64x64 on a CPU device (lavapipe: the parallelism is in the K chunks)
  EXPECT_TRUE(longk == "vulkan.gemm.splitk 8 32x32 (2 dispatches)" || longk == "vulkan.gemm.splitk 8 64x64 (2 dispatches)")
      << longk;
  EXPECT_EQ(kiln::kernel_variant(kiln::gelu(kiln::matmul(rand_tensor(g, {256, 256}), w) + 1.0f)), big);
  {
    kiln_test::scoped_env force("KILN_VULKAN_GEMM", "naive");
    EXPECT_EQ(kiln::kernel_variant(kiln::matmul(rand_tensor(g, {256, 256}), w)), "vulkan.gemm.naive 16x16");
  }
  EXPECT_EQ(kiln::kernel_variant(kiln::sum(w, -1)), "vulkan.sum.rows");
  EXPECT_EQ(kiln::kernel_variant(kiln::sum(w, 0)), "vulkan.sum.columns");
  EXPECT_EQ(kiln::kernel_variant(w + 1.0f), "elementwise");
}

TEST_F(matmul, errors_name_the_op_operands_and_device) {
  auto g = kiln_test::rng();
  auto a = rand_tensor(g, {4, 5});
  auto b = rand_tensor(g, {6, 7});
  try {
    (void)kiln::matmul(a, b);
    ADD_FAILURE() << "no error for mismatched inner dimensions";
  } catch (const kiln::shape_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("kiln::matmul"), std::string::npos) << m;
    EXPECT_NE(m.find("f32[4, 5]"), std::string::npos) << m;
    EXPECT_NE(m.find("f32[6, 7]"), std::string::npos) << m;
    EXPECT_NE(m.find("vulkan"), std::string::npos) << m;
  }
  kiln_test::scoped_env force("KILN_VULKAN_GEMM", "fastest");
  auto y = kiln::empty<float>(ctx(), {4, 7});
  try {
    y = kiln::matmul(a, rand_tensor(g, {5, 7}));
    ADD_FAILURE() << "no error for an unknown KILN_VULKAN_GEMM";
  } catch (const kiln::device_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("KILN_VULKAN_GEMM"), std::string::npos) << m;
    EXPECT_NE(m.find("f32[4, 5]"), std::string::npos) << m;
  }
}
