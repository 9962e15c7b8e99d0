// kiln/dist/environment.hpp — kiln::dist::environment: MPI's start and end for a program.
// MPI_Init_thread at construction (unless MPI is running already), MPI_Finalize at the
// end; after a kiln::dist failure, MPI_Abort instead (finalising would wait for dead peers).
#pragma once

#include <mpi.h>

#include <cstdio>
#include <string>

#include "kiln/dist/detail/runtime.hpp"
#include "kiln/dist/error.hpp"

namespace kiln::dist {

/// Owns MPI's lifetime for the program: make one at the top of main, before any communicator.
/// Requests MPI_THREAD_FUNNELED (kiln::dist calls MPI from the thread that calls it; the
/// watchdog thread only ever calls MPI_Abort), or the level given: MPI_THREAD_SERIALIZED
/// for a program whose collectives run on a thread other than main's (one thread at a
/// time), and throws kiln::dist::error when MPI grants less. Where MPI is initialised
/// already, it neither initialises nor finalises. Throws kiln::dist::error when
/// MPI_Init_thread fails.
/// Example: `int main(int argc, char** argv) { kiln::dist::environment env(argc, argv); ... }`
class environment {
 public:
  environment(int& argc, char**& argv, int required = MPI_THREAD_FUNNELED) { init(&argc, &argv, required); }
  environment() { init(nullptr, nullptr, MPI_THREAD_FUNNELED); }
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;

  /// MPI_Finalize; or, after a failure was thrown (timeout_error, a failed transfer),
  /// MPI_Abort with code 1, so that the job ends on every rank whether or not the program
  /// caught the exception.
  ~environment() {
    if (!owner_) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (detail::watchdog::instance().failed()) {
      std::fflush(nullptr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
  }

  /// The thread level MPI granted.
  int thread_level() const noexcept { return provided_; }

 private:
  void init(int* argc, char*** argv, int required) {
    int init = 0;
    MPI_Initialized(&init);
    if (init) {
      MPI_Query_thread(&provided_);
    } else {
      if (int rc = MPI_Init_thread(argc, argv, required, &provided_); rc != MPI_SUCCESS) {
        throw error("kiln::dist::environment: MPI_Init_thread failed (code " + std::to_string(rc) + ")");
      }
      owner_ = true;
    }
    if (provided_ < required) {
      if (owner_) MPI_Finalize();  // the destructor of an object not constructed does not run
      throw error("kiln::dist::environment: MPI grants thread level " + std::to_string(provided_) + ", below the " +
                  std::to_string(required) + " asked for (MPI_THREAD_SERIALIZED is " +
                  std::to_string(MPI_THREAD_SERIALIZED) + ")");
    }
  }

  bool owner_ = false;
  int provided_ = 0;
};

}  // namespace kiln::dist
