// tests/ops/sampling/sample_test.cpp — kiln::sample and kiln::sampler on every backend
// against a float64 reference written here the textbook way (the logits sorted, top-p by
// the cumulative sum of the sorted probabilities, the draw by the running sum of the
// weights in index order), not the kernels' histogram passes: greedy and each filter
// alone and together, odd vocabularies, ties, k = 1, p = 1, tiny p, min-p 0 and 1,
// penalties, NaN / -inf / +inf logits, empty and one-element inputs, every bad option;
// the draw's distribution by a chi-square test at a bound derived below; seeds repeat.
//
// Exactness: the kernels work in float, the reference in double. A draw is compared
// exactly unless the reference puts u * W within 1e-4 of W of a running sum, or a
// top-p cut's mass within 1e-4 of p (float sums of a few thousand terms err ~1e-6
// relative); there the id must still be one the looser reference keeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backends.hpp"
#include <kiln/sampling.hpp>

using namespace kiln_test;

template <class B>
class sample_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(sample_test, backend_types);

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

/// The reference's verdict on one row: the draw's probabilities over the vocabulary, the
/// id a given u picks, and whether a float kernel may differ from it.
struct ref_draw {
  std::vector<double> prob;  // 0 where filtered out
  std::int32_t id = -1;
  bool ambiguous = false;
};

ref_draw reference(const std::vector<float>& x, const kiln::sampling_options& o, const std::vector<std::int32_t>& history,
                   double u) {
  const std::size_t V = x.size();
  ref_draw r;
  r.prob.assign(V, 0.0);
  std::vector<double> y(V);
  std::vector<bool> valid(V);
  std::vector<bool> in_hist(V, false);
  for (std::int32_t h : history) in_hist[std::size_t(h)] = true;
  const bool penal = o.repeat_penalty != 1.0f || o.presence_penalty != 0.0f;
  for (std::size_t i = 0; i < V; ++i) {
    // the kernels work on floats: the penalised value rounded to float, as they hold it
    float f = std::isnan(x[i]) ? -inf : std::min(x[i], std::numeric_limits<float>::max());
    if (penal && in_hist[i]) {
      f = f > 0.0f ? f / o.repeat_penalty : f * o.repeat_penalty;
      f -= o.presence_penalty;
    }
    y[i] = f;
    valid[i] = f != -inf;
  }
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < V; ++i)
    if (valid[i]) order.push_back(i);
  if (order.empty()) return r;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return y[a] > y[b]; });
  const double m = y[order[0]];
  if (o.temperature == 0.0f) {
    r.id = std::int32_t(order[0]);  // stable: the first index among the largest
    r.prob[order[0]] = 1.0;
    return r;
  }
  std::vector<bool> keep(V, false);
  std::size_t n = order.size();
  if (o.top_k > 0 && std::size_t(o.top_k) < n) {
    const double t = y[order[std::size_t(o.top_k) - 1]];
    while (n > 0 && y[order[n - 1]] < t) --n;
  }
  // top-p: the sorted probabilities' cumulative sum, groups of equal logits kept whole
  if (o.top_p < 1.0f) {
    std::vector<double> q(n);
    for (std::size_t j = 0; j < n; ++j) q[j] = std::exp(y[order[j]] - m);
    const double z = std::accumulate(q.begin(), q.end(), 0.0);
    std::vector<double> cum(n);
    std::partial_sum(q.begin(), q.end(), cum.begin());
    std::size_t j = 0;
    while (j < n) {
      const double before = j ? cum[j - 1] / z : 0.0;
      if (std::fabs(before - o.top_p) < 1e-4) r.ambiguous = true;
      if (!(before < o.top_p)) break;
      std::size_t g = j;
      while (g < n && y[order[g]] == y[order[j]]) ++g;
      j = g;
    }
    n = j;
  }
  for (std::size_t j = 0; j < n; ++j) {
    const double rel = std::exp(y[order[j]] - m);
    if (rel != 1.0 && std::fabs(rel - o.min_p) < 1e-5) r.ambiguous = true;
    if (rel >= o.min_p) keep[order[j]] = true;
  }
  double w = 0.0;
  for (std::size_t i = 0; i < V; ++i)
    if (keep[i]) w += r.prob[i] = std::exp((y[i] - m) / o.temperature);
  for (double& p : r.prob) p /= w;
  double run = 0.0;
  for (std::size_t i = 0; i < V; ++i) {
    if (!keep[i]) continue;
    run += r.prob[i];
    if (std::fabs(run - u) < 1e-4) r.ambiguous = true;
    if (r.id < 0 && run > u) r.id = std::int32_t(i);
  }
  if (r.id < 0) r.ambiguous = true;
  return r;
}

