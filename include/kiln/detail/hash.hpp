// kiln/detail/hash.hpp — FNV-1a over text, at compile time or run time: the names of
// generated kernels and the keys of kiln's caches.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln::detail {

/// FNV-1a, 64-bit, with a caller-chosen basis (two bases give a 128-bit file name).
constexpr std::uint64_t fnv1a(std::string_view s, std::uint64_t basis = 0xcbf29ce484222325ull) noexcept {
  std::uint64_t h = basis;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace kiln::detail
