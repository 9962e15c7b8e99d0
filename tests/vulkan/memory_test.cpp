// tests/vulkan/memory_test.cpp — the sub-allocator: reuse, stats, size classes, block
// limits, the memory limit (OOM and recovery), trimming, and deferred frees.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "vulkan_fixture.hpp"

namespace {

using kiln_test::scoped_env;
using kiln_test::validated;
using memory = kiln_test::vulkan_test;
using vk = kiln::vulkan;
using ftensor = kiln::tensor<float, kiln::vulkan>;

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

kiln::vulkan::options small_blocks(std::size_t block, std::optional<std::size_t> limit = std::nullopt) {
  kiln::vulkan::options o = validated();
  o.block_size = block;
  o.memory_limit = limit;
  return o;
}

TEST_F(memory, freed_ranges_are_reused_without_new_device_memory) {
  kiln::context<kiln::vulkan> c{small_blocks(4 * MiB)};
  { auto t = kiln::empty<float>(c, {1024}); }
  const auto s1 = vk::memory(c);
  EXPECT_EQ(s1.misses, 1u);
  EXPECT_EQ(s1.live_allocations, 0u);
  for (int i = 0; i < 20; ++i) {
    auto t = kiln::empty<float>(c, {1024});
  }
  const auto s2 = vk::memory(c);
  EXPECT_EQ(s2.misses, 1u);
  EXPECT_EQ(s2.hits, s1.hits + 20);
  EXPECT_EQ(s2.reserved, s1.reserved);
  EXPECT_EQ(s2.blocks, 1u);
}

TEST_F(memory, stats_count_use_peak_and_live_allocations) {
  kiln::context<kiln::vulkan> c{small_blocks(4 * MiB)};
  std::optional<ftensor> a(kiln::empty<float>(c, {1000}));  // 4000 bytes -> the 4096 class
  auto s = vk::memory(c);
  EXPECT_EQ(s.in_use, 4096u);
  EXPECT_EQ(s.live_allocations, 1u);
  {
    auto b = kiln::empty<float>(c, {10000});
    s = vk::memory(c);
    EXPECT_GE(s.in_use, 4096u + 40000u);
    EXPECT_LE(s.in_use, 4096u + 40000u * 5 / 4 + 256);  // classes waste at most a quarter
    EXPECT_EQ(s.live_allocations, 2u);
  }
  const auto peak = vk::memory(c).peak;
  a.reset();
  s = vk::memory(c);
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.peak, peak);
  EXPECT_EQ(s.live_allocations, 0u);
  EXPECT_EQ(s.reserved, 4 * MiB);  // blocks stay reserved until trimmed
  EXPECT_EQ(vk::trim(c), 4 * MiB);
  EXPECT_EQ(vk::memory(c).reserved, 0u);
}

TEST_F(memory, blocks_respect_the_device_limits_and_large_tensors_are_dedicated) {
  {
    kiln::context<kiln::vulkan> c{small_blocks(std::size_t(1) << 45)};  // asks for 32 TiB blocks
    const auto& d = vk::device(c);
    EXPECT_LE(vk::memory(c).block_size, std::min(d.max_allocation_size, d.max_buffer_size));
  }
  kiln::context<kiln::vulkan> c{small_blocks(1 * MiB)};
  EXPECT_EQ(vk::memory(c).block_size, 1 * MiB);
  auto big = kiln::empty<float>(c, {600 * 256});  // 600 KiB > half a block: its own allocation
  auto s = vk::memory(c);
  EXPECT_EQ(s.dedicated, 1u);
  EXPECT_EQ(s.blocks, 0u);
  std::vector<ftensor> small;
  for (int i = 0; i < 3; ++i) small.push_back(kiln::empty<float>(c, {300 * 256}));  // 300 KiB: 320 KiB class
  s = vk::memory(c);
  EXPECT_EQ(s.blocks, 1u);
  small.push_back(kiln::empty<float>(c, {300 * 256}));
  EXPECT_EQ(vk::memory(c).blocks, 2u);
  // values survive in sub-allocated neighbours
  for (std::size_t i = 0; i < small.size(); ++i) small[i] = static_cast<float>(i);
  for (std::size_t i = 0; i < small.size(); ++i) EXPECT_EQ(small[i].to_host()[76799], static_cast<float>(i));
}

TEST_F(memory, a_tensor_above_the_per_allocation_limit_is_out_of_memory) {
  const auto& d = vk::device(ctx());
  const std::size_t limit = std::min(d.max_allocation_size, d.max_buffer_size);
  try {
    auto t = kiln::empty<std::uint8_t>(ctx(), {static_cast<kiln::index_t>(limit + 4096)});
    FAIL() << "expected kiln::out_of_memory";
  } catch (const kiln::out_of_memory& e) {
    EXPECT_EQ(e.requested(), limit + 4096);
    EXPECT_NE(std::string(e.what()).find("per-allocation limit"), std::string::npos) << e.what();
  }
}

