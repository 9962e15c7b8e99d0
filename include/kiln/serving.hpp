// kiln/serving.hpp — serving many generation requests at once: kiln::serving::engine
// (continuous batching over a paged KV cache), its requests, token streams and statistics.
// Opt-in, outside kiln.hpp; include <kiln/vulkan.hpp> first for Vulkan decoders.
#pragma once

#include "kiln/serving/engine.hpp"
#include "kiln/serving/queue_full.hpp"
#include "kiln/serving/request.hpp"
#include "kiln/serving/stats.hpp"
#include "kiln/serving/token_stream.hpp"
