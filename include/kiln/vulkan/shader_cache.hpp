// kiln/vulkan/shader_cache.hpp — GLSL -> SPIR-V (shaderc) -> compute pipeline, cached in
// memory per context. A kernel is named GLSL text plus preprocessor defines (its variant);
// the workgroup size and elements per invocation are specialisation constants 0 and 1,
// chosen once per device from its capabilities. Fixed kernels (kernels/*.comp) and
// generated ones go through the same path.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <cstdint>
#include <cstring>
#include <functional>  // std::hash
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/core/version.hpp"
#include "kiln/detail/disk_cache.hpp"
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
/// are storage buffers; push constants are push_bytes long (at most 128, the minimum
/// every device grants). The workgroup size is specialisation constant 0
/// (`layout(local_size_x_id = 0) in;`), elements per invocation constant 1 (optional).
struct kernel_spec {
  std::string_view name;
  std::string_view glsl;
  std::span<const define> defines;
  std::uint32_t bindings = 0;
  std::uint32_t push_bytes = 0;
  /// Generated kernels: the expression they came from (errors name it). Their whole
  /// source is part of the cache key, since `name` is only a hash of it.
  std::string_view expression = {};
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
  double pipeline_seconds = 0;       ///< time in vkCreateComputePipelines
  bool pipeline_cache_loaded = false;  ///< a VkPipelineCache was restored from disk
  std::string directory;             ///< the disk cache's directory ("" = disabled)
};

/// A compiled kernel's Vulkan objects.
struct pipeline {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline handle = VK_NULL_HANDLE;
  std::uint32_t bindings = 0;
  std::uint32_t push_bytes = 0;
  std::string glsl;  ///< the source it was compiled from (confirms cache hits)
};

/// The pipelines of one device. Not thread-safe: the context's mutex guards it.
class shader_cache {
 public:
  shader_cache(VkDevice dev, const device_info& info) : dev_(dev), info_(info), disk_(disk_cache::default_directory()) {
    // 256 invocations where the device allows, a multiple of the subgroup size.
    std::uint32_t wg = std::min<std::uint32_t>({256u, info.max_workgroup_size[0], info.max_workgroup_invocations});
    if (info.subgroup_size && wg >= info.subgroup_size) wg -= wg % info.subgroup_size;
    workgroup_size_ = std::max<std::uint32_t>(wg, 1);
    // CPU implementations (lavapipe) pay per invocation: give each one several elements.
    elements_per_invocation_ = info.type == device_type::cpu ? 4u : 1u;
    prefix_ = disk_key_prefix();
    open_pipeline_cache();
  }

  shader_cache(const shader_cache&) = delete;
  shader_cache& operator=(const shader_cache&) = delete;

  ~shader_cache() {
    for (auto& [key, p] : pipelines_) destroy(*p);
    save_pipeline_cache();
    if (compiler_) shaderc_compiler_release(compiler_);
  }

  /// The pipeline of k, compiled on first use. Throws kiln::shader_error (with the
  /// shaderc log and the GLSL) or kiln::device_error.
  const pipeline& get(const kernel_spec& k) {
    // The source is the key (generated kernels may share a name); its hash keeps the key
    // short, and a hit is confirmed against the stored text.
    std::string key(k.name);
    for (const auto& d : k.defines) {
      key += '|';
      key += d.name;
      key += '=';
      key += d.value;
    }
    key += '#';
    key += std::to_string(std::hash<std::string_view>{}(k.glsl));
    if (auto it = pipelines_.find(key); it != pipelines_.end()) {
      const pipeline& p = *it->second;
      if (std::string_view(p.glsl) == k.glsl) {
        ++stats_.memory_hits;
        return p;
      }
      key += "#collision";  // equal hashes, different text: keep both
      if (auto again = pipelines_.find(key); again != pipelines_.end()) {
        ++stats_.memory_hits;
        return *again->second;
      }
    }
    ++stats_.memory_misses;
    if (k.bindings > sequence::max_bindings) {
      throw shader_error("kiln::vulkan: kernel '" + std::string(k.name) + "' binds " + std::to_string(k.bindings) +
                         " buffers; at most " + std::to_string(sequence::max_bindings) + " are supported");
    }
    if (k.push_bytes > info_.max_push_constants) {
      throw shader_error("kiln::vulkan: kernel '" + std::string(k.name) + "' needs " + std::to_string(k.push_bytes) +
                         " bytes of push constants; the device allows " + std::to_string(info_.max_push_constants));
    }
    const std::vector<std::uint32_t> spirv = spirv_for(k);
    auto p = std::make_unique<pipeline>();
    p->glsl = std::string(k.glsl);
    try {
      build(*p, k, spirv);
    } catch (...) {
      destroy(*p);
      throw;
    }
    return *pipelines_.emplace(std::move(key), std::move(p)).first->second;
  }

