// tests/vulkan/exit_test.cpp — a context still alive when the process exits (held by a
// static, or leaked) is released by kiln's exit handler while the driver is loaded: the
// handler runs before handlers registered earlier, and afterwards the context refuses
// work with a clear kiln::device_error and destructs without a Vulkan call. (On NVIDIA,
// a device freed after the driver's own exit handlers crashed the process.)
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "vulkan_fixture.hpp"

namespace {

using exit_test = kiln_test::vulkan_test;

/// What the child process keeps past main, as a program's statics would.
struct survivors {
  std::unique_ptr<kiln::context<kiln::vulkan>> ctx;
  std::unique_ptr<kiln::tensor<float, kiln::vulkan>> x;
};
survivors* kept = nullptr;

/// Registered before the context exists, so it runs after kiln's exit handler: checks
/// that the context was released and refuses work, then destroys everything (no Vulkan
/// call may follow the release). Prints the verdict on stderr for EXPECT_EXIT.
void after_kiln_released() {
  std::string verdict = "exit check: ";
  try {
    auto y = kiln::empty<float>(*kept->ctx, {4});
    y = *kept->x + 1.0f;
    verdict += "FAIL: the context still accepted work";
  } catch (const kiln::device_error& e) {
    const std::string what = e.what();
    verdict += what.find("process exited") != std::string::npos ? "refused" : "FAIL: unclear message: " + what;
  } catch (const std::exception& e) {
    verdict += std::string("FAIL: not a device_error: ") + e.what();
  }
  try {
    (void)kiln::vulkan::memory(*kept->ctx);
    verdict += ", FAIL: memory() answered";
  } catch (const kiln::device_error&) {
    verdict += ", stats refused";
  }
  kept->x.reset();  // a tensor, then its context, destroyed after the release
  kept->ctx.reset();
  delete kept;
  std::fprintf(stderr, "%s, destroyed\n", verdict.c_str());
  std::fflush(stderr);
}

/// The child: a context and a tensor that outlive main, some work on them, then exit.
[[noreturn]] void run_and_exit() {
  std::atexit(&after_kiln_released);
  kept = new survivors;
  kept->ctx = std::make_unique<kiln::context<kiln::vulkan>>(kiln_test::validated());
  kept->x = std::make_unique<kiln::tensor<float, kiln::vulkan>>(kiln::full(*kept->ctx, {4}, 2.0f));
  auto y = kiln::empty<float>(*kept->ctx, {4});
  y = kiln::gelu(*kept->x * 0.5f);
  const std::vector<float> h = y.to_host();
  std::fprintf(stderr, "computed %.4f\n", double(h[0]));
  std::exit(h[0] > 0.84f && h[0] < 0.85f ? 0 : 5);
}

TEST_F(exit_test, a_context_alive_at_exit_is_released_before_the_driver_unloads) {
  // a fresh process (not a fork of this one): no other context, so the handler kiln
  // registers there runs before after_kiln_released
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_and_exit(), ::testing::ExitedWithCode(0),
              "computed 0\\.841.*exit check: refused, stats refused, destroyed");
}

}  // namespace
