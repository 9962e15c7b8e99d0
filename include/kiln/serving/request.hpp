// kiln/serving/request.hpp — kiln::serving::request: what a client asks kiln::serving::engine
// for: a prompt as token ids, how many tokens to generate, how to sample them and when to
// stop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kiln/core/shape.hpp"              // index_t
#include "kiln/ops/sampling/sample.hpp"     // sampling_options

namespace kiln::serving {

class token_stream;

/// A request's number, unique within its engine (1, 2, 3, ... in submission order).
using request_id = std::uint64_t;

/// One generation request. The prompt's ids must lie in the model's vocabulary, and the
/// prompt and max_tokens must fit the context together (engine::submit checks both).
/// Generation ends after max_tokens tokens, or after a token of stop_ids (that token
/// included in the stream's tokens, as Hugging Face's generate keeps its eos; a server
/// drops it from text), or when the request is cancelled.
///   kiln::serving::request r{.prompt = ids, .max_tokens = 64,
///                            .sampling = {.temperature = 0.7f, .top_p = 0.9f, .seed = 42},
///                            .stop_ids = {eos}};
struct request {
  std::vector<std::int32_t> prompt{};
  index_t max_tokens = 16;
  sampling_options sampling{};     ///< kiln::sample's chain; the default is greedy
  std::size_t penalty_last_n = 64; ///< the penalties' window of recent ids (0: all); the prompt counts
  std::vector<std::int32_t> stop_ids{};
  /// Called on the engine's worker thread (inside engine::step) after a step that added
  /// tokens to the request's stream or finished it; read the new tokens with
  /// stream.poll(). Keep it short (it delays every sequence of the batch) and do not call
  /// back into the engine's step from it; submit and cancel are fine. An exception it throws
  /// ends the request with finish_reason::error (one from the call after the end is ignored).
  std::function<void(token_stream&)> on_update{};
};

}  // namespace kiln::serving
