// kiln/vulkan/impl/context.ipp — definitions of kiln/vulkan/context.hpp (inline in the
// header-only mode, compiled once in kiln::vulkan_runtime otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/codegen/plan.hpp"  // max_texel_binding

#include <bit>  // std::bit_ceil
#if !defined(_WIN32)
#include <unistd.h>  // close: an exported fd that was not imported
#endif

namespace kiln::detail::vk {

KILN_DECL device_caps make_device_caps(const device_info& d, bool texel_reads) {
  device_caps c;
  c.max_invocations = d.max_workgroup_invocations;
  c.max_wg_x = d.max_workgroup_size[0];
  c.shared_bytes = d.max_shared_memory;
  c.max_push_bytes = std::max<std::uint32_t>(d.max_push_constants, 4);  // 0 would mean "no limit"
  c.max_storage_buffers = std::max<std::uint32_t>(d.max_storage_buffers, 1);
  const auto has = [&](const char* op) {
    return std::find(d.subgroup_operations.begin(), d.subgroup_operations.end(), op) != d.subgroup_operations.end();
  };
  if (d.subgroups_in_compute && has("basic")) c.subgroup = d.subgroup_size;
  c.subgroup_arithmetic = has("arithmetic");
  c.subgroup_shuffle = has("shuffle");
  c.cpu = d.type == device_type::cpu;
  c.lanes = c.cpu;  // (given shuffles; see device_caps_of)
  c.int64 = d.int64;
  c.texel_reads = texel_reads;
  c.max_texel_buffers = std::min(d.max_texel_buffers, max_texel_binding);
  c.texel_views = d.max_texel_buffer_elements > 0 && c.max_texel_buffers > 0;
  c.dot = d.integer_dot_product;
  c.dot_fast = d.dot4x8_signed_accelerated;
  // cooperative matrices: f16 x f16 + f32 -> f32, the largest shape the driver reports
  if (d.cooperative_matrix && d.cooperative_matrix_nv && d.fp16_arithmetic && c.arithmetic_subgroup() &&
      !env_off("KILN_VULKAN_COOPMAT")) {
    for (const auto& m : d.cooperative_matrix_shapes) {
      if (m.a != "f16" || m.b != "f16" || m.c != "f32" || m.d != "f32") continue;
      if (std::uint64_t(m.m) * m.n * m.k > std::uint64_t(c.cm_m) * c.cm_n * c.cm_k) {
        c.cm_m = m.m;
        c.cm_n = m.n;
        c.cm_k = m.k;
      }
    }
  }
  return c;
}

KILN_DECL context_state::context_state(const context_options& opt) {
  validation_ = opt.validation.value_or(env_flag("KILN_VULKAN_VALIDATION"));
  std::size_t limit = 0;
  if (opt.memory_limit) {
    limit = *opt.memory_limit;
  } else if (const char* env = std::getenv("KILN_VULKAN_MEMORY_LIMIT"); env && *env) {
    limit = parse_bytes(env, "KILN_VULKAN_MEMORY_LIMIT");
  }
  instance_ = std::make_unique<instance>(validation_);
  std::vector<VkPhysicalDevice> handles;
  const auto all = describe_all(*instance_, &handles);
  info_ = select(all, opt.device);
  physical_ = handles[static_cast<std::size_t>(info_.index)];
  auto cap = [](std::uint32_t& limit, std::uint32_t to) {
    if (to) limit = std::min(limit, to);
  };
  cap(info_.max_push_constants, opt.max_push_constants);
  cap(info_.max_storage_buffers, opt.max_storage_buffers);
  cap(info_.max_texel_buffers, opt.max_texel_buffers);

  // Device: one compute queue; the features kiln's kernels use, where present.
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = info_.compute_queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  f12.timelineSemaphore = VK_TRUE;
  f12.storageBuffer8BitAccess = info_.storage_8bit;
  f12.shaderInt8 = info_.int8_arithmetic;
  f12.shaderFloat16 = info_.fp16_arithmetic;
  VkPhysicalDeviceVulkan11Features f11{};
  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  f11.pNext = &f12;
  f11.storageBuffer16BitAccess = info_.storage_16bit;
  VkPhysicalDeviceFeatures2 f10{};
  f10.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f10.pNext = &f11;
  f10.features.shaderInt64 = info_.int64;
  // Integer dot products (the quantized products' packed 4x8-bit dots): the extension's
  // struct, core in 1.3 (no VkPhysicalDeviceVulkan13Features in the chain, which may not
  // stand beside it); a 1.2 device also needs the extension itself enabled.
  VkPhysicalDeviceShaderIntegerDotProductFeatures fdot{};
  fdot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  fdot.shaderIntegerDotProduct = VK_TRUE;
  std::vector<const char*> extensions;
  if (info_.integer_dot_product) {
    fdot.pNext = f10.pNext;
    f10.pNext = &fdot;
    if (info_.integer_dot_product_extension) extensions.push_back("VK_KHR_shader_integer_dot_product");
  }
  // Cooperative matrices (the GEMM's coopmat variant), NV form, on allowed drivers only.
  VkPhysicalDeviceCooperativeMatrixFeaturesNV fcm{};
  fcm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  fcm.cooperativeMatrix = VK_TRUE;
  if (!(info_.cooperative_matrix && info_.fp16_arithmetic)) info_.cooperative_matrix_nv = false;
  // The Vulkan memory model wherever the device has it (the cooperative-matrix kernels
  // declare it), with device scope where offered: under the model, the device-scope
  // atomics glslang emits by default (kernels/quant/matvec_split.comp's atomicAdd) need
  // vulkanMemoryModelDeviceScope, and every device runs the kernels under one model, so
  // validation on lavapipe sees what it sees on a GPU.
  {
    VkPhysicalDeviceVulkan12Features has{};
    has.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    VkPhysicalDeviceFeatures2 all{};
    all.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    all.pNext = &has;
    vkGetPhysicalDeviceFeatures2(physical_, &all);
    f12.vulkanMemoryModel = has.vulkanMemoryModel;
    f12.vulkanMemoryModelDeviceScope = has.vulkanMemoryModel && has.vulkanMemoryModelDeviceScope;
  }
  if (info_.cooperative_matrix_nv) {
    fcm.pNext = f10.pNext;
    f10.pNext = &fcm;
    extensions.push_back("VK_NV_cooperative_matrix");
  }
  // Copies between contexts through shared memory (copy_to_peer), only where the device
  // offers it: VK_KHR_external_memory itself is core since Vulkan 1.1.
  serial_ = next_serial_.fetch_add(1, std::memory_order_relaxed);
  peer_buffer_size_ = std::max<std::size_t>(opt.peer_buffer_size, std::size_t(1) << 20);
  external_memory_ = info_.external_memory_fd &&
                     opt.external_memory.value_or(!env_off("KILN_VULKAN_EXTERNAL_MEMORY"));
  if (external_memory_) extensions.push_back(VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  di.pNext = &f10;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  di.ppEnabledExtensionNames = extensions.data();
  VkDevice dev = VK_NULL_HANDLE;
  if (VkResult r = vkCreateDevice(physical_, &di, nullptr, &dev); r != VK_SUCCESS) {
    throw device_unavailable("kiln::vulkan: cannot open " + info_.label() + ": " + call_failed("vkCreateDevice", r));
  }
  device_.dev = dev;
  vkGetDeviceQueue(dev, info_.compute_queue_family, 0, &queue_);
  if (external_memory_) {
    get_memory_fd_ = reinterpret_cast<PFN_vkGetMemoryFdKHR>(vkGetDeviceProcAddr(dev, "vkGetMemoryFdKHR"));
    external_memory_ = get_memory_fd_ != nullptr;
  }

  if (opt.texel_reads) {
    texel_reads_ = *opt.texel_reads;
  } else if (const char* env = std::getenv("KILN_VULKAN_TEXEL_READS"); env && *env) {
    texel_reads_ = !env_off("KILN_VULKAN_TEXEL_READS");
  } else {
    texel_reads_ = info_.type == device_type::cpu;
  }
  texel_reads_ = texel_reads_ && info_.max_texel_buffer_elements > 0;
  single_step_ = opt.single_step;
  caps_ = make_device_caps(info_, texel_reads_);
  // Texel views wherever the device has them, whatever texel_reads says: a kernel with
  // more inputs than the device's storage-buffer descriptors reads some through them.
  pool_ = std::make_unique<memory_pool>(dev, info_, opt.block_size, limit, true);
  zero_copy_ = opt.zero_copy && info_.unified_memory;
  auto tensor_type = zero_copy_ ? pool_->find_type(true, true, true, true) : pool_->find_type(true, false, true, false);
  if (!tensor_type) tensor_type = pool_->find_type(false, false, true, false);
  auto staging_type = pool_->find_type(false, true, false, true);
  if (!tensor_type || !staging_type) {
    throw device_unavailable("kiln::vulkan: " + info_.label() + " offers no memory type for storage buffers");
  }
  tensor_type_ = *tensor_type;
  staging_type_ = *staging_type;
  staging_size_ = std::max<std::size_t>(opt.staging_size, std::size_t(64) << 10);
  seq_ = std::make_unique<sequence>(dev, queue_, info_.compute_queue_family, std::max(opt.batch_commands, 1u));
  kernels_ = std::make_unique<shader_cache>(dev, info_);
  std::uint32_t every = info_.type == device_type::cpu ? 16 : 1;
  if (opt.profile_gpu_every) {
    every = *opt.profile_gpu_every;
  } else if (const char* env = std::getenv("KILN_PROFILE_GPU_EVERY"); env && *env) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end || v < 1 || v > 1000000) {
      throw error(std::string("kiln::vulkan: KILN_PROFILE_GPU_EVERY='") + env + "' is not a count (1..1000000)");
    }
    every = static_cast<std::uint32_t>(v);
  }
  profile.gpu_every = std::max<std::uint32_t>(every, 1);
  profile.configure(opt.profile, name());
  workgroup_size_ = kernels_->workgroup_size();
  elements_per_invocation_ = kernels_->elements_per_invocation();
  enlist(this);
}

