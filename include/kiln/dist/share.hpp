// kiln/dist/share.hpp — kiln::dist::share_from_root: rank root's vector of ints on every rank
// (its length, then its values: two broadcasts), as a plain callable, for the code that
// must not see MPI (kiln/serving/tensor_parallel.hpp's share_ints; a prompt's ids).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kiln/dist/communicator.hpp"
#include "kiln/kiln.hpp"

namespace kiln::dist {

/// A callable that every rank of comm calls at the same point: afterwards each rank's v
/// holds root's (resized to its length). Throws what kiln::dist::communicator::broadcast
/// throws (a rank not heard from within the timeout: kiln::dist::timeout_error). comm must
/// outlive the callable.
/// Example: `auto share = kiln::dist::share_from_root(comm); share(ids);  // rank 0's ids everywhere`
inline std::function<void(std::vector<std::int32_t>&)> share_from_root(communicator& comm, int root = 0) {
  auto host = std::make_shared<context<cpu<>>>(threads{1});
  return [&comm, root, host](std::vector<std::int32_t>& v) {
    const std::int32_t n0 = static_cast<std::int32_t>(v.size());
    auto count = from_host(*host, shape{1}, std::span<const std::int32_t>(&n0, 1));
    comm.broadcast(count, root);
    v.resize(static_cast<std::size_t>(count.to_host()[0]));
    if (v.empty()) return;
    auto t = from_host(*host, shape{static_cast<index_t>(v.size())}, std::span<const std::int32_t>(v));
    comm.broadcast(t, root);
    v = t.to_host();
  };
}

}  // namespace kiln::dist
