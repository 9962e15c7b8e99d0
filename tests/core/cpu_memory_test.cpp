// tests/core/cpu_memory_test.cpp — the CPU backend's host memory: alignment of every
// block, huge-page advice for large blocks (KILN_HUGE_PAGES), and results unchanged
// whichever memory backs them.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "scoped_env.hpp"

namespace {

using cpu_ctx = kiln::context<kiln::cpu<>>;
constexpr std::size_t huge_page = kiln::detail::cpu_storage::huge_page_bytes;

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

#if defined(__linux__)
/// The VmFlags line of the mapping in /proc/self/smaps that holds p ("" if none does).
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= address(p) && address(p) < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool advised_huge(const void* p) { return vm_flags_of(p).find(" hg") != std::string::npos; }
#endif

}  // namespace

TEST(cpu_memory, small_blocks_are_64_byte_aligned) {
  cpu_ctx ctx{kiln::threads{1}};
  for (kiln::index_t n : {1, 7, 17, 1000, 100003}) {
    auto t = kiln::zeros<float>(ctx, {n});
    EXPECT_EQ(address(t.data()) % 64, 0u) << "n=" << n;
  }
}

TEST(cpu_memory, large_blocks_are_huge_page_aligned_and_advised) {
  cpu_ctx ctx{kiln::threads{1}};
  const auto n = static_cast<kiln::index_t>(3 * huge_page / sizeof(float) + 5);
  auto t = kiln::full<float>(ctx, {n}, 2.5f);
  EXPECT_EQ(address(t.data()) % huge_page, 0u);
#if defined(__linux__)
  EXPECT_TRUE(advised_huge(t.data())) << vm_flags_of(t.data());
#endif
  auto out = kiln::empty<float>(ctx, {n});
  out = t * t + 1.0f;
  const auto y = out.to_host();
  ASSERT_EQ(y.size(), static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < y.size(); i += 4099) EXPECT_EQ(y[i], 7.25f) << "i=" << i;
  EXPECT_EQ(y.back(), 7.25f);
}

TEST(cpu_memory, huge_pages_off_leaves_large_blocks_on_small_pages) {
  const kiln_test::scoped_env off("KILN_HUGE_PAGES", "off");
  cpu_ctx ctx{kiln::threads{1}};
  auto t = kiln::full<float>(ctx, {static_cast<kiln::index_t>(2 * huge_page / sizeof(float))}, 1.0f);
  EXPECT_EQ(address(t.data()) % 64, 0u);
#if defined(__linux__)
  EXPECT_FALSE(advised_huge(t.data())) << vm_flags_of(t.data());
#endif
  EXPECT_EQ(t.to_host().back(), 1.0f);
}
