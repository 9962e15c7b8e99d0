// kiln/vulkan/impl/backend.ipp — definitions of kiln/vulkan/backend.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/backend.hpp"

namespace kiln {

KILN_DECL std::vector<vulkan::device_info> vulkan::devices() {
  try {
    detail::vk::instance inst(false);
    return detail::vk::describe_all(inst);
  } catch (const device_error&) {
    return {};
  }
}

KILN_DECL bool vulkan::available() noexcept {
  try {
    const auto ds = devices();
    detail::vk::select(ds, std::nullopt);
    return true;
  } catch (...) {
    return false;
  }
}

KILN_DECL std::vector<std::string> vulkan::validation_messages() {
  auto& log = detail::vk::global_validation_log();
  std::lock_guard lock(log.mutex);
  return log.messages;
}

KILN_DECL const vulkan::device_info& vulkan::device(const context<vulkan>& ctx) { return ctx.state()->info(); }
KILN_DECL vulkan::memory_stats vulkan::memory(const context<vulkan>& ctx) { return ctx.state()->memory(); }
KILN_DECL std::size_t vulkan::trim(const context<vulkan>& ctx) { return ctx.state()->trim(); }
KILN_DECL vulkan::stream_stats vulkan::stream(const context<vulkan>& ctx) { return ctx.state()->stream(); }
KILN_DECL vulkan::cache_stats vulkan::cache(const context<vulkan>& ctx) { return ctx.state()->cache(); }
KILN_DECL std::uint64_t vulkan::wait_preloaded(const context<vulkan>& ctx) { return ctx.state()->wait_preloaded(); }
KILN_DECL vulkan::peer_stats vulkan::peers(const context<vulkan>& ctx) { return ctx.state()->peers(); }
KILN_DECL std::string vulkan::peer_refusal(const context<vulkan>& from, const context<vulkan>& to) {
  return from.state()->peer_refusal(*to.state());
}

}  // namespace kiln
