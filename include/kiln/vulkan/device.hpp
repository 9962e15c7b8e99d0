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
#include "kiln/detail/config.hpp"
#include "kiln/detail/env.hpp"  // env_flag, env_off

namespace kiln::detail::vk {

// ---------------------------------------------------------------------------------------
// Results and errors

KILN_DECL const char* result_name(VkResult r) noexcept;

/// "vkQueueSubmit: VK_ERROR_DEVICE_LOST"
KILN_DECL std::string call_failed(const char* call, VkResult r);

/// Throws kiln::device_error naming the call and the result unless r is VK_SUCCESS.
KILN_DECL void check(VkResult r, const char* call);

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
  static void arm(site s, std::uint64_t skip = 0, std::int64_t times = 1);
  /// Every site back to normal.
  static void disarm();
  /// Calls at s failed on purpose since it was last armed.
  static std::uint64_t fired(site s);
  /// Disarms everything when a test's scope ends, failed assertions included.
  struct scope {
    scope() = default;
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;
    ~scope() { disarm(); }
  };

  /// Asked by the runtime at each site: true when this call is to fail.
  static bool fail(site s) noexcept;

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
KILN_DECL validation_log& global_validation_log();

KILN_DECL VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                               VkDebugUtilsMessageTypeFlagsEXT,
                                                               const VkDebugUtilsMessengerCallbackDataEXT* data, void*);

KILN_DECL VkDebugUtilsMessengerCreateInfoEXT messenger_info();

// ---------------------------------------------------------------------------------------
// Instance

/// A VkInstance (Vulkan 1.3 requested), optionally with the Khronos validation layer and
/// a messenger feeding global_validation_log(). Move-only; creation is all-or-nothing.
class instance {
 public:
  explicit instance(bool validation);

  instance(const instance&) = delete;
  instance& operator=(const instance&) = delete;

  ~instance();

  VkInstance get() const noexcept { return instance_; }
  bool validation() const noexcept { return validation_; }

  std::vector<VkPhysicalDevice> physical_devices() const;

  static std::string version_string(std::uint32_t v);

 private:
  static bool layer_present(const char* name);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  bool validation_ = false;
};

// ---------------------------------------------------------------------------------------
// Device description

/// Kind of a physical device, in kiln's order of preference (last is best).
enum class device_type { other, cpu, virtual_gpu, integrated_gpu, discrete_gpu };

KILN_DECL const char* name(device_type t) noexcept;

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

/// One cooperative-matrix product a device offers; types as kiln names them ("f16",
/// "f32", "i8", "i32", "u8", ...; "other" for the rest).
struct cooperative_matrix_shape {
  std::uint32_t m = 0, n = 0, k = 0;
  std::string a, b, c, d;
  /// "16x16x16 f16*f16+f32->f32"
  std::string label() const {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " + a + "*" + b + "+" + c + "->" + d;
  }
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
  std::array<std::uint8_t, VK_UUID_SIZE> uuid{};  ///< pipelineCacheUUID
  /// deviceUUID and driverUUID (VkPhysicalDeviceIDProperties): two devices may share memory
  /// through opaque fd handles only where both match (the Vulkan spec's external memory
  /// handle types compatibility table).
  std::array<std::uint8_t, VK_UUID_SIZE> device_uuid{};
  std::array<std::uint8_t, VK_UUID_SIZE> driver_uuid{};
  /// VK_KHR_external_memory_fd is present and buffers of transfer usage can be exported
  /// and imported as VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT
  /// (vkGetPhysicalDeviceExternalBufferProperties); always false off POSIX systems.
  bool external_memory_fd = false;

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
  /// VK_NV_cooperative_matrix with its cooperativeMatrix feature: the form Debian 12's
  /// glslang compiles (GL_NV_cooperative_matrix). kiln enables it where `cooperative_matrix`.
  bool cooperative_matrix_nv = false;
  /// vulkanMemoryModel (Vulkan 1.2): glslang declares the VulkanMemoryModel capability in
  /// cooperative-matrix kernels (GL_KHR_memory_scope_semantics), which needs this feature
  /// enabled; kiln uses cooperative matrices only where it is.
  bool vulkan_memory_model = false;
  /// The subgroup-scope products the driver reports (vkGetPhysicalDeviceCooperativeMatrixPropertiesNV):
  /// D (m x n) = A (m x k) * B (k x n) + C, with each matrix's component type.
  std::vector<cooperative_matrix_shape> cooperative_matrix_shapes;

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
  std::string label() const;
};

KILN_DECL device_type to_device_type(VkPhysicalDeviceType t) noexcept;

/// Cooperative matrix is used only where a driver's claim has held up in practice: some
/// drivers advertise the extension while miscompiling or trapping on it. Extend this list
/// per driver after testing, never from the extension string alone.
KILN_DECL bool cooperative_matrix_allowed(std::uint32_t driver_id, std::uint32_t driver_version) noexcept;

KILN_DECL std::vector<std::string> subgroup_op_names(VkSubgroupFeatureFlags f);

/// Describes one physical device (queries only; creates nothing).
KILN_DECL device_info describe(VkPhysicalDevice pd, int index, VkInstance inst = VK_NULL_HANDLE);
/// The subgroup-scope shapes of VK_NV_cooperative_matrix on pd (none without the entry point).
KILN_DECL std::vector<cooperative_matrix_shape> cooperative_matrix_shapes_nv(VkInstance inst, VkPhysicalDevice pd);

KILN_DECL std::vector<device_info> describe_all(const instance& inst, std::vector<VkPhysicalDevice>* handles = nullptr);

KILN_DECL std::string device_list(const std::vector<device_info>& ds);

KILN_DECL std::string lower(std::string s);

/// Picks the device kiln runs on: `requested` (an explicit device_index) wins, then
/// KILN_DEVICE (an index, or a case-insensitive substring of the name), then the best
/// usable device by type (discrete > integrated > virtual > CPU; lowest index on ties).
/// Throws kiln::device_unavailable with the reason when nothing fits.
KILN_DECL const device_info& select(const std::vector<device_info>& ds, std::optional<int> requested);

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/impl/device.ipp"
#endif
