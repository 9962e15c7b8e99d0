// kiln/detail/constant_cache.hpp — small constant tensors a context keeps for ops that
// would otherwise upload the same values on every call (kiln::rope's inverse
// frequencies), keyed by what decides the values.
//
// Ownership: each backend's context state holds one of these, and a tensor's storage holds
// its context state, so an entry must not own the state: the ops make entries through a
// handle that does not own it (kiln::rope: detail::rope_frequencies), and the state
// empties its cache first when it is destroyed. What an op hands out is the entry
// together with an owning handle on the state, so an expression holding it keeps the
// context alive as every other tensor does.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kiln/detail/config.hpp"

namespace kiln::detail {

/// A context's constants, by key. Thread-safe: each entry is made once however many
/// threads ask for it together.
class constant_cache {
 public:
  /// Entries kept at most; past them, values are made for the caller and not kept.
  static constexpr std::size_t max_entries = 64;

  constant_cache() = default;
  constant_cache(const constant_cache&) = delete;
  constant_cache& operator=(const constant_cache&) = delete;

  /// The entry under key, made by make() when there is none (under the cache's lock, so
  /// concurrent callers wait for one make instead of each making its own).
  template <class F>
  std::shared_ptr<void> get(const std::string& key, F&& make) {
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    std::shared_ptr<void> v = make();
    made_.fetch_add(1, std::memory_order_relaxed);
    if (entries_.size() < max_entries) entries_.emplace(key, v);
    return v;
  }

  /// Drops every entry (destroyed after the lock is released: freeing a device buffer
  /// takes the context's own lock).
  void clear() noexcept;

  /// Entries held now.
  std::size_t size() const;

  /// Values made so far (uploads): for tests that check a loop makes its constants once.
  std::uint64_t made() const noexcept { return made_.load(std::memory_order_relaxed); }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<void>> entries_;
  std::atomic<std::uint64_t> made_{0};
};

}  // namespace kiln::detail

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/detail/impl/constant_cache.ipp"
#endif