TEST_F(memory, the_memory_limit_gives_out_of_memory_and_the_context_recovers) {
  kiln::context<kiln::vulkan> c{small_blocks(2 * MiB, 8 * MiB)};
  EXPECT_EQ(vk::memory(c).limit, 8 * MiB);
  std::optional<ftensor> a(kiln::full(c, {6 * 256 * 1024}, 1.0f));  // 6 MiB
  try {
    auto b = kiln::empty<float>(c, {6 * 256 * 1024});
    FAIL() << "expected kiln::out_of_memory";
  } catch (const kiln::out_of_memory& e) {
    EXPECT_EQ(e.requested(), 6 * MiB);
    EXPECT_LE(e.available(), 2 * MiB);
    EXPECT_NE(std::string(e.what()).find("memory limit"), std::string::npos) << e.what();
  }
  // still usable: small work, and the big tensor's values
  EXPECT_EQ(kiln::full(c, {16}, 3.0f).to_host()[15], 3.0f);
  EXPECT_EQ(a->to_host()[12345], 1.0f);
  a.reset();
  auto b = kiln::full(c, {6 * 256 * 1024}, 2.0f);
  EXPECT_EQ(b.to_host()[6 * 256 * 1024 - 1], 2.0f);
}

TEST_F(memory, free_blocks_are_trimmed_and_the_request_retried) {
  kiln::context<kiln::vulkan> c{small_blocks(2 * MiB, 8 * MiB)};
  {
    std::vector<ftensor> ts;
    for (int i = 0; i < 8; ++i) ts.push_back(kiln::empty<float>(c, {768 * 256}));  // 768 KiB: two per block
    EXPECT_EQ(vk::memory(c).blocks, 4u);
    EXPECT_EQ(vk::memory(c).reserved, 8 * MiB);
  }
  EXPECT_EQ(vk::memory(c).reserved, 8 * MiB);  // idle blocks, still reserved
  auto big = kiln::full(c, {6 * 256 * 1024}, 5.0f);  // needs the idle blocks back
  const auto s = vk::memory(c);
  EXPECT_EQ(s.blocks, 0u);
  EXPECT_EQ(s.dedicated, 1u);
  EXPECT_EQ(big.to_host()[100], 5.0f);
}

TEST_F(memory, memory_limit_from_the_environment) {
  {
    scoped_env e("KILN_VULKAN_MEMORY_LIMIT", "8M");
    kiln::context<kiln::vulkan> c{validated()};
    EXPECT_EQ(vk::memory(c).limit, 8 * MiB);
    EXPECT_LE(vk::memory(c).block_size, 8 * MiB);
  }
  {
    scoped_env e("KILN_VULKAN_MEMORY_LIMIT", "lots");
    EXPECT_THROW(kiln::context<kiln::vulkan>{validated()}, kiln::error);
  }
  EXPECT_EQ(kiln::detail::vk::parse_bytes("512KiB", "x"), 512 * KiB);
  EXPECT_EQ(kiln::detail::vk::parse_bytes("2G", "x"), std::size_t(2) << 30);
}

TEST_F(memory, memory_limits_beyond_64_bits_throw_instead_of_wrapping) {
  EXPECT_EQ(kiln::detail::vk::parse_bytes("17179869183G", "x"), std::size_t(17179869183) << 30);
  EXPECT_THROW((void)kiln::detail::vk::parse_bytes("17179869184G", "x"), kiln::error);  // 2^64 bytes
  EXPECT_THROW((void)kiln::detail::vk::parse_bytes("99999999999G", "x"), kiln::error);
  EXPECT_THROW((void)kiln::detail::vk::parse_bytes("99999999999999999999999", "x"), kiln::error);
  scoped_env e("KILN_VULKAN_MEMORY_LIMIT", "99999999999G");
  EXPECT_THROW(kiln::context<kiln::vulkan>{validated()}, kiln::error);
}

TEST_F(memory, a_tensor_destroyed_while_in_flight_is_freed_after_its_work) {
  kiln::context<kiln::vulkan> c{small_blocks(16 * MiB)};
  const kiln::index_t n = 1 << 20;
  auto dst = kiln::empty<float>(c, {n});
  {
    auto src = kiln::full(c, {n}, 7.0f);  // fill recorded
    auto mid = kiln::empty<float>(c, {n});
    mid = src;                            // copy recorded, reading src
    dst = mid;                            // reads mid
  }  // src and mid die with their work recorded, not finished
  EXPECT_EQ(vk::memory(c).live_allocations, 3u);  // their ranges wait for the GPU
  const auto h = dst.to_host();
  EXPECT_EQ(h.front(), 7.0f);
  EXPECT_EQ(h.back(), 7.0f);
  c.synchronize();
  EXPECT_EQ(vk::memory(c).live_allocations, 1u);
  // the freed ranges are reused
  const auto hits = vk::memory(c).hits;
  auto again = kiln::empty<float>(c, {n});
  EXPECT_EQ(vk::memory(c).hits, hits + 1);
}

}  // namespace
