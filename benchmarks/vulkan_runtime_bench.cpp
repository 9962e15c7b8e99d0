// benchmarks/vulkan_runtime_bench.cpp — the Vulkan runtime against raw Vulkan and memcpy,
// side by side in one run:
//   BM_dispatch_1000/...      1,000 small fills into one tensor (a WAW barrier between
//                             each): kiln batched, raw Vulkan in one command buffer (the
//                             same pipeline and barriers), and kiln with a submit+wait each.
//   BM_alloc_free_1MiB/...    pool allocate + free vs vkCreateBuffer + vkAllocateMemory
//                             + bind + free per buffer.
//   BM_upload|download_256MiB host transfers (zero-copy where unified; staged variant) vs
//                             host memcpy of the same size.
//   BM_peer_copy/{external,host_staged}/<MiB>  kiln::copy_to from one context to another on
//                             the same device, 1-64 MiB: through memory the two share
//                             (VK_KHR_external_memory_fd) vs staged through the host
//                             (options::external_memory = false), each until the copy is
//                             complete on the receiver.
// Figures read against ../shared/baselines.md (lavapipe section).
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <vector>

#include "bench_support.hpp"

#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

namespace {

using vk_traits = kiln::backend_traits<kiln::vulkan>;
constexpr int dispatches = 1000;
constexpr kiln::index_t small_elems = 1024;
constexpr std::size_t transfer_bytes = std::size_t(256) << 20;

/// One context for the whole run; nullptr (benchmarks skip) without a device.
kiln::context<kiln::vulkan>* gpu(bool zero_copy = true) {
  static std::unique_ptr<kiln::context<kiln::vulkan>> zc, staged;
  auto& slot = zero_copy ? zc : staged;
  if (!slot && kiln::vulkan::available()) {
    kiln::vulkan::options o;
    o.zero_copy = zero_copy;
    slot = std::make_unique<kiln::context<kiln::vulkan>>(o);
  }
  return slot.get();
}

void per_dispatch(benchmark::State& state) {
  state.counters["per_dispatch"] =
      benchmark::Counter(dispatches, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_dispatch_1000_kiln_batched(benchmark::State& state) {
  auto* c = gpu();
  if (!c) return state.SkipWithError("no Vulkan device");
  auto t = kiln::empty<float>(*c, {small_elems});
  t = 0.0f;
  c->synchronize();
  for (auto _ : state) {
    for (int i = 0; i < dispatches; ++i) t = static_cast<float>(i);
    c->synchronize();
  }
  per_dispatch(state);
}
BENCHMARK(BM_dispatch_1000_kiln_batched)->Name("BM_dispatch_1000/kiln_batched")->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_dispatch_1000_kiln_submit_wait_each(benchmark::State& state) {
  auto* c = gpu();
  if (!c) return state.SkipWithError("no Vulkan device");
  auto t = kiln::empty<float>(*c, {small_elems});
  for (auto _ : state) {
    for (int i = 0; i < dispatches; ++i) {
      t = static_cast<float>(i);
      c->synchronize();
    }
  }
  per_dispatch(state);
}
BENCHMARK(BM_dispatch_1000_kiln_submit_wait_each)
    ->Name("BM_dispatch_1000/kiln_submit_wait_each")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

/// The same 1,000 fills recorded by hand: one command buffer, one descriptor set, a
/// barrier after each dispatch, one submit, one fence wait.
void BM_dispatch_1000_raw_vulkan(benchmark::State& state) {
  namespace vk = kiln::detail::vk;
  auto* c = gpu();
  if (!c) return state.SkipWithError("no Vulkan device");
  auto& st = *c->state();
  const VkDevice dev = st.device();
  auto t = kiln::empty<float>(*c, {small_elems});
  c->synchronize();
  static constexpr vk::define defs[1] = {{"KILN_ELEM_BITS", "32"}};
  const vk::kernel_spec k{"fill", vk::kernels::fill, defs, 1, sizeof(vk::fill_params)};
  const vk::pipeline& p = st.prepare(k);

  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, nullptr, VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                             st.info().compute_queue_family};
  vk::check(vkCreateCommandPool(dev, &pi, nullptr, &pool), "vkCreateCommandPool");
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, nullptr, pool, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
  vk::check(vkAllocateCommandBuffers(dev, &cai, &cb), "vkAllocateCommandBuffers");
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
  VkDescriptorPool dpool = VK_NULL_HANDLE;
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, nullptr, 0, 1, 1, &ps};
  vk::check(vkCreateDescriptorPool(dev, &dpi, nullptr, &dpool), "vkCreateDescriptorPool");
  VkDescriptorSet set = VK_NULL_HANDLE;
  VkDescriptorSetAllocateInfo dsa{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, nullptr, dpool, 1, &p.set_layout};
  vk::check(vkAllocateDescriptorSets(dev, &dsa, &set), "vkAllocateDescriptorSets");
  const auto& a = t.storage()->alloc();
  VkDescriptorBufferInfo bi{a.buffer(), a.offset, a.size};
  VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, nullptr, set, 0, 0, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, nullptr, &bi, nullptr};
  vkUpdateDescriptorSets(dev, 1, &w, 0, nullptr);
  VkFence fence = VK_NULL_HANDLE;
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, nullptr, 0};
  vk::check(vkCreateFence(dev, &fi, nullptr, &fence), "vkCreateFence");

  vk::fill_params fp;
  fp.rank = 1;
  fp.count = static_cast<std::uint32_t>(small_elems);
  fp.extent[0] = fp.count;
  fp.dst_stride[0] = 1;
  const std::uint32_t groups = st.groups_for(small_elems);
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_SHADER_WRITE_BIT,
                     VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
  for (auto _ : state) {
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, nullptr, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, nullptr};
    vk::check(vkBeginCommandBuffer(cb, &begin), "vkBeginCommandBuffer");
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.handle);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    for (int i = 0; i < dispatches; ++i) {
      const float v = static_cast<float>(i);
      std::memcpy(&fp.value, &v, 4);
      vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(fp), &fp);
      vkCmdDispatch(cb, groups, 1, 1);
      vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                           nullptr, 0, nullptr);
    }
    vk::check(vkEndCommandBuffer(cb), "vkEndCommandBuffer");
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO, nullptr, 0, nullptr, nullptr, 1, &cb, 0, nullptr};
    vk::check(vkQueueSubmit(st.queue(), 1, &si, fence), "vkQueueSubmit");
    vk::check(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    vk::check(vkResetFences(dev, 1, &fence), "vkResetFences");
    vk::check(vkResetCommandBuffer(cb, 0), "vkResetCommandBuffer");
  }
  per_dispatch(state);
  vkDestroyFence(dev, fence, nullptr);
  vkDestroyDescriptorPool(dev, dpool, nullptr);
  vkDestroyCommandPool(dev, pool, nullptr);
}
BENCHMARK(BM_dispatch_1000_raw_vulkan)->Name("BM_dispatch_1000/raw_vulkan_batched")->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_alloc_free_1MiB_kiln_pool(benchmark::State& state) {
  auto* c = gpu();
  if (!c) return state.SkipWithError("no Vulkan device");
  { auto warm = kiln::empty<float>(*c, {1 << 18}); }
  for (auto _ : state) {
    auto t = kiln::empty<float>(*c, {1 << 18});
    benchmark::DoNotOptimize(t.storage().get());
  }
}
BENCHMARK(BM_alloc_free_1MiB_kiln_pool)->Name("BM_alloc_free_1MiB/kiln_pool");

