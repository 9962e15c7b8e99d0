// tests/support/main.cpp — GoogleTest entry point that prints the run's seed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "random.hpp"

int main(int argc, char** argv) {
  // Kernels compiled by tests go to a cache of this run, not the user's ~/.cache/kiln
  // (an explicit KILN_CACHE_DIR or KILN_CACHE=off still wins).
  const std::string cache = ::testing::TempDir() + "kiln-test-cache";
  ::setenv("KILN_CACHE_DIR", cache.c_str(), 0);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new kiln_test::seed_banner);
  return RUN_ALL_TESTS();
}
