// kiln/dist/error.hpp — the exceptions kiln::dist throws.
// kiln::dist::error is a kiln::error; its message names the operation, the rank that
// reports it, the tensor and the other ranks involved.
#pragma once

#include <string>
#include <vector>

#include "kiln/core/error.hpp"

namespace kiln::dist {

/// A collective or point-to-point operation that could not be done: arguments refused
/// (here or on another rank), tensors that differ across ranks, or an MPI error.
/// Example message: `kiln::dist::all_reduce_sum: rank 1 of 2: tensor f32[4, 8] on cpu does not match rank 0's f32[4, 9]`
class error : public kiln::error {
 public:
  using kiln::error::error;
};

/// Peers did not answer before the communicator's deadline, or MPI reported that a peer
/// failed. The job cannot go on: kiln::dist calls MPI_Abort after the abort grace period
/// (options::abort_grace), so that every rank stops. ranks() are those not heard from.
class timeout_error : public error {
 public:
  timeout_error(const std::string& what, std::vector<int> ranks) : error(what), ranks_(std::move(ranks)) {}
  const std::vector<int>& ranks() const noexcept { return ranks_; }

 private:
  std::vector<int> ranks_;
};

}  // namespace kiln::dist
