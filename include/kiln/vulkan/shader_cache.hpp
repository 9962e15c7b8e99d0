// kiln/vulkan/shader_cache.hpp — GLSL -> SPIR-V (shaderc) -> compute pipeline, cached in
// memory per context. A kernel is named GLSL text plus preprocessor defines (its variant);
// the workgroup size and elements per invocation are specialisation constants 0 and 1,
// chosen once per device from its capabilities. Fixed kernels (kernels/*.comp) and
// generated ones go through the same path.
//
// Warm start: when a context closes, the kernels it used are listed on disk (the "warm
// list", per device and program, in order of first use). The next context of the same
// program rebuilds those pipelines from the cached SPIR-V on a background thread while the
// program sets up, so its first statements find them ready. A statement that needs a
// kernel the thread is still building waits for it instead of building it twice. The
// thread never runs shaderc; KILN_CACHE_PRELOAD=off (or KILN_CACHE=off) turns it off.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <bit>  // std::popcount
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>  // std::hash
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/core/version.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/detail/hash.hpp"
#include "kiln/vulkan/device.hpp"
#include "kiln/vulkan/sequence.hpp"

namespace kiln::detail::vk {

/// One preprocessor definition of a kernel variant: `#define name value`.
struct define {
  std::string_view name;
  std::string_view value;
};

/// A compute kernel: GLSL text (with the defines, the cache key) and a name for messages
/// (a kernel file's name, or the expression of generated code); bindings 0..bindings-1
/// are storage buffers, but those whose bit is set in texel_bindings, which are uniform
/// texel buffers (R32G32B32A32_UINT views); push constants are push_bytes long (at most
/// the device's maxPushConstantsSize). A kernel whose parameters do not fit there reads
/// them from a storage buffer of params_bytes at binding `bindings` instead, which the
/// context fills for each dispatch. The workgroup size is specialisation constant 0
/// (`layout(local_size_x_id = 0) in;`), elements per invocation constant 1 (optional);
/// a kernel that needs a size of its own (a structural kernel sized from the device's
/// subgroup and shared memory) declares `layout(local_size_x = N) in;` in its source and
/// states N in local_size. Constants 0 and 1 are still supplied to every pipeline: a map
/// entry for a constant id the shader does not declare has no effect (Vulkan spec,
/// VkSpecializationInfo), so one pipeline-creation path serves both kinds. A kernel
/// with tunables of its own (a GEMM's tile sizes) takes them as specialisation constants
/// 2, 3, ... (`constants`): one SPIR-V module serves every tile size, each a pipeline.
struct kernel_spec {
  std::string_view name;
  std::string_view glsl;
  std::span<const define> defines;
  std::uint32_t bindings = 0;
  std::uint32_t push_bytes = 0;
  /// Generated kernels: the expression they came from (errors name it). Their whole
  /// source is part of the cache key, since `name` is only a hash of it.
  std::string_view expression = {};
  std::uint32_t texel_bindings = 0;  ///< bit i: binding i is a uniform texel buffer
  std::uint32_t params_bytes = 0;    ///< nonzero: binding `bindings` is a parameter buffer of this size
  std::uint32_t local_size = 0;      ///< nonzero: the source declares local_size_x = this (checked against the device)
  std::span<const std::uint32_t> constants = {};  ///< specialisation constants 2, 3, ... (part of the pipeline's key)
};

/// Kernel-cache counters of one context, per level: memory, then disk, then shaderc.
struct cache_stats {
  std::uint64_t memory_hits = 0;
  std::uint64_t memory_misses = 0;
  std::uint64_t disk_hits = 0;
  std::uint64_t disk_misses = 0;
  std::uint64_t disk_rejected = 0;   ///< entries present but invalid (ignored, then rewritten)
  std::uint64_t compilations = 0;    ///< shaderc runs
  double compile_seconds = 0;        ///< time in shaderc
  double pipeline_seconds = 0;       ///< time in vkCreateComputePipelines, on the caller's thread
  std::uint64_t preloaded = 0;       ///< pipelines rebuilt in the background from the warm list
  double preload_seconds = 0;        ///< time the background thread spent creating them
  bool pipeline_cache_loaded = false;  ///< a VkPipelineCache was restored from disk
  bool pipeline_cache_rejected = false;  ///< one was on disk but not for this device (replaced at close)
  std::uint64_t spirv_rejected = 0;  ///< SPIR-V entries that validated as files but not as k's module (evicted)
  std::uint64_t disk_evicted = 0;    ///< entries removed: SPIR-V that did not fit, or that the driver refused
  std::string directory;             ///< the disk cache's directory ("" = disabled)
};

/// A kernel_spec that owns its strings: what a pipeline was built from, and what a warm
/// list records so that a later process can rebuild it.
struct kernel_record {
  std::string name, glsl;
  std::vector<std::pair<std::string, std::string>> defines;
  std::uint32_t bindings = 0, push_bytes = 0, texel_bindings = 0, params_bytes = 0, local_size = 0;
  std::vector<std::uint32_t> constants;