KILN_DECL context_state::~context_state() {
  delist(this);
  // The cached constants' storage points at this state without owning it: their memory
  // goes back to the pool while the pool is still here.
  constants.clear();
  release_device();
}

KILN_DECL void context_state::release(const allocation& a, const access_state& s) noexcept {
  std::lock_guard lock(mutex_);
  if (!pool_) return;  // the device is released (release_device): its memory went with it
  if (lost_) {
    // A loss seen by one call need not have stopped work submitted before it: let the
    // device drain once (a lost device returns at once) before memory goes back.
    if (!drained_) vkDeviceWaitIdle(device_.dev);
    drained_ = true;
    pool_->free(a);
  } else if (s.last_use() <= seq_->completed()) {
    pool_->free(a);
  } else {
    deferred_.emplace_back(s.last_use(), a);
  }
}

KILN_DECL memory_stats context_state::memory() const {
  std::lock_guard lock(mutex_);
  ensure_alive();
  return pool_->stats();
}

KILN_DECL std::size_t context_state::trim() {
  std::lock_guard lock(mutex_);
  ensure_alive();
  return pool_->trim();
}

KILN_DECL sequence_stats context_state::stream() const {
  std::lock_guard lock(mutex_);
  ensure_alive();
  return seq_->stats();
}

KILN_DECL std::size_t context_state::compilations() const {
  std::lock_guard lock(mutex_);
  ensure_alive();
  return kernels_->compilations();
}

KILN_DECL cache_stats context_state::cache() const {
  std::lock_guard lock(mutex_);
  ensure_alive();
  return kernels_->stats();
}

KILN_DECL void context_state::collect_profile() {
  synchronize();
  std::lock_guard lock(mutex_);
  if (timer_) poll_locked();
}

KILN_DECL std::uint64_t context_state::wait_preloaded() const {
  ensure_alive();
  return kernels_->wait_preloaded();
}

