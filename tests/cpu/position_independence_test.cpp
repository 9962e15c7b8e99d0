// tests/cpu/position_independence_test.cpp — an element's result depends on its operands
// alone: the same value gives the same bits whether it sits in a full batch, in the
// partial batch at a row's tail or at a streaming head, in a one-element tensor, behind
// a misaligned view, in a strided row or in another thread's chunk (cpu/evaluate.hpp
// runs heads and tails through the ops' vector code, whose exp/log/tanh round
// differently from their scalar bodies).
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "random.hpp"

namespace {

using kiln::index_t;
using cpu_ctx = kiln::context<kiln::cpu<>>;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

/// Runs f on the whole of `h` at once, then on each listed element alone, on a view at
/// every offset 0..16 into a padded buffer and through a transposed [2, n/2] output, and
/// checks every copy of an element has the same bits.
template <class F>
void check_op(const char* name, cpu_ctx& ctx, const std::vector<float>& h, F f) {
  const auto n = static_cast<index_t>(h.size());
  auto x = kiln::from_host(ctx, {n}, std::span(h));
  auto y = kiln::empty<float>(ctx, {n});
  y = f(x);
  const auto whole = y.to_host();
  for (index_t i = 0; i < n; i += 7) {
    const std::vector<float> one{h[static_cast<std::size_t>(i)]};
    auto x1 = kiln::from_host(ctx, {1}, std::span(one));
    auto y1 = kiln::empty<float>(ctx, {1});
    y1 = f(x1);
    const float got = y1.to_host()[0];
    EXPECT_TRUE(same_bits(got, whole[static_cast<std::size_t>(i)]))
        << name << "(" << one[0] << "): alone " << got << ", in a row " << whole[static_cast<std::size_t>(i)] << " "
        << kiln_test::seed_note();
  }
  std::vector<float> padded(h.size() + 16, 1.0f);
  for (index_t off = 0; off <= 16; ++off) {
    std::copy(h.begin(), h.end(), padded.begin() + off);
    auto buf = kiln::from_host(ctx, {n + 16}, std::span(padded));
    auto out = kiln::empty<float>(ctx, {n + 16});
    auto yv = kiln::slice(out, 0, off, off + n);
    yv = f(kiln::slice(buf, 0, off, off + n));
    const auto got = yv.to_host();
    index_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) wrong += !same_bits(got[i], whole[i]);
    EXPECT_EQ(wrong, 0) << name << " at offset " << off << " " << kiln_test::seed_note();
  }
  if (n % 2 == 0) {
    auto x2 = kiln::from_host(ctx, {2, n / 2}, std::span(h));
    auto yt = kiln::empty<float>(ctx, {n / 2, 2});
    kiln::transpose(yt, 0, 1) = f(x2);
    const auto got = yt.to_host();
    index_t wrong = 0;
    for (index_t r = 0; r < 2; ++r) {
      for (index_t c = 0; c < n / 2; ++c) {
        wrong += !same_bits(got[static_cast<std::size_t>(c * 2 + r)], whole[static_cast<std::size_t>(r * (n / 2) + c)]);
      }
    }
    EXPECT_EQ(wrong, 0) << name << " through a transposed output " << kiln_test::seed_note();
  }
}

}  // namespace

TEST(position_independence, every_copy_of_an_element_has_the_same_bits) {
  cpu_ctx ctx{kiln::threads{1}};
  auto g = kiln_test::rng();
  auto h = kiln_test::uniform(g, 998, -9.0f, 9.0f);
  kiln_test::add_specials(h);
  check_op("exp", ctx, h, [](const auto& x) { return kiln::exp(x); });
  check_op("log", ctx, h, [](const auto& x) { return kiln::log(kiln::abs(x)); });
  check_op("tanh", ctx, h, [](const auto& x) { return kiln::tanh(x); });
  check_op("sigmoid", ctx, h, [](const auto& x) { return kiln::sigmoid(x); });
  check_op("silu", ctx, h, [](const auto& x) { return kiln::silu(x); });
  check_op("gelu", ctx, h, [](const auto& x) { return kiln::gelu(x); });
  check_op("gelu_tanh", ctx, h, [](const auto& x) { return kiln::gelu_tanh(x); });
  check_op("erf", ctx, h, [](const auto& x) { return kiln::erf(x); });
  check_op("softplus", ctx, h, [](const auto& x) { return kiln::softplus(x); });
  check_op("rsqrt", ctx, h, [](const auto& x) { return kiln::rsqrt(kiln::abs(x)); });
  check_op("pow", ctx, h, [](const auto& x) { return kiln::pow(kiln::abs(x), 1.7f); });
  check_op("chain", ctx, h, [](const auto& x) { return kiln::gelu(x * 0.5f + 1.0f) - kiln::sigmoid(x); });
}

TEST(position_independence, streaming_heads_of_misaligned_views_match_one_thread) {
  // outputs past the streaming threshold (16 MiB) write scalars up to the first aligned
  // address: at a misaligned view those heads sit at each thread's chunk start
  const index_t n = (index_t(1) << 22) + 37;
  auto g = kiln_test::rng();
  const auto h = kiln_test::uniform(g, static_cast<std::size_t>(n) + 3, -9.0f, 9.0f);
  cpu_ctx one{kiln::threads{1}}, many{kiln::threads{4}};
  std::vector<float> results[2];
  int k = 0;
  for (cpu_ctx* c : {&one, &many}) {
    auto x = kiln::from_host(*c, {n + 3}, std::span(h));
    auto out = kiln::empty<float>(*c, {n + 3});
    kiln::slice(out, 0, 3, n + 3) = kiln::gelu(kiln::slice(x, 0, 3, n + 3)) * kiln::exp(kiln::slice(x, 0, 0, n));
    results[k++] = kiln::slice(out, 0, 3, n + 3).to_host();
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)), 0)
      << kiln_test::seed_note();
}
