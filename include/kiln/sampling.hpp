// kiln/sampling.hpp — token sampling on the logits' device (kiln::sample, kiln::sampler):
// the front end and the CPU kernel, and the Vulkan kernel when <kiln/vulkan.hpp> was
// included first. Opt-in, outside kiln.hpp (programs that never sample never parse it).
#pragma once

#include "kiln/kiln.hpp"
#include "kiln/ops/sampling/philox.hpp"
#include "kiln/ops/sampling/sample.hpp"
#include "kiln/ops/sampling/sampler.hpp"
#include "kiln/cpu/sampling/sample.hpp"
#if defined(KILN_VULKAN_UMBRELLA)
#include "kiln/vulkan/ops/sample.hpp"
#endif
