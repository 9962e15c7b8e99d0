// kiln/serving/queue_full.hpp — kiln::serving::queue_full: the error of a request refused
// because the engine's wait queue is full (an HTTP server answers 503 with Retry-After).
#pragma once

#include "kiln/core/error.hpp"

namespace kiln::serving {

/// Thrown by engine::submit when engine_options::max_queue requests already wait for room
/// in the batch or the KV pool; the message says how many wait and which setting bounds them.
class queue_full : public kiln::error {
 public:
  using kiln::error::error;
};

}  // namespace kiln::serving
