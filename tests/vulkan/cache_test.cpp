// tests/vulkan/cache_test.cpp — the kernel cache against hostile files: size fields past
// the end, FIFOs in place of entries, garbage SPIR-V and another kernel's SPIR-V under
// valid checksums, pipeline-cache blobs of another device or none, and cached SPIR-V the
// driver refuses. Each gives the right result, and the bad file is replaced.
#include <gtest/gtest.h>

#include <fcntl.h>     // open(O_WRONLY | O_NONBLOCK): releases a constructor blocked on a FIFO
#include <sys/stat.h>  // mkfifo
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <string>
#include <vector>

#include <kiln/detail/disk_cache.hpp>  // the shader cache's disk level, tested directly

#include "random.hpp"
#include "temp_cache.hpp"
#include "vulkan_fixture.hpp"

namespace {

namespace fs = std::filesystem;
using kernel_cache = kiln_test::vulkan_test;
using kiln::detail::disk_cache;
using faults = kiln::detail::vk::fault_injection;

using kiln_test::temp_cache;

using kiln_test::fresh_context;

/// Statement A (two buffers) on ctx, checked.
void run_a(kiln::context<kiln::vulkan>& ctx, float k = 1.5f) {
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

/// Statement B (five buffers): another interface than A's.
void run_b(kiln::context<kiln::vulkan>& ctx) {
  std::vector<float> ha(300), hb(300), hc(300), hd(300);
  for (std::size_t i = 0; i < 300; ++i) {
    ha[i] = float(i);
    hb[i] = 0.5f;
    hc[i] = float(i % 7);
    hd[i] = -2.0f;
  }
  auto a = kiln::from_host(ctx, {300}, ha), b = kiln::from_host(ctx, {300}, hb), c = kiln::from_host(ctx, {300}, hc),
       d = kiln::from_host(ctx, {300}, hd);
  auto y = kiln::empty<float>(ctx, {300});
  y = a * b + c * d;
  const auto got = y.to_host();
  for (std::size_t i = 0; i < 300; ++i) EXPECT_EQ(got[i], ha[i] * hb[i] + hc[i] * hd[i]) << i;
}

void run_a_and_close() {
  auto c = fresh_context();
  run_a(c);
}

/// A cache file's parts (see kiln/detail/disk_cache.hpp).
struct entry {
  std::string key;
  std::vector<std::byte> payload;
};
constexpr std::size_t header_bytes = 40;

entry read_entry(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  char h[header_bytes];
  f.read(h, header_bytes);
  std::uint64_t key_size = 0, payload_size = 0;
  std::memcpy(&key_size, h + 16, 8);
  std::memcpy(&payload_size, h + 24, 8);
  entry e;
  e.key.resize(key_size);
  f.read(e.key.data(), std::streamsize(key_size));
  e.payload.resize(payload_size);
  f.read(reinterpret_cast<char*>(e.payload.data()), std::streamsize(payload_size));
  EXPECT_TRUE(f) << "cannot read " << p;
  return e;
}

/// Writes an entry as a hostile program would: well formed, with a valid checksum.
void forge_entry(const fs::path& p, const std::string& key, std::span<const std::byte> payload) {
  char h[header_bytes] = {};
  std::memcpy(h, disk_cache::magic, 8);
  const std::uint32_t version = disk_cache::format_version;
  const std::uint64_t key_size = key.size(), payload_size = payload.size(), sum = disk_cache::checksum(key, payload);
  std::memcpy(h + 8, &version, 4);
  std::memcpy(h + 16, &key_size, 8);
  std::memcpy(h + 24, &payload_size, 8);
  std::memcpy(h + 32, &sum, 8);
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(h, header_bytes);
  f << key;
  f.write(reinterpret_cast<const char*>(payload.data()), std::streamsize(payload.size()));
}

/// The next context finds every entry valid: no compilation, the pipeline cache and the
/// warm list loaded.
void expect_cache_whole_again() {
  auto c = fresh_context();
  EXPECT_GE(kiln::vulkan::wait_preloaded(c), 1u) << "the warm list was not replaced";
  run_a(c);
  const auto s = kiln::vulkan::cache(c);
  EXPECT_EQ(s.compilations, 0u) << "the SPIR-V entry was not replaced";
  EXPECT_TRUE(s.pipeline_cache_loaded) << "the pipeline cache was not replaced";
  EXPECT_EQ(s.disk_rejected, 0u);
}

}  // namespace

TEST_F(kernel_cache, size_fields_of_4_gib_cost_nothing_and_are_replaced) {
  temp_cache cache("huge");
  run_a_and_close();
  std::size_t poked = 0;
  for (const char* ext : {".spv", ".pipeline", ".warm"}) {
    for (const auto& p : cache.files(ext)) {
      std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
      const std::uint64_t huge = std::uint64_t(1) << 32;
      f.seekp(24);
      f.write(reinterpret_cast<const char*>(&huge), 8);
      ++poked;
    }
  }
  ASSERT_GE(poked, 3u);
  {
    const auto t0 = std::chrono::steady_clock::now();
    auto c = fresh_context();
    kiln::vulkan::wait_preloaded(c);
    run_a(c);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(seconds, 10.0) << "a context start read the size fields";
    const auto s = kiln::vulkan::cache(c);
    EXPECT_GE(s.disk_rejected, 3u);
    EXPECT_GE(s.compilations, 1u);
  }
  expect_cache_whole_again();
}

TEST_F(kernel_cache, fifos_in_place_of_cache_files_block_nothing_and_are_replaced) {
  temp_cache cache("fifo");
  run_a_and_close();
  std::vector<fs::path> fifos;
  for (const char* ext : {".spv", ".pipeline", ".warm"}) {
    for (const auto& p : cache.files(ext)) {
      fs::remove(p);
      ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
      fifos.push_back(p);
    }
  }
  ASSERT_GE(fifos.size(), 3u);
  // The context on another thread, with a watchdog: should it block in open(), opening
  // the FIFOs for writing releases it, and the test fails instead of hanging the suite.
  auto started = std::async(std::launch::async, [] {
    auto c = fresh_context();
    kiln::vulkan::wait_preloaded(c);
    run_a(c);
    return kiln::vulkan::cache(c);
  });
  for (int i = 0; started.wait_for(std::chrono::seconds(30)) != std::future_status::ready; ++i) {
    if (i == 0) ADD_FAILURE() << "a context blocked on a FIFO in its cache directory";
    for (const auto& p : fifos) {
      const int fd = ::open(p.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
  }
  const auto s = started.get();
  EXPECT_GE(s.disk_rejected, 3u);
  for (const auto& p : fifos) EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(p))) << p << " was not replaced";
  expect_cache_whole_again();
}

TEST_F(kernel_cache, garbage_spirv_with_a_valid_checksum_is_evicted_and_rebuilt) {
  temp_cache cache("garbage");
  for (int variant = 0; variant < 3; ++variant) {
    run_a_and_close();
    const auto spv = cache.files(".spv");
    ASSERT_GE(spv.size(), 1u);
    auto g = kiln_test::rng();
    for (const auto& p : spv) {
      entry e = read_entry(p);
      std::vector<std::uint32_t> words(e.payload.size() / 4);
      std::memcpy(words.data(), e.payload.data(), words.size() * 4);
      if (variant == 0) {
        for (std::size_t i = 5; i < words.size(); ++i) words[i] = std::uint32_t(g());  // SPIR-V header, then noise
      } else if (variant == 1) {
        words.resize(words.size() / 2);  // a module cut in the middle
      } else {
        words.assign(64, 0x07230203u);  // only magic numbers
      }
      forge_entry(p, e.key, std::as_bytes(std::span(words)));
    }
    {
      auto c = fresh_context();
      kiln::vulkan::wait_preloaded(c);
      run_a(c);  // right, and no validation message: the driver never saw the garbage
      const auto s = kiln::vulkan::cache(c);
      EXPECT_GE(s.spirv_rejected, 1u) << variant;
      EXPECT_GE(s.compilations, 1u) << variant;
    }
    expect_cache_whole_again();
  }
}

TEST_F(kernel_cache, another_kernels_spirv_under_this_kernels_key_is_evicted_and_rebuilt) {
  temp_cache cache("foreign");
  run_a_and_close();
  const auto a_files = cache.files(".spv");
  {
    auto c = fresh_context();
    run_b(c);
  }
  std::vector<fs::path> b_files;
  for (const auto& p : cache.files(".spv"))
    if (!a_files.contains(p)) b_files.push_back(p);
  ASSERT_EQ(b_files.size(), 1u);
  const entry b = read_entry(b_files[0]);
  for (const auto& p : a_files) forge_entry(p, read_entry(p).key, b.payload);  // B's module, A's key
  {
    auto c = fresh_context();
    kiln::vulkan::wait_preloaded(c);
    run_a(c);
    const auto s = kiln::vulkan::cache(c);
    EXPECT_GE(s.spirv_rejected, 1u);
    EXPECT_GE(s.compilations, 1u);
  }
  expect_cache_whole_again();
  auto c = fresh_context();
  run_b(c);  // B's own entry was never touched
  EXPECT_EQ(kiln::vulkan::cache(c).compilations, 0u);
}

TEST_F(kernel_cache, pipeline_cache_blobs_of_another_device_or_none_are_not_given_to_the_driver) {
  temp_cache cache("pipeline_blob");
  for (int variant = 0; variant < 5; ++variant) {
    run_a_and_close();
    const auto blobs = cache.files(".pipeline");
    ASSERT_EQ(blobs.size(), 1u);
    entry e = read_entry(*blobs.begin());
    ASSERT_GE(e.payload.size(), 32u);
    std::uint32_t field = 0;
    switch (variant) {
      case 0:  // header length past the blob
        field = 0xffffffffu;
        std::memcpy(e.payload.data(), &field, 4);
        break;
      case 1:  // another pipeline-cache UUID (another driver build)
        e.payload[20] ^= std::byte{0x5a};
        break;
      case 2:  // another device id
        std::memcpy(&field, e.payload.data() + 12, 4);
        field ^= 0x1234u;
        std::memcpy(e.payload.data() + 12, &field, 4);
        break;
      case 3:  // cut inside the header
        e.payload.resize(20);
        break;
      default:  // another header version
        field = 7;
        std::memcpy(e.payload.data() + 4, &field, 4);
        break;
    }
    forge_entry(*blobs.begin(), e.key, e.payload);
    {
      auto c = fresh_context();
      run_a(c);
      const auto s = kiln::vulkan::cache(c);
      EXPECT_FALSE(s.pipeline_cache_loaded) << variant;
      EXPECT_TRUE(s.pipeline_cache_rejected) << variant;
    }
    expect_cache_whole_again();
  }
}

TEST_F(kernel_cache, cached_spirv_the_driver_refuses_is_evicted_and_rebuilt_from_source) {
  temp_cache cache("refused");
  kiln_test::scoped_env no_preload("KILN_CACHE_PRELOAD", "off");  // the statement builds the pipeline
  run_a_and_close();
  faults::scope disarm;
  {
    auto c = fresh_context();
    faults::arm(faults::pipeline_creation);  // the pipeline from the cached SPIR-V fails
    run_a(c);
    EXPECT_EQ(faults::fired(faults::pipeline_creation), 1u);
    const auto s = kiln::vulkan::cache(c);
    EXPECT_EQ(s.compilations, 1u);
    EXPECT_GE(s.disk_evicted, 1u);
  }
  auto c = fresh_context();
  run_a(c);
  EXPECT_EQ(kiln::vulkan::cache(c).compilations, 0u) << "the rebuilt entry was not stored";
}

TEST(spirv_fits, accepts_a_kernels_own_module_and_rejects_mismatched_interfaces) {
  namespace vk = kiln::detail::vk;
  // Hand-assembled: OpCapability Shader; OpMemoryModel Logical GLSL450;
  // OpEntryPoint GLCompute %main "main"; one storage buffer at set 0, binding 1.
  const auto module = [](std::uint32_t model, std::uint32_t set, std::uint32_t storage_class) {
    std::vector<std::uint32_t> w = {0x07230203u, 0x00010500u, 0, 20, 0};
    auto op = [&](std::uint32_t code, std::initializer_list<std::uint32_t> operands) {
      w.push_back(std::uint32_t(operands.size() + 1) << 16 | code);
      w.insert(w.end(), operands);
    };
    op(17, {1});                              // OpCapability Shader
    op(14, {0, 1});                           // OpMemoryModel Logical GLSL450
    op(15, {model, 2, 0x6e69616du, 0});       // OpEntryPoint model %2 "main"
    op(71, {5, 34, set});                     // OpDecorate %5 DescriptorSet set
    op(71, {5, 33, 1});                       // OpDecorate %5 Binding 1
    op(21, {6, 32, 0});                       // %6 = OpTypeInt 32 0
    op(30, {7, 6});                           // %7 = OpTypeStruct %6
    op(32, {8, storage_class, 7});            // %8 = OpTypePointer sc %7
    op(59, {8, 5, storage_class});            // %5 = OpVariable %8 sc
    op(19, {3});                              // %3 = OpTypeVoid
    op(33, {4, 3});                           // %4 = OpTypeFunction %3
    op(54, {3, 2, 0, 4});                     // %2 = OpFunction %3 None %4
    op(248, {9});                             // %9 = OpLabel
    op(253, {});                              // OpReturn
    op(56, {});                               // OpFunctionEnd
    return w;
  };
  const vk::define none[1] = {};
  vk::kernel_spec k{"k", "", std::span(none, 0), 2, 0};
  EXPECT_TRUE(vk::spirv_fits(module(5, 0, 12), k));
  EXPECT_FALSE(vk::spirv_fits(module(0, 0, 12), k)) << "a vertex shader";
  EXPECT_FALSE(vk::spirv_fits(module(5, 1, 12), k)) << "set 1";
  EXPECT_FALSE(vk::spirv_fits(module(5, 0, 0), k)) << "a texel view where k has a storage buffer";
  k.texel_bindings = 0b10;
  EXPECT_TRUE(vk::spirv_fits(module(5, 0, 0), k));
  k.bindings = 1;
  EXPECT_FALSE(vk::spirv_fits(module(5, 0, 0), k)) << "binding 1 of a one-binding kernel";
  k.bindings = 2;
  auto w = module(5, 0, 0);
  for (std::size_t n = 0; n < w.size(); ++n) {
    EXPECT_FALSE(vk::spirv_fits(std::span(w).first(n), k)) << "cut to " << n << " words";
  }
  w[1] = 0x00020000u;
  EXPECT_FALSE(vk::spirv_fits(w, k)) << "SPIR-V 2.0";
}

// A kernel whose parameters went to a storage buffer (past the push-constant limit) has
// one binding more than its operands: its cached SPIR-V must still fit it.
TEST_F(kernel_cache, a_kernel_with_a_parameter_buffer_loads_from_disk) {
  temp_cache cache("params");
  auto options = [] {
    auto o = kiln_test::validated();
    o.max_push_constants = 16;  // every generated kernel here takes its parameters from a buffer
    return o;
  };
  auto run = [](kiln::context<kiln::vulkan>& c) {
    std::vector<float> h(100);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = float(i) - 50.0f;
    auto a = kiln::from_host(c, {100}, h), b = kiln::from_host(c, {100}, h);
    auto y = kiln::empty<float>(c, {100});
    y = a * b + 0.25f;
    const auto got = y.to_host();
    for (std::size_t i = 0; i < h.size(); ++i) EXPECT_EQ(got[i], h[i] * h[i] + 0.25f) << i;
  };
  {
    kiln::context<kiln::vulkan> c{options()};
    run(c);
    EXPECT_GE(kiln::vulkan::cache(c).compilations, 1u);
  }
  kiln::context<kiln::vulkan> c{options()};
  kiln::vulkan::wait_preloaded(c);
  run(c);
  const auto s = kiln::vulkan::cache(c);
  EXPECT_EQ(s.compilations, 0u);
  EXPECT_EQ(s.spirv_rejected, 0u) << "the parameter buffer's binding was taken for a foreign one";
  EXPECT_EQ(s.disk_evicted, 0u);
}
