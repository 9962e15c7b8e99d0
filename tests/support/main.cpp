// tests/support/main.cpp — GoogleTest entry point that prints the run's seed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
#endif

#include "random.hpp"

int main(int argc, char** argv) {
#if defined(__SANITIZE_ADDRESS__)
  // The Vulkan loader unloads the driver and layers when the last instance goes; their
  // own never-freed allocations then show up at exit from "<unknown module>" and cannot
  // be told apart from kiln's. Pinning them (RTLD_NODELETE) keeps their frames named, so
  // tests/support/lsan.supp can set aside exactly those libraries' leaks.
  for (const char* lib : {"libvulkan_lvp.so", "libVkLayer_khronos_validation.so"}) ::dlopen(lib, RTLD_LAZY | RTLD_NODELETE);
#endif
  // Kernels compiled by tests go to a cache of this run, not the user's ~/.cache/kiln
  // (an explicit KILN_CACHE_DIR or KILN_CACHE=off still wins).
  const std::string cache = ::testing::TempDir() + "kiln-test-cache";
  ::setenv("KILN_CACHE_DIR", cache.c_str(), 0);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new kiln_test::seed_banner);
  return RUN_ALL_TESTS();
}
