// tests/vulkan/cumsum_test.cpp — kiln::cumsum's Vulkan kernel (kernels/reduce/cumsum.comp)
// in each of its layouts, forced with KILN_VULKAN_CUMSUM (lanes: a subgroup a line, CPU
// devices' default; subgroup: a workgroup of 64 or 256 with subgroup shuffles, GPUs'
// default; shared: a shared-memory scan, devices without shuffles), against a float64
// reference: lines shorter and longer than a step, lines of 64Ki elements and more in
// the split pass (two dispatches: chunk sums, then the chunks scanned), more lines than
// one grid row holds, int32 wrapping, NaN / inf across chunks, and a fused prologue +
// epilogue as ONE dispatch (two for a split line): kernels_launched grows by that.
// Tolerance as tests/ops/reduce/cumsum_test.cpp: element k of a line to the float sum
// bound of k + 1 terms.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "random.hpp"
#include "vulkan_fixture.hpp"

namespace {

using cumsum_vk = kiln_test::vulkan_test;

/// Inclusive prefix sums of the lines of a row-major [outer, extent, inner] buffer, and
/// a tolerance per element.
struct cumsum_ref {
  std::vector<double> value, tol;
};
cumsum_ref cumsum_prefix(const std::vector<double>& x, std::int64_t outer, std::int64_t extent, std::int64_t inner) {
  cumsum_ref r{std::vector<double>(x.size()), std::vector<double>(x.size())};
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t j = 0; j < inner; ++j) {
      double acc = 0, abs_sum = 0;
      for (std::int64_t k = 0; k < extent; ++k) {
        const auto i = static_cast<std::size_t>((o * extent + k) * inner + j);
        acc += x[i];
        abs_sum += std::fabs(x[i]);
        r.value[i] = acc;
        r.tol[i] = (double(k + 1) / 16.0 + 64.0) * 0x1p-24 * abs_sum;
      }
    }
  }
  return r;
}

void expect_cumsum(const std::vector<float>& got, const cumsum_ref& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.value.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < got.size() && bad < 5; ++i) {
    const double g = got[i], w = want.value[i];
    const bool ok = std::isnan(w) ? std::isnan(g) : std::isinf(w) ? g == w : std::fabs(g - w) <= want.tol[i];
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", expected " << w << " within " << want.tol[i]
                    << " (" << kiln_test::seed_note() << ")";
    }
  }
}

constexpr const char* cumsum_layouts[] = {"lanes", "subgroup", "shared"};

}  // namespace

TEST_F(cumsum_vk, every_layout_every_length) {
  auto g = kiln_test::rng();
  for (const char* layout : cumsum_layouts) {
    const kiln_test::scoped_env env("KILN_VULKAN_CUMSUM", layout);
    for (kiln::index_t n : {1, 5, 31, 32, 33, 257, 1000, 1024, 1025, 4097, 65535, 65536, 140001}) {
      const kiln::index_t rows = n > 10000 ? 2 : 3;
      const auto h = kiln_test::uniform(g, std::size_t(rows * n));
      auto x = kiln::from_host(ctx(), {rows, n}, std::span<const float>(h));
      const std::string what = std::string(layout) + ", [" + std::to_string(rows) + ", " + std::to_string(n) + "]";
      const bool split = n >= 65536;
      EXPECT_EQ(kiln::kernel_variant(kiln::cumsum(x, -1)), std::string("vulkan.cumsum ") + layout + (split ? " split" : ""))
          << what;
      kiln::tensor<float, kiln::vulkan> y;
      const std::uint64_t before = ctx().kernels_launched();
      y = kiln::cumsum(x, -1);
      EXPECT_EQ(ctx().kernels_launched() - before, split ? 2u : 1u) << what;
      expect_cumsum(y.to_host(), cumsum_prefix({h.begin(), h.end()}, rows, n, 1), what);
    }
    // a middle axis (strided lines), and more lines than one grid row (2-D grid)
    const auto h3 = kiln_test::uniform(g, 5 * 300 * 7);
    auto x3 = kiln::from_host(ctx(), {5, 300, 7}, std::span<const float>(h3));
    kiln::tensor<float, kiln::vulkan> y3;
    y3 = kiln::cumsum(x3, 1);
    expect_cumsum(y3.to_host(), cumsum_prefix({h3.begin(), h3.end()}, 5, 300, 7), std::string(layout) + ", axis 1 of [5, 300, 7]");
    const auto hm = kiln_test::uniform(g, 70000 * 3);
    auto xm = kiln::from_host(ctx(), {70000, 3}, std::span<const float>(hm));
    kiln::tensor<float, kiln::vulkan> ym;
    ym = kiln::cumsum(xm, -1);
    expect_cumsum(ym.to_host(), cumsum_prefix({hm.begin(), hm.end()}, 70000, 3, 1), std::string(layout) + ", 70000 lines");
  }
}

TEST_F(cumsum_vk, one_line_of_4mi_in_hundreds_of_chunks) {
  auto g = kiln_test::rng();
  const kiln::index_t n = (kiln::index_t(1) << 22) + 1001;
  const auto h = kiln_test::uniform(g, std::size_t(n), 0.0f, 1.0f);
  auto x = kiln::from_host(ctx(), {n}, std::span<const float>(h));
  for (const char* layout : {"lanes", "subgroup"}) {
    const kiln_test::scoped_env env("KILN_VULKAN_CUMSUM", layout);
    kiln::tensor<float, kiln::vulkan> y;
    y = kiln::cumsum(x, 0);
    expect_cumsum(y.to_host(), cumsum_prefix({h.begin(), h.end()}, 1, n, 1), std::string("a line of 4Mi + 1001, ") + layout);
  }
}

