// tests/profile/profile_test.cpp — the kernel profiler on every backend: off by default
// (no records), on through the context option, the API and KILN_PROFILE / KILN_TRACE; a
// known sequence of statements gives the expected records in order (op chain, variant,
// shape, dtype, bytes, flops, threads; on Vulkan GPU times > 0 that fit in the host time
// around them); the aggregated table; the Chrome trace parsed back (nlohmann-json); the
// memory report.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#if defined(KILN_TEST_JSON)
#include <nlohmann/json.hpp>
#endif

#include "backends.hpp"

using namespace kiln_test;

namespace {

/// A fresh context of B with profiling as given (Vulkan: with the validation layer).
template <class B>
kiln::context<B> fresh_context(std::optional<bool> profile, std::uint32_t gpu_every = 1) {
#if defined(KILN_TEST_VULKAN)
  if constexpr (std::is_same_v<B, kiln::vulkan>) {
    kiln::vulkan::options o;
    o.validation = true;
    o.profile = profile;
    o.profile_gpu_every = gpu_every;  // every call timed, unless a test samples
    return kiln::context<B>{o};
  } else
#endif
  {
    (void)gpu_every;
    if (profile) return kiln::context<B>{kiln::profiling{*profile}};
    return kiln::context<B>{};
  }
}

template <class B>
constexpr bool is_gpu = kiln::backend_traits<B>::asynchronous;

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/kiln_profile_test_" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Unsets an environment variable on scope exit.
struct env_guard {
  const char* name;
  env_guard(const char* n, const std::string& v) : name(n) { ::setenv(n, v.c_str(), 1); }
  ~env_guard() { ::unsetenv(name); }
};

}  // namespace

template <class B>
class profile_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(profile_test, backend_types);

TYPED_TEST(profile_test, off_by_default_records_nothing) {
  if (std::getenv("KILN_PROFILE") || std::getenv("KILN_TRACE")) GTEST_SKIP() << "KILN_PROFILE / KILN_TRACE set";
  auto ctx = fresh_context<TypeParam>(std::nullopt);
  EXPECT_FALSE(ctx.profiling());
  auto a = kiln::random<float>(ctx, {1000});
  auto y = kiln::empty<float>(ctx, {1000});
  for (int i = 0; i < 5; ++i) y = kiln::gelu(a * 2.0f + 1.0f);
  y = kiln::sum(a);
  ctx.synchronize();
  EXPECT_TRUE(ctx.profile().empty());
  EXPECT_TRUE(kiln::profile_table(ctx).rows.empty());
  EXPECT_THROW(kiln::write_trace(ctx, temp_path("never.json")), kiln::error);

  // the option off overrides nothing else and records nothing either
  auto off = fresh_context<TypeParam>(false);
  EXPECT_FALSE(off.profiling());
}

