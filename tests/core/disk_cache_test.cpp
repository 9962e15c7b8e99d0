// tests/core/disk_cache_test.cpp — the persistent kernel cache's storage layer: round
// trips, validation of damaged or foreign files, atomic replacement under concurrent
// writers (threads and processes), the directory the environment selects, and hostile
// files: size fields past the file's end, FIFOs, links and directories in place of
// entries, payloads spliced under another key.
#include <gtest/gtest.h>

#include <kiln/detail/disk_cache.hpp>

#include <fcntl.h>     // open(O_WRONLY | O_NONBLOCK): releases a load blocked on a FIFO
#include <sys/stat.h>  // mkfifo
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "random.hpp"

namespace fs = std::filesystem;
using kiln::detail::disk_cache;

namespace {

std::vector<std::byte> bytes(std::string_view s) {
  std::vector<std::byte> v(s.size());
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

fs::path fresh_dir() {
  static int n = 0;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path d = fs::path(::testing::TempDir()) /
               ("kiln_cache_" + std::to_string(::getpid()) + "_" + info->name() + "_" + std::to_string(n++));
  fs::remove_all(d);
  return d;
}

/// Scoped environment variable.
struct env_var {
  std::string name;
  std::optional<std::string> old;
  env_var(const char* n, const char* v) : name(n) {
    if (const char* o = std::getenv(n)) old = o;
    if (v) ::setenv(n, v, 1);
    else ::unsetenv(n);
  }
  ~env_var() {
    if (old) ::setenv(name.c_str(), old->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

}  // namespace

TEST(disk_cache, round_trip_and_miss) {
  disk_cache c(fresh_dir());
  EXPECT_FALSE(c.load("key", "spv"));
  auto g = kiln_test::rng();
  std::vector<std::byte> payload(10000);
  for (auto& b : payload) b = std::byte(g() & 0xff);
  EXPECT_TRUE(c.store("key", "spv", payload));
  const auto got = c.load("key", "spv");
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, payload);
  EXPECT_FALSE(c.load("key", "pipeline"));  // kinds are separate entries
  EXPECT_FALSE(c.load("other key", "spv"));
  const auto s = c.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.writes, 1u);
  // an empty payload is a valid entry too
  EXPECT_TRUE(c.store("empty", "spv", {}));
  ASSERT_TRUE(c.load("empty", "spv"));
  EXPECT_TRUE(c.load("empty", "spv")->empty());
}

TEST(disk_cache, disabled_cache_never_hits_and_never_writes) {
  disk_cache c{fs::path{}};
  EXPECT_FALSE(c.enabled());
  EXPECT_FALSE(c.store("k", "spv", bytes("data")));
  EXPECT_FALSE(c.load("k", "spv"));
}

TEST(disk_cache, truncated_corrupt_and_foreign_files_are_ignored_then_rewritten) {
  disk_cache c(fresh_dir());
  const auto payload = bytes("a compiled kernel, more or less");
  ASSERT_TRUE(c.store("k", "spv", payload));
  const fs::path p = c.path_for("k", "spv");
  const auto full = fs::file_size(p);

  fs::resize_file(p, full - 5);  // truncated
  EXPECT_FALSE(c.load("k", "spv"));
  ASSERT_TRUE(c.store("k", "spv", payload));
  EXPECT_TRUE(c.load("k", "spv"));

  {  // one payload byte flipped
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(full - 3));
    f.put('#');
  }
  EXPECT_FALSE(c.load("k", "spv"));

  std::ofstream(p, std::ios::binary | std::ios::trunc) << "not a kiln cache file at all";  // foreign
  EXPECT_FALSE(c.load("k", "spv"));
  std::ofstream(p, std::ios::binary | std::ios::trunc);  // empty
  EXPECT_FALSE(c.load("k", "spv"));

  {  // trailing garbage after a valid entry
    ASSERT_TRUE(c.store("k", "spv", payload));
    std::ofstream(p, std::ios::binary | std::ios::app) << "extra";
    EXPECT_FALSE(c.load("k", "spv"));
  }
  EXPECT_EQ(c.stats().rejected, 5u);
  ASSERT_TRUE(c.store("k", "spv", payload));
  ASSERT_TRUE(c.load("k", "spv"));
  EXPECT_EQ(*c.load("k", "spv"), payload);
}

TEST(disk_cache, an_entry_under_another_keys_name_is_a_miss) {
  // Simulates a file-name hash collision: the stored key must match exactly.
  disk_cache c(fresh_dir());
  ASSERT_TRUE(c.store("key A", "spv", bytes("A's kernel")));
  fs::copy_file(c.path_for("key A", "spv"), c.path_for("key B", "spv"));
  EXPECT_FALSE(c.load("key B", "spv"));
  EXPECT_EQ(c.stats().rejected, 1u);
}

TEST(disk_cache, other_format_version_is_rejected) {
  disk_cache c(fresh_dir());
  ASSERT_TRUE(c.store("k", "spv", bytes("payload")));
  {
    std::fstream f(c.path_for("k", "spv"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);  // the version follows the 8-byte magic
    f.put(char(disk_cache::format_version + 1));
  }
  EXPECT_FALSE(c.load("k", "spv"));
}

TEST(disk_cache, concurrent_writers_and_readers_see_whole_entries) {
  const fs::path dir = fresh_dir();
  const auto pa = bytes(std::string(50000, 'a')), pb = bytes(std::string(70000, 'b'));
  std::atomic<int> bad{0}, seen{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t) {
    ts.emplace_back([&, t] {
      disk_cache c(dir);
      for (int i = 0; i < 150; ++i) {
        if ((i + t) % 2) c.store("shared", "spv", t % 2 ? pa : pb);
        if (auto got = c.load("shared", "spv")) {
          ++seen;
          if (*got != pa && *got != pb) ++bad;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(seen.load(), 0);
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << "temporary left behind: " << e.path();
  }
}

TEST(disk_cache, several_processes_share_one_directory) {
  const fs::path dir = fresh_dir();
  std::vector<pid_t> kids;
  for (int k = 0; k < 4; ++k) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      disk_cache c(dir);
      const auto mine = bytes(std::string(30000 + 1000 * k, char('p' + k)));
      int bad = 0;
      for (int i = 0; i < 100; ++i) {
        c.store("key" + std::to_string(i % 3), "spv", mine);
        if (auto got = c.load("key" + std::to_string((i + 1) % 3), "spv")) {
          const char first = char((*got)[0]);
          if (first < 'p' || first > 's' || got->size() != std::size_t(30000 + 1000 * (first - 'p'))) ++bad;
          for (auto b : *got) bad += char(b) != first;
        }
      }
      std::_Exit(bad == 0 ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a process read a torn or foreign entry";
  }
}

TEST(disk_cache, directory_from_the_environment) {
  {
    env_var a("KILN_CACHE", nullptr), b("KILN_CACHE_DIR", "/tmp/kiln-a"), c("XDG_CACHE_HOME", "/tmp/xdg");
    EXPECT_EQ(disk_cache::default_directory(), fs::path("/tmp/kiln-a"));
  }
  {
    env_var a("KILN_CACHE", nullptr), b("KILN_CACHE_DIR", nullptr), c("XDG_CACHE_HOME", "/tmp/xdg");
    EXPECT_EQ(disk_cache::default_directory(), fs::path("/tmp/xdg/kiln"));
  }
  {
    env_var a("KILN_CACHE", nullptr), b("KILN_CACHE_DIR", nullptr), c("XDG_CACHE_HOME", nullptr), d("HOME", "/home/u");
    EXPECT_EQ(disk_cache::default_directory(), fs::path("/home/u/.cache/kiln"));
  }
  {
    env_var a("KILN_CACHE", "off"), b("KILN_CACHE_DIR", "/tmp/kiln-a");
    EXPECT_TRUE(disk_cache::default_directory().empty());
  }
}

TEST(disk_cache, unwritable_directory_fails_quietly) {
  disk_cache c(fs::path("/proc/kiln-cannot-write-here"));
  EXPECT_FALSE(c.store("k", "spv", bytes("x")));
  EXPECT_FALSE(c.load("k", "spv"));
  EXPECT_EQ(c.stats().write_failures, 1u);
}

// ---- hostile files ----------------------------------------------------------------------

namespace {

/// Byte offsets of the entry header's fields (magic[8], version, reserved, key size,
/// payload size, checksum).
constexpr std::streamoff key_size_at = 16, payload_size_at = 24, checksum_at = 32, header_bytes = 40;

void poke_u64(const fs::path& p, std::streamoff at, std::uint64_t v) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(at);
  f.write(reinterpret_cast<const char*>(&v), sizeof v);
}

/// Runs c.load(key) with a watchdog: if it has not returned after 10 s (blocked in open()
/// on the FIFO at fifo), the test fails and opens the FIFO for writing, which releases the
/// blocked open, so that a regression fails the test instead of hanging the suite.
std::optional<std::vector<std::byte>> load_with_watchdog(disk_cache& c, const std::string& key, const fs::path& fifo) {
  auto result = std::async(std::launch::async, [&] { return c.load(key, "spv"); });
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "disk_cache::load blocked on a FIFO";
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  return result.get();
}

}  // namespace

TEST(disk_cache, size_fields_past_the_files_end_are_rejected_before_allocating) {
  // A payload size of 4 GiB used to be trusted: every load allocated and zeroed 4 GiB.
  disk_cache c(fresh_dir());
  const auto payload = bytes("a small kernel");
  const fs::path p = c.path_for("k", "spv");
  for (const std::uint64_t size : {std::uint64_t(1) << 32, ~std::uint64_t(0), std::uint64_t(1) << 63,
                                   std::uint64_t(payload.size() + 1), std::uint64_t(payload.size() - 1)}) {
    ASSERT_TRUE(c.store("k", "spv", payload));
    poke_u64(p, payload_size_at, size);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(c.load("k", "spv")) << size;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.5) << size;
  }
  for (const std::uint64_t size : {std::uint64_t(1) << 32, ~std::uint64_t(0)}) {  // the key's size too
    ASSERT_TRUE(c.store("k", "spv", payload));
    poke_u64(p, key_size_at, size);
    EXPECT_FALSE(c.load("k", "spv")) << size;
  }
  EXPECT_EQ(c.stats().rejected, 7u);
  ASSERT_TRUE(c.store("k", "spv", payload));  // replaced by a good entry
  ASSERT_TRUE(c.load("k", "spv"));
  EXPECT_EQ(*c.load("k", "spv"), payload);
}

TEST(disk_cache, a_fifo_in_place_of_an_entry_neither_blocks_nor_sticks) {
  disk_cache c(fresh_dir());
  fs::create_directories(c.directory());
  const fs::path p = c.path_for("k", "spv");
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  EXPECT_FALSE(load_with_watchdog(c, "k", p));
  EXPECT_EQ(c.stats().rejected, 1u);
  ASSERT_TRUE(c.store("k", "spv", bytes("payload")));  // the FIFO is replaced
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(p)));
  const auto got = load_with_watchdog(c, "k", p);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, bytes("payload"));
}

TEST(disk_cache, links_and_directories_in_place_of_entries_are_not_followed) {
  disk_cache c(fresh_dir());
  disk_cache elsewhere(fresh_dir());
  ASSERT_TRUE(elsewhere.store("k", "spv", bytes("someone else's file")));
  fs::create_directories(c.directory());
  const fs::path p = c.path_for("k", "spv");
  fs::create_symlink(elsewhere.path_for("k", "spv"), p);
  EXPECT_FALSE(c.load("k", "spv")) << "a link was followed";
  ASSERT_TRUE(c.store("k", "spv", bytes("mine")));  // replaces the link, not its target
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(p)));
  EXPECT_EQ(*elsewhere.load("k", "spv"), bytes("someone else's file"));
  EXPECT_EQ(*c.load("k", "spv"), bytes("mine"));

  const fs::path q = c.path_for("d", "spv");
  fs::create_directories(q);
  EXPECT_FALSE(c.load("d", "spv"));
  EXPECT_EQ(c.stats().rejected, 2u);
}

