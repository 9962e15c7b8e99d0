// kiln/ops/attention.hpp — attention: one include per op. Kernels: cpu/attention/,
// vulkan/ops/attention.hpp.
#pragma once

#include "kiln/ops/attention/attention.hpp"
#include "kiln/ops/attention/kv_cache.hpp"
#include "kiln/ops/attention/paged_attention.hpp"
#include "kiln/ops/attention/paged_write.hpp"
#include "kiln/ops/attention/paged_kv_cache.hpp"
