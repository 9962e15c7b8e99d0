// kiln/detail/disk_cache.hpp — a persistent, process-safe cache of binary blobs keyed by
// strings (compiled SPIR-V, VkPipelineCache data). No backend headers: tested without a GPU.
//
// Where: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln;
// KILN_CACHE=off disables it. One file per entry, named by a 128-bit hash of the key.
// A file holds a header (magic, format version, sizes, payload checksum), the full key
// (so a hash collision is a miss, never a wrong kernel) and the payload; the checksum
// covers key and payload, so a payload spliced under another key does not validate. Writes go to a
// unique temporary file in the same directory and are renamed into place, so readers in
// any process see a whole old entry or a whole new one. Anything that does not validate
// (truncated, corrupt, foreign, other version) is ignored and then overwritten. Disk
// errors never throw: the cache only ever makes things faster.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <cerrno>
#include <fcntl.h>     // open: O_NONBLOCK | O_NOFOLLOW, so a FIFO or a link in the directory cannot block or redirect a load
#include <sys/stat.h>  // fstat: regular files only, and their real length
#include <unistd.h>    // getpid: unique temporary names across processes; read, close

#include "kiln/detail/config.hpp"
#include "kiln/detail/hash.hpp"

namespace kiln::detail {

KILN_DECL std::uint64_t fnv1a(std::span<const std::byte> s, std::uint64_t basis = 0xcbf29ce484222325ull) noexcept;

/// Counters of one cache (all levels of the disk cache).
struct disk_cache_stats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t rejected = 0;  // files present but invalid (ignored, then rewritten)
  std::uint64_t writes = 0;
  std::uint64_t write_failures = 0;
  std::uint64_t evictions = 0;  // entries removed because their payload proved unusable
};

class disk_cache {
 public:
  static constexpr char magic[8] = {'K', 'I', 'L', 'N', 'B', 'L', 'O', 'B'};
  static constexpr std::uint32_t format_version = 2;  ///< 2: the checksum covers the key

  /// The directory the environment selects; empty when KILN_CACHE=off or nothing is set.
  static std::filesystem::path default_directory();

  /// A cache in dir (empty: disabled, every load misses and stores do nothing).
  explicit disk_cache(std::filesystem::path dir = default_directory());

  bool enabled() const noexcept { return !dir_.empty(); }
  const std::filesystem::path& directory() const noexcept { return dir_; }

  /// The file an entry lives in (kind: a short tag such as "spv" or "pipeline").
  std::filesystem::path path_for(std::string_view key, std::string_view kind) const;

  /// The payload stored under key, or nothing (miss, disabled, or an invalid file).
  /// The file is opened without blocking or following links and must be a regular file
  /// whose length is exactly what its header announces, checked before anything is
  /// allocated: a FIFO, a device, a directory or a header claiming gigabytes costs one
  /// open and one fstat, never a hang or an allocation.
  std::optional<std::vector<std::byte>> load(std::string_view key, std::string_view kind);

  /// Removes the entry under key (a payload that validated here but that its user found
  /// unusable, such as SPIR-V a driver refuses). Best effort.
  void evict(std::string_view key, std::string_view kind) noexcept;

  /// What a file's header holds for payload under key: the payload's hash chained onto
  /// the key's, so that a payload moved under another entry's key (a splice of two valid
  /// files) does not validate.
  static std::uint64_t checksum(std::string_view key, std::span<const std::byte> payload) noexcept {
    return fnv1a(payload, fnv1a(key));
  }

  /// Stores payload under key (best effort: failures are counted, never thrown).
  bool store(std::string_view key, std::string_view kind, std::span<const std::byte> payload) noexcept;

  disk_cache_stats stats() const noexcept {
    return {hits_.load(), misses_.load(), rejected_.load(), writes_.load(), write_failures_.load(), evictions_.load()};
  }

 private:
  struct header {
    char magic[8];
    std::uint32_t version;
    std::uint32_t reserved;
    std::uint64_t key_size;
    std::uint64_t payload_size;
    std::uint64_t payload_checksum;
  };

  /// Reads exactly n bytes (a regular file: no EAGAIN; EINTR retried).
  static bool read_all(int fd, void* dst, std::size_t n) noexcept;

  std::optional<std::vector<std::byte>> miss();
  std::optional<std::vector<std::byte>> reject();

  std::filesystem::path dir_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, rejected_{0}, writes_{0}, write_failures_{0}, evictions_{0};
};

}  // namespace kiln::detail

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/detail/impl/disk_cache.ipp"
#endif
