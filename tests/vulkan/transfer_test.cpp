// tests/vulkan/transfer_test.cpp — host transfers: zero-copy on unified memory, the
// staging ring elsewhere (forced on lavapipe), to_host of views, host writes after GPU reads.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "random.hpp"
#include "vulkan_fixture.hpp"

namespace {

using kiln_test::validated;
using transfer = kiln_test::vulkan_test;
using vk = kiln::vulkan;

std::vector<float> random_floats(std::size_t n) {
  auto g = kiln_test::rng();
  return kiln_test::uniform(g, n);
}

kiln::vulkan::options staged() {
  kiln::vulkan::options o = validated();
  o.zero_copy = false;
  o.staging_size = 256 * 1024;  // small, so transfers wrap the ring
  return o;
}

TEST_F(transfer, unified_memory_is_zero_copy) {
  auto& c = ctx();
  if (!vk::device(c).unified_memory) GTEST_SKIP() << "the device has no unified memory";
  ASSERT_TRUE(c.state()->zero_copy());
  const auto h = random_floats(10000);
  const auto before = vk::stream(c);
  auto x = kiln::from_host(c, {100, 100}, h);
  ASSERT_NE(x.storage()->mapped(), nullptr);
  EXPECT_EQ(std::memcmp(x.storage()->mapped(), h.data(), h.size() * sizeof(float)), 0);  // the bytes, in place
  EXPECT_EQ(x.to_host(), h);
  const auto after = vk::stream(c);
  EXPECT_EQ(after.transfers, before.transfers);  // no staging copies
  EXPECT_EQ(after.dispatches, before.dispatches);
}

TEST_F(transfer, the_staging_ring_carries_transfers_without_zero_copy) {
  kiln::context<kiln::vulkan> c{staged()};
  EXPECT_FALSE(c.state()->zero_copy());
  const auto h = random_floats(300000);  // 1.2 MB: five trips through a 256 KiB ring
  auto x = kiln::from_host(c, {300000}, h);
  EXPECT_EQ(x.storage()->mapped(), nullptr);
  EXPECT_EQ(x.to_host(), h);
  EXPECT_GE(vk::stream(c).transfers, 10u);
  auto y = kiln::slice(kiln::reshape(x, {600, 500}), 1, 3, 400, 7);
  const auto v = y.to_host();
  ASSERT_EQ(v.size(), 600u * 57u);
  EXPECT_EQ(v[57 + 2], h[500 + 3 + 2 * 7]);
  auto r = vk::read_async(x);
  EXPECT_EQ(r.get(), h);
}

void host_write_after_gpu_read(kiln::context<kiln::vulkan>& c) {
  const auto h1 = random_floats(5000);
  auto h2 = h1;
  for (auto& v : h2) v += 1.0f;
  auto a = kiln::from_host(c, {5000}, h1);
  auto b = kiln::empty<float>(c, {5000});
  b = a;  // recorded, reads a
  kiln::backend_traits<kiln::vulkan>::upload(*a.storage(), 0, h2.data(), h2.size() * sizeof(float));
  EXPECT_EQ(b.to_host(), h1);
  EXPECT_EQ(a.to_host(), h2);
}

TEST_F(transfer, host_writes_wait_for_gpu_reads_zero_copy) { host_write_after_gpu_read(ctx()); }

TEST_F(transfer, host_writes_wait_for_gpu_reads_staged) {
  kiln::context<kiln::vulkan> c{staged()};
  host_write_after_gpu_read(c);
}

TEST_F(transfer, to_host_of_transposed_sliced_and_broadcast_views) {
  auto& c = ctx();
  const auto h = random_floats(4 * 5 * 6);
  auto x = kiln::from_host(c, {4, 5, 6}, h);
  auto at = [&](int i, int j, int k) { return h[static_cast<std::size_t>((i * 5 + j) * 6 + k)]; };

  const auto t = kiln::transpose(x).to_host();  // {6, 5, 4}
  for (int k = 0; k < 6; ++k)
    for (int j = 0; j < 5; ++j)
      for (int i = 0; i < 4; ++i) EXPECT_EQ(t[static_cast<std::size_t>((k * 5 + j) * 4 + i)], at(i, j, k));

  const auto p = kiln::permute(x, {1, 0, 2}).to_host();  // {5, 4, 6}
  EXPECT_EQ(p[static_cast<std::size_t>((2 * 4 + 3) * 6 + 5)], at(3, 2, 5));

  const auto s = kiln::slice(kiln::slice(x, 2, 1, 6, 2), 0, 1, 3).to_host();  // {2, 5, 3}
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(s[static_cast<std::size_t>((i * 5 + j) * 3 + k)], at(i + 1, j, 1 + 2 * k));

  auto row = kiln::slice(x, 0, 2, 3);  // {1, 5, 6}
  const auto b = kiln::broadcast_to(row, {3, 5, 6}).to_host();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(b[static_cast<std::size_t>((r * 5 + 4) * 6 + 5)], at(2, 4, 5));

  auto col = kiln::slice(kiln::slice(x, 0, 0, 1), 2, 0, 1);  // {1, 5, 1}
  const auto bc = kiln::broadcast_to(kiln::squeeze(col, 0), {5, 7}).to_host();
  EXPECT_EQ(bc[static_cast<std::size_t>(3 * 7 + 6)], at(0, 3, 0));
}

TEST_F(transfer, copy_to_checks_and_fills_a_span) {
  auto& c = ctx();
  const auto h = random_floats(64);
  auto x = kiln::from_host(c, {8, 8}, h);
  std::vector<float> out(64);
  kiln::transpose(x).copy_to(out);
  EXPECT_EQ(out[1], h[8]);
  std::vector<float> wrong(3);
  EXPECT_THROW(x.copy_to(wrong), kiln::shape_error);
}

}  // namespace
