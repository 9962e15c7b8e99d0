// tests/vulkan/fused_test.cpp — generated kernels on Vulkan: one dispatch per statement,
// eight-per-step (u64vec4) kernels at every tail and offset, scalars as push constants
// (new values reuse the kernel), invalid GLSL from a user's op as kiln::shader_error, and
// the persistent cache across contexts: cold, warm, damaged entries rebuilt, KILN_CACHE=off.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "random.hpp"
#include "temp_cache.hpp"
#include "vulkan_fixture.hpp"

namespace {

namespace fs = std::filesystem;
using fused = kiln_test::vulkan_test;

struct broken_op {
  static constexpr std::string_view name = "broken";
  template <class V>
  static V apply(const V& v) {
    return v;
  }
  static constexpr std::string_view glsl = "no_such_function({0})";
};

using kiln_test::temp_cache;

/// A context of its own (so its in-memory kernel cache starts empty), validation on.
using kiln_test::fresh_context;

/// Runs one fused statement on ctx and checks it.
void run_statement(kiln::context<kiln::vulkan>& ctx, float k) {
  std::vector<float> h = {-2.0f, -0.5f, 0.0f, 0.5f, 2.0f, 3.0f, -3.0f};
  auto x = kiln::from_host(ctx, {7}, h);
  auto y = kiln::empty<float>(ctx, {7});
  y = kiln::sigmoid(x * k) + kiln::relu(x) - 1.0f;
  const auto got = y.to_host();
  for (std::size_t i = 0; i < h.size(); ++i) {
    const double want = 1.0 / (1.0 + std::exp(-double(h[i]) * k)) + std::max(0.0f, h[i]) - 1.0;
    EXPECT_NEAR(got[i], want, 1e-6) << i;
  }
}

/// An earlier run of the program: a context that runs one statement and closes (writing
/// its SPIR-V, pipeline cache and warm list to the current cache directory).
void run_and_close(float k) {
  auto c = fresh_context();
  run_statement(c, k);
}

}  // namespace

TEST_F(fused, a_chain_is_one_dispatch_and_new_scalars_reuse_the_kernel) {
  auto& c = ctx();
  auto x = kiln::full(c, {1001}, 0.25f);
  auto y = kiln::empty<float>(c, {1001});
  y = kiln::gelu(x * 2.0f + 1.0f) * kiln::tanh(x);  // warm up this statement's kernel
  const auto compiled = kiln::vulkan::cache(c).compilations;
  const auto launched = c.kernels_launched();
  for (float s : {3.0f, 4.0f, 5.0f}) y = kiln::gelu(x * s + 1.0f) * kiln::tanh(x);
  EXPECT_EQ(c.kernels_launched() - launched, 3u);
  EXPECT_EQ(kiln::vulkan::cache(c).compilations, compiled) << "a new scalar value recompiled the kernel";
  const float want = 0.5f * 2.25f * (1.0f + std::erf(2.25f / std::sqrt(2.0f))) * std::tanh(0.25f);
  for (float v : y.to_host()) EXPECT_NEAR(v, want, 1e-6f);
}