KILN_DECL std::uint32_t context_state::groups_for(std::uint64_t elements) const noexcept {
  const std::uint64_t per = std::uint64_t(workgroup_size_) * elements_per_invocation_;
  const std::uint64_t g = (elements + per - 1) / per;
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(g, 1, info_.max_workgroup_count[0]));
}

KILN_DECL const pipeline& context_state::prepare(const kernel_spec& k) {
  std::lock_guard lock(mutex_);
  ensure_alive();
  return kernels_->get(k);
}

KILN_DECL void context_state::dispatch(const kernel_spec& k, std::span<const binding> buffers,
                                       std::span<const std::byte> push, const grid& groups) {
  check_groups(k, groups);
  dispatch_grid(k, buffers, push, groups);
}

KILN_DECL void context_state::dispatch_checked(const kernel_spec& k, std::span<const binding> buffers,
                                               std::span<const std::byte> push, const grid& groups,
                                               std::uint64_t words, check_report report) {
  check_groups(k, groups);
  pending_check c;
  c.words = std::max<std::uint64_t>(words, 1);
  c.report = std::move(report);
  // Host-visible memory, written here before the batch is submitted (coherent: visible
  // at submit) and read by the host once the batch completes (sequence::submit's barrier).
  c.buffer = allocate_in(static_cast<std::size_t>(c.words) * 4, zero_copy_ ? tensor_type_ : staging_type_);
  std::memcpy(c.buffer.mapped(), &check_none, sizeof check_none);
  access_state st;
  std::vector<binding> b(buffers.begin(), buffers.end());
  try {
    b.push_back({&c.buffer, &st, true});
    dispatch_grid(k, b, push, groups, &c);  // on success, c moved into checks_
  } catch (...) {
    if (c.buffer) release(c.buffer, st);
    throw;
  }
}

KILN_DECL void context_state::check_groups(const kernel_spec& k, const grid& groups) const {
  for (int d = 0; d < 3; ++d) {
    if (groups.count[d] > info_.max_workgroup_count[static_cast<std::size_t>(d)]) {
      throw device_error("kiln::vulkan: kernel '" + std::string(k.name) + "' needs " + std::to_string(groups.count[d]) +
                         " workgroups along dimension " + std::to_string(d) + "; " + info_.label() + " allows " +
                         std::to_string(info_.max_workgroup_count[static_cast<std::size_t>(d)]) +
                         " (maxComputeWorkGroupCount)");
    }
  }
}

KILN_DECL context_state::grid context_state::grid_for(std::uint64_t count) const {
  const std::uint64_t mx = std::max<std::uint32_t>(info_.max_workgroup_count[0], 1);
  const std::uint64_t x = std::clamp<std::uint64_t>(count, 1, mx);
  const std::uint64_t y = std::max<std::uint64_t>((count + x - 1) / x, 1);
  if (y > info_.max_workgroup_count[1]) {
    throw device_error("kiln::vulkan: " + std::to_string(count) + " workgroups exceed " + info_.label() +
                       "'s maxComputeWorkGroupCount[0] * [1]; split the work");
  }
  return grid{{static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y), 1}};
}

KILN_DECL void context_state::dispatch_grid(const kernel_spec& k, std::span<const binding> buffers,
                                            std::span<const std::byte> push, const grid& groups,
                                            pending_check* check) {
  const std::uint32_t param_bytes = k.params_bytes ? k.params_bytes : k.push_bytes;
  if (buffers.size() != k.bindings || push.size() != param_bytes) {
    throw error("kiln::vulkan: kernel '" + std::string(k.name) + "' takes " + std::to_string(k.bindings) +
                " buffers and " + std::to_string(param_bytes) + " bytes of " +
                (k.params_bytes ? "parameters" : "push constants") + "; given " + std::to_string(buffers.size()) +
                " and " + std::to_string(push.size()));
  }
  allocation params;
  if (k.params_bytes) {
    params = allocate_in(k.params_bytes, zero_copy_ ? tensor_type_ : staging_type_);
    std::memcpy(params.mapped(), push.data(), push.size());  // coherent: visible at submit
  }
  std::lock_guard lock(mutex_);
  access_state params_state;  // the dispatch's read of the parameters, for the deferred free
  auto release_params = [&]() noexcept {
    if (!params) return;
    if (lost_ || params_state.last_use() <= seq_->completed()) pool_->free(params);
    else deferred_.emplace_back(params_state.last_use(), params);  // room reserved below
  };
  try {
    if (params) deferred_.reserve(deferred_.size() + 1);
    if (check) checks_.reserve(checks_.size() + 1);  // the push_back below cannot fail once recorded
    record_dispatch(k, buffers, push, groups, params, params_state);
  } catch (...) {
    release_params();
    throw;
  }
  release_params();
  if (check) {
    check->value = buffers.back().state->write_value;
    checks_.push_back(std::move(*check));
    check->buffer = {};
  }
  kernels_launched.fetch_add(1, std::memory_order_relaxed);
}

KILN_DECL void context_state::write(const allocation& a, access_state& s, std::size_t offset, const void* src,
                                    std::size_t bytes) {
  std::unique_lock lock(mutex_);
  ensure_alive();
  if (zero_copy_) {
    wait_locked(lock, s.last_use());
    lock.unlock();
    std::memcpy(a.mapped() + offset, src, bytes);
    return;
  }
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(bytes - done, staging_size_);
    const VkDeviceSize at = ring_reserve(lock, n);
    std::memcpy(ring_.alloc.mapped() + at, static_cast<const std::byte*>(src) + done, n);
    record_copy(ring_.alloc, ring_.alloc.offset + at, a, s, a.offset + offset + done, n, true);
    ring_commit(at, n);
    done += n;
  }
}