std::vector<float> random_logits(std::size_t n, std::uint32_t seed, float scale = 3.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

template <class B>
std::vector<std::int32_t> draw(const std::vector<float>& host, kiln::index_t rows, const kiln::sampling_options& o,
                               std::uint64_t step, const std::vector<std::int32_t>& history = {}) {
  const kiln::index_t V = rows ? kiln::index_t(host.size()) / rows : 0;
  auto x = kiln::from_host(ctx<B>(), {rows, V}, std::span<const float>(host));
  return kiln::sample(x, o, step, history).to_host();
}

/// Checks every row of `host` [rows, V] under o at `step` against the reference.
template <class B>
void check_rows(const std::vector<float>& host, kiln::index_t rows, const kiln::sampling_options& o, std::uint64_t step,
                const std::vector<std::int32_t>& history, const std::string& what) {
  const std::size_t V = host.size() / std::size_t(rows);
  const auto ids = draw<B>(host, rows, o, step, history);
  ASSERT_EQ(ids.size(), std::size_t(rows));
  for (kiln::index_t r = 0; r < rows; ++r) {
    const std::vector<float> row(host.begin() + std::ptrdiff_t(r * V), host.begin() + std::ptrdiff_t((r + 1) * V));
    const double u = o.temperature == 0.0f ? 0.0 : kiln::detail::sample_uniform(o.seed, step, std::uint32_t(r));
    const ref_draw ref = reference(row, o, history, u);
    const std::int32_t id = ids[std::size_t(r)];
    if (!ref.ambiguous) {
      EXPECT_EQ(id, ref.id) << what << ", row " << r << " of " << rows << " x " << V << ", u " << u;
    } else {
      ASSERT_TRUE(id >= 0 && std::size_t(id) < V) << what << ", row " << r;
    }
  }
}

}  // namespace

TYPED_TEST(sample_test, greedy_is_the_first_largest_after_penalties) {
  using B = TypeParam;
  for (std::size_t V : {1u, 2u, 7u, 97u, 1001u, 4099u}) {
    std::vector<float> x = random_logits(3 * V, std::uint32_t(V));
    if (V > 2) {
      x[1] = x[V - 1] = 50.0f;  // a tie: the first wins
      x[V + 2] = std::numeric_limits<float>::quiet_NaN();
      x[V] = -inf;
    }
    check_rows<B>(x, 3, {}, 0, {}, "greedy V " + std::to_string(V));
    // penalties apply before the argmax: id 1 divided by 100 loses to id V - 1
    if (V > 2) check_rows<B>(x, 3, {.repeat_penalty = 100.0f}, 0, {1}, "greedy with penalty V " + std::to_string(V));
  }
}

TYPED_TEST(sample_test, each_filter_matches_the_reference) {
  using B = TypeParam;
  const std::vector<kiln::sampling_options> cases = {
      {.temperature = 1.0f, .seed = 1},
      {.temperature = 0.7f, .top_k = 1, .seed = 2},
      {.temperature = 1.3f, .top_k = 5, .seed = 3},
      {.temperature = 1.0f, .top_p = 0.9f, .seed = 4},
      {.temperature = 1.0f, .top_p = 1e-6f, .seed = 5},
      {.temperature = 1.0f, .top_p = 1.0f, .seed = 6},
      {.temperature = 0.8f, .min_p = 0.05f, .seed = 7},
      {.temperature = 2.0f, .min_p = 1.0f, .seed = 8},
      {.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 9},
      {.temperature = 1.0f, .top_k = 20, .top_p = 0.5f, .repeat_penalty = 1.3f, .presence_penalty = 0.5f, .seed = 10},
      {.temperature = 0.5f, .seed = 0xfedcba9876543210ull},
  };
  const std::vector<std::int32_t> history = {0, 3, 3, 9, 1, 0};
  for (std::size_t V : {1u, 2u, 31u, 97u, 1000u, 5003u}) {
    const std::vector<float> x = random_logits(4 * V, std::uint32_t(7 * V + 1));
    std::vector<std::int32_t> h;
    for (std::int32_t id : history)
      if (std::size_t(id) < V) h.push_back(id);
    for (std::size_t c = 0; c < cases.size(); ++c) {
      for (std::uint64_t step : {0ull, 1ull, 12345ull}) {
        check_rows<B>(x, 4, cases[c], step, h, "case " + std::to_string(c) + " V " + std::to_string(V) + " step " + std::to_string(step));
      }
    }
  }
}

