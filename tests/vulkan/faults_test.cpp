// tests/vulkan/faults_test.cpp — what a context does when the device fails it, reached
// through kiln::detail::vk::fault_injection: out of device memory (trim, retry, then
// kiln::out_of_memory with the context still usable), a failed shader compile (a
// kiln::shader_error, later statements fine), a lost device at submit or at a wait (every
// later call a clear kiln::device_error, nothing hangs, clean destruction), and the same
// user code then run on the CPU backend.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "vulkan_fixture.hpp"

namespace {

using faults_test = kiln_test::vulkan_test;
using faults = kiln::detail::vk::fault_injection;

using kiln_test::fresh_context;

/// The user's code, written once for any backend: a fused statement and a read-back.
template <kiln::backend B>
std::vector<float> user_code(kiln::context<B>& ctx) {
  std::vector<float> h(1000);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = float(i) / 100.0f - 5.0f;
  auto x = kiln::from_host(ctx, {1000}, h);
  auto y = kiln::empty<float>(ctx, {1000});
  y = kiln::tanh(x * 0.5f) + kiln::relu(x) * 2.0f;
  return y.to_host();
}

void expect_user_code_right(const std::vector<float>& got) {
  ASSERT_EQ(got.size(), 1000u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double x = double(float(i) / 100.0f - 5.0f);
    EXPECT_NEAR(got[i], std::tanh(x * 0.5) + std::max(0.0, x) * 2.0, 1e-5) << i;
  }
}

/// Expects f to throw kiln::device_error saying the device is lost.
template <class F>
void expect_lost(F&& f, const char* what) {
  try {
    f();
    ADD_FAILURE() << what << " did not throw on a lost device";
  } catch (const kiln::device_error& e) {
    EXPECT_NE(std::string(e.what()).find("lost"), std::string::npos) << what << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << " threw something else than kiln::device_error: " << e.what();
  }
}

/// After a loss: every call that would need the device throws, and nothing waits.
void expect_every_call_refused(kiln::context<kiln::vulkan>& c, kiln::tensor<float, kiln::vulkan>& x,
                               kiln::tensor<float, kiln::vulkan>& y) {
  const auto t0 = std::chrono::steady_clock::now();
  expect_lost([&] { y = x + 1.0f; }, "a statement");
  expect_lost([&] { (void)y.to_host(); }, "to_host");
  expect_lost([&] { (void)kiln::empty<float>(c, {16}); }, "empty");
  expect_lost([&] { (void)kiln::full(c, {16}, 1.0f); }, "full");
  const std::vector<float> h(16, 1.0f);
  expect_lost([&] { (void)kiln::from_host(c, {16}, h); }, "from_host");
  expect_lost([&] { c.synchronize(); }, "synchronize");
  expect_lost([&] { (void)kiln::vulkan::read_async(y).get(); }, "read_async");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0) << "a call waited";
}

}  // namespace