KILN_DECL void context_state::read(const allocation& a, access_state& s, std::size_t offset, void* dst,
                                   std::size_t bytes) {
  std::unique_lock lock(mutex_);
  ensure_alive();
  if (zero_copy_) {
    wait_locked(lock, s.write_value);
    report_failed_checks_locked();
    lock.unlock();
    std::memcpy(dst, a.mapped() + offset, bytes);
    return;
  }
  // The lock stays held until each chunk is copied out, so no other thread can reuse
  // the ring range between the GPU's copy and ours.
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(bytes - done, staging_size_);
    const VkDeviceSize at = ring_reserve(lock, n);
    record_copy(a, a.offset + offset + done, ring_.alloc, s, ring_.alloc.offset + at, n, false);
    ring_commit(at, n);
    const std::uint64_t v = seq_->recording_value();
    submit_locked();
    fatal_on_failure([&] { seq_->wait(v, &lost_); });
    poll_locked();
    std::memcpy(static_cast<std::byte*>(dst) + done, ring_.alloc.mapped() + at, n);
    done += n;
  }
  report_failed_checks_locked();
}

KILN_DECL std::uint64_t context_state::read_begin(const allocation& a, access_state& s, std::size_t offset,
                                                  std::size_t bytes, allocation& readback,
                                                  access_state& readback_state) {
  std::unique_lock lock(mutex_);
  ensure_alive();
  std::uint64_t v = s.write_value;
  if (!zero_copy_) {
    lock.unlock();
    readback = allocate_in(bytes, staging_type_);
    lock.lock();
    record_copy(a, a.offset + offset, readback, s, readback.offset, bytes, false);
    readback_state.write_value = seq_->recording_value();
    v = readback_state.write_value;
  }
  if (v > seq_->submitted()) submit_locked();
  return v;
}

KILN_DECL void context_state::flush() {
  std::lock_guard lock(mutex_);
  ensure_alive();
  submit_locked();
}

KILN_DECL void context_state::wait(std::uint64_t v) {
  std::unique_lock lock(mutex_);
  ensure_alive();
  wait_locked(lock, v);
  report_failed_checks_locked();
}

KILN_DECL bool context_state::done(std::uint64_t v) {
  std::lock_guard lock(mutex_);
  ensure_alive();
  if (v > seq_->completed()) poll_locked();
  return v <= seq_->completed();
}

KILN_DECL void context_state::synchronize() {
  std::unique_lock lock(mutex_);
  ensure_alive();
  const std::uint64_t v = seq_->has_recorded() ? seq_->recording_value() : seq_->submitted();
  wait_locked(lock, v);
  report_failed_checks_locked();
}

KILN_DECL void context_state::mark_lost(const std::string& why) noexcept {
  std::lock_guard lock(lost_mutex_);
  if (!lost_) {
    lost_reason_ = why;
    lost_ = true;
  }
}

KILN_DECL void context_state::release_device() noexcept {
  std::lock_guard lock(mutex_);
  if (!pool_) return;  // released before
  if (device_.dev) vkDeviceWaitIdle(device_.dev);
  if (timer_ && !lost_) {  // the last GPU times, before the profiler writes its trace
    try {
      seq_->poll();
      timer_->collect(seq_->completed());
    } catch (...) {
    }
  }
  for (auto& d : deferred_) pool_->free(d.second);
  deferred_.clear();
  for (auto& c : checks_) pool_->free(c.buffer);
  checks_.clear();
  // Shared buffers: this context's side of each goes with its device (the device is idle);
  // the other context frees its own side when it next copies or goes.
  for (auto& [serial, link] : links_out_) {
    link->dead = true;
    destroy_side(link->send);
  }
  links_out_.clear();
  for (auto& link : links_in_) {
    link->dead = true;
    destroy_side(link->receive);
  }
  links_in_.clear();
  if (ring_.alloc) pool_->free(ring_.alloc);
  ring_.alloc = {};
  ring_.in_use.clear();
  // the members' own order of destruction
  timer_.reset();
  kernels_.reset();
  seq_.reset();
  pool_.reset();
  device_.destroy();
  instance_.reset();
}

KILN_DECL context_state::device_owner::~device_owner() { destroy(); }

KILN_DECL void context_state::device_owner::destroy() noexcept {
  if (dev) vkDestroyDevice(dev, nullptr);
  dev = VK_NULL_HANDLE;
}

KILN_DECL context_state::live_contexts& context_state::registry() {
  static auto* r = new live_contexts;
  return *r;
}

KILN_DECL void context_state::enlist(context_state* s) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.states.reserve(r.states.size() + 1);
  if (r.states.empty() && std::atexit(&release_at_exit) != 0) {
    throw error("kiln::vulkan: cannot register the exit handler that releases the device");
  }
  r.states.push_back(s);
}

KILN_DECL void context_state::delist(context_state* s) noexcept {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.states.erase(std::remove(r.states.begin(), r.states.end(), s), r.states.end());
}

KILN_DECL void context_state::release_at_exit() noexcept {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  for (context_state* s : r.states) {
    s->mark_lost("released when the process exited, before the Vulkan driver unloads");
    s->release_device();
  }
}

KILN_DECL void context_state::ensure_alive() const {
  if (lost_) {
    std::lock_guard lock(lost_mutex_);
    throw device_error("kiln::vulkan: " + info_.label() + " is lost (" + lost_reason_ +
                       "); this context accepts no new work: create a new context");
  }
}

KILN_DECL allocation context_state::allocate_in(std::size_t bytes, std::uint32_t type) {
  std::unique_lock lock(mutex_);
  ensure_alive();
  if (!deferred_.empty()) poll_locked();
  try {
    return count_memory(pool_->allocate(bytes, type));
  } catch (const out_of_memory&) {
    if (deferred_.empty()) throw;
  }
  std::uint64_t v = 0;
  for (const auto& d : deferred_) v = std::max(v, d.first);
  wait_locked(lock, v);
  return count_memory(pool_->allocate(bytes, type));
}

KILN_DECL allocation context_state::count_memory(allocation a) {
  if (profile.on.load(std::memory_order_relaxed)) [[unlikely]] {
    const memory_stats m = pool_->stats();
    profile.get()->counter("memory pool", "reserved", double(m.reserved), "in_use", double(m.in_use));
  }
  return a;
}

KILN_DECL void context_state::submit_locked() {
  if (timer_) [[unlikely]] {  // profiling: the submit on its thread's track, the batch's host time
    profiler& p = *profile.get();
    const std::uint64_t batch = seq_->recording_value();
    const double t0 = p.now_us();
    fatal_on_failure([&] { seq_->submit(); });
    p.span("submit", t0, p.now_us());
    timer_->submitted(batch, t0);
  } else {
    fatal_on_failure([&] { seq_->submit(); });
  }
  poll_locked();
}

