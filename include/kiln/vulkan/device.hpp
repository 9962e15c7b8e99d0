// kiln/vulkan/device.hpp — the Vulkan instance, physical-device discovery and selection.
// Lists every device with its compute capabilities, picks one (discrete > integrated >
// virtual > CPU, or KILN_DEVICE), and collects validation-layer messages.
// Included through <kiln/vulkan.hpp> only (it needs <vulkan/vulkan.h>).
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/detail/env.hpp"  // env_flag, env_off

namespace kiln::detail::vk {

// ---------------------------------------------------------------------------------------
// Results and errors

inline const char* result_name(VkResult r) noexcept {
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

/// "vkQueueSubmit: VK_ERROR_DEVICE_LOST"
inline std::string call_failed(const char* call, VkResult r) {
  return std::string(call) + ": " + result_name(r) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

/// Throws kiln::device_error naming the call and the result unless r is VK_SUCCESS.
inline void check(VkResult r, const char* call) {
  if (r != VK_SUCCESS) throw device_error("kiln::vulkan: " + call_failed(call, r));
}

// ---------------------------------------------------------------------------------------
// Fault injection (tests only)

/// One fault site's countdown (fault_injection).
struct fault_counter {
  std::uint64_t skip = 0;
  std::int64_t times = 0;
  std::uint64_t fired = 0;
};

/// What fault_injection shares between threads.
struct fault_state {
  std::atomic<bool> armed{false};
  std::mutex mutex;
  fault_counter sites[8];
};

/// Makes chosen runtime calls fail, so that tests can reach the paths a real device takes
/// only under memory pressure, a broken compiler or a lost GPU. Always compiled in: the
/// tests then exercise the very code users run (a macro that test files define would give
/// the runtime's inline functions two definitions in one program), and while nothing is
/// armed a site costs one relaxed load and a branch that is never taken, beside a Vulkan
/// call of microseconds. Process-wide; tests disarm it when done (fault_injection::scope).
///
///   fault_injection::arm(fault_injection::queue_submit);   // the next vkQueueSubmit fails
///   fault_injection::arm(fault_injection::memory_allocation, 2, fault_injection::always);
class fault_injection {
 public:
  enum site : unsigned {
    memory_allocation,  ///< vkAllocateMemory -> VK_ERROR_OUT_OF_DEVICE_MEMORY
    shader_compile,     ///< shaderc reports a failed compilation
    pipeline_creation,  ///< vkCreateComputePipelines -> VK_ERROR_UNKNOWN
    queue_submit,       ///< vkQueueSubmit -> VK_ERROR_DEVICE_LOST (nothing is submitted)
    semaphore_wait,     ///< vkWaitSemaphores -> VK_ERROR_DEVICE_LOST
    site_count
  };
  static constexpr std::int64_t always = -1;

  /// Lets `skip` calls at s pass, then fails the next `times` calls (always: every call
  /// until disarm).
  static void arm(site s, std::uint64_t skip = 0, std::int64_t times = 1) {
    std::lock_guard lock(state_.mutex);
    state_.sites[s] = fault_counter{skip, times, 0};
    state_.armed.store(true, std::memory_order_relaxed);
  }
  /// Every site back to normal.
  static void disarm() {
    std::lock_guard lock(state_.mutex);
    for (auto& c : state_.sites) c = fault_counter{};
    state_.armed.store(false, std::memory_order_relaxed);
  }
  /// Calls at s failed on purpose since it was last armed.
  static std::uint64_t fired(site s) {
    std::lock_guard lock(state_.mutex);
    return state_.sites[s].fired;
  }
  /// Disarms everything when a test's scope ends, failed assertions included.
  struct scope {
    scope() = default;
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;
    ~scope() { disarm(); }
  };

  /// Asked by the runtime at each site: true when this call is to fail.
  static bool fail(site s) noexcept {
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

 private:
  static_assert(site_count <= std::size(fault_state{}.sites));
  static inline constinit fault_state state_{};  // constant-initialised: no static-init code
};

// ---------------------------------------------------------------------------------------
// Validation-layer messages (KILN_VULKAN_VALIDATION=1 or options::validation)

/// Every validation message of this process, in arrival order. Function-local static so
/// that nothing runs at static-initialisation time.
struct validation_log {
  std::mutex mutex;
  std::vector<std::string> messages;
};
inline validation_log& global_validation_log() {
  static validation_log log;
  return log;
}

inline VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
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

inline VkDebugUtilsMessengerCreateInfoEXT messenger_info() {
  VkDebugUtilsMessengerCreateInfoEXT info{};
  info.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  info.pfnUserCallback = &on_validation_message;
  return info;
}

// ---------------------------------------------------------------------------------------
// Instance

/// A VkInstance (Vulkan 1.3 requested), optionally with the Khronos validation layer and
/// a messenger feeding global_validation_log(). Move-only; creation is all-or-nothing.
class instance {
 public:
  explicit instance(bool validation) {
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

  instance(const instance&) = delete;
  instance& operator=(const instance&) = delete;

  ~instance() {
    if (messenger_ != VK_NULL_HANDLE) {
      auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
      if (destroy) destroy(instance_, messenger_, nullptr);
    }
    if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
  }

  VkInstance get() const noexcept { return instance_; }
  bool validation() const noexcept { return validation_; }

  std::vector<VkPhysicalDevice> physical_devices() const {
    std::uint32_t n = 0;
    check(vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices");
    std::vector<VkPhysicalDevice> v(n);
    VkResult r = vkEnumeratePhysicalDevices(instance_, &n, v.data());
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) check(r, "vkEnumeratePhysicalDevices");
    v.resize(n);
    return v;
  }

  static std::string version_string(std::uint32_t v) {
    return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
           std::to_string(VK_API_VERSION_PATCH(v));
  }

 private:
  static bool layer_present(const char* name) {
    std::uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
    std::vector<VkLayerProperties> props(n);
    if (vkEnumerateInstanceLayerProperties(&n, props.data()) != VK_SUCCESS) return false;
    return std::any_of(props.begin(), props.begin() + n,
                       [&](const VkLayerProperties& p) { return std::strcmp(p.layerName, name) == 0; });
  }

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  bool validation_ = false;
};

// ---------------------------------------------------------------------------------------
// Device description

/// Kind of a physical device, in kiln's order of preference (last is best).
enum class device_type { other, cpu, virtual_gpu, integrated_gpu, discrete_gpu };

inline const char* name(device_type t) noexcept {
  switch (t) {
    case device_type::discrete_gpu: return "discrete GPU";
    case device_type::integrated_gpu: return "integrated GPU";
    case device_type::virtual_gpu: return "virtual GPU";
    case device_type::cpu: return "CPU";
    default: return "other";
  }
}

struct memory_heap_info {
  std::uint64_t size = 0;
  bool device_local = false;
};

struct memory_type_info {
  std::uint32_t heap = 0;
  bool device_local = false;
  bool host_visible = false;
  bool host_coherent = false;
  bool host_cached = false;
};

/// What kiln knows about one physical device. `usable()` is false (with the reason in
/// `unusable_reason`) when kiln cannot run on it: no compute queue, Vulkan below 1.2, no
/// timeline semaphores.
struct device_info {
  int index = -1;  ///< position in vkEnumeratePhysicalDevices order (the KILN_DEVICE index)
  std::string name;
  device_type type = device_type::other;
  std::uint32_t vendor_id = 0;
  std::uint32_t device_id = 0;
  std::uint32_t driver_id = 0;  ///< VkDriverId
  std::string driver_name;
  std::string driver_info;
  std::uint32_t driver_version = 0;  ///< vendor-encoded
  std::uint32_t api_version = 0;     ///< VK_MAKE_API_VERSION
  std::array<std::uint8_t, VK_UUID_SIZE> uuid{};

  // compute
  /// Float controls (Vulkan 1.2): kernels may ask the compiler to keep NaN, inf and the
  /// sign of zero (SignedZeroInfNanPreserve) and subnormals (DenormPreserve) in f32.
  /// kiln asks for both where they are supported (shader_cache): without them a driver
  /// may fold `x < 0 ? 0 : x` into a max() that drops NaN and flush subnormals to zero.
  bool f32_nan_preserve = false;
  bool f32_denorm_preserve = false;
  std::uint32_t subgroup_size = 0;
  std::vector<std::string> subgroup_operations;  ///< "basic", "vote", "arithmetic", ...
  bool subgroups_in_compute = false;
  std::uint32_t max_shared_memory = 0;  ///< bytes per workgroup
  std::array<std::uint32_t, 3> max_workgroup_size{};
  std::uint32_t max_workgroup_invocations = 0;
  std::array<std::uint32_t, 3> max_workgroup_count{};
  std::uint32_t max_push_constants = 0;
  /// Descriptors one kernel may bind (one set, the compute stage): storage buffers (the
  /// lower of maxPerStageDescriptorStorageBuffers and maxDescriptorSetStorageBuffers),
  /// uniform texel buffers, which count as sampled images (maxPerStageDescriptorSampledImages,
  /// maxDescriptorSetSampledImages), and all of them together (maxPerStageResources).
  std::uint32_t max_storage_buffers = 0;
  std::uint32_t max_texel_buffers = 0;
  std::uint32_t max_resources = 0;

  // arithmetic and storage
  bool fp16_arithmetic = false;
  bool int8_arithmetic = false;
  bool int64 = false;  // shaderInt64: 64-bit integers in shaders (generated kernels' wide loads)
  bool storage_8bit = false;
  bool storage_16bit = false;
  /// shaderIntegerDotProduct (Vulkan 1.3, or VK_KHR_shader_integer_dot_product on 1.2):
  /// OpSDot / OpUDot / OpSUDot in shaders; kiln enables it on the device it opens.
  bool integer_dot_product = false;
  /// The device has it through VK_KHR_shader_integer_dot_product (a Vulkan 1.2 device),
  /// which kiln then enables as a device extension.
  bool integer_dot_product_extension = false;
  /// Which dot products of four 8-bit integers packed in a 32-bit word the driver reports
  /// as faster than the multiplies and adds they stand for
  /// (VkPhysicalDeviceShaderIntegerDotProductProperties::integerDotProduct4x8BitPacked*Accelerated):
  /// signed x signed, unsigned x unsigned, signed x unsigned. kiln's quantized products
  /// use the signed one by default only where it is accelerated (lavapipe reports none).
  bool dot4x8_signed_accelerated = false;
  bool dot4x8_unsigned_accelerated = false;
  bool dot4x8_mixed_accelerated = false;
  bool cooperative_matrix_claimed = false;  ///< the driver advertises an extension for it
  bool cooperative_matrix = false;          ///< claimed AND the driver is on kiln's allow-list

  // memory
  std::uint64_t max_allocation_size = 0;  ///< maxMemoryAllocationSize
  std::uint64_t max_buffer_size = 0;      ///< maxBufferSize (maintenance4) or the allocation limit
  std::uint64_t max_storage_buffer_range = 0;
  std::uint64_t min_storage_buffer_offset_alignment = 0;
  std::uint64_t non_coherent_atom_size = 0;
  /// Uniform texel buffers of R32G32B32A32_UINT (16 bytes a texel): supported, and at most
  /// this many texels a view (0 = not supported). Generated kernels may read through them.
  std::uint64_t max_texel_buffer_elements = 0;
  std::uint64_t min_texel_buffer_offset_alignment = 0;
  std::vector<memory_heap_info> heaps;
  std::vector<memory_type_info> memory_types;
  bool unified_memory = false;  ///< device-local memory the host can map (integrated, CPU, ReBAR)

  // queue and sync
  bool has_compute_queue = false;
  std::uint32_t compute_queue_family = 0;
  bool timeline_semaphore = false;
  /// Timestamps on the compute queue (the profiler's GPU times): bits a timestamp keeps
  /// (timestampValidBits of the family; 0: none) and nanoseconds per tick (timestampPeriod).
  std::uint32_t timestamp_valid_bits = 0;
  float timestamp_period = 0;

  std::string unusable_reason;
  bool usable() const noexcept { return unusable_reason.empty(); }

  std::string api_version_string() const { return instance::version_string(api_version); }
  /// "vulkan:0 (llvmpipe (LLVM 15.0.6, 256 bits), CPU)"
  std::string label() const {
    return "vulkan:" + std::to_string(index) + " (" + name + ", " + vk::name(type) + ")";
  }
};

inline device_type to_device_type(VkPhysicalDeviceType t) noexcept {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return device_type::discrete_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return device_type::integrated_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return device_type::virtual_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return device_type::cpu;
    default: return device_type::other;
  }
}

/// Cooperative matrix is used only where a driver's claim has held up in practice: some
/// drivers advertise the extension while miscompiling or trapping on it. Extend this list
/// per driver after testing, never from the extension string alone.
inline bool cooperative_matrix_allowed(std::uint32_t driver_id, std::uint32_t driver_version) noexcept {
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

inline std::vector<std::string> subgroup_op_names(VkSubgroupFeatureFlags f) {
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

/// Describes one physical device (queries only; creates nothing).
inline device_info describe(VkPhysicalDevice pd, int index) {
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
    vkGetPhysicalDeviceFeatures2(pd, &f2);
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
  if (!d.has_compute_queue && d.unusable_reason.empty()) d.unusable_reason = "has no compute queue";
  return d;
}

inline std::vector<device_info> describe_all(const instance& inst, std::vector<VkPhysicalDevice>* handles = nullptr) {
  auto pds = inst.physical_devices();
  std::vector<device_info> out;
  for (std::size_t i = 0; i < pds.size(); ++i) out.push_back(describe(pds[i], static_cast<int>(i)));
  if (handles) *handles = std::move(pds);
  return out;
}

inline std::string device_list(const std::vector<device_info>& ds) {
  if (ds.empty()) return "no devices";
  std::string s;
  for (const auto& d : ds) {
    if (!s.empty()) s += "; ";
    s += std::to_string(d.index) + ": " + d.name + " (" + name(d.type) + (d.usable() ? "" : ", unusable: " + d.unusable_reason) + ")";
  }
  return s;
}

inline std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Picks the device kiln runs on: `requested` (an explicit device_index) wins, then
/// KILN_DEVICE (an index, or a case-insensitive substring of the name), then the best
/// usable device by type (discrete > integrated > virtual > CPU; lowest index on ties).
/// Throws kiln::device_unavailable with the reason when nothing fits.
inline const device_info& select(const std::vector<device_info>& ds, std::optional<int> requested) {
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