TEST_F(fused, vector_kernels_are_exact_at_every_tail_offset_and_in_place_in_every_variant) {
  namespace vk = kiln::detail::vk;
  auto& shared = ctx();
  // the shared context (single-step kernels), and grid-stride loops reading both ways
  kiln::vulkan::options o = kiln_test::validated();
  o.single_step = false;
  o.texel_reads = shared.state()->texel_reads();
  kiln::context<kiln::vulkan> loop{o};
  o.texel_reads = !shared.state()->texel_reads();
  kiln::context<kiln::vulkan> loop_other{o};
  auto g = kiln_test::rng();
  for (kiln::context<kiln::vulkan>* cp : {&shared, &loop, &loop_other}) {
    auto& c = *cp;
    const bool texel = c.state()->texel_reads();
    const vk::plan_options opt = vk::plan_options_for(*c.state());
    // (the larger sizes take the loop several turns per invocation)
    for (kiln::index_t n : {1, 7, 8, 9, 15, 16, 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 4099, 20003}) {
      for (kiln::index_t off : {0, 3, 4, 8}) {
        const auto ha = kiln_test::uniform(g, static_cast<std::size_t>(n + off));
        const auto hb = kiln_test::uniform(g, static_cast<std::size_t>(n + off));
        std::vector<std::int32_t> hi(static_cast<std::size_t>(n + off));
        for (std::size_t k = 0; k < hi.size(); ++k) hi[k] = static_cast<std::int32_t>(k % 201) - 100;
        const auto a = kiln::slice(kiln::from_host(c, {n + off}, ha), 0, off, n + off);
        const auto b = kiln::slice(kiln::from_host(c, {n + off}, hb), 0, off, n + off);
        const auto i = kiln::slice(kiln::from_host(c, {n + off}, hi), 0, off, n + off);
        auto y = kiln::empty<float>(c, {n});
        auto yi = kiln::empty<std::int32_t>(c, {n});
        const auto k = vk::make_kernel(y, a * b - kiln::cast<float>(i), opt);
        if (n > 1) {  // n = 1: all constant
          EXPECT_EQ(k.source.plan.wide, opt.int64 && off % 8 == 0) << k.source.glsl;
          EXPECT_EQ(k.source.plan.texel_bindings != 0, texel && off % 4 == 0) << k.source.glsl;
          EXPECT_EQ(k.source.plan.single_step, c.state()->single_step()) << k.source.glsl;
        }
        y = a * b - kiln::cast<float>(i);
        yi = i * 3 + i;
        auto x = kiln::from_host(c, {n}, std::vector<float>(ha.begin() + off, ha.end()));
        x = x * 2.0f + 1.0f;  // in place: the output binding is read too
        const auto gy = y.to_host();
        const auto gi = yi.to_host();
        const auto gx = x.to_host();
        for (kiln::index_t e = 0; e < n; ++e) {
          const auto s = static_cast<std::size_t>(e + off), d = static_cast<std::size_t>(e);
          const float want = ha[s] * hb[s] - float(hi[s]);  // up to one rounding apart (fma)
          EXPECT_NEAR(gy[d], want, 1e-6f * (1.0f + std::abs(want))) << "texel=" << texel << " n=" << n << " off=" << off << " e=" << e;
          EXPECT_EQ(gi[d], hi[s] * 4) << "texel=" << texel << " n=" << n << " off=" << off << " e=" << e;
          EXPECT_EQ(gx[d], ha[s] * 2.0f + 1.0f) << "texel=" << texel << " n=" << n << " off=" << off << " e=" << e;
        }
      }
    }
  }
}

TEST_F(fused, texel_reads_index_every_block_a_tensor_may_live_in) {
  // small pooled blocks, so inputs sit at many offsets in several blocks, and an input
  // larger than a block (a dedicated allocation); ranges freed and handed out again, in
  // their size class and after coalescing into other sizes, get the right views
  kiln::vulkan::options o = kiln_test::validated();
  o.texel_reads = true;
  o.block_size = std::size_t(1) << 20;
  kiln::context<kiln::vulkan> c{o};
  if (!c.state()->texel_reads()) GTEST_SKIP() << "the device has no uniform texel buffers";
  auto g = kiln_test::rng();
  std::vector<kiln::tensor<float, kiln::vulkan>> keep;  // shifts the next inputs' offsets
  for (kiln::index_t n : {30011, 30027, 30043, 30059, 30075, 30091, 600001}) {
    keep.push_back(kiln::full(c, {40000 + n % 97}, 1.0f));
    const auto ha = kiln_test::uniform(g, static_cast<std::size_t>(n));
    const auto hb = kiln_test::uniform(g, static_cast<std::size_t>(n));
    const auto a = kiln::from_host(c, {n}, ha);
    const auto b = kiln::from_host(c, {n}, hb);
    auto y = kiln::empty<float>(c, {n});
    y = kiln::relu(a - b) * 2.0f + a;
    const auto got = y.to_host();
    for (std::size_t e = 0; e < got.size(); ++e) {
      const float want = std::max(ha[e] - hb[e], 0.0f) * 2.0f + ha[e];  // up to one rounding apart (fma)
      ASSERT_NEAR(got[e], want, 1e-6f * (1.0f + std::abs(want))) << "n=" << n << " e=" << e;
    }
    if (n > 500000) {
      EXPECT_GE(kiln::vulkan::memory(c).dedicated, 1u) << "the largest input was meant to get a block of its own";
    }
  }
  keep.clear();
  kiln::vulkan::trim(c);  // every range coalesces: their views go
  for (kiln::index_t n : {70001, 1003, 250007}) {
    const auto ha = kiln_test::uniform(g, static_cast<std::size_t>(n));
    const auto a = kiln::from_host(c, {n}, ha);
    auto y = kiln::empty<float>(c, {n});
    y = a * a - 1.0f;
    const auto got = y.to_host();
    for (std::size_t e = 0; e < got.size(); ++e) {
      const float want = ha[e] * ha[e] - 1.0f;
      ASSERT_NEAR(got[e], want, 1e-6f * (1.0f + std::abs(want))) << "n=" << n << " e=" << e;
    }
  }
}