KILN_DECL void context_state::poll_locked() {
  fatal_on_failure([&] { seq_->poll(); });
  if (timer_ && timer_->pending()) [[unlikely]] fatal_on_failure([&] { timer_->collect(seq_->completed()); });
  const std::uint64_t done = seq_->completed();
  std::erase_if(deferred_, [&](const std::pair<std::uint64_t, allocation>& d) {
    if (d.first > done) return false;
    pool_->free(d.second);
    return true;
  });
  // Checks that passed go as their work completes; failed ones wait for a synchronisation.
  std::erase_if(checks_, [&](const pending_check& c) {
    if (c.value > done) return false;
    std::uint32_t first;
    std::memcpy(&first, c.buffer.mapped(), sizeof first);
    if (first != check_none) return false;
    pool_->free(c.buffer);
    return true;
  });
}

KILN_DECL std::optional<std::string> context_state::take_failed_checks_locked() {
  std::optional<std::string> message;
  const std::uint64_t done = seq_->completed();
  std::erase_if(checks_, [&](pending_check& c) {
    if (c.value > done) return false;
    if (!message) {
      const auto* w = reinterpret_cast<const std::uint32_t*>(c.buffer.mapped());
      if (w[0] != check_none) {
        const std::uint64_t at = w[0];
        const std::int64_t value = at + 1 < c.words ? std::int64_t(std::int32_t(w[at + 1])) : 0;
        try {
          message = c.report(at, value);
        } catch (...) {  // out of memory while formatting: still report the failure
          message = "kiln: an index check failed at position " + std::to_string(at);
        }
      }
    }
    pool_->free(c.buffer);
    return true;
  });
  return message;
}

KILN_DECL void context_state::report_failed_checks_locked() {
  if (checks_.empty()) return;
  if (auto m = take_failed_checks_locked()) throw index_error(std::move(*m));
}

KILN_DECL void context_state::wait_locked(std::unique_lock<std::mutex>& lock, std::uint64_t v) {
  if (v <= seq_->completed()) return;
  if (v > seq_->submitted()) submit_locked();
  if (v > seq_->submitted()) return;  // nothing was recorded for it after all
  profiler* p = profile.on.load(std::memory_order_relaxed) ? profile.get() : nullptr;
  const double t0 = p ? p->now_us() : 0;
  lock.unlock();
  fatal_on_failure([&] { seq_->wait(v, &lost_); });
  if (p) p->span("wait", t0, p->now_us());
  lock.lock();
  poll_locked();
}

KILN_DECL VkDeviceSize context_state::ring_reserve(std::unique_lock<std::mutex>& lock, std::size_t n) {
  if (!ring_.alloc) {
    lock.unlock();
    allocation a = allocate_in(staging_size_, staging_type_);
    lock.lock();
    if (ring_.alloc) {  // another thread made it meanwhile
      pool_->free(a);
    } else {
      ring_.alloc = a;
    }
  }
  const VkDeviceSize align = pool_->alignment();
  const VkDeviceSize size = (n + align - 1) / align * align;
  if (ring_.head + size > ring_.alloc.size) ring_.head = 0;
  const VkDeviceSize b = ring_.head, e = b + size;
  std::uint64_t need = 0;
  for (const auto& r : ring_.in_use) {
    if (r.begin < e && b < r.end) need = std::max(need, r.value);
  }
  if (need > seq_->completed()) {
    if (need > seq_->submitted()) submit_locked();
    fatal_on_failure([&] { seq_->wait(need, &lost_); });  // the lock stays: the range is ours next
    poll_locked();
  }
  std::erase_if(ring_.in_use, [&](const staging_ring::range& r) { return r.value <= seq_->completed(); });
  ring_.head = e;
  return b;
}

KILN_DECL void context_state::ring_commit(VkDeviceSize at, std::size_t n) {
  const VkDeviceSize align = pool_->alignment();
  ring_.in_use.push_back({at, at + (n + align - 1) / align * align, seq_->recording_value()});
}

KILN_DECL void context_state::record_copy(const allocation& src, VkDeviceSize src_offset, const allocation& dst,
                                          access_state& s, VkDeviceSize dst_offset, std::size_t bytes,
                                          bool to_tensor) {
  fatal_on_failure([&] {
    const buffer_access use{&s, to_tensor};
    VkCommandBuffer cb = seq_->begin_command({&use, 1});
    const VkBufferCopy c{src_offset, dst_offset, bytes};
    vkCmdCopyBuffer(cb, src.buffer(), dst.buffer(), 1, &c);
    seq_->count_transfer();
  });
}

