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
  shader_cache(VkDevice dev, const device_info& info) : dev_(dev), info_(info) {
    // 256 invocations where the device allows, a multiple of the subgroup size.
    std::uint32_t wg = std::min<std::uint32_t>({256u, info.max_workgroup_size[0], info.max_workgroup_invocations});
    if (info.subgroup_size && wg >= info.subgroup_size) wg -= wg % info.subgroup_size;
    workgroup_size_ = std::max<std::uint32_t>(wg, 1);
    // CPU implementations (lavapipe) pay per invocation: give each one several elements.
    elements_per_invocation_ = info.type == device_type::cpu ? 4u : 1u;
  }

  shader_cache(const shader_cache&) = delete;
  shader_cache& operator=(const shader_cache&) = delete;

  ~shader_cache() {
    for (auto& [key, p] : pipelines_) destroy(*p);
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
      if (std::string_view(p.glsl) == k.glsl) return p;
      key += "#collision";  // equal hashes, different text: keep both
      if (auto again = pipelines_.find(key); again != pipelines_.end()) return *again->second;
    }
    if (k.bindings > sequence::max_bindings) {
      throw shader_error("kiln::vulkan: kernel '" + std::string(k.name) + "' binds " + std::to_string(k.bindings) +
                         " buffers; at most " + std::to_string(sequence::max_bindings) + " are supported");
    }
    if (k.push_bytes > info_.max_push_constants) {
      throw shader_error("kiln::vulkan: kernel '" + std::string(k.name) + "' needs " + std::to_string(k.push_bytes) +
                         " bytes of push constants; the device allows " + std::to_string(info_.max_push_constants));
    }
    const std::vector<std::uint32_t> spirv = compile(k);
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
    shaderc_compilation_result_t res = shaderc_compile_into_spv(compiler_, k.glsl.data(), k.glsl.size(),
                                                                shaderc_compute_shader, file.c_str(), "main", opts);
    shaderc_compile_options_release(opts);
    ++compilations_;
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
      msg += " does not compile:\n";
      msg += log;
      msg += "\n--- GLSL ---\n";
      msg += k.glsl;
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
    const VkResult r = vkCreateComputePipelines(dev_, VK_NULL_HANDLE, 1, &ci, nullptr, &p.handle);
    vkDestroyShaderModule(dev_, module, nullptr);  // the pipeline keeps what it needs
    check(r, "vkCreateComputePipelines");
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
};

}  // namespace kiln::detail::vk
