// tests/support/main.cpp — GoogleTest entry point that prints the run's seed.
#include <gtest/gtest.h>

#include "random.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new kiln_test::seed_banner);
  return RUN_ALL_TESTS();
}
