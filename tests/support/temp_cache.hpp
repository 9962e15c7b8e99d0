// tests/support/temp_cache.hpp — a kernel-cache directory of one test's own
// (KILN_CACHE_DIR for the test's scope), removed before and after it.
#pragma once

#include <unistd.h>  // getpid: parallel test processes get distinct directories

#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "scoped_env.hpp"

namespace kiln_test {

struct temp_cache {
  std::filesystem::path dir;
  scoped_env env;
  explicit temp_cache(const std::string& name)
      : dir(std::filesystem::path(::testing::TempDir()) / ("kiln_vk_cache_" + name + "_" + std::to_string(::getpid()))),
        env("KILN_CACHE_DIR", dir.c_str()) {
    std::filesystem::remove_all(dir);
  }
  ~temp_cache() { std::filesystem::remove_all(dir); }
  temp_cache(const temp_cache&) = delete;
  temp_cache& operator=(const temp_cache&) = delete;

  /// The directory's files with extension ext (".spv", ".pipeline", ".warm").
  std::set<std::filesystem::path> files(const std::string& ext) const {
    std::set<std::filesystem::path> out;
    if (std::filesystem::exists(dir))
      for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ext) out.insert(e.path());
    return out;
  }
};

}  // namespace kiln_test