TEST_F(fused, invalid_glsl_of_a_custom_op_is_a_shader_error_with_expression_source_and_log) {
  auto& c = ctx();
  auto x = kiln::full(c, {8}, 1.0f);
  auto y = kiln::empty<float>(c, {8});
  try {
    y = kiln::map<broken_op>(x + 1.0f);
    FAIL() << "expected kiln::shader_error";
  } catch (const kiln::shader_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("broken(add(a, s0))"), std::string::npos) << m;   // the expression
    EXPECT_NE(m.find("no_such_function"), std::string::npos) << m;     // shaderc's log / the source
    EXPECT_NE(m.find("   1 | #version 450"), std::string::npos) << m;  // numbered source lines
  }
  // the context is still usable
  y = x * 3.0f;
  for (float v : y.to_host()) EXPECT_EQ(v, 3.0f);
}

TEST_F(fused, cold_then_warm_contexts_share_the_disk_cache) {
  temp_cache cache("warm");
  {
    auto c = fresh_context();
    run_statement(c, 1.5f);
    const auto s = kiln::vulkan::cache(c);
    EXPECT_GE(s.compilations, 1u);
    EXPECT_EQ(s.disk_hits, 0u);
    EXPECT_EQ(s.directory, cache.dir.string());
  }
  EXPECT_GE(cache.files(".spv").size(), 1u);
  {
    auto c = fresh_context();
    run_statement(c, 2.5f);  // other scalar: same kernel
    const auto s = kiln::vulkan::cache(c);
    EXPECT_EQ(s.compilations, 0u) << "the warm context compiled again";
    EXPECT_GE(s.disk_hits, 1u);
  }
}

TEST_F(fused, damaged_cache_entries_are_rebuilt_not_trusted) {
  temp_cache cache("damaged");
  run_and_close(1.0f);
  ASSERT_GE(cache.files(".spv").size(), 1u);
  for (const auto& e : fs::directory_iterator(cache.dir)) {  // flip bytes in, then truncate, every entry
    if (e.path().extension() != ".spv") continue;
    const auto size = fs::file_size(e.path());
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(size / 2));
    f.write("garbage!", 8);
    f.close();
  }
  {
    auto c = fresh_context();
    run_statement(c, 1.0f);  // correct results from a fresh compile
    const auto s = kiln::vulkan::cache(c);
    EXPECT_GE(s.disk_rejected, 1u);
    EXPECT_GE(s.compilations, 1u);
  }
  for (const auto& e : fs::directory_iterator(cache.dir)) {
    if (e.path().extension() == ".spv") fs::resize_file(e.path(), 10);
  }
  {
    auto c = fresh_context();
    run_statement(c, 1.0f);
    EXPECT_GE(kiln::vulkan::cache(c).disk_rejected, 1u);
  }
  {
    auto c = fresh_context();  // the rewritten entries are valid again
    run_statement(c, 1.0f);
    EXPECT_EQ(kiln::vulkan::cache(c).compilations, 0u);
  }
}

TEST_F(fused, cache_off_writes_nothing) {
  temp_cache cache("off");
  kiln_test::scoped_env off("KILN_CACHE", "off");
  auto c = fresh_context();
  run_statement(c, 1.0f);
  EXPECT_EQ(kiln::vulkan::cache(c).directory, "");
  EXPECT_FALSE(fs::exists(cache.dir));
}

// ---- warm start: the last run's kernels rebuilt in the background -----------------------

TEST_F(fused, a_warm_start_rebuilds_the_last_runs_kernels_before_they_are_used) {
  temp_cache cache("preload");
  {
    auto c = fresh_context();
    EXPECT_EQ(kiln::vulkan::wait_preloaded(c), 0u);  // nothing listed yet
    run_statement(c, 1.5f);
  }
  EXPECT_EQ(cache.files(".warm").size(), 1u) << "the closing context listed the kernels it used";
  auto c = fresh_context();
  EXPECT_GE(kiln::vulkan::wait_preloaded(c), 1u);
  const auto before = kiln::vulkan::cache(c);
  EXPECT_EQ(before.compilations, 0u) << "the warm-start thread never runs shaderc";
  EXPECT_GT(before.preload_seconds, 0.0);
  run_statement(c, 0.5f);
  const auto after = kiln::vulkan::cache(c);
  EXPECT_EQ(after.compilations, 0u);
  EXPECT_EQ(after.memory_misses, 0u) << "the statement's kernel should have been ready";
  EXPECT_EQ(after.pipeline_seconds, 0.0);
  EXPECT_GE(after.memory_hits, 1u);
}

TEST_F(fused, a_statement_racing_the_warm_start_builds_its_kernel_exactly_once) {
  temp_cache cache("preload_race");
  run_and_close(1.0f);
  auto c = fresh_context();
  run_statement(c, 2.0f);  // at once: the kernel is ready, being built (wait), or not started
  kiln::vulkan::wait_preloaded(c);
  const auto s = kiln::vulkan::cache(c);
  EXPECT_EQ(s.compilations, 0u);
  EXPECT_EQ(s.preloaded + s.memory_misses, 1u) << "built by the warm start or by the statement, not both";
}