TYPED_TEST(sample_test, ties_are_kept_together) {
  using B = TypeParam;
  // logits on a grid of a few values: many ties at every cut
  std::vector<float> x(8 * 101);
  std::mt19937 g(11);
  for (float& v : x) v = float(int(g() % 5)) - 2.0f;
  for (std::uint64_t step = 0; step < 4; ++step) {
    check_rows<B>(x, 8, {.temperature = 1.0f, .top_k = 3, .seed = 5}, step, {}, "top_k ties");
    check_rows<B>(x, 8, {.temperature = 1.0f, .top_p = 0.3f, .seed = 5}, step, {}, "top_p ties");
    check_rows<B>(x, 8, {.temperature = 1.0f, .min_p = 0.3f, .seed = 5}, step, {}, "min_p ties");
  }
  // top_k = 1 with the maximum tied: every tied id can come out, nothing else
  std::vector<float> y(64, 0.0f);
  y[5] = y[17] = y[40] = 2.0f;
  std::vector<float> rows;
  for (int r = 0; r < 300; ++r) rows.insert(rows.end(), y.begin(), y.end());
  const auto ids = draw<B>(rows, 300, {.temperature = 1.0f, .top_k = 1, .seed = 3}, 0);
  int seen[64] = {};
  for (std::int32_t id : ids) ++seen[id];
  EXPECT_EQ(seen[5] + seen[17] + seen[40], 300);
  EXPECT_GT(seen[5], 60);
  EXPECT_GT(seen[17], 60);
  EXPECT_GT(seen[40], 60);
}

TYPED_TEST(sample_test, nan_and_infinities) {
  using B = TypeParam;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // row 0: nothing drawable; row 1: one finite id among NaN and -inf; row 2: two +inf ids
  std::vector<float> x = {nan, -inf, nan, -inf, -inf,  //
                          nan, -inf, 3.0f, nan, -inf,  //
                          1.0f, inf, 2.0f, inf, -inf};
  for (const kiln::sampling_options& o : {kiln::sampling_options{}, kiln::sampling_options{.temperature = 1.0f, .seed = 1},
                                          kiln::sampling_options{.temperature = 1.0f, .top_k = 2, .top_p = 0.5f, .seed = 2}}) {
    for (std::uint64_t step = 0; step < 8; ++step) {
      const auto ids = draw<B>(x, 3, o, step);
      EXPECT_EQ(ids[0], -1);
      EXPECT_EQ(ids[1], 2);
      EXPECT_TRUE(ids[2] == 1 || ids[2] == 3) << ids[2];
    }
  }
}

TYPED_TEST(sample_test, empty_and_one_element) {
  using B = TypeParam;
  auto none = kiln::zeros<float>(ctx<B>(), {0, 5});
  EXPECT_EQ(kiln::sample(none, {.temperature = 1.0f}).shape(), kiln::shape({0}));
  auto one = kiln::full(ctx<B>(), {1}, 0.5f);  // rank 1: a rank-0 id
  const auto id = kiln::sample(one, {.temperature = 1.0f, .top_p = 0.1f});
  EXPECT_EQ(id.shape().rank(), 0);
  EXPECT_EQ(id.to_host().at(0), 0);
  auto h = kiln::full(ctx<B>(), {2, 1}, kiln::half(1.0f));  // f16 logits
  EXPECT_EQ(kiln::sample(h, {.temperature = 1.0f}).to_host(), (std::vector<std::int32_t>{0, 0}));
}

