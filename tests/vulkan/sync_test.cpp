// tests/vulkan/sync_test.cpp — hazards (RAW chains, WAR, WAW, views of one buffer),
// barrier economy, several threads on one context, async reads.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "vulkan_fixture.hpp"

namespace {

using kiln_test::validated;
using sync = kiln_test::vulkan_test;
using vk = kiln::vulkan;

std::vector<float> iota(std::size_t n, float start = 0.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

TEST_F(sync, independent_writes_need_no_barrier) {
  auto& c = ctx();
  std::vector<kiln::tensor<float, kiln::vulkan>> ts;
  for (int i = 0; i < 8; ++i) ts.push_back(kiln::empty<float>(c, {257}));
  const auto before = vk::stream(c);
  for (int i = 0; i < 8; ++i) ts[static_cast<std::size_t>(i)] = static_cast<float>(i);
  const auto after = vk::stream(c);
  EXPECT_EQ(after.dispatches - before.dispatches, 8u);
  EXPECT_EQ(after.barriers - before.barriers, 0u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(ts[static_cast<std::size_t>(i)].to_host()[256], static_cast<float>(i));
}

TEST_F(sync, a_write_read_chain_gets_one_barrier_per_link) {
  auto& c = ctx();
  auto a = kiln::empty<float>(c, {1000});
  auto b = kiln::empty<float>(c, {1000});
  auto d = kiln::empty<float>(c, {1000});
  auto e = kiln::empty<float>(c, {1000});
  const auto before = vk::stream(c);
  a = 3.0f;  // no hazard: a is fresh
  b = a;     // RAW on a
  d = b;     // RAW on b
  e = d;     // RAW on d
  const auto after = vk::stream(c);
  EXPECT_EQ(after.barriers - before.barriers, 3u);
  const auto h = e.to_host();
  EXPECT_EQ(h.front(), 3.0f);
  EXPECT_EQ(h.back(), 3.0f);
}

TEST_F(sync, write_after_read_keeps_the_old_values_for_the_reader) {
  auto& c = ctx();
  auto a = kiln::full(c, {4099}, 1.0f);
  auto b = kiln::empty<float>(c, {4099});
  b = a;      // reads a
  a = 2.0f;   // WAR: must wait for the read
  a = 4.0f;   // WAW
  b = b;      // in place: reads and writes b
  EXPECT_EQ(b.to_host()[4098], 1.0f);
  EXPECT_EQ(a.to_host()[0], 4.0f);
}

TEST_F(sync, views_of_one_buffer_are_ordered) {
  auto& c = ctx();
  auto base = kiln::zeros<float>(c, {6, 8});
  auto top = kiln::slice(base, 0, 0, 3);
  auto bottom = kiln::slice(base, 0, 3, 6);
  auto odd_cols = kiln::slice(base, 1, 1, 8, 2);
  top = 1.0f;
  bottom = top;       // same buffer, disjoint views: read and write in one dispatch
  odd_cols = 5.0f;    // overlaps both
  auto t = kiln::transpose(base).to_host();  // {8, 6}
  for (int r = 0; r < 6; ++r) {
    for (int col = 0; col < 8; ++col) {
      EXPECT_EQ(t[static_cast<std::size_t>(col * 6 + r)], col % 2 ? 5.0f : 1.0f) << r << "," << col;
    }
  }
}

TEST_F(sync, an_overlapping_self_copy_goes_through_a_temporary) {
  auto& c = ctx();
  auto sq = kiln::from_host(c, {3, 3}, iota(9));
  sq = kiln::transpose(sq);
  EXPECT_EQ(sq.to_host(), (std::vector<float>{0, 3, 6, 1, 4, 7, 2, 5, 8}));
}

void hammer_from_threads(kiln::context<kiln::vulkan>& c) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 20; ++i) {
          const auto h = iota(12 * 5, static_cast<float>(t * 1000 + i));
          auto x = kiln::from_host(c, {12, 5}, h);
          auto y = kiln::transpose(x).to_host();
          auto z = kiln::full(c, {33}, static_cast<float>(t)).to_host();
          if (y[1] != h[5] || y[59] != h[59] || z[32] != static_cast<float>(t)) ++failures;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(vk::stream(c).dispatches, 4u * 20u * 2u);
}

TEST_F(sync, several_threads_share_one_context) {
  kiln::context<kiln::vulkan> c{validated()};
  hammer_from_threads(c);
}

TEST_F(sync, several_threads_share_one_context_through_the_staging_ring) {
  kiln::vulkan::options o = validated();
  o.zero_copy = false;
  o.staging_size = 64 * 1024;
  o.batch_commands = 8;  // full batches are submitted while ring ranges are in use
  kiln::context<kiln::vulkan> c{o};
  hammer_from_threads(c);
}

TEST_F(sync, async_reads_return_a_waitable_handle) {
  auto& c = ctx();
  auto x = kiln::from_host(c, {4, 7}, iota(28));
  auto h = vk::read_async(kiln::transpose(x));
  h.wait();
  EXPECT_TRUE(h.ready());
  const auto v = h.get();
  ASSERT_EQ(v.size(), 28u);
  EXPECT_EQ(v[1], 7.0f);
  EXPECT_EQ(v[27], 27.0f);
}

TEST_F(sync, synchronize_waits_for_everything) {
  auto& c = ctx();
  auto a = kiln::empty<float>(c, {1 << 16});
  for (int i = 0; i < 10; ++i) a = static_cast<float>(i);
  c.synchronize();
  const auto after_sync = vk::stream(c);
  EXPECT_GE(after_sync.submits, 1u);
  EXPECT_EQ(a.to_host()[65535], 9.0f);
  EXPECT_EQ(vk::stream(c).submits, after_sync.submits);  // nothing was left to submit or wait for
}

TEST_F(sync, batches_are_submitted_when_full) {
  kiln::vulkan::options o = validated();
  o.batch_commands = 16;
  kiln::context<kiln::vulkan> c{o};
  auto a = kiln::empty<float>(c, {64});
  for (int i = 0; i < 40; ++i) a = static_cast<float>(i);
  EXPECT_EQ(vk::stream(c).submits, 2u);  // 16 + 16 submitted, 8 still recording
  EXPECT_EQ(a.to_host()[63], 39.0f);
  EXPECT_EQ(vk::stream(c).submits, 3u);
}

TEST_F(sync, a_chain_of_fused_statements_reads_each_result_after_it_is_written) {
  // RAW hazards between generated kernels: each statement reads the previous one's output.
  auto& c = ctx();
  auto x = kiln::full(c, {4099}, 1.0f);
  auto y = kiln::empty<float>(c, {4099});
  for (int i = 0; i < 20; ++i) {
    y = x * 2.0f + 1.0f;  // 3, 7, 15, ...
    x = y - 0.0f;
  }
  for (float v : x.to_host()) ASSERT_EQ(v, 2097151.0f);  // 2^21 - 1
}

}  // namespace