TEST(disk_cache, a_payload_spliced_under_another_key_is_rejected) {
  // A file with this entry's key, another entry's payload and that payload's own hash:
  // the checksum covers the key, so the splice does not validate.
  disk_cache c(fresh_dir());
  const auto mine = bytes("kernel B's SPIR-V"), theirs = bytes("kernel A's SPIR-V, longer");
  ASSERT_TRUE(c.store("key B", "spv", mine));
  const fs::path p = c.path_for("key B", "spv");
  auto write_entry = [&](std::uint64_t checksum) {
    std::string head(std::size_t(header_bytes), '\0');
    std::ifstream(p, std::ios::binary).read(head.data(), header_bytes);
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(head.data(), header_bytes);
    f << "key B";
    f.write(reinterpret_cast<const char*>(theirs.data()), std::streamsize(theirs.size()));
    f.close();
    poke_u64(p, payload_size_at, theirs.size());
    poke_u64(p, checksum_at, checksum);
  };
  write_entry(kiln::detail::fnv1a(std::span<const std::byte>(theirs)));  // the payload's hash alone
  EXPECT_FALSE(c.load("key B", "spv"));
  write_entry(disk_cache::checksum("key B", theirs));  // a deliberate forgery validates as a file:
  ASSERT_TRUE(c.load("key B", "spv"));                 // its user checks the payload (spirv_fits)
  EXPECT_EQ(*c.load("key B", "spv"), theirs);
}

TEST(disk_cache, evict_removes_an_entry) {
  disk_cache c(fresh_dir());
  ASSERT_TRUE(c.store("k", "spv", bytes("payload")));
  c.evict("k", "spv");
  EXPECT_FALSE(fs::exists(c.path_for("k", "spv")));
  EXPECT_FALSE(c.load("k", "spv"));
  EXPECT_EQ(c.stats().evictions, 1u);
}