TYPED_TEST(sample_test, bad_options_name_the_op_the_option_and_the_logits) {
  using B = TypeParam;
  auto x = kiln::zeros<float>(ctx<B>(), {2, 7});
  const std::string dev = x.describe();
  const auto expect_error = [&](const kiln::sampling_options& o, const std::string& what) {
    try {
      (void)kiln::sample(x, o);
      ADD_FAILURE() << "no error for " << what;
    } catch (const kiln::shape_error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("kiln::sample"), std::string::npos) << m;
      EXPECT_NE(m.find(what), std::string::npos) << m;
      EXPECT_NE(m.find(dev), std::string::npos) << m;
    }
  };
  expect_error({.temperature = -1.0f}, "temperature");
  expect_error({.temperature = inf}, "temperature");
  expect_error({.top_k = -3}, "top_k");
  expect_error({.top_p = 0.0f}, "top_p");
  expect_error({.top_p = 1.5f}, "top_p");
  expect_error({.top_p = std::numeric_limits<float>::quiet_NaN()}, "top_p");
  expect_error({.min_p = -0.1f}, "min_p");
  expect_error({.min_p = 2.0f}, "min_p");
  expect_error({.repeat_penalty = 0.0f}, "repeat_penalty");
  expect_error({.presence_penalty = inf}, "presence_penalty");
  const std::vector<std::int32_t> bad = {3, 7};
  try {
    (void)kiln::sample(x, {.repeat_penalty = 1.1f}, 0, bad);
    ADD_FAILURE() << "no error for a history id past the vocabulary";
  } catch (const kiln::index_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("kiln::sample: history id 7 at history[1]"), std::string::npos) << m;
    EXPECT_NE(m.find(dev), std::string::npos) << m;
  }
  auto scalar = kiln::full(ctx<B>(), kiln::shape{}, 1.0f);
  EXPECT_THROW((void)kiln::sample(scalar, {}), kiln::shape_error);
  auto no_vocab = kiln::zeros<float>(ctx<B>(), {3, 0});
  EXPECT_THROW((void)kiln::sample(no_vocab, {}), kiln::shape_error);
  EXPECT_THROW(kiln::sampler({.top_p = 2.0f}), kiln::shape_error);
}

// The draw's distribution: N rows of the same logits drawn in one call (each row its own
// random number) against the reference's probabilities. Pearson's statistic over the
// kept ids has df = kept - 1; the bound is its 1 - 1e-6 quantile by Wilson-Hilferty
// (z = 4.7534), so a correct sampler fails this fixed-seed test with probability 1e-6;
// filtered ids must never come out.
TYPED_TEST(sample_test, draws_follow_the_distribution) {
  using B = TypeParam;
  const std::size_t V = 24;
  const kiln::index_t N = 6000;
  const std::vector<float> base = random_logits(V, 99, 1.0f);
  for (const kiln::sampling_options& o :
       {kiln::sampling_options{.temperature = 1.0f, .seed = 21}, kiln::sampling_options{.temperature = 0.7f, .top_k = 10, .seed = 22},
        kiln::sampling_options{.temperature = 1.5f, .top_p = 0.8f, .min_p = 0.1f, .seed = 23}}) {
    std::vector<float> x;
    for (kiln::index_t r = 0; r < N; ++r) x.insert(x.end(), base.begin(), base.end());
    const auto ids = draw<B>(x, N, o, 5);
    const ref_draw ref = reference(base, o, {}, 0.5);
    std::vector<double> count(V, 0.0);
    for (std::int32_t id : ids) count[std::size_t(id)] += 1.0;
    double chi2 = 0.0;
    int kept = 0;
    for (std::size_t i = 0; i < V; ++i) {
      if (ref.prob[i] == 0.0) {
        EXPECT_EQ(count[i], 0.0) << "filtered id " << i << " was drawn";
        continue;
      }
      ++kept;
      const double e = ref.prob[i] * double(N);
      chi2 += (count[i] - e) * (count[i] - e) / e;
    }
    const double df = kept - 1, z = 4.7534;
    const double bound = df * std::pow(1.0 - 2.0 / (9.0 * df) + z * std::sqrt(2.0 / (9.0 * df)), 3.0);
    EXPECT_LT(chi2, bound) << "kept " << kept << " ids, temperature " << o.temperature;
  }
}

