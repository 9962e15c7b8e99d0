// kiln/ops/sampling/philox.hpp — the counter-based random numbers of kiln::sample:
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11),
// keyed by the seed, counting (step, row). The same formula is the GLSL of
// kernels/sampling/sample.comp, so each backend draws the same number for a (seed, step,
// row) with no state kept between calls.
#pragma once

#include <array>
#include <cstdint>

namespace kiln::detail {

/// Philox4x32 with 10 rounds: the four 32-bit words of block `ctr` under key `key`.
constexpr std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> ctr, std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u, w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += w0;
      key[1] += w1;
    }
    const std::uint64_t p0 = std::uint64_t(m0) * ctr[0], p1 = std::uint64_t(m1) * ctr[2];
    const auto hi0 = std::uint32_t(p0 >> 32), lo0 = std::uint32_t(p0), hi1 = std::uint32_t(p1 >> 32), lo1 = std::uint32_t(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

/// The uniform number in [0, 1) of draw `step` of row `row` under `seed`: the top 24
/// bits of the block's first word, exact in float.
constexpr float sample_uniform(std::uint64_t seed, std::uint64_t step, std::uint32_t row) {
  const auto w = philox4x32({std::uint32_t(step), std::uint32_t(step >> 32), row, 0u},
                            {std::uint32_t(seed), std::uint32_t(seed >> 32)});
  return float(w[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace kiln::detail