  std::uint32_t workgroup_size() const noexcept { return workgroup_size_; }
  std::uint32_t elements_per_invocation() const noexcept { return elements_per_invocation_; }
  /// Number of shaderc compilations so far (a cache hit compiles nothing).
  std::size_t compilations() const noexcept { return compilations_; }
  cache_stats stats() const {
    cache_stats s = stats_;
    const auto d = disk_.stats();
    s.disk_hits = d.hits;
    s.disk_misses = d.misses;
    s.disk_rejected = d.rejected;
    s.compilations = compilations_;
    s.directory = disk_.directory().string();
    return s;
  }
  std::size_t size() const noexcept { return pipelines_.size(); }

 private:
  std::vector<std::uint32_t> compile(const kernel_spec& k) {
    if (!compiler_) {
      compiler_ = shaderc_compiler_initialize();
      if (!compiler_) throw shader_error("kiln::vulkan: shaderc_compiler_initialize failed");
    }
    shaderc_compile_options_t opts = shaderc_compile_options_initialize();
    if (!opts) throw shader_error("kiln::vulkan: shaderc_compile_options_initialize failed");
    shaderc_compile_options_set_target_env(opts, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
    shaderc_compile_options_set_optimization_level(opts, shaderc_optimization_level_performance);
    for (const auto& d : k.defines) {
      shaderc_compile_options_add_macro_definition(opts, d.name.data(), d.name.size(), d.value.data(), d.value.size());
    }
    const std::string file = std::string(k.name) + ".comp";
    const auto t0 = std::chrono::steady_clock::now();
    shaderc_compilation_result_t res = shaderc_compile_into_spv(compiler_, k.glsl.data(), k.glsl.size(),
                                                                shaderc_compute_shader, file.c_str(), "main", opts);
    shaderc_compile_options_release(opts);
    ++compilations_;
    stats_.compile_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!res || shaderc_result_get_compilation_status(res) != shaderc_compilation_status_success) {
      std::string log = res ? shaderc_result_get_error_message(res) : "shaderc returned no result";
      if (res) shaderc_result_release(res);
      std::string msg = "kiln::vulkan: kernel '";
      msg += k.name;
      msg += '\'';
      for (std::size_t i = 0; i < k.defines.size(); ++i) {
        msg += i ? ", " : " (";
        msg += k.defines[i].name;
        msg += '=';
        msg += k.defines[i].value;
        if (i + 1 == k.defines.size()) msg += ')';
      }
      if (!k.expression.empty()) {
        msg += " generated for ";
        msg += k.expression;
      }
      msg += " does not compile:\n";
      msg += log;
      msg += "\n--- GLSL ---\n";
      std::size_t line = 1, start = 0;
      while (start < k.glsl.size()) {
        const std::size_t end = std::min(k.glsl.find('\n', start), k.glsl.size());
        char num[16];
        std::snprintf(num, sizeof num, "%4zu | ", line++);
        msg += num;
        msg.append(k.glsl.substr(start, end - start));
        msg += '\n';
        start = end + 1;
      }
      throw shader_error(msg);
    }
    const std::size_t bytes = shaderc_result_get_length(res);
    std::vector<std::uint32_t> words(bytes / 4);
    std::memcpy(words.data(), shaderc_result_get_bytes(res), words.size() * 4);
    shaderc_result_release(res);
    return words;
  }

  void build(pipeline& p, const kernel_spec& k, const std::vector<std::uint32_t>& spirv) {
    p.bindings = k.bindings;
    p.push_bytes = k.push_bytes;
    std::vector<VkDescriptorSetLayoutBinding> binds(k.bindings);
    for (std::uint32_t i = 0; i < k.bindings; ++i) {
      binds[i] = VkDescriptorSetLayoutBinding{i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    }
    VkDescriptorSetLayoutCreateInfo dl{};
    dl.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    dl.bindingCount = k.bindings;
    dl.pBindings = binds.data();
    check(vkCreateDescriptorSetLayout(dev_, &dl, nullptr, &p.set_layout), "vkCreateDescriptorSetLayout");

    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, k.push_bytes};
    VkPipelineLayoutCreateInfo pl{};
    pl.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &p.set_layout;
    pl.pushConstantRangeCount = k.push_bytes ? 1 : 0;
    pl.pPushConstantRanges = &range;
    check(vkCreatePipelineLayout(dev_, &pl, nullptr, &p.layout), "vkCreatePipelineLayout");

    VkShaderModuleCreateInfo sm{};
    sm.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    sm.codeSize = spirv.size() * 4;
    sm.pCode = spirv.data();
    VkShaderModule module = VK_NULL_HANDLE;
    check(vkCreateShaderModule(dev_, &sm, nullptr, &module), "vkCreateShaderModule");

    const std::uint32_t constants[2] = {workgroup_size_, elements_per_invocation_};
    const VkSpecializationMapEntry entries[2] = {{0, 0, 4}, {1, 4, 4}};
    VkSpecializationInfo spec{2, entries, sizeof(constants), constants};
    VkComputePipelineCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = &spec;
    ci.layout = p.layout;
    const auto t0 = std::chrono::steady_clock::now();
    const VkResult r = vkCreateComputePipelines(dev_, pipeline_cache_, 1, &ci, nullptr, &p.handle);
    stats_.pipeline_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    vkDestroyShaderModule(dev_, module, nullptr);  // the pipeline keeps what it needs
    check(r, "vkCreateComputePipelines");
  }

