// tests/vulkan/vulkan_fixture.hpp — the Vulkan tests' fixture: one shared context with
// the Khronos validation layer on, a skip only when no device exists at all, and a
// failure for any validation message a test produced.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

#include "scoped_env.hpp"

namespace kiln_test {

inline bool vulkan_present() {
  static const bool present = kiln::vulkan::available();
  return present;
}

/// Options every test context uses: validation on.
inline kiln::vulkan::options validated(kiln::vulkan::options o = {}) {
  o.validation = true;
  return o;
}

/// A context of its own (validation on), for a test that must not share gpu()'s.
inline kiln::context<kiln::vulkan> fresh_context(kiln::vulkan::options o = {}) {
  return kiln::context<kiln::vulkan>{validated(o)};
}

/// Special values the tests feed in.
inline constexpr float inf = std::numeric_limits<float>::infinity();
inline constexpr float qnan = std::numeric_limits<float>::quiet_NaN();

/// The shared context of the test binary (created on first use, validation on).
inline kiln::context<kiln::vulkan>& gpu() {
  static kiln::context<kiln::vulkan> c{validated()};
  return c;
}

class vulkan_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!vulkan_present()) GTEST_SKIP() << "no Vulkan device on this machine (kiln::vulkan::available() is false)";
    // KILN_VULKAN_VALIDATION=1 also turns validation on for contexts a test makes itself.
    env_ = std::make_unique<scoped_env>("KILN_VULKAN_VALIDATION", "1");
    before_ = kiln::vulkan::validation_messages().size();
  }
  void TearDown() override {
    if (!env_) return;
    const auto all = kiln::vulkan::validation_messages();
    std::string text;
    for (std::size_t i = before_; i < all.size(); ++i) text += "\n  " + all[i];
    EXPECT_EQ(all.size(), before_) << "validation messages:" << text;
    env_.reset();
  }
  /// Forget messages so far (a test that provokes one on purpose).
  void accept_validation_messages() { before_ = kiln::vulkan::validation_messages().size(); }

  kiln::context<kiln::vulkan>& ctx() { return gpu(); }

 private:
  std::unique_ptr<scoped_env> env_;
  std::size_t before_ = 0;
};

}  // namespace kiln_test
