// kiln/vulkan/impl/profiler.ipp — definitions of kiln/vulkan/profiler.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/profiler.hpp"

namespace kiln::detail::vk {

KILN_DECL gpu_timer::gpu_timer(VkDevice dev, const device_info& info, profiler& prof) : dev_(dev), prof_(prof) {
  if (info.timestamp_valid_bits == 0) {
    note_ = "queue family " + std::to_string(info.compute_queue_family) + " of " + info.label() +
            " has no timestamps (timestampValidBits = 0)";
  } else if (!(info.timestamp_period > 0)) {
    note_ = info.label() + " reports timestampPeriod = 0";
  } else {
    period_ns_ = info.timestamp_period;
    mask_ = info.timestamp_valid_bits >= 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << info.timestamp_valid_bits) - 1;
  }
  prof_.set_timing_note(note_);
}

KILN_DECL gpu_timer::~gpu_timer() {
  for (auto& p : active_) vkDestroyQueryPool(dev_, p.pool, nullptr);
  for (auto& p : idle_) vkDestroyQueryPool(dev_, p.pool, nullptr);
}

KILN_DECL void gpu_timer::before(VkCommandBuffer cb, std::uint64_t batch, profiler::handle h) {
  if (!available()) return;
  if (active_.empty() || active_.back().batch != batch || active_.back().entries.size() == pairs_per_pool) {
    open(cb, batch);
  }
  query_pool& p = active_.back();
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p.pool, 2 * std::uint32_t(p.entries.size()));
  p.entries.push_back(h);
}

KILN_DECL void gpu_timer::after(VkCommandBuffer cb) {
  if (!available()) return;
  query_pool& p = active_.back();
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p.pool, 2 * std::uint32_t(p.entries.size()) - 1);
}

KILN_DECL void gpu_timer::submitted(std::uint64_t batch, double host_us) {
  if (!available()) return;
  if (!active_.empty() && active_.back().batch >= batch) submits_.emplace_back(batch, host_us);
}

KILN_DECL void gpu_timer::collect(std::uint64_t completed) {
  std::vector<std::uint64_t> ticks;
  while (!active_.empty() && active_.front().batch <= completed) {
    query_pool& p = active_.front();
    const auto n = 2 * static_cast<std::uint32_t>(p.entries.size());
    ticks.assign(n, 0);
    const VkResult r = vkGetQueryPoolResults(dev_, p.pool, 0, n, n * sizeof(std::uint64_t), ticks.data(),
                                             sizeof(std::uint64_t), VK_QUERY_RESULT_64_BIT);
    if (r == VK_NOT_READY) break;  // complete by the timeline, not yet by the queries: later
    check(r, "vkGetQueryPoolResults");
    const double offset = align(p.batch, n ? ticks[0] & mask_ : 0);
    for (std::size_t i = 0; i < p.entries.size(); ++i) {
      const std::uint64_t b = ticks[2 * i] & mask_, e = ticks[2 * i + 1] & mask_;
      const double dur_us = double((e - b) & mask_) * period_ns_ / 1e3;
      const double start_us = offset + double(b) * period_ns_ / 1e3;
      prof_.add_gpu(p.entries[i], start_us, dur_us);
      last_end_us_ = std::max(last_end_us_, start_us + dur_us);
    }
    p.entries.clear();
    idle_.push_back(p);
    active_.pop_front();
  }
  while (!submits_.empty() && submits_.front().first <= completed &&
         (active_.empty() || active_.front().batch > submits_.front().first)) {
    submits_.pop_front();
  }
}

KILN_DECL void gpu_timer::open(VkCommandBuffer cb, std::uint64_t batch) {
  query_pool p;
  if (!idle_.empty()) {
    p = std::move(idle_.back());
    idle_.pop_back();
  } else {
    VkQueryPoolCreateInfo qi{};
    qi.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = 2 * pairs_per_pool;
    check(vkCreateQueryPool(dev_, &qi, nullptr, &p.pool), "vkCreateQueryPool");
    p.entries.reserve(pairs_per_pool);
  }
  // Queries must be reset before they are written; the reset runs on the GPU in order
  // with the batch, so a pool is reusable as soon as its results were read.
  vkCmdResetQueryPool(cb, p.pool, 0, 2 * pairs_per_pool);
  p.batch = batch;
  active_.push_back(std::move(p));
}

KILN_DECL double gpu_timer::align(std::uint64_t batch, std::uint64_t t0) {
  if (batch == aligned_batch_) return aligned_offset_;
  double host = last_end_us_;
  for (const auto& [b, at] : submits_) {
    if (b == batch) host = std::max(host, at);
  }
  aligned_batch_ = batch;
  aligned_offset_ = host - double(t0) * period_ns_ / 1e3;
  return aligned_offset_;
}

KILN_DECL std::string stats_report(const memory_stats& m, const sequence_stats& q, const cache_stats& c) {
  auto mib = [](double b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
    return std::string(buf);
  };
  auto pct = [](double a, double b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", b > 0 ? 100.0 * a / b : 0.0);
    return std::string(buf);
  };
  auto secs = [](double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f s", s);
    return std::string(buf);
  };
  std::string r = "vulkan memory pool: " + mib(double(m.in_use)) + " in use, " + mib(double(m.reserved)) + " reserved, peak " +
                  mib(double(m.peak)) + "; " + std::to_string(m.blocks) + " blocks of " + mib(double(m.block_size)) + " + " +
                  std::to_string(m.dedicated) + " dedicated; " + std::to_string(m.live_allocations) + " live allocations; hit rate " +
                  pct(double(m.hits), double(m.hits + m.misses)) + " (" + std::to_string(m.hits) + " hits, " +
                  std::to_string(m.misses) + " misses)" + (m.limit ? "; limit " + mib(double(m.limit)) : std::string()) + "\n";
  r += "vulkan stream: " + std::to_string(q.dispatches) + " dispatches, " + std::to_string(q.transfers) + " transfers, " +
       std::to_string(q.barriers) + " barriers, " + std::to_string(q.submits) + " submits\n";
  const std::uint64_t lookups = c.memory_hits + c.memory_misses;
  r += "vulkan kernel cache: memory " + std::to_string(c.memory_hits) + " hits / " + std::to_string(c.memory_misses) +
       " misses (hit rate " + pct(double(c.memory_hits), double(lookups)) + "); disk " + std::to_string(c.disk_hits) + " hits / " +
       std::to_string(c.disk_misses) + " misses, " + std::to_string(c.disk_rejected) + " rejected; " +
       std::to_string(c.compilations) + " shaderc compilations (" + secs(c.compile_seconds) + "), pipelines " +
       secs(c.pipeline_seconds) + ", " + std::to_string(c.preloaded) + " preloaded; " +
       (c.directory.empty() ? std::string("disk cache off") : "directory " + c.directory) + "\n";
  return r;
}

}  // namespace kiln::detail::vk
