// tests/ops/linalg/matmul_isa_test.cpp — the CPU matmul built for each instruction set
// this machine runs (SSE2: a 6 x 8 tile; AVX2 without and with FMA: 6 x 16; AVX-512 when the
// CPU has it: 12 x 32), every path (dot, stream, rows_dot, packed with edge tiles) against the
// float64 reference, as the exp test does for its lanes. 7, 16 and 29 rows take the dot path's
// groups (of four rows on AVX-512, two on the others; a short last group; 16-bit weights below
// AVX-512 from 12 rows converted a block at a time: dot_blocked, K = 300 and 1300 more than one
// block, K = 3 shorter than a vector, and each row bit for bit what four rows alone give; on
// the cores of microarch.hpp's dot_groups_4x3 groups of 4 rows x 3 columns for every dtype (f16
// also 6 x 2 below 8 rows: 6 rows one group of 6, 7 rows 4 + 3; from 8 rows f16 takes
// dot_shared, the first group of 4 converting the columns for the others: 10, 13, 23 and 29
// rows a last group of 2, 1, 3 and 1 rows, K = 600 and 1300 several blocks) and
// no dot_blocked: both run on every machine, the second test taking the other cores' choice;
// those cores send f16 weights to the packed path from 32 rows (40 from 8192 columns), so a
// third test runs their dot path up to the ISA's 48 rows, 40 included)
// against the transposed weight, 40, 67 and 100 rows too with 16-bit weights where
// dot_max_rows() allows (48 on AVX2, f16 31 / 39 on the dot_groups_4x3 cores, 128 on AVX-512 from 1024 columns, so 67 x 1030 there, 48
// under; f32 32, 48 on AVX-512). 40 (past AVX-512's 48: 67) to 128 rows against the transposed
// f32 weight take the transposed path (micro_t: the weight's rows read in place, x's rows
// packed, the tile written transposed; edges of both, K = 1300 and 2100 two and three depth
// steps where x's panels fill half of a 1 MiB L2, with a prologue, with an epilogue, and a
// batched x whose rows span two batches). K = 1300 takes several depth steps (kc) on every
// instruction set; N = 300 splits the packed product's columns between the threads, N = 2100
// (past nc_limit) makes two blocks of them; `* 2` takes the path with an epilogue. One row: a
// short K takes its weight rows one after the other, a long K (3000) side by side, bf16 one
// after the other up to K = 4096 (dot_one_split: blocks of 2L weights, K = 13 a tail alone,
// 2561 one past whole blocks, 3000 a last single block and a tail) and side by side past it
// (5000). The weight as f16 or bf16 (read as its transpose, converted while its panels are
// packed: L x L squares transposed in registers, columns and steps past them one by one), one
// dtype per conversion path (a product per ISA and dtype is a compile-time cost): SSE2 converts
// lane by lane, AVX2 f16 with F16C and bf16 with a shift, AVX-512 both with its own.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "random.hpp"
#include "reference.hpp"