  kernel_record() = default;
  explicit kernel_record(const kernel_spec& k);
  /// A spec viewing this record; `views` holds its defines and must outlive it.
  kernel_spec spec(std::vector<define>& views) const;
};

/// A compiled kernel's Vulkan objects.
struct pipeline {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline handle = VK_NULL_HANDLE;
  kernel_record source;         ///< confirms cache hits (glsl); listed in the warm list
  std::uint64_t first_use = 0;  ///< order of first use here; 0: preloaded, not used (yet)
};

/// The warm list's bytes: version, count, then per kernel bindings, texel bindings, push
/// bytes, parameter-buffer bytes, name, defines and source (strings as u32 length + bytes).
inline constexpr std::uint32_t warm_list_version = 4;  ///< 2: texel bindings; 3: parameter buffers; 4: constants

KILN_DECL std::vector<std::byte> serialize_warm_list(const std::vector<const kernel_record*>& used);

/// Parses a warm list; anything malformed gives an empty list (it is only a hint).
KILN_DECL std::vector<kernel_record> parse_warm_list(std::span<const std::byte> in);

/// Whether `w` could be kernel k's SPIR-V, checked before a driver sees words from the
/// disk: a well-formed module (header, an instruction stream that ends exactly at the end,
/// ids below the bound, functions closed, called functions defined), one GLCompute entry
/// point "main" that is a defined function, and resources that fit k's
/// layout: set 0, bindings below k.bindings, each of the kind k declares (texel view or
/// storage buffer), push constants only when k has some and no more bytes than it has.
/// Garbage, another kernel's module and a truncated one fail here; a module that passes
/// and still fails in the driver is evicted by the cache (shader_cache::get).
KILN_DECL bool spirv_fits(std::span<const std::uint32_t> w, const kernel_spec& k);

/// The running program, so that each program keeps a warm list of its own.
KILN_DECL std::string program_identity();

KILN_DECL bool preload_enabled();

/// The pipelines of one device. Callers are serialised by the context's mutex; the cache's
/// own mutex guards what the warm-start thread shares with them.
class shader_cache {
 public:
  shader_cache(VkDevice dev, const device_info& info);

  shader_cache(const shader_cache&) = delete;
  shader_cache& operator=(const shader_cache&) = delete;

  ~shader_cache();

  /// The pipeline of k, compiled on first use. Throws kiln::shader_error (with the
  /// shaderc log and the GLSL) or kiln::device_error.
  const pipeline& get(const kernel_spec& k);

  /// Waits until the warm-start thread is done; the number of pipelines it rebuilt.
  std::uint64_t wait_preloaded();

  std::uint32_t workgroup_size() const noexcept { return workgroup_size_; }
  std::uint32_t elements_per_invocation() const noexcept { return elements_per_invocation_; }
  /// Number of shaderc compilations so far (a cache hit compiles nothing).
  std::size_t compilations() const noexcept { return compilations_; }
  cache_stats stats() const;
  std::size_t size() const;