KILN_DECL void context_state::record_dispatch(const kernel_spec& k, std::span<const binding> buffers,
                                              std::span<const std::byte> push, const grid& groups,
                                              const allocation& params, access_state& params_state) {
  ensure_alive();
  const auto nb = static_cast<std::uint32_t>(buffers.size());
  const std::uint32_t n = nb + (params ? 1 : 0);
  std::vector<VkBufferView> views(nb, VK_NULL_HANDLE);
  descriptor_counts counts;
  for (std::uint32_t i = 0; i < nb; ++i) {
    const auto& b = buffers[i];
    const bool texel = i < 32 && (k.texel_bindings >> i) & 1u;
    if (texel != b.texel || (texel && !pool_->texel_viewable(*b.alloc))) {
      throw error("kiln::vulkan: kernel '" + std::string(k.name) + "' binding " + std::to_string(i) + " is " +
                  (texel ? "a uniform texel buffer" : "a storage buffer") + "; given " +
                  (b.texel ? "a range without a texel view" : "a storage buffer"));
    }
    if (texel) views[i] = pool_->texel_view(*b.alloc);
    if (!texel && b.alloc->size > info_.max_storage_buffer_range) {
      throw device_error("kiln::vulkan: kernel '" + std::string(k.name) + "' would bind " + std::to_string(b.alloc->size) +
                         " bytes; " + info_.label() + " binds at most " + std::to_string(info_.max_storage_buffer_range) +
                         " (maxStorageBufferRange)");
    }
    ++(texel ? counts.texel : counts.storage);
  }
  if (params) ++counts.storage;
  const pipeline& p = kernels_->get(k);
  std::vector<buffer_access> uses(n);
  std::vector<VkDescriptorBufferInfo> infos(n);
  std::vector<VkWriteDescriptorSet> writes(n);
  for (std::uint32_t i = 0; i < nb; ++i) {
    uses[i] = {buffers[i].state, buffers[i].write};
    infos[i] = {buffers[i].alloc->buffer(), buffers[i].alloc->offset, buffers[i].alloc->size};
  }
  if (params) {
    uses[nb] = {&params_state, false};
    infos[nb] = {params.buffer(), params.offset, params.size};
  }
  fatal_on_failure([&] {
    VkCommandBuffer cb = seq_->begin_command(uses);
    // Within a batch, a dispatch of the same kernel on the same buffers as the last one
    // (a loop, a chain of fills) reuses its pipeline and descriptor bindings: less to
    // record, and less for the driver to execute.
    const std::uint64_t batch = seq_->recording_value();
    const bool same_batch = bound_.batch == batch;
    bool same_set = same_batch && bound_.set_layout == p.set_layout && bound_.infos.size() == n;
    for (std::uint32_t i = 0; same_set && i < n; ++i) {
      same_set = bound_.infos[i].buffer == infos[i].buffer && bound_.infos[i].offset == infos[i].offset &&
                 bound_.infos[i].range == infos[i].range;
    }
    if (!same_batch || bound_.pipeline != p.handle) {
      vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.handle);
    }
    if (!same_set) {
      bound_.batch = 0;  // until the new set is bound
      VkDescriptorSet set = seq_->allocate_set(p.set_layout, counts);
      for (std::uint32_t i = 0; i < n; ++i) {
        writes[i] = VkWriteDescriptorSet{};
        writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
        writes[i].dstSet = set;
        writes[i].dstBinding = i;
        writes[i].descriptorCount = 1;
        if (i < nb && buffers[i].texel) {
          writes[i].descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
          writes[i].pTexelBufferView = &views[i];
        } else {
          writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
          writes[i].pBufferInfo = &infos[i];
        }
      }
      vkUpdateDescriptorSets(device_.dev, n, writes.data(), 0, nullptr);
      if (n) vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
      bound_.set_layout = p.set_layout;
      bound_.infos = std::move(infos);
    }
    bound_.batch = batch;
    bound_.pipeline = p.handle;
    if (!params && !push.empty()) {
      vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<std::uint32_t>(push.size()), push.data());
    }
    gpu_timer* timer = profile.on.load(std::memory_order_relaxed) ? profiled_dispatch(k, cb, batch) : nullptr;
    vkCmdDispatch(cb, groups.count[0], groups.count[1], groups.count[2]);
    if (timer) timer->after(cb);
    seq_->count_dispatch();
  });
}

// noinline on the definition, not the declaration: GCC warns of an inline definition that
// follows a noinline declaration (the header-only mode).
[[gnu::noinline]] KILN_DECL gpu_timer* context_state::profiled_dispatch(const kernel_spec& k,
                                                                       VkCommandBuffer cb, std::uint64_t batch) {
  profiler* p = profile.get();
  if (!p) return nullptr;
  if (!timer_) timer_ = std::make_unique<gpu_timer>(device_.dev, info_, *p);
  profiler::handle h;
  if (current_profile_statement.prof == p) {
    h = current_profile_statement.record;
  } else {
    profile_record r;
    r.name = std::string(k.name);
    r.variant = "dispatch";
    r.start_us = p->now_us();
    h = p->begin(std::move(r));
  }
  p->count_dispatch(h);
  if (!h.time_gpu) return nullptr;  // sampling: a call the timer skips
  timer_->before(cb, batch, h);
  return timer_.get();
}

// ---- copies between contexts --------------------------------------------------------------

KILN_DECL void ownership_barrier(VkCommandBuffer cb, VkBuffer buf, VkDeviceSize offset, VkDeviceSize n,
                                 std::uint32_t from_family, std::uint32_t to_family, VkAccessFlags src_access,
                                 VkAccessFlags dst_access) {
  VkBufferMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER;
  b.srcAccessMask = src_access;
  b.dstAccessMask = dst_access;
  b.srcQueueFamilyIndex = from_family;
  b.dstQueueFamilyIndex = to_family;
  b.buffer = buf;
  b.offset = offset;
  b.size = n;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, nullptr, 1, &b, 0,
                       nullptr);
}

KILN_DECL VkBuffer external_buffer(VkDevice dev, VkDeviceSize size) {
  VkExternalMemoryBufferCreateInfo ext{};
  ext.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
  ext.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.pNext = &ext;
  bi.size = size;
  bi.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer b = VK_NULL_HANDLE;
  check(vkCreateBuffer(dev, &bi, nullptr, &b), "vkCreateBuffer");
  return b;
}

KILN_DECL std::string context_state::peer_refusal(const context_state& to) const {
  const auto off = [](const context_state& c) {
    return c.name() + " has copies through shared memory turned off (vulkan::options::external_memory, "
                      "KILN_VULKAN_EXTERNAL_MEMORY)";
  };
  const auto cannot = [](const context_state& c) {
    return c.info_.label() + " cannot export and import memory as opaque fds (VK_KHR_external_memory_fd)";
  };
  if (&to == this) return "the same context";
  if (!info_.external_memory_fd) return cannot(*this);
  if (!to.info_.external_memory_fd) return cannot(to);
  if (!external_memory_) return off(*this);
  if (!to.external_memory_) return off(to);
  if (info_.device_uuid != to.info_.device_uuid || info_.driver_uuid != to.info_.driver_uuid) {
    return info_.label() + " and " + to.info_.label() +
           " differ in deviceUUID or driverUUID: opaque fd memory is shared only within one device and driver";
  }
  std::lock_guard lock(links_mutex_);
  if (auto it = link_failures_.find(to.serial_); it != link_failures_.end()) return it->second;
  return {};
}

