// tests/vulkan/peer_copy_test.cpp — kiln::copy_to between two Vulkan contexts (the copy a
// pipeline split makes between its stages, kiln/models/pipeline.hpp) on both of its paths:
// device to device through memory the contexts share (VK_KHR_external_memory_fd; on
// lavapipe two contexts of its one device), and staged through the host (forced with
// options::external_memory = false or KILN_VULKAN_EXTERNAL_MEMORY=off). Odd sizes, empty
// and 1-element tensors, every dtype, strided and offset views, copies of several chunks
// through a small shared buffer, ordering against kernels on both sides, the shared buffer
// growing and outliving a context, a failed shared allocation falling back to the host and
// a failed submit reported with the op, the tensor and the devices. vulkan::peers proves
// which path ran; the fixture fails any validation message.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>  // /proc/self/fd: no exported fd left open
#include <string>
#include <thread>
#include <vector>

#include "vulkan_fixture.hpp"

namespace {

using peer_copy = kiln_test::vulkan_test;
using faults = kiln::detail::vk::fault_injection;
using kiln_test::fresh_context;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// n distinct-ish values of T (every bit pattern of the element matters, so compare bytes).
template <class T>
std::vector<T> values(std::size_t n, unsigned seed) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned k = static_cast<unsigned>(i * 2654435761u + seed);
    if constexpr (std::is_integral_v<T>) {
      v[i] = static_cast<T>(k >> 7);
    } else {
      v[i] = T(static_cast<float>(k % 20011u) * 0.01f - 100.0f);
    }
  }
  return v;
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// Copies n elements of T from `from` to `to` and checks every byte on arrival.
template <class T>
void round_trip(kiln::context<kiln::vulkan>& from, kiln::context<kiln::vulkan>& to, std::size_t n, unsigned seed) {
  const auto v = values<T>(n, seed);
  const auto t = kiln::from_host(from, kiln::shape{static_cast<kiln::index_t>(n)}, std::span<const T>(v));
  const auto u = kiln::copy_to(to, t);
  EXPECT_TRUE(u.context() == to);
  EXPECT_EQ(u.shape(), t.shape());
  EXPECT_TRUE(same_bytes(u.to_host(), v)) << kiln::dtype_name_v<T> << " x " << n;
}

/// Every dtype at sizes that are no multiple of anything (and 0, 1); the count of
/// non-empty copies made.
std::uint64_t all_sizes_and_dtypes(kiln::context<kiln::vulkan>& a, kiln::context<kiln::vulkan>& b) {
  std::uint64_t copies = 0;
  unsigned seed = 1;
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(3), std::size_t(1001), std::size_t(65537),
                        std::size_t(300007)}) {
    round_trip<float>(a, b, n, seed++);
    round_trip<kiln::half>(a, b, n, seed++);
    round_trip<kiln::bfloat16>(a, b, n, seed++);
    round_trip<std::int32_t>(a, b, n, seed++);
    round_trip<std::int8_t>(a, b, n, seed++);
    round_trip<std::uint8_t>(b, a, n, seed++);  // the other way too
    if (n) copies += 6;
  }
  return copies;
}

TEST_F(peer_copy, two_contexts_of_one_device_share_memory) {
  auto a = fresh_context(), b = fresh_context();
  const auto& d = kiln::vulkan::device(a);
  if (!d.external_memory_fd) {
    GTEST_SKIP() << d.label() << " has no VK_KHR_external_memory_fd: " << kiln::vulkan::peer_refusal(a, b);
  }
  EXPECT_EQ(kiln::vulkan::peer_refusal(a, b), "");
  EXPECT_EQ(kiln::vulkan::peer_refusal(b, a), "");
  EXPECT_TRUE(has(kiln::vulkan::peer_refusal(a, a), "same context"));
  const auto b0 = kiln::vulkan::peers(b), a0 = kiln::vulkan::peers(a);
  const std::uint64_t copies = all_sizes_and_dtypes(a, b);
  const auto b1 = kiln::vulkan::peers(b), a1 = kiln::vulkan::peers(a);
  // the external path ran for every non-empty copy, in both directions; nothing was staged
  EXPECT_EQ(b1.external_copies - b0.external_copies + a1.external_copies - a0.external_copies, copies);
  EXPECT_EQ(a1.external_copies - a0.external_copies, copies / 6);  // the uint8 ones, b -> a
  EXPECT_EQ(b1.staged_copies + a1.staged_copies, 0u);
  EXPECT_GT(b1.external_bytes, b0.external_bytes);
  // one shared buffer a pair and direction, a side in each context
  EXPECT_EQ(a1.links, 2u);
  EXPECT_EQ(b1.links, 2u);
  EXPECT_GE(b1.link_bytes, std::size_t(1) << 20);
  // nothing left in use in either pool beyond what is alive here
  a.synchronize();
  b.synchronize();
}

