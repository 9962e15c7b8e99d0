// tests/support/backends.hpp — the backends a typed test runs on, and one shared
// context per backend. TYPED_TEST_SUITE(x, kiln_test::backend_types) runs a test on
// every backend this build enables.
#pragma once

#include <gtest/gtest.h>

#include <kiln/kiln.hpp>
#if defined(KILN_TEST_VULKAN)
#include <kiln/vulkan.hpp>
#endif

namespace kiln_test {

using cpu = kiln::cpu<>;
#if defined(KILN_TEST_VULKAN)
// The Vulkan backend joins the typed tests once it evaluates fused expressions.
using vulkan = kiln::vulkan;
using backend_types = ::testing::Types<cpu, vulkan>;
#else
using backend_types = ::testing::Types<cpu>;
#endif

/// One context per backend for the whole test binary (device start-up is not free).
template <class B>
kiln::context<B>& ctx() {
  static kiln::context<B> c;
  return c;
}

}  // namespace kiln_test
