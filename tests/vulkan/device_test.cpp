// tests/vulkan/device_test.cpp — device listing, selection, KILN_DEVICE, missing drivers,
// validation capture and device loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "vulkan_fixture.hpp"

namespace {

using kiln_test::scoped_env;
using kiln_test::validated;
using device = kiln_test::vulkan_test;
using vk = kiln::vulkan;

TEST_F(device, lists_every_device_with_compute_capabilities) {
  const auto ds = vk::devices();
  ASSERT_FALSE(ds.empty());
  for (std::size_t i = 0; i < ds.size(); ++i) {
    const auto& d = ds[i];
    EXPECT_EQ(d.index, static_cast<int>(i));
    EXPECT_FALSE(d.name.empty());
    EXPECT_FALSE(d.heaps.empty());
    EXPECT_FALSE(d.memory_types.empty());
    if (!d.usable()) continue;
    EXPECT_GE(d.api_version, VK_API_VERSION_1_2);
    EXPECT_GT(d.subgroup_size, 0u);
    EXPECT_FALSE(d.subgroup_operations.empty());
    EXPECT_GE(d.max_shared_memory, 16384u);
    EXPECT_GE(d.max_workgroup_invocations, 128u);
    EXPECT_GT(d.max_allocation_size, 0u);
    EXPECT_LE(d.max_allocation_size, d.heaps[0].size * 16);
    EXPECT_TRUE(d.has_compute_queue);
    EXPECT_TRUE(d.timeline_semaphore);
    EXPECT_TRUE(!d.cooperative_matrix || d.cooperative_matrix_claimed);
    // Vulkan 1.3 requires shaderIntegerDotProduct; the extension is kiln's way only below 1.3,
    // and nothing is accelerated without the feature
    if (d.api_version >= VK_API_VERSION_1_3) {
      EXPECT_TRUE(d.integer_dot_product) << d.name;
    }
    EXPECT_TRUE(!d.integer_dot_product_extension || (d.integer_dot_product && d.api_version < VK_API_VERSION_1_3));
    if (!d.integer_dot_product) {
      EXPECT_FALSE(d.dot4x8_signed_accelerated || d.dot4x8_unsigned_accelerated || d.dot4x8_mixed_accelerated);
    }
  }
}

TEST_F(device, lavapipe_is_a_unified_cpu_device_without_trusted_cooperative_matrix) {
  const auto ds = vk::devices();
  auto it = std::find_if(ds.begin(), ds.end(), [](const auto& d) { return d.name.find("llvmpipe") != std::string::npos; });
  if (it == ds.end()) GTEST_SKIP() << "lavapipe is not installed here";
  EXPECT_EQ(it->type, vk::device_type::cpu);
  EXPECT_TRUE(it->unified_memory);
  EXPECT_TRUE(it->storage_16bit);
  EXPECT_TRUE(it->storage_8bit);
  EXPECT_FALSE(it->cooperative_matrix);
  // lavapipe has integer dot products (Vulkan 1.3) and lowers them to plain arithmetic:
  // none reported accelerated, so kiln's quantized products keep the plain path there
  if (it->api_version >= VK_API_VERSION_1_3) {
    EXPECT_TRUE(it->integer_dot_product);
  }
  EXPECT_FALSE(it->dot4x8_signed_accelerated);
  EXPECT_EQ(it->driver_id, static_cast<std::uint32_t>(VK_DRIVER_ID_MESA_LLVMPIPE));
}

TEST_F(device, cooperative_matrix_needs_the_allow_list_not_just_the_claim) {
  using kiln::detail::vk::cooperative_matrix_allowed;
  EXPECT_TRUE(cooperative_matrix_allowed(VK_DRIVER_ID_NVIDIA_PROPRIETARY, 0));
  EXPECT_FALSE(cooperative_matrix_allowed(VK_DRIVER_ID_MESA_LLVMPIPE, VK_MAKE_VERSION(99, 0, 0)));
  EXPECT_FALSE(cooperative_matrix_allowed(VK_DRIVER_ID_MESA_RADV, VK_MAKE_VERSION(23, 3, 0)));
  EXPECT_TRUE(cooperative_matrix_allowed(VK_DRIVER_ID_MESA_RADV, VK_MAKE_VERSION(24, 1, 0)));
  EXPECT_FALSE(cooperative_matrix_allowed(VK_DRIVER_ID_INTEL_OPEN_SOURCE_MESA, VK_MAKE_VERSION(24, 1, 0)));
}

TEST_F(device, default_selection_prefers_the_best_device_type) {
  scoped_env unset("KILN_DEVICE", nullptr);
  const auto ds = vk::devices();
  auto best = vk::device_type::other;
  for (const auto& d : ds) {
    if (d.usable()) best = std::max(best, d.type);
  }
  kiln::context<kiln::vulkan> c{validated()};
  EXPECT_EQ(vk::device(c).type, best);
  EXPECT_EQ(c.device_name(), "vulkan:" + std::to_string(vk::device(c).index));
  EXPECT_TRUE(c.state()->validation());
}

TEST_F(device, kiln_device_selects_by_index_or_name) {
  const auto ds = vk::devices();
  const auto& first = ds.front();
  {
    scoped_env e("KILN_DEVICE", "0");
    kiln::context<kiln::vulkan> c{validated()};
    EXPECT_EQ(vk::device(c).index, 0);
  }
  {
    // a case-insensitive part of the name
    std::string part = first.name.substr(0, std::min<std::size_t>(first.name.size(), 5));
    std::transform(part.begin(), part.end(), part.begin(), [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
    scoped_env e("KILN_DEVICE", part.c_str());
    kiln::context<kiln::vulkan> c{validated()};
    EXPECT_NE(kiln::detail::vk::lower(vk::device(c).name).find(kiln::detail::vk::lower(part)), std::string::npos);
  }
  {
    kiln::context<kiln::vulkan> c{vk::device_index{0}};
    EXPECT_EQ(c.device_name(), "vulkan:0");
  }
}

TEST_F(device, a_bad_override_is_a_clear_error) {
  {
    scoped_env e("KILN_DEVICE", "no-such-gpu");
    try {
      kiln::context<kiln::vulkan> c{validated()};
      FAIL() << "expected kiln::device_unavailable";
    } catch (const kiln::device_unavailable& err) {
      const std::string m = err.what();
      EXPECT_NE(m.find("KILN_DEVICE='no-such-gpu'"), std::string::npos) << m;
      EXPECT_NE(m.find("matches no device"), std::string::npos) << m;
      EXPECT_NE(m.find(vk::devices().front().name), std::string::npos) << m;  // lists what exists
    }
  }
  {
    scoped_env e("KILN_DEVICE", "97");
    EXPECT_THROW(kiln::context<kiln::vulkan>{validated()}, kiln::device_unavailable);
  }
  try {
    kiln::context<kiln::vulkan> c{vk::device_index{42}};
    FAIL() << "expected kiln::device_unavailable";
  } catch (const kiln::device_unavailable& err) {
    EXPECT_NE(std::string(err.what()).find("device_index{42} is out of range"), std::string::npos) << err.what();
  }
}

TEST_F(device, no_driver_means_device_unavailable_not_a_crash) {
  scoped_env files("VK_DRIVER_FILES", "/nonexistent/kiln_no_such_icd.json");
  scoped_env icds("VK_ICD_FILENAMES", "/nonexistent/kiln_no_such_icd.json");
  EXPECT_FALSE(vk::available());
  EXPECT_TRUE(vk::devices().empty());
  try {
    kiln::context<kiln::vulkan> c{validated()};
    FAIL() << "expected kiln::device_unavailable";
  } catch (const kiln::device_unavailable& err) {
    const std::string m = err.what();
    EXPECT_TRUE(m.find("driver") != std::string::npos || m.find("no physical device") != std::string::npos) << m;
  }
}

TEST_F(device, validation_messages_are_collected) {
  auto& state = *ctx().state();
  ASSERT_TRUE(state.validation());
  const auto before = vk::validation_messages().size();
  // A zero-sized buffer breaks VUID-VkBufferCreateInfo-size-00912: the layer must say so.
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = 0;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer b = VK_NULL_HANDLE;
  if (vkCreateBuffer(state.device(), &bi, nullptr, &b) == VK_SUCCESS && b) vkDestroyBuffer(state.device(), b, nullptr);
  const auto after = vk::validation_messages();
  ASSERT_GT(after.size(), before);
  EXPECT_NE(after.back().find("size"), std::string::npos) << after.back();
  accept_validation_messages();
}

TEST_F(device, after_device_loss_new_work_is_refused_and_destruction_is_clean) {
  kiln::context<kiln::vulkan> c{validated()};
  auto t = kiln::full(c, {64}, 1.0f);
  c.state()->mark_lost("vkQueueSubmit: VK_ERROR_DEVICE_LOST (simulated by the test)");
  try {
    t = 2.0f;
    FAIL() << "expected kiln::device_error";
  } catch (const kiln::device_error& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("is lost"), std::string::npos) << m;
    EXPECT_NE(m.find("VK_ERROR_DEVICE_LOST"), std::string::npos) << m;
  }
  EXPECT_THROW(kiln::empty<float>(c, {4}), kiln::device_error);
  EXPECT_THROW(t.to_host(), kiln::device_error);
  EXPECT_THROW(c.synchronize(), kiln::device_error);
  // t and c go out of scope here: no wait on the lost device, no throw
}

TEST_F(device, results_name_the_call) {
  try {
    kiln::detail::vk::check(VK_ERROR_DEVICE_LOST, "vkQueueSubmit");
    FAIL();
  } catch (const kiln::device_error& err) {
    EXPECT_NE(std::string(err.what()).find("vkQueueSubmit: VK_ERROR_DEVICE_LOST"), std::string::npos) << err.what();
  }
}

}  // namespace