KILN_DECL std::shared_ptr<peer_link> context_state::make_link(context_state& to, VkDeviceSize size) {
  auto link = std::make_shared<peer_link>();
  link->size = size;
  int fd = -1;
  {
    std::lock_guard lock(mutex_);
    ensure_alive();
    peer_link::side& d = link->send;
    try {
      d.buffer = external_buffer(device_.dev, size);
      VkMemoryRequirements req{};
      vkGetBufferMemoryRequirements(device_.dev, d.buffer, &req);
      // device-local memory where the buffer may live there (tensor memory first)
      std::optional<std::uint32_t> type;
      if (req.memoryTypeBits >> tensor_type_ & 1u) type = tensor_type_;
      for (std::uint32_t i = 0; !type && i < info_.memory_types.size(); ++i) {
        if ((req.memoryTypeBits >> i & 1u) && info_.memory_types[i].device_local) type = i;
      }
      for (std::uint32_t i = 0; !type && i < info_.memory_types.size(); ++i) {
        if (req.memoryTypeBits >> i & 1u) type = i;
      }
      if (!type) throw device_error("kiln::vulkan: " + info_.label() + " offers no memory type for an exportable buffer");
      link->memory_type = *type;
      VkMemoryDedicatedAllocateInfo ded{};
      ded.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO;
      ded.buffer = d.buffer;
      VkExportMemoryAllocateInfo ex{};
      ex.sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO;
      ex.pNext = &ded;
      ex.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
      VkMemoryAllocateInfo ai{};
      ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
      ai.pNext = &ex;
      ai.allocationSize = req.size;
      ai.memoryTypeIndex = *type;
      const VkResult r = fault_injection::fail(fault_injection::memory_allocation)
                             ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                             : vkAllocateMemory(device_.dev, &ai, nullptr, &d.memory);
      check(r, "vkAllocateMemory (exportable)");
      check(vkBindBufferMemory(device_.dev, d.buffer, d.memory, 0), "vkBindBufferMemory");
      VkMemoryGetFdInfoKHR gi{};
      gi.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR;
      gi.memory = d.memory;
      gi.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
      check(get_memory_fd_(device_.dev, &gi, &fd), "vkGetMemoryFdKHR");
    } catch (...) {
      destroy_side(d);
      throw;
    }
  }
  try {
    to.import_side(link, fd);  // takes fd, whatever happens
  } catch (...) {
    std::lock_guard lock(mutex_);
    destroy_side(link->send);
    throw;
  }
  std::lock_guard lock(mutex_);
  ++peer_stats_.links;
  peer_stats_.link_bytes += static_cast<std::size_t>(size);
  return link;
}

KILN_DECL void context_state::import_side(const std::shared_ptr<peer_link>& link, int fd) {
  std::unique_lock lock(mutex_, std::defer_lock);
  peer_link::side& d = link->receive;
  try {
    lock.lock();
    ensure_alive();
    sweep_links_locked();
    links_in_.reserve(links_in_.size() + 1);
    d.buffer = external_buffer(device_.dev, link->size);
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(device_.dev, d.buffer, &req);
    if (!(req.memoryTypeBits >> link->memory_type & 1u) || req.size > link->size) {
      throw device_error("kiln::vulkan: " + info_.label() + " cannot place the shared buffer in memory type " +
                         std::to_string(link->memory_type) + ", where the sender allocated it");
    }
    // An opaque fd import names the payload's own size and memory type (and, being a
    // dedicated allocation, a dedicated buffer).
    VkMemoryDedicatedAllocateInfo ded{};
    ded.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO;
    ded.buffer = d.buffer;
    VkImportMemoryFdInfoKHR im{};
    im.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR;
    im.pNext = &ded;
    im.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
    im.fd = fd;
    VkMemoryAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    ai.pNext = &im;
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = link->memory_type;
    const VkResult r = vkAllocateMemory(device_.dev, &ai, nullptr, &d.memory);
    check(r, "vkAllocateMemory (import)");
    fd = -1;  // a successful import owns the fd
    check(vkBindBufferMemory(device_.dev, d.buffer, d.memory, 0), "vkBindBufferMemory");
    links_in_.push_back(link);
    ++peer_stats_.links;
    peer_stats_.link_bytes += static_cast<std::size_t>(link->size);
  } catch (...) {
#if !defined(_WIN32)
    if (fd >= 0) ::close(fd);
#endif
    if (lock.owns_lock()) destroy_side(d);
    throw;
  }
}

KILN_DECL void context_state::destroy_side(peer_link::side& d) noexcept {
  if (!device_.dev) return;
  if (d.buffer) vkDestroyBuffer(device_.dev, d.buffer, nullptr);
  if (d.memory) vkFreeMemory(device_.dev, d.memory, nullptr);
  d.buffer = VK_NULL_HANDLE;
  d.memory = VK_NULL_HANDLE;
}

KILN_DECL void context_state::sweep_links_locked() noexcept {
  std::erase_if(links_in_, [&](const std::shared_ptr<peer_link>& l) {
    if (!l->dead || l->receive.access.last_use() > seq_->completed()) return false;
    if (l->receive.memory) {
      --peer_stats_.links;
      peer_stats_.link_bytes -= static_cast<std::size_t>(l->size);
    }
    destroy_side(l->receive);
    return true;
  });
}