TEST_F(fused, preload_off_builds_kernels_on_use) {
  temp_cache cache("preload_off");
  kiln_test::scoped_env off("KILN_CACHE_PRELOAD", "off");
  run_and_close(1.0f);
  EXPECT_EQ(cache.files(".warm").size(), 0u);
  EXPECT_GE(cache.files(".spv").size(), 1u);
  auto c = fresh_context();
  EXPECT_EQ(kiln::vulkan::wait_preloaded(c), 0u);
  run_statement(c, 1.0f);
  const auto s = kiln::vulkan::cache(c);
  EXPECT_EQ(s.preloaded, 0u);
  EXPECT_EQ(s.compilations, 0u);
  EXPECT_GE(s.memory_misses, 1u);
}

TEST_F(fused, a_damaged_warm_list_is_ignored_then_rewritten) {
  temp_cache cache("preload_damaged");
  run_and_close(1.0f);
  ASSERT_EQ(cache.files(".warm").size(), 1u);
  for (const auto& e : fs::directory_iterator(cache.dir)) {
    if (e.path().extension() == ".warm") fs::resize_file(e.path(), fs::file_size(e.path()) - 3);
  }
  {
    auto c = fresh_context();
    EXPECT_EQ(kiln::vulkan::wait_preloaded(c), 0u);
    EXPECT_GE(kiln::vulkan::cache(c).disk_rejected, 1u);
    run_statement(c, 1.0f);  // correct, built on use
  }
  auto c = fresh_context();  // the list was rewritten when that context closed
  EXPECT_GE(kiln::vulkan::wait_preloaded(c), 1u);
  run_statement(c, 1.0f);
}

TEST_F(fused, a_warm_list_whose_spirv_is_gone_starts_cold_without_compiling_in_the_background) {
  temp_cache cache("preload_no_spirv");
  run_and_close(1.0f);
  for (const auto& e : fs::directory_iterator(cache.dir)) {
    if (e.path().extension() == ".spv") fs::remove(e.path());
  }
  auto c = fresh_context();
  EXPECT_EQ(kiln::vulkan::wait_preloaded(c), 0u);
  EXPECT_EQ(kiln::vulkan::cache(c).compilations, 0u);
  run_statement(c, 1.0f);
  EXPECT_GE(kiln::vulkan::cache(c).compilations, 1u);
}

TEST(warm_list, round_trips_and_rejects_every_truncation_and_trailing_bytes) {
  namespace vk = kiln::detail::vk;
  vk::kernel_record a, b;
  a.name = "copy";
  a.defines = {{"KILN_ELEM_BITS", "32"}};
  a.bindings = 2;
  a.push_bytes = 64;
  a.glsl = "#version 450\nvoid main() {}\n";
  b.name = "k0123";
  b.bindings = 4;
  b.texel_bindings = 0b1110;
  b.push_bytes = 20;
  b.params_bytes = 1352;
  b.glsl = std::string(1000, 'x');
  const auto bytes = vk::serialize_warm_list({&a, &b});
  auto back = vk::parse_warm_list(bytes);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].name, "copy");
  EXPECT_EQ(back[0].defines, a.defines);
  EXPECT_EQ(back[0].bindings, 2u);
  EXPECT_EQ(back[0].push_bytes, 64u);
  EXPECT_EQ(back[0].glsl, a.glsl);
  EXPECT_EQ(back[1].name, "k0123");
  EXPECT_TRUE(back[1].defines.empty());
  EXPECT_EQ(back[1].texel_bindings, 0b1110u);
  EXPECT_EQ(back[0].texel_bindings, 0u);
  EXPECT_EQ(back[1].glsl, b.glsl);
  std::vector<vk::define> views;
  EXPECT_EQ(back[1].spec(views).texel_bindings, 0b1110u);
  EXPECT_EQ(back[1].params_bytes, 1352u);
  EXPECT_EQ(back[0].params_bytes, 0u);
  EXPECT_EQ(back[1].spec(views).params_bytes, 1352u);
  const auto spec = back[0].spec(views);
  ASSERT_EQ(spec.defines.size(), 1u);
  EXPECT_EQ(spec.defines[0].value, "32");
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_TRUE(vk::parse_warm_list(std::span(bytes).first(n)).empty()) << "truncated to " << n;
  }
  auto longer = bytes;
  longer.push_back(std::byte{0});
  EXPECT_TRUE(vk::parse_warm_list(longer).empty());
}
