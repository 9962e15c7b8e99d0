// tests/support/backends.hpp — the backends a typed test runs on, one shared context per
// backend, and the fixture typed tests derive from. TYPED_TEST_SUITE(x,
// kiln_test::backend_types) runs a test on every backend this build enables; on Vulkan
// the fixture skips when no device exists and fails a test that produced any
// validation-layer message.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <type_traits>

#include <kiln/kiln.hpp>
#if defined(KILN_TEST_VULKAN)
#include <kiln/vulkan.hpp>
#endif

namespace kiln_test {

using cpu = kiln::cpu<>;
#if defined(KILN_TEST_VULKAN)
using vulkan = kiln::vulkan;
using backend_types = ::testing::Types<cpu, vulkan>;
#else
using backend_types = ::testing::Types<cpu>;
#endif

/// A new context of backend B (Vulkan: the Khronos validation layer on, checking every
/// call the tests make). ctx<B>() is the one most tests share; a test that needs a second
/// context (several devices in one process) makes its own.
template <class B>
kiln::context<B> new_context() {
#if defined(KILN_TEST_VULKAN)
  if constexpr (std::is_same_v<B, kiln::vulkan>) {
    kiln::vulkan::options o;
    o.validation = true;
    return kiln::context<B>{o};
  } else
#endif
  {
    return kiln::context<B>{};
  }
}

/// One context per backend for the whole test binary (device start-up is not free).
template <class B>
kiln::context<B>& ctx() {
  static kiln::context<B> c = new_context<B>();
  return c;
}

/// Base of typed tests: skips a backend without a device, and fails a Vulkan test that
/// produced validation messages.
template <class B>
class backend_test : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(KILN_TEST_VULKAN)
    if constexpr (std::is_same_v<B, kiln::vulkan>) {
      static const bool present = kiln::vulkan::available();
      if (!present) GTEST_SKIP() << "no Vulkan device on this machine (kiln::vulkan::available() is false)";
      before_ = kiln::vulkan::validation_messages().size();
    }
#endif
  }
  void TearDown() override {
#if defined(KILN_TEST_VULKAN)
    if constexpr (std::is_same_v<B, kiln::vulkan>) {
      const auto all = kiln::vulkan::validation_messages();
      std::string text;
      for (std::size_t i = before_; i < all.size(); ++i) text += "\n  " + all[i];
      EXPECT_EQ(all.size(), before_) << "validation messages:" << text;
    }
#endif
  }

 private:
  std::size_t before_ = 0;
};

}  // namespace kiln_test
