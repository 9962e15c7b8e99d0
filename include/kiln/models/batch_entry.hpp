// kiln/models/batch_entry.hpp — kiln::models::batch_entry: one sequence's part of a batched
// decoder step over a paged KV cache (kiln::paged_kv_cache), as the decoders' forward(cache,
// batch) takes it (llama.hpp) and kiln::serving::engine builds it each step.
#pragma once

#include <cstdint>
#include <span>

namespace kiln::models {

/// A sequence of a paged_kv_cache (its handle), the tokens it runs this step (the next
/// token of a decoding sequence, or a chunk of a prompt) and whether the step returns the
/// logits of its last token (a prompt chunk that is not the prompt's last needs none).
///   kiln::models::batch_entry e{.sequence = s, .ids = std::span(&next, 1)};
struct batch_entry {
  std::uint32_t sequence = 0;
  std::span<const std::int32_t> ids;
  bool logits = true;
};

}  // namespace kiln::models