TYPED_TEST(profile_test, known_statements_give_records_in_order) {
  auto ctx = fresh_context<TypeParam>(true);
  ASSERT_TRUE(ctx.profiling());
  constexpr std::int64_t n = 100000;
  auto a = kiln::random<float>(ctx, {n});
  auto b = kiln::random<float>(ctx, {n});
  auto c = kiln::random<float>(ctx, {n});
  auto y = kiln::empty<float>(ctx, {n});
  auto p = kiln::random<float>(ctx, {64, 32});
  auto q = kiln::random<float>(ctx, {32, 48});
  auto m = kiln::empty<float>(ctx, {64, 48});
  auto r = kiln::empty<float>(ctx, {64});
  ctx.synchronize();
  ctx.clear_profile();  // the factories' kernels

  std::vector<double> around;  // host time around each statement, its GPU work included
  auto timed = [&](auto&& f) {
    const double t0 = now_us();
    f();
    ctx.synchronize();
    around.push_back(now_us() - t0);
  };
  timed([&] { y = kiln::gelu(a * b + c); });
  timed([&] { y = a * a; });
  timed([&] { m = kiln::matmul(p, q); });
  timed([&] { r = kiln::sum(p, -1); });
  timed([&] { y = 0.0f; });
  const std::string mm_variant = kiln::kernel_variant(kiln::matmul(p, q));
  const std::string sum_variant = kiln::kernel_variant(kiln::sum(p, -1));

  const auto recs = ctx.profile();
  ASSERT_EQ(recs.size(), 5u);
  EXPECT_EQ(recs[0].name, "gelu(add(mul(a,b),c))");
  EXPECT_EQ(recs[0].variant, "elementwise");
  EXPECT_EQ(recs[0].shape, kiln::shape({n}));
  EXPECT_EQ(recs[0].type, kiln::dtype::f32);
  EXPECT_EQ(recs[0].bytes, std::uint64_t(4 * n * 4));
  EXPECT_EQ(recs[0].flops, std::uint64_t(3 * n));
  EXPECT_EQ(recs[1].name, "mul(a,a)");  // one tensor read twice is one operand
  EXPECT_EQ(recs[1].bytes, std::uint64_t(3 * n * 4));
  EXPECT_EQ(recs[2].name, "matmul(a,b)");
  EXPECT_EQ(recs[2].variant, mm_variant);
  EXPECT_EQ(recs[2].shape, kiln::shape({64, 48}));
  EXPECT_EQ(recs[2].flops, std::uint64_t(2 * 64 * 48 * 32));
  EXPECT_EQ(recs[2].bytes, std::uint64_t(4 * (64 * 32 + 32 * 48 + 64 * 48)));
  EXPECT_EQ(recs[3].name, "sum(a)");
  EXPECT_EQ(recs[3].variant, sum_variant);
  EXPECT_EQ(recs[3].flops, std::uint64_t(64 * 32));
  EXPECT_EQ(recs[4].name, "fill(s0)");
  EXPECT_EQ(recs[4].bytes, std::uint64_t(n * 4));

  for (std::size_t i = 0; i < recs.size(); ++i) {
    const auto& rec = recs[i];
    SCOPED_TRACE(rec.name);
    EXPECT_GT(rec.wall_us, 0.0);
    EXPECT_LE(rec.wall_us, around[i]);
    if (i) {
      EXPECT_GE(rec.start_us, recs[i - 1].start_us + recs[i - 1].wall_us);
    }
    if constexpr (is_gpu<TypeParam>) {
      EXPECT_EQ(rec.threads, 0);
      EXPECT_GE(rec.dispatches, 1u);
      EXPECT_GT(rec.gpu_us, 0.0);
      EXPECT_LE(rec.gpu_us, around[i]);  // the GPU ran within the host time around it
      EXPECT_GE(rec.gpu_start_us, rec.start_us);  // placed after it was recorded
    } else {
      EXPECT_GE(rec.threads, 1);
      EXPECT_EQ(rec.dispatches, 0u);
      EXPECT_EQ(rec.gpu_us, -1.0);
    }
  }
}

TYPED_TEST(profile_test, a_statement_with_two_structural_ops_is_two_records_innermost_first) {
  auto ctx = fresh_context<TypeParam>(true);
  auto x = kiln::random<float>(ctx, {16, 64});
  auto y = kiln::empty<float>(ctx, {16});
  ctx.clear_profile();
  y = kiln::amax(kiln::softmax(x * 2.0f), -1) + 1.0f;
  const auto recs = ctx.profile();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].name, "softmax(mul(a,s0))");
  EXPECT_EQ(recs[0].shape, kiln::shape({16, 64}));
  EXPECT_EQ(recs[1].name, "add(amax(a),s0)");
  EXPECT_EQ(recs[1].shape, kiln::shape({16}));
}

TYPED_TEST(profile_test, set_profiling_toggles_and_clear_forgets) {
  auto ctx = fresh_context<TypeParam>(false);
  auto a = kiln::random<float>(ctx, {4096});
  auto y = kiln::empty<float>(ctx, {4096});
  y = a + 1.0f;
  ctx.set_profiling(true);
  y = a + 2.0f;
  y = kiln::exp(a);
  ctx.set_profiling(false);
  y = a + 3.0f;
  auto recs = ctx.profile();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].name, "add(a,s0)");
  EXPECT_EQ(recs[1].name, "exp(a)");
  ctx.clear_profile();
  EXPECT_TRUE(ctx.profile().empty());
}