  /// What besides the source decides the SPIR-V and pipeline: device, driver, compiler
  /// target, kiln version. Part of every disk key.
  std::string disk_key_prefix() const {
    unsigned spv = 0, rev = 0;
    shaderc_get_spv_version(&spv, &rev);
    char buf[160];
    std::snprintf(buf, sizeof buf, "kiln %s | vendor %04x device %04x driver %u/%u | spv %u.%u | vulkan1.2 O | wg %u epi %u\n",
                  KILN_VERSION_STRING, info_.vendor_id, info_.device_id, info_.driver_id, info_.driver_version, spv, rev,
                  workgroup_size_, elements_per_invocation_);
    std::string s(buf);
    for (auto b : info_.uuid) {
      std::snprintf(buf, sizeof buf, "%02x", unsigned(b));
      s += buf;
    }
    return s + "\n";
  }

  /// SPIR-V of k: from the disk cache when a valid entry exists, else compiled and stored.
  std::vector<std::uint32_t> spirv_for(const kernel_spec& k) {
    std::string key = prefix_;
    for (const auto& d : k.defines) {
      key += d.name;
      key += '=';
      key += d.value;
      key += '\n';
    }
    key += k.glsl;
    if (auto blob = disk_.load(key, "spv"); blob && blob->size() % 4 == 0 && blob->size() >= 20) {
      std::vector<std::uint32_t> words(blob->size() / 4);
      std::memcpy(words.data(), blob->data(), blob->size());
      if (words[0] == 0x07230203u) return words;  // SPIR-V magic; anything else is not ours
    }
    std::vector<std::uint32_t> words = compile(k);
    disk_.store(key, "spv", std::as_bytes(std::span(words)));
    return words;
  }

  void open_pipeline_cache() {
    VkPipelineCacheCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
    std::optional<std::vector<std::byte>> blob = disk_.load(prefix_ + "pipeline cache", "pipeline");
    // Vulkan's own header (length, version, vendor, device, cache UUID) must match too.
    if (blob && blob->size() >= 32) {
      std::uint32_t h[4];
      std::memcpy(h, blob->data(), sizeof h);
      const bool ours = h[0] >= 32 && h[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && h[2] == info_.vendor_id &&
                        h[3] == info_.device_id &&
                        std::memcmp(blob->data() + 16, info_.uuid.data(), info_.uuid.size()) == 0;
      if (ours) {
        ci.initialDataSize = blob->size();
        ci.pInitialData = blob->data();
      }
    }
    if (vkCreatePipelineCache(dev_, &ci, nullptr, &pipeline_cache_) != VK_SUCCESS) {
      pipeline_cache_ = VK_NULL_HANDLE;  // still correct without one, only slower
    } else {
      stats_.pipeline_cache_loaded = ci.initialDataSize > 0;
    }
  }

  void save_pipeline_cache() noexcept {
    if (!pipeline_cache_) return;
    if (disk_.enabled() && stats_.memory_misses > 0) {  // nothing new to save otherwise
      std::size_t size = 0;
      if (vkGetPipelineCacheData(dev_, pipeline_cache_, &size, nullptr) == VK_SUCCESS && size) {
        try {
          std::vector<std::byte> data(size);
          if (vkGetPipelineCacheData(dev_, pipeline_cache_, &size, data.data()) == VK_SUCCESS) {
            data.resize(size);
            disk_.store(prefix_ + "pipeline cache", "pipeline", data);
          }
        } catch (...) {  // out of memory while saving: the cache is only an optimisation
        }
      }
    }
    vkDestroyPipelineCache(dev_, pipeline_cache_, nullptr);
    pipeline_cache_ = VK_NULL_HANDLE;
  }

  void destroy(pipeline& p) noexcept {
    if (p.handle) vkDestroyPipeline(dev_, p.handle, nullptr);
    if (p.layout) vkDestroyPipelineLayout(dev_, p.layout, nullptr);
    if (p.set_layout) vkDestroyDescriptorSetLayout(dev_, p.set_layout, nullptr);
  }

  VkDevice dev_;
  const device_info& info_;
  shaderc_compiler_t compiler_ = nullptr;
  std::uint32_t workgroup_size_ = 64;
  std::uint32_t elements_per_invocation_ = 1;
  std::size_t compilations_ = 0;
  std::unordered_map<std::string, std::unique_ptr<pipeline>> pipelines_;
  disk_cache disk_;
  std::string prefix_;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  cache_stats stats_;
};

}  // namespace kiln::detail::vk