TEST_F(faults_test, out_of_memory_trims_retries_then_throws_and_the_context_stays_usable) {
  faults::scope disarm;
  kiln::vulkan::options o;
  o.block_size = std::size_t(1) << 20;  // small blocks: a 4 MiB tensor is a dedicated allocation
  auto c = fresh_context(o);
  auto idle_block = [&] {  // a pooled block that holds nothing: what a trim gives back
    { auto t = kiln::empty<float>(c, {65536}); }
    ASSERT_EQ(kiln::vulkan::memory(c).blocks, 1u);
  };

  // One failure: trimmed, retried, served.
  idle_block();
  faults::arm(faults::memory_allocation);
  {
    auto big = kiln::empty<float>(c, {1 << 20});
    EXPECT_EQ(faults::fired(faults::memory_allocation), 1u);
    EXPECT_EQ(kiln::vulkan::memory(c).blocks, 0u) << "the idle block was not trimmed before the retry";
    EXPECT_EQ(kiln::vulkan::memory(c).dedicated, 1u);
  }

  // Every attempt fails: trimmed, retried once, then kiln::out_of_memory naming the sizes.
  idle_block();
  faults::arm(faults::memory_allocation, 0, faults::always);
  try {
    auto big = kiln::empty<float>(c, {1 << 20});
    ADD_FAILURE() << "no kiln::out_of_memory";
  } catch (const kiln::out_of_memory& e) {
    EXPECT_EQ(e.requested(), std::size_t(4) << 20);
    EXPECT_NE(std::string(e.what()).find("4194304 bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("VK_ERROR_OUT_OF_DEVICE_MEMORY"), std::string::npos) << e.what();
  }
  EXPECT_EQ(faults::fired(faults::memory_allocation), 2u) << "first attempt and one retry after the trim";
  EXPECT_EQ(kiln::vulkan::memory(c).blocks, 0u);
  EXPECT_EQ(kiln::vulkan::memory(c).live_allocations, 0u);

  // A statement that needs memory fails the same way; once memory is back, all works.
  EXPECT_THROW(user_code(c), kiln::out_of_memory);
  faults::disarm();
  expect_user_code_right(user_code(c));
  auto big = kiln::full(c, {1 << 20}, 2.0f);
  EXPECT_EQ(big.to_host()[12345], 2.0f);
}

TEST_F(faults_test, a_failed_compile_throws_shader_error_and_later_statements_work) {
  faults::scope disarm;
  kiln_test::scoped_env no_cache("KILN_CACHE", "off");  // every kernel compiles here
  auto c = fresh_context();
  auto x = kiln::full(c, {100}, 0.25f);
  auto y = kiln::empty<float>(c, {100});
  faults::arm(faults::shader_compile);
  try {
    y = kiln::exp(x) * 3.0f - x;
    ADD_FAILURE() << "no kiln::shader_error";
  } catch (const kiln::shader_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not compile"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << e.what();
  }
  EXPECT_EQ(faults::fired(faults::shader_compile), 1u);
  y = kiln::exp(x) * 3.0f - x;  // the same statement, compiled this time
  for (float v : y.to_host()) EXPECT_NEAR(v, std::exp(0.25) * 3.0 - 0.25, 1e-5);
  expect_user_code_right(user_code(c));
}

TEST_F(faults_test, a_device_lost_at_submit_refuses_every_later_call_and_destructs_cleanly) {
  faults::scope disarm;
  auto c = fresh_context();
  auto x = kiln::full(c, {4096}, 1.5f);
  auto y = kiln::empty<float>(c, {4096});
  y = x * 2.0f;  // recorded
  faults::arm(faults::queue_submit);
  try {
    (void)y.to_host();
    ADD_FAILURE() << "no kiln::device_error";
  } catch (const kiln::device_error& e) {
    EXPECT_NE(std::string(e.what()).find("vkQueueSubmit: VK_ERROR_DEVICE_LOST"), std::string::npos) << e.what();
  }
  faults::disarm();  // the device stays lost for this context all the same
  expect_every_call_refused(c, x, y);
  // Tensors and context then destruct here: no validation message, no wait, no leak.
}

TEST_F(faults_test, a_device_lost_at_a_wait_refuses_every_later_call_and_destructs_cleanly) {
  faults::scope disarm;
  auto c = fresh_context();
  auto x = kiln::full(c, {4096}, 1.5f);
  auto y = kiln::empty<float>(c, {4096});
  y = x * 2.0f;
  faults::arm(faults::semaphore_wait);
  try {
    (void)y.to_host();
    ADD_FAILURE() << "no kiln::device_error";
  } catch (const kiln::device_error& e) {
    EXPECT_NE(std::string(e.what()).find("vkWaitSemaphores: VK_ERROR_DEVICE_LOST"), std::string::npos) << e.what();
  }
  faults::disarm();
  expect_every_call_refused(c, x, y);
  {  // a tensor made before the loss and released after it
    auto z = std::move(x);
  }
}

TEST_F(faults_test, a_new_context_works_after_another_lost_its_device) {
  faults::scope disarm;
  {
    auto c = fresh_context();
    faults::arm(faults::queue_submit);
    EXPECT_THROW(user_code(c), kiln::device_error);
  }
  faults::disarm();
  auto c = fresh_context();
  expect_user_code_right(user_code(c));
}

TEST_F(faults_test, after_a_device_loss_the_same_user_code_runs_on_the_cpu) {
  faults::scope disarm;
  std::vector<float> out;
  bool fell_back = false;
  try {
    auto gpu = fresh_context();
    faults::arm(faults::queue_submit);
    out = user_code(gpu);
  } catch (const kiln::device_error&) {
    faults::disarm();
    kiln::context<kiln::cpu<>> cpu;
    out = user_code(cpu);
    fell_back = true;
  }
  EXPECT_TRUE(fell_back);
  expect_user_code_right(out);
}