KILN_DECL std::shared_ptr<peer_link> context_state::link_to(context_state& to, std::size_t bytes) {
  if (link_failures_.count(to.serial_)) return nullptr;
  // twice the copy (two halves), rounded up to a power of two, within the cap and the device's limits
  const std::uint64_t limit = std::min<std::uint64_t>({peer_buffer_size_, info_.max_allocation_size,
                                                       info_.max_buffer_size, to.info_.max_allocation_size,
                                                       to.info_.max_buffer_size});
  const std::uint64_t cap = std::max<std::uint64_t>(std::bit_floor(limit), std::uint64_t(1) << 20);
  const std::uint64_t want = std::clamp<std::uint64_t>(std::bit_ceil(std::uint64_t(bytes) * 2), 1u << 20, cap);
  // Links to receivers that are gone: the sender's side is idle (each send is waited for).
  for (auto it = links_out_.begin(); it != links_out_.end();) {
    if (!it->second->dead || it->first == to.serial_) {
      ++it;
      continue;
    }
    std::lock_guard lock(mutex_);
    if (it->second->send.memory) {
      --peer_stats_.links;
      peer_stats_.link_bytes -= static_cast<std::size_t>(it->second->size);
    }
    destroy_side(it->second->send);
    it = links_out_.erase(it);
  }
  std::shared_ptr<peer_link> old;
  if (auto it = links_out_.find(to.serial_); it != links_out_.end()) {
    if (!it->second->dead && it->second->size >= want) return it->second;
    old = std::move(it->second);
    links_out_.erase(it);
  }
  if (old) {  // too small (or the receiver let go): both sides go once their copies are done
    std::lock_guard lk(old->mutex);
    for (const std::uint64_t v : old->received) {
      if (v) to.wait(v);
    }
    old->dead = true;
    std::lock_guard lock(mutex_);
    if (old->send.memory) {
      --peer_stats_.links;
      peer_stats_.link_bytes -= static_cast<std::size_t>(old->size);
    }
    destroy_side(old->send);
  }
  try {
    auto link = make_link(to, want);
    links_out_.emplace(to.serial_, link);
    return link;
  } catch (const device_error& e) {
    if (lost_ || to.lost_) throw;
    link_failures_.emplace(to.serial_, std::string("sharing memory with ") + to.name() + " failed: " + e.what());
    return nullptr;
  }
}

KILN_DECL void context_state::send_half(peer_link& link, int h, const allocation& a, access_state& s,
                                        std::size_t offset, std::size_t n) {
  std::unique_lock lock(mutex_);
  ensure_alive();
  const VkDeviceSize half = link.size / 2, at = half * static_cast<VkDeviceSize>(h);
  peer_link::side& d = link.send;
  const std::uint32_t family = info_.compute_queue_family;
  fatal_on_failure([&] {
    const buffer_access uses[2] = {{&s, false}, {&d.access, true}};
    VkCommandBuffer cb = seq_->begin_command(uses);
    if (d.released[h]) ownership_barrier(cb, d.buffer, at, half, VK_QUEUE_FAMILY_EXTERNAL, family, 0, VK_ACCESS_TRANSFER_WRITE_BIT);
    const VkBufferCopy c{a.offset + offset, at, n};
    vkCmdCopyBuffer(cb, a.buffer(), d.buffer, 1, &c);
    ownership_barrier(cb, d.buffer, at, half, family, VK_QUEUE_FAMILY_EXTERNAL, VK_ACCESS_TRANSFER_WRITE_BIT, 0);
    seq_->count_transfer();
  });
  d.released[h] = true;
  const std::uint64_t v = seq_->recording_value();
  submit_locked();
  wait_locked(lock, v);
}

KILN_DECL std::uint64_t context_state::receive_half(peer_link& link, int h, const allocation& b, access_state& bs,
                                                    std::size_t b_offset, std::size_t n) {
  std::lock_guard lock(mutex_);
  ensure_alive();
  const VkDeviceSize half = link.size / 2, at = half * static_cast<VkDeviceSize>(h);
  peer_link::side& d = link.receive;
  const std::uint32_t family = info_.compute_queue_family;
  fatal_on_failure([&] {
    const buffer_access uses[2] = {{&d.access, false}, {&bs, true}};
    VkCommandBuffer cb = seq_->begin_command(uses);
    ownership_barrier(cb, d.buffer, at, half, VK_QUEUE_FAMILY_EXTERNAL, family, 0, VK_ACCESS_TRANSFER_READ_BIT);
    const VkBufferCopy c{at, b.offset + b_offset, n};
    vkCmdCopyBuffer(cb, d.buffer, b.buffer(), 1, &c);
    // handed back, so that the sender's next copy into the half acquires what it released
    ownership_barrier(cb, d.buffer, at, half, family, VK_QUEUE_FAMILY_EXTERNAL, 0, 0);
    seq_->count_transfer();
  });
  d.released[h] = true;
  const std::uint64_t v = seq_->recording_value();
  submit_locked();
  return v;
}

KILN_DECL bool context_state::copy_to_peer(const allocation& a, access_state& s, std::size_t offset,
                                           context_state& to, const allocation& b, access_state& bs,
                                           std::size_t b_offset, std::size_t bytes) {
  if (!peer_refusal(to).empty()) return false;
  std::shared_ptr<peer_link> link;
  std::unique_lock<std::mutex> lk;
  do {  // a link replaced (grown by another thread's copy) between the look-up and the lock is dead
    {
      std::lock_guard links(links_mutex_);
      link = link_to(to, bytes);
    }
    if (!link) return false;
    lk = std::unique_lock(link->mutex);
  } while (link->dead);
  const std::size_t half = static_cast<std::size_t>(link->size / 2);
  int h = 0;
  for (std::size_t done = 0; done < bytes; done += half, h ^= 1) {
    const std::size_t n = std::min(half, bytes - done);
    if (link->received[h]) to.wait(link->received[h]);  // the receiver has read what the half held
    send_half(*link, h, a, s, offset + done, n);
    link->received[h] = to.receive_half(*link, h, b, bs, b_offset + done, n);
  }
  std::lock_guard lock(to.mutex_);
  ++to.peer_stats_.external_copies;
  to.peer_stats_.external_bytes += bytes;
  return true;
}

KILN_DECL void context_state::count_staged(std::size_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  ++peer_stats_.staged_copies;
  peer_stats_.staged_bytes += bytes;
}

KILN_DECL peer_stats context_state::peers() const {
  std::lock_guard lock(mutex_);
  ensure_alive();
  return peer_stats_;
}

KILN_DECL storage::storage(std::shared_ptr<context_state> c, std::size_t bytes)
    : ctx(std::move(c)), bytes_(bytes), alloc_(ctx->allocate(bytes)) {}

KILN_DECL storage::~storage() { ctx->release(alloc_, access_); }

}  // namespace kiln::detail::vk
