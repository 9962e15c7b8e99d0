// kiln/dist/dist.hpp — kiln::dist: kiln's tensors past one process, over MPI.
// A communicator (world, split, rank, size) with all-reduce, all-gather, broadcast and
// send / receive on tensors of every backend; failures end the job instead of hanging it.
// Link kiln::dist (CMake option KILN_MPI); nothing else in kiln needs MPI.
#pragma once

#include "kiln/dist/communicator.hpp"
#include "kiln/dist/environment.hpp"
#include "kiln/dist/error.hpp"
#include "kiln/dist/share.hpp"  // kiln::dist::share_from_root: rank 0's ints on every rank
#include "kiln/dist/tensor_parallel.hpp"  // kiln::dist::tensor_parallel: a decoder split over the ranks