namespace {

using kiln::index_t;

template <class Arch, class... W16>
void check_arch(const char* name) {
  kiln::context<kiln::cpu<Arch>> c(kiln::threads{2});
  auto g = kiln_test::rng();
  const index_t shapes[][3] = {{1, 37, 70}, {1, 29, 3000}, {1, 40, 13}, {1, 33, 2561}, {1, 21, 5000}, {3, 40, 33}, {4, 41, 300}, {7, 45, 300}, {16, 37, 70}, {29, 45, 300}, {10, 45, 300}, {23, 37, 600}, {6, 50, 9}, {300, 3, 65}, {67, 45, 300}, {67, 1030, 70}, {130, 129, 257}, {130, 2100, 70}, {13, 40, 3},
                               {40, 70, 1300}, {100, 300, 1300}, {128, 37, 2100}};
  for (const auto& s : shapes) {
    const index_t M = s[0], N = s[1], K = s[2];
    const auto ha = kiln_test::uniform(g, std::size_t(M * K), -1.0f, 1.0f);
    const auto hb = kiln_test::uniform(g, std::size_t(K * N), -1.0f, 1.0f);
    auto a = kiln::from_host(c, {M, K}, std::span<const float>(ha));
    auto b = kiln::from_host(c, {K, N}, std::span<const float>(hb));
    auto bt = kiln::from_host(c, {N, K}, std::span<const float>(kiln::transpose(b).to_host()));
    kiln_test::reference r;
    r.value.resize(std::size_t(M * N));
    r.tol.resize(r.value.size());
    for (index_t m = 0; m < M; ++m) {
      for (index_t n = 0; n < N; ++n) {
        double acc = 0, mag = 0;
        for (index_t k = 0; k < K; ++k) {
          acc += double(ha[std::size_t(m * K + k)]) * hb[std::size_t(k * N + n)];
          mag += std::fabs(double(ha[std::size_t(m * K + k)]) * hb[std::size_t(k * N + n)]);
        }
        r.value[std::size_t(m * N + n)] = acc;
        r.tol[std::size_t(m * N + n)] = double(K + 4) * 0x1p-24 * mag + 1e-30;
      }
    }
    const std::string what = std::string(name) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
                             " K=" + std::to_string(K);
    kiln::tensor<float, kiln::cpu<Arch>> y, yt;
    y = kiln::matmul(a, b);
    EXPECT_TRUE(kiln_test::close(y.to_host(), r, what + " (" + kiln::kernel_variant(kiln::matmul(a, b)) + ")"));
    yt = kiln::matmul(a, kiln::transpose(bt));
    EXPECT_TRUE(kiln_test::close(yt.to_host(), r, what + ", transpose(w) (" +
                                                      kiln::kernel_variant(kiln::matmul(a, kiln::transpose(bt))) + ")"));
    // 16-bit weights, transposed; the reference takes the weight as stored
    const auto narrow = [&]<class W>(W) {
      std::vector<W> hw(std::size_t(N * K));
      for (index_t n = 0; n < N; ++n)
        for (index_t k = 0; k < K; ++k) hw[std::size_t(n * K + k)] = W(hb[std::size_t(k * N + n)]);
      kiln_test::reference rw = r;
      for (index_t m = 0; m < M; ++m) {
        for (index_t n = 0; n < N; ++n) {
          double acc = 0;
          for (index_t k = 0; k < K; ++k) acc += double(ha[std::size_t(m * K + k)]) * float(hw[std::size_t(n * K + k)]);
          rw.value[std::size_t(m * N + n)] = acc;
        }
      }
      auto w = kiln::from_host(c, {N, K}, std::span<const W>(hw));
      yt = kiln::matmul(a, kiln::transpose(w));
      EXPECT_TRUE(kiln_test::close(yt.to_host(), rw, what + ", transpose(w " + std::string(kiln::dtype_name_v<W>) + ") (" +
                                                       kiln::kernel_variant(kiln::matmul(a, kiln::transpose(w))) + ")"));
      if (M > 4 && M <= kiln::detail::cpu_gemm::dot_max_rows<Arch, W>(N)) {
        // the dot path's groups of rows (and their conversion of the weight) give each row
        // what four rows alone give it, bit for bit: a row's result does not depend on its
        // company (the serving engine's batches)
        auto a4 = kiln::from_host(c, {4, K}, std::span<const float>(ha.data(), std::size_t(4 * K)));
        kiln::tensor<float, kiln::cpu<Arch>> y4;
        y4 = kiln::matmul(a4, kiln::transpose(w));
        const auto all = yt.to_host(), four = y4.to_host();
        EXPECT_TRUE(std::equal(four.begin(), four.end(), all.begin())) << what << ", the first 4 rows alone";
      }
    };
    (narrow(W16{}), ...);
    if (M > kiln::detail::cpu_gemm::dot_max_rows<Arch, float>() && M <= kiln::detail::cpu_gemm::transposed_max_rows<Arch>(N)) {  // the transposed path: named, with an epilogue, x batched
      EXPECT_NE(kiln::kernel_variant(kiln::matmul(a, kiln::transpose(bt))).find("transposed"), std::string::npos) << what;
      kiln_test::reference rt = r;
      for (std::size_t i = 0; i < rt.value.size(); ++i) {
        rt.value[i] = rt.value[i] * 2 + 1;
        rt.tol[i] = rt.tol[i] * 2 + 0x1p-22 * (std::fabs(rt.value[i]) + 1);  // + 1 rounded once more
      }
      yt = kiln::matmul(a, kiln::transpose(bt)) * 2.0f + 1.0f;
      EXPECT_TRUE(kiln_test::close(yt.to_host(), rt, what + ", transpose(w) * 2 + 1"));
      kiln_test::reference rp = r;  // a prologue on x: its rows evaluated as they are packed
      for (std::size_t i = 0; i < rp.value.size(); ++i) rp.value[i] *= 2, rp.tol[i] *= 2;
      yt = kiln::matmul(a * 2.0f, kiln::transpose(bt));
      EXPECT_TRUE(kiln_test::close(yt.to_host(), rp, what + ", (x * 2) @ transpose(w)"));
      if (M % 2 == 0) {
        auto a2 = kiln::from_host(c, {2, M / 2, K}, std::span<const float>(ha));
        kiln::tensor<float, kiln::cpu<Arch>> y2;
        y2 = kiln::matmul(a2, kiln::transpose(bt));
        EXPECT_TRUE(kiln_test::close(y2.to_host(), r, what + ", x [2, M/2, K], transpose(w)"));
      }
    }
    // with an epilogue: accumulated in a buffer, handed to it segment by segment
    kiln_test::reference r2 = r;
    for (std::size_t i = 0; i < r2.value.size(); ++i) r2.value[i] *= 2, r2.tol[i] *= 2;
    y = kiln::matmul(a, b) * 2.0f;
    EXPECT_TRUE(kiln_test::close(y.to_host(), r2, what + " * 2"));
  }
}

TEST(matmul_isa, every_instruction_set_this_cpu_runs) {
#if XSIMD_WITH_SSE2
  check_arch<xsimd::sse2, kiln::half>("sse2");
#endif
#if XSIMD_WITH_AVX2
  check_arch<xsimd::avx2, kiln::half>("avx2");
#endif
#if XSIMD_WITH_FMA3_AVX2
  check_arch<xsimd::fma3<xsimd::avx2>, kiln::bfloat16>("fma3<avx2>");
#endif
#if XSIMD_WITH_AVX512F
  check_arch<xsimd::avx512f, kiln::half, kiln::bfloat16>("avx512f");
#endif
}

// The GEMM's core traits (microarch.hpp) changed for one test, the detected ones put back
// after it.
struct tuning_scope {
  kiln::detail::cpu_gemm::microarch& t = kiln::detail::cpu_gemm::tuning();
  const kiln::detail::cpu_gemm::microarch detected = t;
  ~tuning_scope() { t = detected; }
};

// The dot path's groups below AVX-512 follow the core (microarch.hpp): 2 x 6 (4 x 4 for four
// rows) and dot_blocked for 16-bit weights from 12 rows, or 4 x 3 for every dtype and 6 x 2 for
// f16 (Zen 2). The test above runs this machine's choice; this one the other (4, 6, 7, 13, 16,
// 29 rows: whole groups, a short last group, odd N, dot_blocked or not), with the same
// references and the same bit-for-bit check against four rows alone; and the other cores'
// bound on the transposed path for f32 weights of at most 1024 columns (128 or 64 rows).
TEST(matmul_isa, the_other_cores_dot_shapes) {
  const tuning_scope scope;
  // every trait of the other kind of core: groups, f16 dot rows, the f32 transposed bound
  scope.t = scope.detected.dot_groups_4x3 ? kiln::detail::cpu_gemm::microarch{}
                                          : kiln::detail::cpu_gemm::family_17h_traits();
#if XSIMD_WITH_SSE2
  check_arch<xsimd::sse2, kiln::half>("sse2, the other core's choice");
#endif
#if XSIMD_WITH_FMA3_AVX2
  check_arch<xsimd::fma3<xsimd::avx2>, kiln::half, kiln::bfloat16>("fma3<avx2>, the other core's choice");
#endif
}

// The dot path of the dot_groups_4x3 cores past the rows where they leave it for f16 weights
// (31 and 39): 40 rows through dot_shared too (bf16 keeps it to the ISA's 48).
TEST(matmul_isa, the_4x3_groups_to_the_isa_rows) {
  const tuning_scope scope;
  scope.t.dot_groups_4x3 = true;
  scope.t.dot_rows_f16 = scope.t.dot_rows_f16_wide = 0;
#if XSIMD_WITH_FMA3_AVX2
  check_arch<xsimd::fma3<xsimd::avx2>, kiln::half, kiln::bfloat16>("fma3<avx2>, 4 x 3 groups to 48 rows");
#endif
}

}  // namespace
