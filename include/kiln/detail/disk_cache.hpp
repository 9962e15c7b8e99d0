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
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <cerrno>
#include <fcntl.h>     // open: O_NONBLOCK | O_NOFOLLOW, so a FIFO or a link in the directory cannot block or redirect a load
#include <sys/stat.h>  // fstat: regular files only, and their real length
#include <unistd.h>    // getpid: unique temporary names across processes; read, close

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

inline std::uint64_t fnv1a(std::span<const std::byte> s, std::uint64_t basis = 0xcbf29ce484222325ull) noexcept {
  return fnv1a(std::string_view(reinterpret_cast<const char*>(s.data()), s.size()), basis);
}

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
  static std::filesystem::path default_directory() {
    if (const char* off = std::getenv("KILN_CACHE"); off && (std::string_view(off) == "off" || std::string_view(off) == "0")) {
      return {};
    }
    if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return d;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "kiln";
    if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "kiln";
    return {};
  }

  /// A cache in dir (empty: disabled, every load misses and stores do nothing).
  explicit disk_cache(std::filesystem::path dir = default_directory()) : dir_(std::move(dir)) {}

  bool enabled() const noexcept { return !dir_.empty(); }
  const std::filesystem::path& directory() const noexcept { return dir_; }

  /// The file an entry lives in (kind: a short tag such as "spv" or "pipeline").
  std::filesystem::path path_for(std::string_view key, std::string_view kind) const {
    char name[40];
    std::snprintf(name, sizeof name, "%016llx%016llx", static_cast<unsigned long long>(fnv1a(key)),
                  static_cast<unsigned long long>(fnv1a(key, 0x84222325cbf29ce4ull)));
    return dir_ / (std::string(name) + "." + std::string(kind));
  }

  /// The payload stored under key, or nothing (miss, disabled, or an invalid file).
  /// The file is opened without blocking or following links and must be a regular file
  /// whose length is exactly what its header announces, checked before anything is
  /// allocated: a FIFO, a device, a directory or a header claiming gigabytes costs one
  /// open and one fstat, never a hang or an allocation.
  std::optional<std::vector<std::byte>> load(std::string_view key, std::string_view kind) {
    if (!enabled()) return miss();
    const std::string path = path_for(key, kind).string();
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? miss() : reject();
    struct closer {
      int fd;
      ~closer() { ::close(fd); }
    } close_on_return{fd};
    struct ::stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return reject();
    const std::uint64_t length = static_cast<std::uint64_t>(st.st_size);
    header h{};
    if (length < sizeof h || !read_all(fd, &h, sizeof h)) return reject();
    // The sizes must add up to the file's length exactly (no trailing bytes either).
    if (std::memcmp(h.magic, magic, sizeof magic) != 0 || h.version != format_version || h.key_size != key.size() ||
        length - sizeof h < key.size() || length - sizeof h - key.size() != h.payload_size) {
      return reject();
    }
    std::string stored_key(key.size(), '\0');
    if (!read_all(fd, stored_key.data(), key.size()) || stored_key != key) return reject();
    std::vector<std::byte> payload(static_cast<std::size_t>(h.payload_size));
    if (!read_all(fd, payload.data(), payload.size())) return reject();
    if (checksum(key, payload) != h.payload_checksum) return reject();
    hits_.fetch_add(1, std::memory_order_relaxed);
    return payload;
  }

  /// Removes the entry under key (a payload that validated here but that its user found
  /// unusable, such as SPIR-V a driver refuses). Best effort.
  void evict(std::string_view key, std::string_view kind) noexcept {
    if (!enabled()) return;
    try {
      std::error_code ec;
      std::filesystem::remove(path_for(key, kind), ec);
      evictions_.fetch_add(1, std::memory_order_relaxed);
    } catch (...) {
    }
  }

  /// What a file's header holds for payload under key: the payload's hash chained onto
  /// the key's, so that a payload moved under another entry's key (a splice of two valid
  /// files) does not validate.
  static std::uint64_t checksum(std::string_view key, std::span<const std::byte> payload) noexcept {
    return fnv1a(payload, fnv1a(key));
  }

  /// Stores payload under key (best effort: failures are counted, never thrown).
  bool store(std::string_view key, std::string_view kind, std::span<const std::byte> payload) noexcept {
    if (!enabled()) return false;
    try {
      std::error_code ec;
      std::filesystem::create_directories(dir_, ec);
      static std::atomic<std::uint64_t> counter{0};
      const auto final_path = path_for(key, kind);
      const auto tmp = dir_ / (".tmp-" + std::to_string(::getpid()) + "-" +
                               std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + "-" +
                               std::to_string(counter.fetch_add(1)));
      header h{};
      std::memcpy(h.magic, magic, sizeof magic);
      h.version = format_version;
      h.key_size = key.size();
      h.payload_size = payload.size();
      h.payload_checksum = checksum(key, payload);
      {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char*>(&h), sizeof h);
        f.write(key.data(), std::streamsize(key.size()));
        f.write(reinterpret_cast<const char*>(payload.data()), std::streamsize(payload.size()));
        f.flush();
        if (!f) {
          f.close();
          std::filesystem::remove(tmp, ec);
          write_failures_.fetch_add(1, std::memory_order_relaxed);
          return false;
        }
      }
      std::filesystem::rename(tmp, final_path, ec);  // atomic replace on POSIX
      if (ec) {
        std::filesystem::remove(tmp, ec);
        write_failures_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      writes_.fetch_add(1, std::memory_order_relaxed);
      return true;
    } catch (...) {
      write_failures_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  }

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
  static bool read_all(int fd, void* dst, std::size_t n) noexcept {
    auto* p = static_cast<char*>(dst);
    while (n) {
      const ::ssize_t got = ::read(fd, p, n);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      p += got;
      n -= static_cast<std::size_t>(got);
    }
    return true;
  }

  std::optional<std::vector<std::byte>> miss() {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  std::optional<std::vector<std::byte>> reject() {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return miss();
  }

  std::filesystem::path dir_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, rejected_{0}, writes_{0}, write_failures_{0}, evictions_{0};
};

}  // namespace kiln::detail
