// kiln/core/context.hpp — kiln::context<B>, the owner of a backend's resources.
// A context is a cheap handle: tensors made from it share its state, so destroying the
// context object while tensors live is safe; the resources go with the last tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/backend.hpp"
#include "kiln/core/profiler.hpp"

namespace kiln {

/// Owns one backend device's resources (threads on the CPU; device, pools, queues on
/// Vulkan). Constructor arguments are the backend's (e.g. kiln::vulkan::device_index).
/// Example: `kiln::context<kiln::cpu<>> ctx;`
template <class B>
class context {
 public:
  using backend_type = B;
  using traits = backend_traits<B>;
  using state_type = typename traits::context_state;

  template <class... Args>
    requires(!(sizeof...(Args) == 1 &&
               (std::is_same_v<std::remove_cvref_t<Args>, context> || ...)))
  explicit context(Args&&... args) : state_(traits::create(std::forward<Args>(args)...)) {}

  /// Wraps an existing state (used by tensor::context()).
  explicit context(std::shared_ptr<state_type> s) noexcept : state_(std::move(s)) {}

  /// Waits until every operation submitted through this context has completed.
  void synchronize() const { traits::synchronize(*state_); }

  /// "cpu", "vulkan:0"
  std::string device_name() const { return traits::device_name(*state_); }

  /// Number of kernels (fused loops on the CPU, dispatches on a GPU) run so far.
  std::uint64_t kernels_launched() const noexcept { return state_->kernels_launched.load(); }

  /// The kernels run while profiling was on, in order (empty when it never was). Profiling
  /// is off by default; KILN_PROFILE=1, a context option (kiln::profiling{} on the CPU,
  /// kiln::vulkan::options::profile) or set_profiling(true) turns it on. On Vulkan this
  /// waits for the GPU work recorded so far, whose GPU times it reports.
  std::vector<profile_record> profile() const {
    if constexpr (requires(state_type& s) { traits::collect_profile(s); }) traits::collect_profile(*state_);
    if (const auto* p = state_->profile.get()) return p->records();
    return {};
  }
  /// Turns profiling on or off for this context (and every tensor's statements on it).
  void set_profiling(bool on) { state_->profile.enable(on, device_name()); }
  bool profiling() const noexcept { return state_->profile.on.load(std::memory_order_relaxed); }
  /// Forgets the records so far (profiling stays as it is).
  void clear_profile() const {
    if (auto* p = state_->profile.get()) p->clear();
  }

  const std::shared_ptr<state_type>& state() const noexcept { return state_; }

  friend bool operator==(const context& a, const context& b) noexcept { return a.state_ == b.state_; }

 private:
  std::shared_ptr<state_type> state_;
};

}  // namespace kiln
