// tests/dist/main.cpp — GoogleTest under mpirun: MPI starts before the tests and ends after
// them; every rank runs every test (the collectives need all of them); rank 0 prints the
// usual progress, the other ranks only their failures, prefixed with the rank.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <kiln/dist/dist.hpp>

namespace {

class failure_printer : public ::testing::EmptyTestEventListener {
 public:
  explicit failure_printer(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::fprintf(stderr, "[rank %d] %s.%s: %s:%d: failure\n%s\n", rank_, info ? info->test_suite_name() : "?",
                 info ? info->name() : "?", r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  kiln::dist::environment env(argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // each rank its own kernel cache: ranks compiling the same kernel must not race on a file
  const std::string cache = ::testing::TempDir() + "kiln-dist-test-cache-" + std::to_string(rank);
  ::setenv("KILN_CACHE_DIR", cache.c_str(), 0);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new failure_printer(rank));
  }
  return RUN_ALL_TESTS();
}