TYPED_TEST(profile_test, table_aggregates_and_sorts_by_time) {
  auto ctx = fresh_context<TypeParam>(true);
  auto a = kiln::random<float>(ctx, {1 << 18});
  auto y = kiln::empty<float>(ctx, {1 << 18});
  ctx.clear_profile();
  for (int i = 0; i < 4; ++i) y = kiln::gelu(a * 0.5f + a);
  for (int i = 0; i < 2; ++i) y = a + 1.0f;
  const auto t = kiln::profile_table(ctx);
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_GE(t.rows[0].total_us, t.rows[1].total_us);
  double share = 0;
  std::uint64_t calls = 0;
  for (const auto& r : t.rows) {
    share += r.total_us;
    calls += r.calls;
    EXPECT_GT(r.gb_per_s(), 0.0);
    EXPECT_NEAR(r.mean_us() * double(r.calls), r.total_us, 1e-6 * r.total_us + 1e-9);
  }
  EXPECT_EQ(calls, 6u);
  EXPECT_NEAR(share, t.total_us, 1e-6 * t.total_us);
  const auto& gelu = t.rows[0].name == "gelu(add(mul(a,s0),a))" ? t.rows[0] : t.rows[1];
  EXPECT_EQ(gelu.name, "gelu(add(mul(a,s0),a))");
  EXPECT_EQ(gelu.calls, 4u);
  const std::string text = t.str();
  EXPECT_NE(text.find("gelu(add(mul(a,s0),a))"), std::string::npos) << text;
  EXPECT_NE(text.find("GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find(is_gpu<TypeParam> ? "GPU time" : "host wall time"), std::string::npos) << text;
}

TYPED_TEST(profile_test, gpu_sampling_times_one_call_in_n_and_estimates_totals) {
  if constexpr (!is_gpu<TypeParam>) {
    GTEST_SKIP() << "GPU timing only";
  } else {
    auto ctx = fresh_context<TypeParam>(true, 4);
    auto a = kiln::random<float>(ctx, {1 << 16});
    auto y = kiln::empty<float>(ctx, {1 << 16});
    ctx.synchronize();
    ctx.clear_profile();
    for (int i = 0; i < 8; ++i) y = kiln::exp(a);
    y = a * 3.0f;
    const auto recs = ctx.profile();
    ASSERT_EQ(recs.size(), 9u);
    for (int i = 0; i < 8; ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(recs[i].gpu_timed, i % 4 == 0);  // the first call of a kernel, then one in 4
      EXPECT_EQ(recs[i].gpu_us >= 0, i % 4 == 0);
      EXPECT_EQ(recs[i].dispatches, 1u);
    }
    EXPECT_TRUE(recs[8].gpu_timed);  // another kernel: its first call
    const auto t = kiln::profile_table(ctx);
    ASSERT_EQ(t.rows.size(), 2u);
    const auto& e = t.rows[0].name == "exp(a)" ? t.rows[0] : t.rows[1];
    EXPECT_EQ(e.calls, 8u);
    EXPECT_EQ(e.timed, 2u);
    // the six calls not timed count at the mean of the timed calls after the first
    EXPECT_NEAR(e.total_us, recs[0].gpu_us + 7 * recs[4].gpu_us, 1e-6 * e.total_us);
    EXPECT_NE(t.str().find("one call in 4"), std::string::npos) << t.str();
    EXPECT_NE(t.str().find("timed"), std::string::npos) << t.str();
  }
}

TYPED_TEST(profile_test, memory_report_is_printable) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto a = kiln::random<float>(ctx, {1024});
  const std::string r = kiln::memory_report(ctx);
  if constexpr (is_gpu<TypeParam>) {
    EXPECT_NE(r.find("vulkan memory pool"), std::string::npos) << r;
    EXPECT_NE(r.find("hit rate"), std::string::npos) << r;
    EXPECT_NE(r.find("kernel cache"), std::string::npos) << r;
  } else {
    EXPECT_NE(r.find("cpu memory"), std::string::npos) << r;
    EXPECT_NE(r.find("in use"), std::string::npos) << r;
  }
}

#if defined(KILN_TEST_JSON)

namespace {

/// Checks a trace file: valid JSON, the kernels on the device track (tid 0) in order,
/// host spans on thread tracks (Vulkan), a memory counter track.
template <class B>
void check_trace(const std::string& path, const std::vector<std::string>& kernels) {
  const std::string text = read_file(path);
  ASSERT_FALSE(text.empty()) << path;
  const auto j = nlohmann::json::parse(text);  // throws on invalid JSON
  ASSERT_TRUE(j.contains("traceEvents"));
  std::vector<std::string> names;
  int host = 0, counters = 0, threads_named = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("name") && e.contains("pid"));
    const std::string ph = e["ph"];
    if (ph == "X") {
      ASSERT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("tid"));
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      if (e["cat"] == "kernel") {
        EXPECT_EQ(e["tid"], 0);
        names.push_back(e["name"]);
        EXPECT_TRUE(e["args"].contains("bytes") && e["args"].contains("variant") && e["args"].contains("shape"));
      } else {
        EXPECT_EQ(e["cat"], "host");
        EXPECT_NE(e["tid"], 0);
        ++host;
      }
    } else if (ph == "C") {
      ++counters;
      EXPECT_TRUE(e["args"].is_object());
    } else if (ph == "M" && e["name"] == "thread_name") {
      ++threads_named;
    }
  }
  EXPECT_EQ(names, kernels);
  EXPECT_GT(counters, 0);
  EXPECT_GE(threads_named, 1);
  if constexpr (is_gpu<B>) {
    EXPECT_GE(host, int(kernels.size()));  // recording, submits, waits
  }
}

}  // namespace

