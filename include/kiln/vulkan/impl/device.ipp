// kiln/vulkan/impl/device.ipp — definitions of kiln/vulkan/device.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/device.hpp"

namespace kiln::detail::vk {

KILN_DECL const char* result_name(VkResult r) noexcept {
  switch (r) {
#define KILN_VK_RESULT(x) \
  case x:                 \
    return #x;
    KILN_VK_RESULT(VK_SUCCESS)
    KILN_VK_RESULT(VK_NOT_READY)
    KILN_VK_RESULT(VK_TIMEOUT)
    KILN_VK_RESULT(VK_EVENT_SET)
    KILN_VK_RESULT(VK_EVENT_RESET)
    KILN_VK_RESULT(VK_INCOMPLETE)
    KILN_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    KILN_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    KILN_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    KILN_VK_RESULT(VK_ERROR_DEVICE_LOST)
    KILN_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    KILN_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    KILN_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    KILN_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    KILN_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    KILN_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    KILN_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    KILN_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    KILN_VK_RESULT(VK_ERROR_UNKNOWN)
    KILN_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    KILN_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    KILN_VK_RESULT(VK_ERROR_FRAGMENTATION)
    KILN_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    KILN_VK_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
#undef KILN_VK_RESULT
    default:
      return "VkResult(unknown)";
  }
}

KILN_DECL std::string call_failed(const char* call, VkResult r) {
  return std::string(call) + ": " + result_name(r) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

KILN_DECL void check(VkResult r, const char* call) {
  if (r != VK_SUCCESS) throw device_error("kiln::vulkan: " + call_failed(call, r));
}

KILN_DECL void fault_injection::arm(site s, std::uint64_t skip, std::int64_t times) {
  std::lock_guard lock(state_.mutex);
  state_.sites[s] = fault_counter{skip, times, 0};
  state_.armed.store(true, std::memory_order_relaxed);
}

KILN_DECL void fault_injection::disarm() {
  std::lock_guard lock(state_.mutex);
  for (auto& c : state_.sites) c = fault_counter{};
  state_.armed.store(false, std::memory_order_relaxed);
}

KILN_DECL std::uint64_t fault_injection::fired(site s) {
  std::lock_guard lock(state_.mutex);
  return state_.sites[s].fired;
}

KILN_DECL bool fault_injection::fail(site s) noexcept {
  if (!state_.armed.load(std::memory_order_relaxed)) [[likely]] return false;
  std::lock_guard lock(state_.mutex);
  auto& c = state_.sites[s];
  if (c.times == 0) return false;
  if (c.skip) {
    --c.skip;
    return false;
  }
  if (c.times > 0) --c.times;
  ++c.fired;
  return true;
}

KILN_DECL validation_log& global_validation_log() {
  static validation_log log;
  return log;
}

KILN_DECL VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                               VkDebugUtilsMessageTypeFlagsEXT,
                                                               const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  auto& log = global_validation_log();
  std::string m = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error: " : "warning: ";
  if (data && data->pMessageIdName) m += std::string(data->pMessageIdName) + ": ";
  if (data && data->pMessage) m += data->pMessage;
  std::lock_guard lock(log.mutex);
  log.messages.push_back(std::move(m));
  return VK_FALSE;  // the spec asks layers' callers to return false
}

KILN_DECL VkDebugUtilsMessengerCreateInfoEXT messenger_info() {
  VkDebugUtilsMessengerCreateInfoEXT info{};
  info.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  info.pfnUserCallback = &on_validation_message;
  return info;
}

KILN_DECL instance::instance(bool validation) {
  global_validation_log();  // constructed before any messenger can fire (and so outlives it)
  std::uint32_t loader_version = VK_API_VERSION_1_0;
  if (auto r = vkEnumerateInstanceVersion(&loader_version); r != VK_SUCCESS) {
    throw device_unavailable("kiln::vulkan: the Vulkan loader does not answer: " +
                             call_failed("vkEnumerateInstanceVersion", r));
  }
  if (loader_version < VK_API_VERSION_1_2) {
    throw device_unavailable("kiln::vulkan: the Vulkan loader is " + version_string(loader_version) +
                             "; kiln needs 1.2 or newer (timeline semaphores)");
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "kiln";
  app.pEngineName = "kiln";
  app.apiVersion = VK_API_VERSION_1_3;

  std::vector<const char*> layers, extensions;
  VkDebugUtilsMessengerCreateInfoEXT dbg = messenger_info();
  const VkValidationFeatureEnableEXT sync_validation = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{};
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  if (validation) {
    if (!layer_present("VK_LAYER_KHRONOS_validation")) {
      throw device_unavailable(
          "kiln::vulkan: validation was requested (KILN_VULKAN_VALIDATION or options::validation) but "
          "VK_LAYER_KHRONOS_validation is not installed (Debian: vulkan-validationlayers)");
    }
    layers.push_back("VK_LAYER_KHRONOS_validation");
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    // Synchronisation validation checks kiln's hazard tracking: a missing barrier is a
    // SYNC-HAZARD-* message, which fails kiln's tests.
    features.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT;
    features.enabledValidationFeatureCount = 1;
    features.pEnabledValidationFeatures = &sync_validation;
    features.pNext = &dbg;  // the messenger also reports on vkCreateInstance / vkDestroyInstance
    ci.pNext = &features;
  }
  ci.enabledLayerCount = static_cast<std::uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();

  const VkResult r = vkCreateInstance(&ci, nullptr, &instance_);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
    throw device_unavailable("kiln::vulkan: no Vulkan driver (ICD) could be loaded: " +
                             call_failed("vkCreateInstance", r) +
                             "; install one (e.g. mesa-vulkan-drivers) or check VK_DRIVER_FILES / VK_ICD_FILENAMES");
  }
  if (r != VK_SUCCESS) {
    throw device_unavailable("kiln::vulkan: cannot create a Vulkan instance: " + call_failed("vkCreateInstance", r));
  }
  if (validation) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    const VkResult mr = create ? create(instance_, &dbg, nullptr, &messenger_) : VK_ERROR_EXTENSION_NOT_PRESENT;
    if (mr != VK_SUCCESS) {
      vkDestroyInstance(instance_, nullptr);
      throw device_unavailable("kiln::vulkan: " + call_failed("vkCreateDebugUtilsMessengerEXT", mr));
    }
  }
  validation_ = validation;
}