TEST_F(cumsum_vk, integers_wrap_and_specials_propagate_in_every_layout) {
  auto g = kiln_test::rng();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const char* layout : cumsum_layouts) {
    const kiln_test::scoped_env env("KILN_VULKAN_CUMSUM", layout);
    for (const kiln::index_t n : {kiln::index_t(3001), kiln::index_t(70001)}) {  // one dispatch, the split pass
      const std::string what = std::string(layout) + ", lines of " + std::to_string(n);
      const auto hi = kiln_test::uniform_int<std::int32_t>(g, std::size_t(2 * n), -(1 << 30), 1 << 30);
      auto xi = kiln::from_host(ctx(), {2, n}, std::span<const std::int32_t>(hi));
      kiln::tensor<std::int32_t, kiln::vulkan> yi;
      yi = kiln::cumsum(xi, 1);
      std::vector<std::int32_t> want(hi.size());
      for (kiln::index_t r = 0; r < 2; ++r) {
        std::uint32_t acc = 0;
        for (kiln::index_t k = 0; k < n; ++k) {
          acc += static_cast<std::uint32_t>(hi[std::size_t(r * n + k)]);
          want[std::size_t(r * n + k)] = static_cast<std::int32_t>(acc);
        }
      }
      EXPECT_EQ(yi.to_host(), want) << "int32, " << what;
      auto hf = kiln_test::uniform(g, std::size_t(3 * n));
      hf[std::size_t(0 * n + n / 2)] = nan;
      hf[std::size_t(1 * n + 7)] = inf;
      hf[std::size_t(2 * n + n / 3)] = inf;
      hf[std::size_t(2 * n + n - 100)] = -inf;
      auto xf = kiln::from_host(ctx(), {3, n}, std::span<const float>(hf));
      kiln::tensor<float, kiln::vulkan> yf;
      yf = kiln::cumsum(xf, -1);
      expect_cumsum(yf.to_host(), cumsum_prefix({hf.begin(), hf.end()}, 3, n, 1), "specials, " + what);
    }
  }
}

TEST_F(cumsum_vk, fused_prologue_and_epilogue_are_one_dispatch_in_every_layout) {
  auto g = kiln_test::rng();
  const kiln::shape s{3, 17, 1500};
  const auto hx = kiln_test::uniform(g, std::size_t(s.numel()), -1.0f, 1.0f);
  const auto hb = kiln_test::uniform(g, 1500, -1.0f, 1.0f);
  auto x = kiln::from_host(ctx(), s, std::span<const float>(hx));
  auto b = kiln::from_host(ctx(), {1500}, std::span<const float>(hb));
  std::vector<double> in(hx.size());
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = double(hx[i]) * 2.0 + hb[i % 1500];
  // a long line: the split pass, both dispatches carrying the prologue (the first) and
  // the prologue and epilogue (the second)
  const kiln::index_t ln = 70000;
  const auto hl = kiln_test::uniform(g, std::size_t(2 * ln), -1.5f, 0.5f);  // 2x + 1 of mean 0: no overflow in exp
  auto xl = kiln::from_host(ctx(), {2, ln}, std::span<const float>(hl));
  std::vector<double> inl(hl.size());
  for (std::size_t i = 0; i < inl.size(); ++i) inl[i] = double(hl[i]) * 2.0 + 1.0;
  // k: the scale inside exp, small enough that no output nears FLT_MAX (where a last-bit
  // difference decides between a finite value and infinity)
  auto apply_epilogue = [](cumsum_ref r, double k = 0.01) {
    for (std::size_t i = 0; i < r.value.size(); ++i) {
      const double e = 3.0 * std::exp(r.value[i] * k);
      r.tol[i] = (r.tol[i] * k + 6e-7) * e;
      r.value[i] = e;
    }
    return r;
  };
  for (const char* layout : cumsum_layouts) {
    const kiln_test::scoped_env env("KILN_VULKAN_CUMSUM", layout);
    for (int axis : {2, 0}) {
      const cumsum_ref want = apply_epilogue(axis == 2 ? cumsum_prefix(in, 51, 1500, 1) : cumsum_prefix(in, 1, 3, 17 * 1500));
      auto y = kiln::empty<float>(ctx(), s);
      ctx().synchronize();
      const std::uint64_t before = ctx().kernels_launched();
      y = kiln::exp(kiln::cumsum(x * 2.0f + b, axis) * 0.01f) * 3.0f;
      ctx().synchronize();
      EXPECT_EQ(ctx().kernels_launched() - before, 1u) << layout << ", axis " << axis;
      expect_cumsum(y.to_host(), want, std::string("fused, ") + layout + ", axis " + std::to_string(axis));
    }
    auto yl = kiln::empty<float>(ctx(), {2, ln});
    ctx().synchronize();
    const std::uint64_t before = ctx().kernels_launched();
    yl = kiln::exp(kiln::cumsum(xl * 2.0f + 1.0f, -1) * 0.001f) * 3.0f;
    ctx().synchronize();
    EXPECT_EQ(ctx().kernels_launched() - before, 2u) << layout << ", a split line";
    expect_cumsum(yl.to_host(), apply_epilogue(cumsum_prefix(inl, 2, ln, 1), 0.001), std::string("fused split line, ") + layout);
  }
}
