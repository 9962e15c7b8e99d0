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
#include "kiln/core/error.hpp"
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
  void synchronize() const { traits::synchronize(live("synchronize")); }

  /// "cpu", "vulkan:0"
  std::string device_name() const { return traits::device_name(live("device_name")); }

  /// Number of kernels (fused loops on the CPU, dispatches on a GPU) run so far.
  std::uint64_t kernels_launched() const { return live("kernels_launched").kernels_launched.load(); }

  /// The kernels run while profiling was on, in order (empty when it never was). Profiling
  /// is off by default; KILN_PROFILE=1, a context option (kiln::profiling{} on the CPU,
  /// kiln::vulkan::options::profile) or set_profiling(true) turns it on. On Vulkan this
  /// waits for the GPU work recorded so far, whose GPU times it reports.
  std::vector<profile_record> profile() const {
    state_type& s = live("profile");
    if constexpr (requires { traits::collect_profile(s); }) traits::collect_profile(s);
    if (const auto* p = s.profile.get()) return p->records();
    return {};
  }
  /// Turns profiling on or off for this context (and every tensor's statements on it).
  void set_profiling(bool on) { live("set_profiling").profile.enable(on, device_name()); }
  bool profiling() const { return live("profiling").profile.on.load(std::memory_order_relaxed); }
  /// Forgets the records so far (profiling stays as it is).
  void clear_profile() const {
    if (auto* p = live("clear_profile").profile.get()) p->clear();
  }

  /// The backend's state; throws kiln::device_error for a moved-from context.
  const std::shared_ptr<state_type>& state() const {
    live("state");
    return state_;
  }

  friend bool operator==(const context& a, const context& b) noexcept { return a.state_ == b.state_; }

 private:
  // A moved-from context holds no state: every use throws instead of dereferencing null.
  state_type& live(const char* what) const {
    if (!state_) {
      throw device_error(std::string("kiln::context::") + what +
                         ": the context was moved from and owns no device; use the context it was moved into");
    }
    return *state_;
  }

  std::shared_ptr<state_type> state_;
};

}  // namespace kiln