void BM_alloc_free_1MiB_raw_vulkan(benchmark::State& state) {
  namespace vk = kiln::detail::vk;
  auto* c = gpu();
  if (!c) return state.SkipWithError("no Vulkan device");
  auto& st = *c->state();
  const VkDevice dev = st.device();
  for (auto _ : state) {
    VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, nullptr, 0, VkDeviceSize(1) << 20,
                          vk::memory_pool::storage_usage, VK_SHARING_MODE_EXCLUSIVE, 0, nullptr};
    VkBuffer b = VK_NULL_HANDLE;
    vk::check(vkCreateBuffer(dev, &bi, nullptr, &b), "vkCreateBuffer");
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(dev, b, &req);
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, nullptr, req.size, st.tensor_memory_type()};
    VkDeviceMemory m = VK_NULL_HANDLE;
    vk::check(vkAllocateMemory(dev, &ai, nullptr, &m), "vkAllocateMemory");
    vk::check(vkBindBufferMemory(dev, b, m, 0), "vkBindBufferMemory");
    benchmark::DoNotOptimize(m);
    vkDestroyBuffer(dev, b, nullptr);
    vkFreeMemory(dev, m, nullptr);
  }
}
BENCHMARK(BM_alloc_free_1MiB_raw_vulkan)->Name("BM_alloc_free_1MiB/raw_vulkan_per_buffer");