TYPED_TEST(profile_test, write_trace_gives_chrome_trace_json) {
  auto ctx = fresh_context<TypeParam>(true);
  auto a = kiln::random<float>(ctx, {1 << 16});
  auto b = kiln::random<float>(ctx, {1 << 16});
  auto y = kiln::empty<float>(ctx, {1 << 16});
  ctx.synchronize();
  ctx.clear_profile();
  y = kiln::relu(a - b);
  y = kiln::sigmoid(y);
  auto fresh = kiln::empty<float>(ctx, {1 << 16});  // an allocation while profiling: a counter sample
  fresh = y * 2.0f;
  (void)fresh.to_host();
  const std::string path = temp_path(std::string(is_gpu<TypeParam> ? "vk" : "cpu") + "_explicit.json");
  kiln::write_trace(ctx, path);
  check_trace<TypeParam>(path, {"relu(sub(a,b))", "sigmoid(a)", "mul(a,s0)"});
  std::remove(path.c_str());
  EXPECT_THROW(kiln::write_trace(ctx, "/nonexistent-dir/x/trace.json"), kiln::error);
}

TYPED_TEST(profile_test, kiln_trace_writes_the_file_when_the_context_goes) {
  const std::string path = temp_path(std::string(is_gpu<TypeParam> ? "vk" : "cpu") + "_env.json");
  std::remove(path.c_str());
  {
    env_guard g("KILN_TRACE", path);
    auto ctx = fresh_context<TypeParam>(std::nullopt);
    EXPECT_TRUE(ctx.profiling());  // a trace needs the records
    auto a = kiln::random<float>(ctx, {1000});
    auto y = kiln::empty<float>(ctx, {1000});
    y = kiln::tanh(a) * a;
    y = y + 1.0f;
    (void)y.to_host();  // Vulkan: submitted and run (work never submitted has no GPU time)
  }  // the context (and its tensors) go: the trace is written
  check_trace<TypeParam>(path, {"mul(tanh(a),a)", "add(a,s0)"});
  std::remove(path.c_str());
}

#endif  // KILN_TEST_JSON