TYPED_TEST(sample_test, a_seed_and_step_repeat_exactly) {
  using B = TypeParam;
  const std::vector<float> x = random_logits(64 * 500, 5);
  const kiln::sampling_options o{.temperature = 1.0f, .top_k = 50, .top_p = 0.95f, .seed = 1234};
  const auto a = draw<B>(x, 64, o, 7), b = draw<B>(x, 64, o, 7);
  EXPECT_EQ(a, b);
  kiln::sampling_options other = o;
  other.seed = 1235;
  EXPECT_NE(draw<B>(x, 64, other, 7), a);
  EXPECT_NE(draw<B>(x, 64, o, 8), a);
  // kiln::sampler: the same options and logits give the same sequence of ids
  auto logits = kiln::from_host(ctx<B>(), {4, 500}, std::span<const float>(x.data(), 2000));
  const auto run = [&] {
    kiln::sampler s(o, 8);
    s.accept(std::vector<std::int32_t>{1, 2, 3});
    std::vector<std::int32_t> ids;
    for (int i = 0; i < 20; ++i) ids.push_back(s.next(logits));  // the last row [3]
    return ids;
  };
  const auto first = run();
  EXPECT_EQ(first, run());
  for (std::int32_t id : first) EXPECT_TRUE(id >= 0 && id < 500);
}

#if defined(KILN_TEST_VULKAN)
// The two backends run the same steps with the same random numbers: on the same logits
// they draw the same ids, but where a float sum (summed in another order on each) lands
// within rounding of a cut or of the target. Over 512 rows of 300 ids, fewer than 1% may
// differ (each such row needs a sum within ~1e-6 relative of a boundary).
TEST(sample_backends, cpu_and_vulkan_draw_the_same_ids) {
  if (!kiln::vulkan::available()) GTEST_SKIP() << "no Vulkan device on this machine";
  const std::size_t before = kiln::vulkan::validation_messages().size();
  const kiln::index_t rows = 512, V = 300;
  const std::vector<float> x = random_logits(std::size_t(rows * V), 77);
  for (const kiln::sampling_options& o : {kiln::sampling_options{.temperature = 1.0f, .seed = 3},
                                          kiln::sampling_options{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                                                                 .repeat_penalty = 1.1f, .seed = 4}}) {
    const std::vector<std::int32_t> history = {1, 2, 3, 50, 299};
    const auto c = draw<kiln_test::cpu>(x, rows, o, 9, history);
    const auto g = draw<kiln_test::vulkan>(x, rows, o, 9, history);
    int differ = 0;
    for (std::size_t r = 0; r < c.size(); ++r) differ += c[r] != g[r];
    EXPECT_LE(differ, rows / 100) << "temperature " << o.temperature;
  }
  EXPECT_EQ(kiln::vulkan::validation_messages().size(), before);
}
#endif

// The logits as a strided view (the transpose of [V, rows]) and as f16 / bf16 go through
// the kernels' prologue: the same ids as the contiguous f32 row holding the same values.
TYPED_TEST(sample_test, strided_and_half_logits) {
  using B = TypeParam;
  const kiln::index_t rows = 6, V = 257;
  std::vector<float> x = random_logits(std::size_t(rows * V), 31);
  for (float& v : x) v = float(kiln::half(v));  // rounded to f16: the f16 copy holds the same values
  std::vector<float> xt(x.size());
  for (kiln::index_t r = 0; r < rows; ++r)
    for (kiln::index_t i = 0; i < V; ++i) xt[std::size_t(i * rows + r)] = x[std::size_t(r * V + i)];
  const kiln::sampling_options o{.temperature = 0.9f, .top_k = 30, .top_p = 0.9f, .seed = 8};
  const auto want = draw<B>(x, rows, o, 2, {4, 5});
  auto t = kiln::from_host(ctx<B>(), {V, rows}, std::span<const float>(xt));
  EXPECT_EQ(kiln::sample(kiln::transpose(t, 0, 1), o, 2, std::vector<std::int32_t>{4, 5}).to_host(), want);
  std::vector<kiln::half> h;
  for (float v : x) h.push_back(kiln::half(v));
  auto th = kiln::from_host(ctx<B>(), {rows, V}, std::span<const kiln::half>(h));
  EXPECT_EQ(kiln::sample(th, o, 2, std::vector<std::int32_t>{4, 5}).to_host(), want);
}