KILN_DECL instance::~instance() {
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

KILN_DECL std::vector<VkPhysicalDevice> instance::physical_devices() const {
  std::uint32_t n = 0;
  check(vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> v(n);
  VkResult r = vkEnumeratePhysicalDevices(instance_, &n, v.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) check(r, "vkEnumeratePhysicalDevices");
  v.resize(n);
  return v;
}

KILN_DECL std::string instance::version_string(std::uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

KILN_DECL bool instance::layer_present(const char* name) {
  std::uint32_t n = 0;
  if (vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> props(n);
  if (vkEnumerateInstanceLayerProperties(&n, props.data()) != VK_SUCCESS) return false;
  return std::any_of(props.begin(), props.begin() + n,
                     [&](const VkLayerProperties& p) { return std::strcmp(p.layerName, name) == 0; });
}

KILN_DECL const char* name(device_type t) noexcept {
  switch (t) {
    case device_type::discrete_gpu: return "discrete GPU";
    case device_type::integrated_gpu: return "integrated GPU";
    case device_type::virtual_gpu: return "virtual GPU";
    case device_type::cpu: return "CPU";
    default: return "other";
  }
}

KILN_DECL std::string device_info::label() const {
  return "vulkan:" + std::to_string(index) + " (" + name + ", " + vk::name(type) + ")";
}

KILN_DECL device_type to_device_type(VkPhysicalDeviceType t) noexcept {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return device_type::discrete_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return device_type::integrated_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return device_type::virtual_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return device_type::cpu;
    default: return device_type::other;
  }
}

KILN_DECL bool cooperative_matrix_allowed(std::uint32_t driver_id, std::uint32_t driver_version) noexcept {
  switch (driver_id) {
    case VK_DRIVER_ID_NVIDIA_PROPRIETARY:
      return true;
    case VK_DRIVER_ID_MESA_RADV:  // Mesa encodes its version as VK_MAKE_VERSION(major, minor, patch)
      return VK_VERSION_MAJOR(driver_version) > 24 ||
             (VK_VERSION_MAJOR(driver_version) == 24 && VK_VERSION_MINOR(driver_version) >= 1);
    default:
      return false;
  }
}

KILN_DECL std::vector<std::string> subgroup_op_names(VkSubgroupFeatureFlags f) {
  static constexpr std::pair<VkSubgroupFeatureFlagBits, const char*> names[] = {
      {VK_SUBGROUP_FEATURE_BASIC_BIT, "basic"},
      {VK_SUBGROUP_FEATURE_VOTE_BIT, "vote"},
      {VK_SUBGROUP_FEATURE_ARITHMETIC_BIT, "arithmetic"},
      {VK_SUBGROUP_FEATURE_BALLOT_BIT, "ballot"},
      {VK_SUBGROUP_FEATURE_SHUFFLE_BIT, "shuffle"},
      {VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT, "shuffle_relative"},
      {VK_SUBGROUP_FEATURE_CLUSTERED_BIT, "clustered"},
      {VK_SUBGROUP_FEATURE_QUAD_BIT, "quad"},
  };
  std::vector<std::string> out;
  for (const auto& [bit, n] : names) {
    if (f & bit) out.emplace_back(n);
  }
  return out;
}

KILN_DECL std::vector<cooperative_matrix_shape> cooperative_matrix_shapes_nv(VkInstance inst, VkPhysicalDevice pd) {
  std::vector<cooperative_matrix_shape> out;
  const auto get = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (!get) return out;
  std::uint32_t n = 0;
  if (get(pd, &n, nullptr) != VK_SUCCESS || n == 0) return out;
  std::vector<VkCooperativeMatrixPropertiesNV> props(n);
  for (auto& p : props) p.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  if (get(pd, &n, props.data()) != VK_SUCCESS) return out;
  props.resize(n);
  const auto type = [](VkComponentTypeNV t) -> std::string {
    switch (t) {
      case VK_COMPONENT_TYPE_FLOAT16_NV: return "f16";
      case VK_COMPONENT_TYPE_FLOAT32_NV: return "f32";
      case VK_COMPONENT_TYPE_FLOAT64_NV: return "f64";
      case VK_COMPONENT_TYPE_SINT8_NV: return "i8";
      case VK_COMPONENT_TYPE_SINT32_NV: return "i32";
      case VK_COMPONENT_TYPE_UINT8_NV: return "u8";
      case VK_COMPONENT_TYPE_UINT32_NV: return "u32";
      default: return "other";
    }
  };
  for (const auto& p : props) {
    if (p.scope != VK_SCOPE_SUBGROUP_NV) continue;
    out.push_back({p.MSize, p.NSize, p.KSize, type(p.AType), type(p.BType), type(p.CType), type(p.DType)});
  }
  return out;
}

KILN_DECL device_info describe(VkPhysicalDevice pd, int index, VkInstance inst) {
  device_info d;
  d.index = index;

  VkPhysicalDeviceProperties base{};
  vkGetPhysicalDeviceProperties(pd, &base);
  d.name = base.deviceName;
  d.type = to_device_type(base.deviceType);
  d.vendor_id = base.vendorID;
  d.device_id = base.deviceID;
  d.driver_version = base.driverVersion;
  d.api_version = base.apiVersion;
  std::copy(std::begin(base.pipelineCacheUUID), std::end(base.pipelineCacheUUID), d.uuid.begin());
  const auto& lim = base.limits;
  d.max_shared_memory = lim.maxComputeSharedMemorySize;
  d.max_workgroup_invocations = lim.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) {
    d.max_workgroup_size[static_cast<std::size_t>(i)] = lim.maxComputeWorkGroupSize[i];
    d.max_workgroup_count[static_cast<std::size_t>(i)] = lim.maxComputeWorkGroupCount[i];
  }
  d.max_push_constants = lim.maxPushConstantsSize;
  d.max_storage_buffers = std::min(lim.maxPerStageDescriptorStorageBuffers, lim.maxDescriptorSetStorageBuffers);
  d.max_texel_buffers = std::min(lim.maxPerStageDescriptorSampledImages, lim.maxDescriptorSetSampledImages);
  d.max_resources = lim.maxPerStageResources;
  d.max_storage_buffer_range = lim.maxStorageBufferRange;
  d.min_storage_buffer_offset_alignment = lim.minStorageBufferOffsetAlignment;
  d.non_coherent_atom_size = lim.nonCoherentAtomSize;
  VkFormatProperties texel_format{};
  vkGetPhysicalDeviceFormatProperties(pd, VK_FORMAT_R32G32B32A32_UINT, &texel_format);
  if (texel_format.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) {
    d.max_texel_buffer_elements = lim.maxTexelBufferElements;
    d.min_texel_buffer_offset_alignment = lim.minTexelBufferOffsetAlignment;
  }

  // extensions
  std::uint32_t n_ext = 0;
  std::vector<VkExtensionProperties> exts;
  if (vkEnumerateDeviceExtensionProperties(pd, nullptr, &n_ext, nullptr) == VK_SUCCESS) {
    exts.resize(n_ext);
    if (vkEnumerateDeviceExtensionProperties(pd, nullptr, &n_ext, exts.data()) != VK_SUCCESS) n_ext = 0;
    exts.resize(n_ext);
  }
  auto has_ext = [&](const char* e) {
    return std::any_of(exts.begin(), exts.end(), [&](const VkExtensionProperties& p) { return std::strcmp(p.extensionName, e) == 0; });
  };

  // queues
  std::uint32_t n_q = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n_q, nullptr);
  std::vector<VkQueueFamilyProperties> qs(n_q);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n_q, qs.data());
  // Prefer a compute family without graphics (an async-compute queue), else any compute one.
  int best = -1;
  for (std::uint32_t i = 0; i < n_q; ++i) {
    if (!(qs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || qs[i].queueCount == 0) continue;
    if (best < 0 || ((qs[static_cast<std::size_t>(best)].queueFlags & VK_QUEUE_GRAPHICS_BIT) && !(qs[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))) {
      best = static_cast<int>(i);
    }
  }
  d.has_compute_queue = best >= 0;
  d.compute_queue_family = best >= 0 ? static_cast<std::uint32_t>(best) : 0;
  if (best >= 0) d.timestamp_valid_bits = qs[static_cast<std::size_t>(best)].timestampValidBits;
  d.timestamp_period = lim.timestampPeriod;

  // memory
  VkPhysicalDeviceMemoryProperties mem{};
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  std::uint64_t largest_local = 0;
  for (std::uint32_t i = 0; i < mem.memoryHeapCount; ++i) {
    const bool local = mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
    d.heaps.push_back({mem.memoryHeaps[i].size, local});
    if (local) largest_local = std::max<std::uint64_t>(largest_local, mem.memoryHeaps[i].size);
  }
  for (std::uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    const auto f = mem.memoryTypes[i].propertyFlags;
    memory_type_info t{mem.memoryTypes[i].heapIndex, (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) != 0,
                       (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) != 0, (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0,
                       (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) != 0};
    d.memory_types.push_back(t);
    // Unified: host-visible, coherent device-local memory on a heap as large as the
    // biggest device-local heap (a 256 MiB BAR window on a discrete GPU is not).
    if (t.device_local && t.host_visible && t.host_coherent && mem.memoryHeaps[t.heap].size >= largest_local) {
      d.unified_memory = true;
    }
  }

  d.max_allocation_size = 1ull << 30;  // the spec's guaranteed minimum, refined below
  d.max_buffer_size = d.max_allocation_size;
  if (d.api_version < VK_API_VERSION_1_2) {
    d.unusable_reason = "reports Vulkan " + d.api_version_string() + "; kiln needs 1.2 or newer";
  }
  if (d.api_version >= VK_API_VERSION_1_2) {
    d.integer_dot_product_extension = d.api_version < VK_API_VERSION_1_3 && has_ext("VK_KHR_shader_integer_dot_product");
    const bool dot_structs = d.api_version >= VK_API_VERSION_1_3 || d.integer_dot_product_extension;
    VkPhysicalDeviceShaderIntegerDotProductProperties dotp{};
    dotp.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES;
    VkPhysicalDeviceMaintenance4Properties m4{};
    m4.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES;
    VkPhysicalDeviceVulkan12Properties p12{};
    p12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES;
    VkPhysicalDeviceVulkan11Properties p11{};
    p11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES;
    p11.pNext = &p12;
    if (d.api_version >= VK_API_VERSION_1_3) p12.pNext = &m4;
    if (dot_structs) {
      dotp.pNext = p11.pNext;
      p11.pNext = &dotp;
    }
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &p11;
    vkGetPhysicalDeviceProperties2(pd, &p2);
    d.subgroup_size = p11.subgroupSize;
    d.subgroup_operations = subgroup_op_names(p11.subgroupSupportedOperations);
    d.subgroups_in_compute = (p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
    d.max_allocation_size = p11.maxMemoryAllocationSize;
    d.max_buffer_size = d.api_version >= VK_API_VERSION_1_3 ? m4.maxBufferSize : d.max_allocation_size;
    d.f32_nan_preserve = p12.shaderSignedZeroInfNanPreserveFloat32 == VK_TRUE;
    d.f32_denorm_preserve = p12.shaderDenormPreserveFloat32 == VK_TRUE;
    d.driver_id = static_cast<std::uint32_t>(p12.driverID);
    std::copy(std::begin(p11.deviceUUID), std::end(p11.deviceUUID), d.device_uuid.begin());
    std::copy(std::begin(p11.driverUUID), std::end(p11.driverUUID), d.driver_uuid.begin());
#if !defined(_WIN32)
    // Cross-context copies through shared memory (context_state::copy_to_peer): opaque fd
    // handles of dedicated transfer buffers, exported by one context and imported by the other.
    if (has_ext(VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME)) {
      VkPhysicalDeviceExternalBufferInfo bi{};
      bi.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO;
      bi.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
      bi.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
      VkExternalBufferProperties ep{};
      ep.sType = VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES;
      vkGetPhysicalDeviceExternalBufferProperties(pd, &bi, &ep);
      const auto f = ep.externalMemoryProperties.externalMemoryFeatures;
      d.external_memory_fd = (f & VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT) && (f & VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT) &&
                             (ep.externalMemoryProperties.compatibleHandleTypes & VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT);
    }
#endif
    d.driver_name = p12.driverName;
    d.driver_info = p12.driverInfo;

    VkPhysicalDeviceShaderIntegerDotProductFeatures dotf{};
    dotf.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
    VkPhysicalDeviceVulkan12Features f12{};
    f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    VkPhysicalDeviceVulkan11Features f11{};
    f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &f11;
    if (dot_structs) {  // the extension's own struct: the same query on 1.2 and 1.3 devices
      dotf.pNext = f2.pNext;
      f2.pNext = &dotf;
    }
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cmf{};
    cmf.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
    const bool nv_cm = has_ext("VK_NV_cooperative_matrix");
    if (nv_cm) {
      cmf.pNext = f2.pNext;
      f2.pNext = &cmf;
    }
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    d.vulkan_memory_model = f12.vulkanMemoryModel;
    d.cooperative_matrix_nv = nv_cm && cmf.cooperativeMatrix && d.vulkan_memory_model && inst != VK_NULL_HANDLE;
    d.storage_16bit = f11.storageBuffer16BitAccess;
    d.storage_8bit = f12.storageBuffer8BitAccess;
    d.fp16_arithmetic = f12.shaderFloat16;
    d.int8_arithmetic = f12.shaderInt8;
    d.int64 = f2.features.shaderInt64;
    d.timeline_semaphore = f12.timelineSemaphore;
    d.integer_dot_product = dot_structs && dotf.shaderIntegerDotProduct;
    if (!d.integer_dot_product) d.integer_dot_product_extension = false;
    if (d.integer_dot_product) {
      d.dot4x8_signed_accelerated = dotp.integerDotProduct4x8BitPackedSignedAccelerated;
      d.dot4x8_unsigned_accelerated = dotp.integerDotProduct4x8BitPackedUnsignedAccelerated;
      d.dot4x8_mixed_accelerated = dotp.integerDotProduct4x8BitPackedMixedSignednessAccelerated;
    }
    if (!d.timeline_semaphore && d.unusable_reason.empty()) d.unusable_reason = "has no timeline semaphores";
  }
  d.cooperative_matrix_claimed = has_ext("VK_KHR_cooperative_matrix") || has_ext("VK_NV_cooperative_matrix");
  d.cooperative_matrix = d.cooperative_matrix_claimed && cooperative_matrix_allowed(d.driver_id, d.driver_version);
  if (d.cooperative_matrix_nv) d.cooperative_matrix_shapes = cooperative_matrix_shapes_nv(inst, pd);
  if (d.cooperative_matrix_shapes.empty()) d.cooperative_matrix_nv = false;
  if (!d.has_compute_queue && d.unusable_reason.empty()) d.unusable_reason = "has no compute queue";
  return d;
}

KILN_DECL std::vector<device_info> describe_all(const instance& inst, std::vector<VkPhysicalDevice>* handles) {
  auto pds = inst.physical_devices();
  std::vector<device_info> out;
  for (std::size_t i = 0; i < pds.size(); ++i) out.push_back(describe(pds[i], static_cast<int>(i), inst.get()));
  if (handles) *handles = std::move(pds);
  return out;
}

KILN_DECL std::string device_list(const std::vector<device_info>& ds) {
  if (ds.empty()) return "no devices";
  std::string s;
  for (const auto& d : ds) {
    if (!s.empty()) s += "; ";
    s += std::to_string(d.index) + ": " + d.name + " (" + name(d.type) + (d.usable() ? "" : ", unusable: " + d.unusable_reason) + ")";
  }
  return s;
}

KILN_DECL std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

KILN_DECL const device_info& select(const std::vector<device_info>& ds, std::optional<int> requested) {
  auto usable_or_throw = [&](const device_info& d, const std::string& how) -> const device_info& {
    if (!d.usable()) {
      throw device_unavailable("kiln::vulkan: " + how + " selects " + d.label() + ", which kiln cannot use: it " +
                               d.unusable_reason);
    }
    return d;
  };
  if (requested) {
    if (*requested < 0 || *requested >= static_cast<int>(ds.size())) {
      throw device_unavailable("kiln::vulkan: device_index{" + std::to_string(*requested) +
                               "} is out of range; devices: " + device_list(ds));
    }
    return usable_or_throw(ds[static_cast<std::size_t>(*requested)], "device_index{" + std::to_string(*requested) + "}");
  }
  if (const char* env = std::getenv("KILN_DEVICE"); env && *env) {
    const std::string want(env);
    const std::string how = "KILN_DEVICE='" + want + "'";
    const bool numeric = std::all_of(want.begin(), want.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (numeric) {
      const long i = std::strtol(want.c_str(), nullptr, 10);
      if (i >= static_cast<long>(ds.size())) {
        throw device_unavailable("kiln::vulkan: " + how + " is out of range; devices: " + device_list(ds));
      }
      return usable_or_throw(ds[static_cast<std::size_t>(i)], how);
    }
    for (const auto& d : ds) {
      if (lower(d.name).find(lower(want)) != std::string::npos) return usable_or_throw(d, how);
    }
    throw device_unavailable("kiln::vulkan: " + how + " matches no device name; devices: " + device_list(ds) +
                             " (set an index or a part of a name, or unset it)");
  }
  const device_info* best = nullptr;
  for (const auto& d : ds) {
    if (d.usable() && (!best || d.type > best->type)) best = &d;
  }
  if (!best) {
    if (ds.empty()) {
      throw device_unavailable("kiln::vulkan: the Vulkan driver reports no physical device (no ICD for this "
                               "machine's hardware; install one, e.g. mesa-vulkan-drivers for lavapipe)");
    }
    throw device_unavailable("kiln::vulkan: no usable device: " + device_list(ds));
  }
  return *best;
}

}  // namespace kiln::detail::vk