 private:
  /// The in-memory key: name, defines and a hash of the source (hits confirm the text).
  static std::string memory_key(const kernel_spec& k);

  /// The pipeline under key compiled from glsl, or nullptr. Equal hashes of different
  /// text live side by side: key then names the second one's slot. Needs mutex_.
  pipeline* find(std::string& key, std::string_view glsl);

  /// What k needs beyond the device's limits, in words naming the limit; "" when it fits.
  std::string beyond_limits(const kernel_spec& k) const;

  static std::unique_ptr<pipeline> make_pipeline(const kernel_spec& k);

  std::string warm_list_key() const;

  /// Starts rebuilding the kernels this program used last time, if the disk cache has a
  /// warm list for it.
  void start_preload();

  /// The warm-start thread: rebuilds each listed kernel whose SPIR-V is on disk (it never
  /// compiles), skipping those a caller already has or is building.
  void preload(const std::vector<kernel_record>& records) noexcept;

  /// Lists the kernels used here, in order of first use, for the next process (only when
  /// some were used and the list changed).
  void save_warm_list() noexcept;

  std::vector<std::uint32_t> compile(const kernel_spec& k);

  /// Creates p's Vulkan objects; the seconds vkCreateComputePipelines took.
  double build(pipeline& p, const kernel_spec& k, const std::vector<std::uint32_t>& spirv);

  /// What besides the source decides the SPIR-V and pipeline: device, driver, compiler
  /// target, kiln version. Part of every disk key.
  /// The execution modes every kernel gets on this device: f32 NaN / inf / signed-zero
  /// preservation and subnormal preservation where the device supports them (Vulkan 1.2
  /// float controls; SPIR-V capabilities 4466 and 4464, modes 4461 and 4459).
  std::string float_modes() const;

  std::string disk_key_prefix() const;

  /// The disk key of k's SPIR-V: what decides it besides the source, then the source.
  std::string spirv_key(const kernel_spec& k) const;

  /// k's SPIR-V from the disk cache, when a valid entry exists that fits k (spirv_fits);
  /// an entry that does not is evicted.
  std::optional<std::vector<std::uint32_t>> load_spirv(const kernel_spec& k);

  /// SPIR-V of k: from the disk cache when a valid entry exists (from_disk), else compiled
  /// and stored.
  std::vector<std::uint32_t> spirv_for(const kernel_spec& k, bool& from_disk);

  void open_pipeline_cache();

  /// Whether a stored VkPipelineCache blob was made by this device and driver: the whole
  /// VkPipelineCacheHeaderVersionOne (its length field exactly 32, version one, vendor
  /// and device ids, the pipeline-cache UUID) is checked before the driver parses it.
  bool pipeline_cache_header_fits(std::span<const std::byte> blob) const;

  void save_pipeline_cache() noexcept;

  void destroy(pipeline& p) noexcept;

  VkDevice dev_;
  const device_info& info_;
  shaderc_compiler_t compiler_ = nullptr;
  std::uint32_t workgroup_size_ = 64;
  std::uint32_t elements_per_invocation_ = 1;
  std::size_t compilations_ = 0;
  std::unordered_map<std::string, std::unique_ptr<pipeline>> pipelines_;
  /// The disk cache, the warm-start thread and what callers wait on (shader_cache.ipp):
  /// behind a pointer, so that this header needs neither <thread> nor <filesystem>.
  struct shared_state;
  std::unique_ptr<shared_state> shared_;
  std::string prefix_;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  cache_stats stats_;
  // Shared with the warm-start thread (mutex_): pipelines_, building_, stats_, stop_, preload_done_
  // (and shared_->built, which signals them).
  static constexpr std::size_t max_warm_kernels = 256;
  mutable std::mutex mutex_;
  std::unordered_set<std::string> building_;  ///< keys being built right now
  std::uint64_t uses_ = 0;
  bool stop_ = false;
  bool preload_done_ = true;
  std::vector<std::byte> warm_list_loaded_;
};

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/impl/shader_cache.ipp"
#endif