std::vector<std::byte>& host_buffer(int which) {
  static std::vector<std::byte> bufs[2];
  auto& b = bufs[which];
  if (b.empty()) b.assign(transfer_bytes, std::byte{1});  // touched: no page faults in the loop
  return b;
}

void BM_upload_256MiB(benchmark::State& state) {
  auto* c = gpu(state.range(0) != 0);
  if (!c) return state.SkipWithError("no Vulkan device");
  auto t = kiln::empty<std::uint8_t>(*c, {static_cast<kiln::index_t>(transfer_bytes)});
  const auto& src = host_buffer(0);
  vk_traits::upload(*t.storage(), 0, src.data(), transfer_bytes);  // first touch of the pages
  c->synchronize();
  for (auto _ : state) {
    vk_traits::upload(*t.storage(), 0, src.data(), transfer_bytes);
    c->synchronize();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(transfer_bytes));
}
BENCHMARK(BM_upload_256MiB)->Name("BM_upload_256MiB/kiln_zero_copy")->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_upload_256MiB)->Name("BM_upload_256MiB/kiln_staged")->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_download_256MiB(benchmark::State& state) {
  auto* c = gpu(state.range(0) != 0);
  if (!c) return state.SkipWithError("no Vulkan device");
  auto t = kiln::empty<std::uint8_t>(*c, {static_cast<kiln::index_t>(transfer_bytes)});
  vk_traits::upload(*t.storage(), 0, host_buffer(0).data(), transfer_bytes);
  auto& dst = host_buffer(1);
  vk_traits::download(*t.storage(), 0, dst.data(), transfer_bytes);
  for (auto _ : state) {
    vk_traits::download(*t.storage(), 0, dst.data(), transfer_bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(transfer_bytes));
}
BENCHMARK(BM_download_256MiB)->Name("BM_download_256MiB/kiln_zero_copy")->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_download_256MiB)->Name("BM_download_256MiB/kiln_staged")->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_memcpy_256MiB(benchmark::State& state) {
  const auto& src = host_buffer(0);
  auto& dst = host_buffer(1);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), transfer_bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(transfer_bytes));
}
BENCHMARK(BM_memcpy_256MiB)->Name("BM_memcpy_256MiB/host")->Unit(benchmark::kMillisecond)->UseRealTime();

/// Contexts for the copies between contexts: a pair with shared memory allowed, a pair without.
kiln::context<kiln::vulkan>* peer(int i, bool external) {
  static std::unique_ptr<kiln::context<kiln::vulkan>> slots[2][2];
  auto& slot = slots[external ? 1 : 0][i];
  if (!slot && kiln::vulkan::available()) {
    kiln::vulkan::options o;
    o.external_memory = external;
    slot = std::make_unique<kiln::context<kiln::vulkan>>(o);
  }
  return slot.get();
}

template <bool external>
void BM_peer_copy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0)) << 20;
  auto* a = peer(0, external);
  auto* b = peer(1, external);
  if (!a || !b) return state.SkipWithError("no Vulkan device");
  if (const auto why = kiln::vulkan::peer_refusal(*a, *b); external && !why.empty()) {
    return state.SkipWithError(why.c_str());
  }
  auto t = kiln::empty<float>(*a, {static_cast<kiln::index_t>(bytes / sizeof(float))});
  t = 1.0f;
  a->synchronize();
  {
    const auto warm = kiln::copy_to(*b, t);  // the shared buffer made, the pools warm
    b->synchronize();
  }
  const auto before = kiln::vulkan::peers(*b);
  for (auto _ : state) {
    const auto u = kiln::copy_to(*b, t);
    b->synchronize();
  }
  const auto after = kiln::vulkan::peers(*b);
  const auto ran = external ? after.external_copies - before.external_copies : after.staged_copies - before.staged_copies;
  if (ran != static_cast<std::uint64_t>(state.iterations())) return state.SkipWithError("the copies took the other path");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_peer_copy<true>)->Name("BM_peer_copy/external")->Arg(1)->Arg(4)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_peer_copy<false>)->Name("BM_peer_copy/host_staged")->Arg(1)->Arg(4)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, [] {}); }