TEST_F(peer_copy, several_chunks_through_a_small_shared_buffer) {
  kiln::vulkan::options o;
  o.peer_buffer_size = std::size_t(1) << 20;  // halves of 512 KiB: a 1.2 MB copy takes three
  auto a = fresh_context(o), b = fresh_context(o);
  if (!kiln::vulkan::peer_refusal(a, b).empty()) GTEST_SKIP() << kiln::vulkan::peer_refusal(a, b);
  for (std::size_t n : {std::size_t(131072), std::size_t(300007), std::size_t(1048579)}) {
    round_trip<float>(a, b, n, 7);
    round_trip<kiln::half>(a, b, n, 8);
  }
  EXPECT_EQ(kiln::vulkan::peers(b).external_copies, 6u);
  EXPECT_EQ(kiln::vulkan::peers(b).link_bytes, std::size_t(1) << 20);  // never grown past the cap
}

TEST_F(peer_copy, forced_through_the_host_by_option_and_environment) {
  kiln::vulkan::options off;
  off.external_memory = false;
  {
    auto a = fresh_context(), b = fresh_context(off);  // one side refusing is enough
    const std::string why = kiln::vulkan::peer_refusal(a, b);
    EXPECT_TRUE(has(why, "turned off")) << why;
    EXPECT_TRUE(has(why, "KILN_VULKAN_EXTERNAL_MEMORY")) << why;
    const std::uint64_t copies = all_sizes_and_dtypes(a, b);
    const auto pa = kiln::vulkan::peers(a), pb = kiln::vulkan::peers(b);
    EXPECT_EQ(pa.external_copies + pb.external_copies, 0u);
    EXPECT_EQ(pa.staged_copies + pb.staged_copies, copies);
    EXPECT_EQ(pa.links + pb.links, 0u);
  }
  {
    kiln_test::scoped_env env("KILN_VULKAN_EXTERNAL_MEMORY", "off");
    auto a = fresh_context(), b = fresh_context();
    EXPECT_TRUE(has(kiln::vulkan::peer_refusal(a, b), "turned off"));
    round_trip<float>(a, b, 4097, 3);
    EXPECT_EQ(kiln::vulkan::peers(b).staged_copies, 1u);
    EXPECT_EQ(kiln::vulkan::peers(b).external_copies, 0u);
  }
}

TEST_F(peer_copy, views_and_ordering_against_kernels_on_both_sides) {
  auto a = fresh_context(), b = fresh_context();
  if (!kiln::vulkan::peer_refusal(a, b).empty()) GTEST_SKIP() << kiln::vulkan::peer_refusal(a, b);
  std::vector<float> v(7 * 13);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i) - 40.0f;
  const auto x = kiln::from_host(a, kiln::shape{7, 13}, std::span<const float>(v));
  // a kernel on a writes the source, nobody waits: the copy is ordered after it
  auto y = kiln::empty<float>(a, {7, 13});
  y = x * 2.0f + 1.0f;
  auto u = kiln::copy_to(b, y);
  // the source overwritten right after: the copy already holds the old values
  y = x * 0.0f;
  // a kernel on b reads the copy, nobody waits: it is ordered after the copy's arrival
  auto z = kiln::empty<float>(b, {7, 13});
  z = u - 1.0f;
  const auto got = z.to_host();
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(got[i], v[i] * 2.0f) << i;
  // a transposed view (made contiguous on a first) and a slice at an offset
  const auto tt = kiln::copy_to(b, kiln::transpose(x, 0, 1));
  EXPECT_EQ(tt.shape(), kiln::shape({13, 7}));
  EXPECT_EQ(tt.to_host()[1], v[13]);
  const auto row = kiln::copy_to(b, kiln::slice(x, 0, 3, 4));
  EXPECT_EQ(row.shape(), kiln::shape({1, 13}));
  EXPECT_EQ(row.to_host()[0], v[3 * 13]);
  // the copy the other way lands in a tensor a kernel on a then uses
  const auto back = kiln::copy_to(a, z);
  auto w = kiln::empty<float>(a, {7, 13});
  w = back + x;
  const auto wh = w.to_host();
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(wh[i], v[i] * 3.0f) << i;
  EXPECT_EQ(kiln::vulkan::peers(b).external_copies, 3u);
  EXPECT_EQ(kiln::vulkan::peers(a).external_copies, 1u);
}

