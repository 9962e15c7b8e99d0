// tests/vulkan/operands_test.cpp — generated kernels with many operands: nine (eight
// inputs, the output) with texel reads on and off; parameters past the push-constant
// limit (the 172-byte statement) in a parameter buffer; 32 rank-8 strided inputs,
// more than lavapipe's 32 storage-buffer descriptors with the output and the parameters;
// capped limits (context options) for a small device's paths and the error beyond them.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "random.hpp"
#include "vulkan_fixture.hpp"

namespace {

namespace vkd = kiln::detail::vk;
using operands = kiln_test::vulkan_test;
using gpu_tensor = kiln::tensor<float, kiln::vulkan>;

kiln::context<kiln::vulkan> context_with(kiln::vulkan::options o) { return kiln::context<kiln::vulkan>{kiln_test::validated(o)}; }

/// The plan ctx's generated kernel for `y = e` gets (what record_elementwise_kernel decides).
template <class E>
vkd::kernel_plan plan_of(kiln::context<kiln::vulkan>& ctx, const gpu_tensor& y, const E& e) {
  vkd::plan_options opt = vkd::plan_options_for(*ctx.state());
  kiln::detail::for_each_leaf(e, [&](const auto& in) {
    opt.texel_views = opt.texel_views && ctx.state()->texel_viewable(in.storage()->alloc());
  });
  opt.texel_reads = opt.texel_reads && opt.texel_views;
  return vkd::make_kernel(y, e, opt).source.plan;
}

/// Expects got == want within rel * scale[i] (+ a float's rounding of want).
void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& scale,
                  double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = rel * scale[i] + 1e-7 * std::abs(want[i]) + 1e-30;
    if (!(std::abs(double(got[i]) - want[i]) <= tol) && bad++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", want " << want[i] << " (tolerance " << tol
                    << "); " << kiln_test::seed_note();
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": elements out of tolerance";
}

TEST_F(operands, nine_operands_with_texel_reads_on_and_off) {
  auto g = kiln_test::rng();
  constexpr kiln::index_t n = 1037;  // not a whole number of vector steps
  for (const bool texel : {true, false}) {
    kiln::vulkan::options o;
    o.texel_reads = texel;
    auto c = context_with(o);
    std::vector<std::vector<float>> h;
    std::vector<gpu_tensor> in;
    for (int k = 0; k < 8; ++k) {
      h.push_back(kiln_test::uniform(g, n));
      in.push_back(kiln::from_host(c, {n}, std::span<const float>(h.back())));
    }
    const auto &a = in[0], &b = in[1], &cc = in[2], &d = in[3], &e = in[4], &f = in[5], &gg = in[6], &hh = in[7];
    auto y = kiln::empty<float>(c, {n});
    const auto plan = plan_of(c, y, a + b + cc + d + e + f + gg + hh);
    EXPECT_EQ(plan.bindings, 9u);
    EXPECT_EQ(plan.texel_bindings != 0, texel && c.state()->texel_reads());
    const auto before = kiln::vulkan::stream(c).dispatches;
    y = a + b + cc + d + e + f + gg + hh;
    const auto got = y.to_host();
    EXPECT_EQ(kiln::vulkan::stream(c).dispatches, before + 1);
    std::vector<double> want(n, 0.0), scale(n, 0.0);
    for (std::size_t i = 0; i < std::size_t(n); ++i) {
      for (int k = 0; k < 8; ++k) {
        want[i] += h[k][i];
        scale[i] += std::abs(h[k][i]);
      }
    }
    expect_close(got, want, scale, 8 * 6e-8, texel ? "texel reads on" : "texel reads off");
  }
}

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

TEST_F(operands, parameters_past_the_push_constant_limit_go_to_a_buffer) {
  // The statement over a (contiguous), b (transposed) and c (a broadcast row):
  // 14 leaves and five scalars need 172 bytes of parameters, beyond the 128 that
  // lavapipe (and the spec's minimum) grants.
  auto g = kiln_test::rng();
  constexpr kiln::index_t rows = 37, cols = 29;
  const std::size_t n = rows * cols;
  const auto ha = kiln_test::uniform(g, n), hbt = kiln_test::uniform(g, n), hrow = kiln_test::uniform(g, cols);
  auto& c = ctx();
  auto a = kiln::from_host(c, {rows, cols}, std::span<const float>(ha));
  auto bt = kiln::from_host(c, {cols, rows}, std::span<const float>(hbt));
  auto row = kiln::from_host(c, {cols}, std::span<const float>(hrow));
  const auto b = kiln::transpose(bt);
  const auto cc = kiln::broadcast_to(row, {rows, cols});
  auto y = kiln::empty<float>(c, {rows, cols});
  auto statement = [&](float one) {
    return kiln::max(kiln::gelu(kiln::log(kiln::abs(a) + one)) * kiln::tanh(b / (kiln::abs(cc) + 1.0f) + b), -0.111f) /
           (kiln::abs(kiln::gelu(kiln::min((cc - (a - cc)) - (1.465f - cc) * b,
                                           kiln::min(a * cc * kiln::relu(a), kiln::sqrt(kiln::abs(cc - cc)))))) +
            1.0f);
  };
  auto check = [&](double one, const std::string& what) {
    std::vector<double> want(n), scale(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double av = ha[i], bv = hbt[(i % cols) * rows + i / cols], cv = hrow[i % cols];
      const double num = std::max(gelu(std::log(std::abs(av) + one)) * std::tanh(bv / (std::abs(cv) + 1.0) + bv), double(-0.111f));
      const double inner = std::min((cv - (av - cv)) - (double(1.465f) - cv) * bv, std::min(av * cv * std::max(av, 0.0), 0.0));
      want[i] = num / (std::abs(gelu(inner)) + 1.0);
      scale[i] = std::abs(num) + 1e-6;  // log, tanh and gelu as the backends compute them: ~1e-6 relative
    }
    expect_close(y.to_host(), want, scale, 1e-5, what);
  };
  const auto k = vkd::make_kernel(y, statement(1.0f), vkd::plan_options_for(*c.state()));
  EXPECT_EQ(k.args.push.size() * 4, 172u);
  EXPECT_EQ(k.source.plan.params_buffer, 172 > kiln::vulkan::device(c).max_push_constants);
  y = statement(1.0f);
  check(1.0, "the issue's statement");
  // new scalar values reuse the kernel, through a fresh parameter buffer
  const auto compiled = kiln::vulkan::cache(c).compilations;
  y = statement(2.0f);
  check(2.0, "the issue's statement, another scalar");
  EXPECT_EQ(kiln::vulkan::cache(c).compilations, compiled);
}

constexpr std::size_t wide_count = 32;
constexpr std::array<kiln::index_t, 8> rank8_shape = {3, 2, 5, 2, 3, 1, 3, 2};

/// y = sum_k x[k] * w[k]: one statement of 32 tensor operands and 32 scalars.
template <std::size_t... I>
auto weighted_sum(const std::vector<gpu_tensor>& x, const std::array<float, wide_count>& w, std::index_sequence<I...>) {
  return (... + (x[I] * w[I]));
}

/// Host value of view v (over `base`, a rank-8 tensor's host data) at output index i.
double element_at(const gpu_tensor& v, const std::vector<float>& base, std::size_t i) {
  kiln::index_t at = v.offset();
  for (int d = 7; d >= 0; --d) {
    const auto e = rank8_shape[static_cast<std::size_t>(d)];
    at += static_cast<kiln::index_t>(i % std::size_t(e)) * v.strides()[d];
    i /= std::size_t(e);
  }
  return base[static_cast<std::size_t>(at)];
}

/// Operand k: a permuted and sliced view of a rank-8 tensor of its own (odd extents, no
/// two views alike), with out's shape.
gpu_tensor strided_view(kiln::context<kiln::vulkan>& c, std::size_t k, std::mt19937_64& g, std::vector<float>& host) {
  std::array<int, 8> order = {0, 1, 2, 3, 4, 5, 6, 7};
  for (std::size_t r = 0; r < 1 + k % 7; ++r) std::swap(order[r], order[(r * 3 + k) % 8]);
  const int sliced = static_cast<int>(k % 8);  // output dimension read every other element
  std::vector<kiln::index_t> dims(8);
  for (int i = 0; i < 8; ++i) {
    const auto e = rank8_shape[static_cast<std::size_t>(i)];
    dims[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = i == sliced ? 2 * e + 1 : e;
  }
  std::size_t numel = 1;
  for (auto e : dims) numel *= std::size_t(e);
  host = kiln_test::uniform(g, numel);
  auto base = kiln::from_host(c, kiln::shape(std::span<const kiln::index_t>(dims)), std::span<const float>(host));
  auto v = kiln::permute(base, {order[0], order[1], order[2], order[3], order[4], order[5], order[6], order[7]});
  return kiln::slice(v, sliced, 1, 1 + 2 * rank8_shape[static_cast<std::size_t>(sliced)], 2);
}

TEST_F(operands, thirty_two_strided_rank8_operands) {
  auto g = kiln_test::rng();
  std::size_t n = 1;
  for (auto e : rank8_shape) n *= std::size_t(e);
  std::array<float, wide_count> w{};
  for (std::size_t k = 0; k < wide_count; ++k) w[k] = (k % 2 ? -1.0f : 1.0f) * (0.25f + 0.125f * float(k % 5));
  for (const bool texel : {true, false}) {
    kiln::vulkan::options o;
    o.texel_reads = texel;
    auto c = context_with(o);
    std::vector<std::vector<float>> host(wide_count);
    std::vector<gpu_tensor> x;
    for (std::size_t k = 0; k < wide_count; ++k) x.push_back(strided_view(c, k, g, host[k]));
    const kiln::shape out_shape{std::span<const kiln::index_t>(rank8_shape)};
    auto y = kiln::empty<float>(c, out_shape);
    const auto seq = std::make_index_sequence<wide_count>();
    const auto plan = plan_of(c, y, weighted_sum(x, w, seq));
    EXPECT_EQ(plan.bindings, 33u);
    EXPECT_EQ(plan.operands[1].how, vkd::access::strided);
    EXPECT_TRUE(plan.params_buffer);  // over 300 words of parameters
    EXPECT_LE(vkd::storage_buffers(plan), kiln::vulkan::device(c).max_storage_buffers);
    y = weighted_sum(x, w, seq);
    std::vector<double> want(n, 0.0), scale(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < wide_count; ++k) {
        const double t = double(w[k]) * element_at(x[k], host[k], i);
        want[i] += t;
        scale[i] += std::abs(t);
      }
    }
    expect_close(y.to_host(), want, scale, 40 * 6e-8, texel ? "texel reads on" : "texel reads off");

    // 200 more dispatches in a row: more descriptors than a batch's first pool holds, a
    // parameter buffer each, all freed once the GPU is done
    const auto live = kiln::vulkan::memory(c).live_allocations;
    for (int r = 0; r < 200; ++r) y = weighted_sum(x, w, seq);
    c.synchronize();
    expect_close(y.to_host(), want, scale, 40 * 6e-8, "after 200 dispatches");
    EXPECT_EQ(kiln::vulkan::memory(c).live_allocations, live);
  }
}

TEST_F(operands, thirty_two_contiguous_operands_with_texel_reads) {
  auto g = kiln_test::rng();
  constexpr kiln::index_t n = 4099;
  std::array<float, wide_count> w{};
  for (std::size_t k = 0; k < wide_count; ++k) w[k] = 0.5f + 0.25f * float(k % 3);
  kiln::vulkan::options o;
  o.texel_reads = true;
  auto c = context_with(o);
  std::vector<std::vector<float>> host;
  std::vector<gpu_tensor> x;
  for (std::size_t k = 0; k < wide_count; ++k) {
    host.push_back(kiln_test::uniform(g, n));
    x.push_back(kiln::from_host(c, {n}, std::span<const float>(host.back())));
  }
  auto y = kiln::empty<float>(c, {n});
  const auto seq = std::make_index_sequence<wide_count>();
  const auto plan = plan_of(c, y, weighted_sum(x, w, seq));
  EXPECT_TRUE(plan.vec4);
  if (c.state()->texel_reads()) {
    // bindings 1..31 are texel reads; binding 32 is past what the mask names
    EXPECT_EQ(plan.texel_bindings, 0xfffffffeu);
  }
  y = weighted_sum(x, w, seq);
  std::vector<double> want(n, 0.0), scale(n, 0.0);
  for (std::size_t i = 0; i < std::size_t(n); ++i) {
    for (std::size_t k = 0; k < wide_count; ++k) {
      want[i] += double(w[k]) * host[k][i];
      scale[i] += std::abs(double(w[k]) * host[k][i]);
    }
  }
  expect_close(y.to_host(), want, scale, 40 * 6e-8, "32 contiguous operands");
}

/// y = sum of eight transposed [9, 7] inputs: strided, so no vector variant.
struct eight_strided {
  std::vector<std::vector<float>> host;
  std::vector<gpu_tensor> x;
  eight_strided(kiln::context<kiln::vulkan>& c, std::mt19937_64& g) {
    for (int k = 0; k < 8; ++k) {
      host.push_back(kiln_test::uniform(g, 63));
      x.push_back(kiln::from_host(c, {9, 7}, std::span<const float>(host.back())));
    }
  }
  auto expr() const {
    using kiln::transpose;
    return transpose(x[0]) + transpose(x[1]) + transpose(x[2]) + transpose(x[3]) + transpose(x[4]) + transpose(x[5]) +
           transpose(x[6]) + transpose(x[7]);
  }
  void check(const std::vector<float>& got) const {
    std::vector<double> want(63, 0.0), scale(63, 0.0);
    for (std::size_t i = 0; i < 7; ++i) {
      for (std::size_t j = 0; j < 9; ++j) {
        for (const auto& h : host) {
          want[i * 9 + j] += h[j * 7 + i];
          scale[i * 9 + j] += std::abs(h[j * 7 + i]);
        }
      }
    }
    expect_close(got, want, scale, 8 * 6e-8, "eight strided inputs");
  }
};

TEST_F(operands, a_small_devices_limits_read_inputs_through_texel_views) {
  auto g = kiln_test::rng();
  kiln::vulkan::options o;
  o.texel_reads = false;
  o.max_storage_buffers = 4;
  auto c = context_with(o);
  if (kiln::vulkan::device(c).max_texel_buffer_elements == 0) GTEST_SKIP() << "the device has no uniform texel buffers";
  EXPECT_EQ(kiln::vulkan::device(c).max_storage_buffers, 4u);
  eight_strided s(c, g);
  auto y = kiln::empty<float>(c, {7, 9});
  const auto plan = plan_of(c, y, s.expr());
  EXPECT_FALSE(plan.vec4);
  EXPECT_FALSE(plan.params_buffer);  // 30 words
  EXPECT_EQ(vkd::storage_buffers(plan), 4u);
  EXPECT_EQ(plan.texel_bindings, 0b111110u);  // the first five inputs
  y = s.expr();
  s.check(y.to_host());
}

TEST_F(operands, a_small_push_constant_limit_puts_any_statement_in_a_parameter_buffer) {
  auto g = kiln_test::rng();
  kiln::vulkan::options o;
  o.max_push_constants = 16;  // the fixed kernels (copy, fill) need more: only generated ones run here
  auto c = context_with(o);
  const auto ha = kiln_test::uniform(g, 1001), hb = kiln_test::uniform(g, 1001);
  auto a = kiln::from_host(c, {1001}, std::span<const float>(ha));
  auto b = kiln::from_host(c, {1001}, std::span<const float>(hb));
  auto y = kiln::empty<float>(c, {1001});
  EXPECT_TRUE(plan_of(c, y, a * 2.0f + b).params_buffer);  // n, three offsets, a scalar: 20 bytes
  EXPECT_FALSE(plan_of(c, y, a + b).params_buffer);        // 16 bytes
  y = a * 2.0f + b;
  auto got = y.to_host();
  std::vector<double> want(1001), scale(1001);
  for (std::size_t i = 0; i < 1001; ++i) {
    want[i] = 2.0 * ha[i] + hb[i];
    scale[i] = std::abs(want[i]);
  }
  expect_close(got, want, scale, 6e-8, "a * 2 + b");
  y = y * 0.5f + a;  // in place, another parameter buffer
  got = y.to_host();
  for (std::size_t i = 0; i < 1001; ++i) {
    want[i] = 0.5 * double(float(2.0 * ha[i] + hb[i])) + ha[i];
    scale[i] = std::abs(want[i]) + std::abs(ha[i]);
  }
  expect_close(got, want, scale, 6e-8, "y * 0.5 + a");
}

TEST_F(operands, beyond_the_devices_limits_a_shader_error_names_the_limit) {
  auto g = kiln_test::rng();
  kiln::vulkan::options o;
  o.max_storage_buffers = 4;
  o.max_texel_buffers = 2;
  auto c = context_with(o);
  eight_strided s(c, g);
  auto y = kiln::empty<float>(c, {7, 9});
  try {
    y = s.expr();
    FAIL() << "nine buffers ran with four storage-buffer and two texel-buffer descriptors";
  } catch (const kiln::shader_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("maxPerStageDescriptorStorageBuffers"), std::string::npos) << what;
    EXPECT_NE(what.find("allows 4"), std::string::npos) << what;
    EXPECT_NE(what.find("add(add("), std::string::npos) << what;  // the expression
  }
  // the context goes on: a statement within the limits runs
  auto z = kiln::empty<float>(c, {9, 7});
  z = s.x[0] + s.x[1];
  const auto got = z.to_host();
  for (std::size_t i = 0; i < 63; ++i) EXPECT_EQ(got[i], s.host[0][i] + s.host[1][i]);
}

}  // namespace
