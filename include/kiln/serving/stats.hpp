// kiln/serving/stats.hpp — kiln::serving::step_stats and engine_stats: what one step of
// kiln::serving::engine did and the engine's totals, for logs and a server's /metrics.
#pragma once

#include <cstdint>

#include "kiln/core/shape.hpp"  // index_t

namespace kiln::serving {

/// One engine::step.
struct step_stats {
  index_t sequences = 0;     ///< sequences in the step's batch
  index_t decode_rows = 0;   ///< of which decoding (one token each)
  index_t prefill_rows = 0;  ///< prompt tokens run (chunks of prefill)
  index_t tokens = 0;        ///< tokens generated
  index_t finished = 0;      ///< requests that ended in the step (cancelled ones included)
  index_t active = 0;        ///< requests admitted (holding KV blocks) after the step
  index_t queued = 0;        ///< requests waiting after the step
  index_t kv_blocks_used = 0;
  index_t kv_blocks_total = 0;
  double seconds = 0.0;      ///< the step's wall time
};

/// The engine's totals since it was made, and its last step.
struct engine_stats {
  std::uint64_t submitted = 0;         ///< accepted by submit
  std::uint64_t refused = 0;           ///< queue full
  std::uint64_t completed = 0;         ///< ended by length or a stop id
  std::uint64_t cancelled = 0;
  std::uint64_t failed = 0;            ///< ended by an error
  std::uint64_t prompt_tokens = 0;     ///< prompt tokens run
  std::uint64_t generated_tokens = 0;
  std::uint64_t steps = 0;             ///< steps that ran a batch
  step_stats last;                     ///< the last step that ran a batch
  /// KV blocks in use after the latest step, one that ran no batch included (a step that
  /// only ended cancelled requests gives their blocks back; `last` keeps its batch's count).
  index_t kv_blocks_used = 0;
};

}  // namespace kiln::serving