TEST_F(peer_copy, the_shared_buffer_grows_and_outlives_either_context) {
  auto a = fresh_context();
  {
    auto b = fresh_context();
    if (!kiln::vulkan::peer_refusal(a, b).empty()) GTEST_SKIP() << kiln::vulkan::peer_refusal(a, b);
    round_trip<float>(a, b, 10, 1);
    EXPECT_EQ(kiln::vulkan::peers(b).link_bytes, std::size_t(1) << 20);
    round_trip<float>(a, b, 1000003, 2);  // 4 MB: a larger buffer replaces the first
    round_trip<float>(a, b, 5, 3);        // and serves the small ones after
    const auto pb = kiln::vulkan::peers(b);
    EXPECT_EQ(pb.external_copies, 3u);
    EXPECT_EQ(pb.links, 1u);  // the first one's side went once its copies completed
    EXPECT_EQ(pb.link_bytes, std::size_t(8) << 20);
    EXPECT_EQ(kiln::vulkan::peers(a).links, 1u);
  }
  // b is gone: a's side of their buffer goes with a; copies to a new context work
  auto c = fresh_context();
  round_trip<std::int32_t>(a, c, 77, 4);
  EXPECT_EQ(kiln::vulkan::peers(c).external_copies, 1u);
  // the receiver goes first this time, then the sender copies to another one
  {
    auto d = fresh_context();
    round_trip<float>(c, d, 33, 5);
  }
  round_trip<float>(c, a, 33, 6);
  EXPECT_EQ(kiln::vulkan::peers(a).external_copies, 1u);
}

TEST_F(peer_copy, threads_copying_both_ways_at_once) {
  auto a = fresh_context(), b = fresh_context();
  if (!kiln::vulkan::peer_refusal(a, b).empty()) GTEST_SKIP() << kiln::vulkan::peer_refusal(a, b);
  // two threads a -> b (one link, taken in turn; the second grows it), one b -> a (the
  // other link): no lock is held across the two contexts, so nothing deadlocks
  const auto work = [](kiln::context<kiln::vulkan>& from, kiln::context<kiln::vulkan>& to, std::size_t n,
                       unsigned seed, int& bad) {
    for (int i = 0; i < 12; ++i) {
      const auto v = values<float>(n + static_cast<std::size_t>(i), seed + static_cast<unsigned>(i));
      const auto t = kiln::from_host(from, kiln::shape{static_cast<kiln::index_t>(v.size())}, std::span<const float>(v));
      if (!same_bytes(kiln::copy_to(to, t).to_host(), v)) ++bad;
    }
  };
  int bad1 = 0, bad2 = 0, bad3 = 0;
  std::thread t1([&] { work(a, b, 1000, 100, bad1); });
  std::thread t2([&] { work(a, b, 400000, 200, bad2); });
  std::thread t3([&] { work(b, a, 70001, 300, bad3); });
  t1.join();
  t2.join();
  t3.join();
  EXPECT_EQ(bad1 + bad2 + bad3, 0);
  EXPECT_EQ(kiln::vulkan::peers(b).external_copies, 24u);
  EXPECT_EQ(kiln::vulkan::peers(a).external_copies, 12u);
}

