// kiln/detail/impl/disk_cache.ipp — definitions of kiln/detail/disk_cache.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include <fstream>
#include <functional>  // std::hash
#include <thread>

#include "kiln/detail/disk_cache.hpp"

namespace kiln::detail {

KILN_DECL std::uint64_t fnv1a(std::span<const std::byte> s, std::uint64_t basis) noexcept {
  return fnv1a(std::string_view(reinterpret_cast<const char*>(s.data()), s.size()), basis);
}

KILN_DECL std::filesystem::path disk_cache::default_directory() {
  if (const char* off = std::getenv("KILN_CACHE"); off && (std::string_view(off) == "off" || std::string_view(off) == "0")) {
    return {};
  }
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "kiln";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "kiln";
  return {};
}

KILN_DECL disk_cache::disk_cache(std::filesystem::path dir) : dir_(std::move(dir)) {}

KILN_DECL std::filesystem::path disk_cache::path_for(std::string_view key, std::string_view kind) const {
  char name[40];
  std::snprintf(name, sizeof name, "%016llx%016llx", static_cast<unsigned long long>(fnv1a(key)),
                static_cast<unsigned long long>(fnv1a(key, 0x84222325cbf29ce4ull)));
  return dir_ / (std::string(name) + "." + std::string(kind));
}

KILN_DECL std::optional<std::vector<std::byte>> disk_cache::load(std::string_view key, std::string_view kind) {
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

KILN_DECL void disk_cache::evict(std::string_view key, std::string_view kind) noexcept {
  if (!enabled()) return;
  try {
    std::error_code ec;
    std::filesystem::remove(path_for(key, kind), ec);
    evictions_.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {
  }
}

KILN_DECL bool disk_cache::store(std::string_view key, std::string_view kind, std::span<const std::byte> payload) noexcept {
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

KILN_DECL bool disk_cache::read_all(int fd, void* dst, std::size_t n) noexcept {
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

KILN_DECL std::optional<std::vector<std::byte>> disk_cache::miss() {
  misses_.fetch_add(1, std::memory_order_relaxed);
  return std::nullopt;
}

KILN_DECL std::optional<std::vector<std::byte>> disk_cache::reject() {
  rejected_.fetch_add(1, std::memory_order_relaxed);
  return miss();
}

}  // namespace kiln::detail
