// tests/dist/failure.cpp — one failing rank per mode, for expect_failure.cmake (run with
// 2 ranks and KILN_DIST_TIMEOUT=3): rank 0 goes into a collective, rank 1 fails the way
// the mode says. The job must end non-zero within 30 s, with a message naming rank 1.
#include <kiln/dist/dist.hpp>
#include <kiln/kiln.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

void sleep_s(int s) { std::this_thread::sleep_for(std::chrono::seconds(s)); }

}  // namespace

int main(int argc, char** argv) {
  kiln::dist::environment env(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  auto comm = kiln::dist::communicator::world();
  kiln::context<kiln::cpu<>> ctx;
  auto t = kiln::full(ctx, {1 << 20}, 1.0f);
  comm.all_reduce_sum(t);  // every rank is up and talking

  if (comm.rank() == 1) {
    if (mode == "kill") std::raise(SIGKILL);
    if (mode == "throw") throw std::runtime_error("rank 1 gave up");
    if (mode == "transfer") {
      // joins the next all_reduce_sum's descriptor exchange as a real rank would, then
      // stops before the transfer: rank 0's blocking MPI_Allreduce never completes
      auto d = kiln::dist::detail::describe(kiln::dist::detail::op_code::all_reduce_sum, 2, t, -1, false);
      kiln::dist::detail::descriptor theirs;
      MPI_Request r[2];
      MPI_Isend(&d, sizeof d, MPI_BYTE, 0, 1, comm.native(), &r[0]);
      MPI_Irecv(&theirs, sizeof theirs, MPI_BYTE, 0, 1, comm.native(), &r[1]);
      MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    }
    sleep_s(120);  // stall: never joins
    return 0;
  }

  if (mode == "stall_caught" || mode == "stall_caught_running") {
    try {
      if (mode == "stall_caught") comm.all_reduce_sum(t);
      else comm.broadcast(t, 0);
    } catch (const kiln::dist::timeout_error& e) {
      std::printf("caught: %s\n", e.what());
      std::fflush(stdout);
      // stall_caught: returning ends the environment, which aborts the job;
      // stall_caught_running: the program carries on, and the watchdog aborts it
      if (mode == "stall_caught_running") sleep_s(120);
      return 0;
    }
    return 0;
  }
  comm.all_reduce_sum(t);  // kill, throw, stall, transfer: uncaught failures end rank 0
  std::printf("rank 0: the collective returned without rank 1\n");
  return 0;
}