#if defined(__linux__)
std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST_F(peer_copy, no_fd_left_open_and_every_pool_range_returned) {
  // a pair made, used both ways (and grown), then destroyed, receiver first or sender
  // first: once the loader and driver are warm, the process holds no more fds than before
  const auto cycle = [](bool receiver_first) {
    auto a = std::make_unique<kiln::context<kiln::vulkan>>(kiln_test::validated());
    auto b = std::make_unique<kiln::context<kiln::vulkan>>(kiln_test::validated());
    round_trip<float>(*a, *b, 100, 1);
    round_trip<float>(*a, *b, 600000, 2);
    round_trip<std::int32_t>(*b, *a, 3000, 3);
    a->synchronize();
    b->synchronize();
    EXPECT_EQ(kiln::vulkan::memory(*a).live_allocations, 0u);
    EXPECT_EQ(kiln::vulkan::memory(*b).live_allocations, 0u);
    if (receiver_first) b.reset();
    a.reset();
    b.reset();
  };
  cycle(true);
  const std::size_t before = open_fds();
  for (int i = 0; i < 3; ++i) cycle(i % 2 == 0);
  EXPECT_EQ(open_fds(), before);
}
#endif

TEST_F(peer_copy, a_failed_shared_allocation_falls_back_to_the_host) {
  faults::scope guard;
  auto a = fresh_context(), b = fresh_context();
  if (!kiln::vulkan::peer_refusal(a, b).empty()) GTEST_SKIP() << kiln::vulkan::peer_refusal(a, b);
  // warm both pools, so that the only vkAllocateMemory the copy makes is the shared buffer's
  const auto warm_a = kiln::zeros<float>(a, {64});
  const auto warm_b = kiln::zeros<float>(b, {64});
  faults::arm(faults::memory_allocation);
  round_trip<float>(a, b, 1001, 9);
  EXPECT_EQ(faults::fired(faults::memory_allocation), 1u);
  faults::disarm();
  const std::string why = kiln::vulkan::peer_refusal(a, b);
  EXPECT_TRUE(has(why, "sharing memory with vulkan:")) << why;
  EXPECT_TRUE(has(why, "VK_ERROR_OUT_OF_DEVICE_MEMORY")) << why;
  round_trip<float>(a, b, 17, 10);  // remembered: staged again, no second try
  EXPECT_EQ(kiln::vulkan::peers(b).staged_copies, 2u);
  EXPECT_EQ(kiln::vulkan::peers(b).external_copies, 0u);
  EXPECT_EQ(kiln::vulkan::peers(a).links + kiln::vulkan::peers(b).links, 0u);
  round_trip<float>(b, a, 17, 11);  // the other direction is its own pair
  EXPECT_EQ(kiln::vulkan::peers(a).external_copies, 1u);
}

TEST_F(peer_copy, a_failed_submit_names_the_op_the_tensor_and_the_devices) {
  faults::scope guard;
  auto a = fresh_context(), b = fresh_context();
  if (!kiln::vulkan::peer_refusal(a, b).empty()) GTEST_SKIP() << kiln::vulkan::peer_refusal(a, b);
  const auto t = kiln::full(a, {3, 5}, kiln::half(1.5f));
  a.synchronize();
  faults::arm(faults::queue_submit);
  try {
    (void)kiln::copy_to(b, t);
    ADD_FAILURE() << "no error for a failed submit";
  } catch (const kiln::device_error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(has(m, "kiln::copy_to: f16[3, 5] on " + a.device_name() + " to " + b.device_name())) << m;
    EXPECT_TRUE(has(m, "vkQueueSubmit: VK_ERROR_DEVICE_LOST")) << m;
  }
  faults::disarm();
  // the sender is lost (a failed submit is fatal for its context); the receiver goes on
  EXPECT_THROW(a.synchronize(), kiln::device_error);
  const auto again = kiln::copy_to(b, kiln::full(b, {2}, 3.0f));
  EXPECT_EQ(again.to_host(), std::vector<float>({3.0f, 3.0f}));
}

}  // namespace
