// kiln/vulkan/impl/shader_cache.ipp — definitions of kiln/vulkan/shader_cache.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <thread>

#include "kiln/detail/disk_cache.hpp"
#include "kiln/vulkan/shader_cache.hpp"

namespace kiln::detail::vk {

KILN_DECL kernel_record::kernel_record(const kernel_spec& k)
    : name(k.name), glsl(k.glsl), bindings(k.bindings), push_bytes(k.push_bytes), texel_bindings(k.texel_bindings),
      params_bytes(k.params_bytes), local_size(k.local_size), constants(k.constants.begin(), k.constants.end()) {
  for (const auto& d : k.defines) defines.emplace_back(std::string(d.name), std::string(d.value));
}

KILN_DECL kernel_spec kernel_record::spec(std::vector<define>& views) const {
  views.clear();
  for (const auto& [n, v] : defines) views.push_back({n, v});
  return kernel_spec{name, glsl, views, bindings, push_bytes, {}, texel_bindings, params_bytes, local_size, constants};
}

KILN_DECL std::vector<std::byte> serialize_warm_list(const std::vector<const kernel_record*>& used) {
  std::vector<std::byte> out;
  auto u32 = [&](std::uint32_t v) {
    const auto* b = reinterpret_cast<const std::byte*>(&v);
    out.insert(out.end(), b, b + 4);
  };
  auto str = [&](std::string_view t) {
    u32(static_cast<std::uint32_t>(t.size()));
    const auto* b = reinterpret_cast<const std::byte*>(t.data());
    out.insert(out.end(), b, b + t.size());
  };
  u32(warm_list_version);
  u32(static_cast<std::uint32_t>(used.size()));
  for (const kernel_record* r : used) {
    u32(r->bindings);
    u32(r->texel_bindings);
    u32(r->push_bytes);
    u32(r->params_bytes);
    u32(r->local_size);
    u32(static_cast<std::uint32_t>(r->constants.size()));
    for (std::uint32_t c : r->constants) u32(c);
    str(r->name);
    u32(static_cast<std::uint32_t>(r->defines.size()));
    for (const auto& [n, v] : r->defines) {
      str(n);
      str(v);
    }
    str(r->glsl);
  }
  return out;
}

KILN_DECL std::vector<kernel_record> parse_warm_list(std::span<const std::byte> in) {
  std::size_t at = 0;
  bool ok = true;
  auto u32 = [&]() -> std::uint32_t {
    std::uint32_t v = 0;
    if (in.size() - at < 4) {
      ok = false;
      return 0;
    }
    std::memcpy(&v, in.data() + at, 4);
    at += 4;
    return v;
  };
  auto str = [&]() -> std::string {
    const std::uint32_t n = u32();
    if (!ok || in.size() - at < n) {
      ok = false;
      return {};
    }
    std::string t(reinterpret_cast<const char*>(in.data() + at), n);
    at += n;
    return t;
  };
  std::vector<kernel_record> out;
  if (u32() != warm_list_version || !ok) return {};
  const std::uint32_t count = u32();
  for (std::uint32_t i = 0; ok && i < count && i < 4096; ++i) {
    kernel_record r;
    r.bindings = u32();
    r.texel_bindings = u32();
    r.push_bytes = u32();
    r.params_bytes = u32();
    r.local_size = u32();
    const std::uint32_t nc = u32();
    if (nc > 64) ok = false;
    for (std::uint32_t c = 0; ok && c < nc; ++c) r.constants.push_back(u32());
    r.name = str();
    const std::uint32_t nd = u32();
    for (std::uint32_t d = 0; ok && d < nd && d < 64; ++d) {
      std::string n = str();
      std::string v = str();
      r.defines.emplace_back(std::move(n), std::move(v));
    }
    r.glsl = str();
    if (ok) out.push_back(std::move(r));
  }
  if (!ok || at != in.size()) return {};
  return out;
}

KILN_DECL bool spirv_fits(std::span<const std::uint32_t> w, const kernel_spec& k) {
  constexpr std::uint32_t magic = 0x07230203u;
  if (w.size() < 5 || w[0] != magic || w[4] != 0) return false;
  const std::uint32_t major = (w[1] >> 16) & 0xff, minor = (w[1] >> 8) & 0xff;
  if ((w[1] & 0xff0000ffu) != 0 || major != 1 || minor > 6) return false;
  const std::uint32_t bound = w[3];
  if (bound == 0 || bound > (1u << 22)) return false;
  struct id_info {
    std::uint32_t op = 0;             // the opcode that defined it (types, variables, constants)
    std::uint32_t a = 0, b = 0;       // its first operands
    std::int64_t set = -1, binding = -1, array_stride = -1;
  };
  // By id; a map, so that what this costs follows the module's size, not its claimed bound.
  std::unordered_map<std::uint32_t, id_info> ids;
  std::unordered_map<std::uint64_t, std::uint32_t> offsets;  // (struct id << 32 | member) -> Offset
  std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> structs;
  std::vector<std::uint32_t> variables;
  int entry_points = 0;
  bool main_compute = false;
  std::uint32_t main_function = 0;
  int open_functions = 0, functions = 0;  // a module cut between instructions shows here
  std::vector<std::uint32_t> called;
  constexpr std::uint32_t op_entry_point = 15, op_type_int = 21, op_type_float = 22, op_type_vector = 23,
                          op_type_array = 28, op_type_struct = 30, op_type_pointer = 32, op_constant = 43,
                          op_variable = 59, op_decorate = 71, op_member_decorate = 72, op_function = 54,
                          op_function_end = 56, op_function_call = 57;
  constexpr std::uint32_t deco_array_stride = 6, deco_binding = 33, deco_set = 34, deco_offset = 35;
  constexpr std::uint32_t sc_uniform_constant = 0, sc_uniform = 2, sc_push_constant = 9, sc_storage_buffer = 12;
  for (std::size_t i = 5; i < w.size();) {
    const std::uint32_t op = w[i] & 0xffffu, n = w[i] >> 16;
    if (n == 0 || n > w.size() - i) return false;
    const std::uint32_t* o = w.data() + i + 1;  // operands: n - 1 words
    auto id_ok = [&](std::uint32_t id) { return id > 0 && id < bound; };
    switch (op) {
      case op_entry_point: {
        if (n < 4) return false;
        ++entry_points;
        const char* name = reinterpret_cast<const char*>(o + 2);
        main_compute = o[0] == 5 /* GLCompute */ && (n - 3) * 4 >= 5 && std::memcmp(name, "main", 5) == 0;
        main_function = o[1];
        break;
      }
      case op_function:
        if (n < 5 || !id_ok(o[1]) || open_functions) return false;
        ids[o[1]].op = op;
        ++open_functions;
        ++functions;
        break;
      case op_function_end:
        if (--open_functions != 0) return false;
        break;
      case op_function_call:
        if (n < 4 || !open_functions) return false;
        called.push_back(o[2]);
        break;
      case op_decorate:
        if (n < 3 || !id_ok(o[0])) return false;
        if (n >= 4 && o[1] == deco_binding) ids[o[0]].binding = o[2];
        if (n >= 4 && o[1] == deco_set) ids[o[0]].set = o[2];
        if (n >= 4 && o[1] == deco_array_stride) ids[o[0]].array_stride = o[2];
        break;
      case op_member_decorate:
        if (n < 4 || !id_ok(o[0])) return false;
        if (n >= 5 && o[2] == deco_offset) offsets[(std::uint64_t(o[0]) << 32) | o[1]] = o[3];
        break;
      case op_type_int:
      case op_type_float:
      case op_type_vector:
      case op_type_array:
      case op_type_pointer:
        if (n < 3 || !id_ok(o[0])) return false;
        ids[o[0]].op = op;  // field by field: decorations came first and stay
        ids[o[0]].a = o[1];
        ids[o[0]].b = n > 3 ? o[2] : 0;
        break;
      case op_type_struct:
        if (n < 2 || !id_ok(o[0])) return false;
        ids[o[0]].op = op;
        structs[o[0]].assign(o + 1, o + (n - 1));
        break;
      case op_constant:
        if (n < 4 || !id_ok(o[1])) return false;
        ids[o[1]].op = op;
        ids[o[1]].a = o[0];
        ids[o[1]].b = o[2];
        break;
      case op_variable:
        if (n < 4 || !id_ok(o[1])) return false;
        ids[o[1]].op = op;
        ids[o[1]].a = o[0];  // pointer type
        ids[o[1]].b = o[2];  // storage class
        variables.push_back(o[1]);
        break;
      default:
        break;
    }
    i += n;
  }
  if (entry_points != 1 || !main_compute || open_functions || !functions) return false;
  auto is_function = [&](std::uint32_t id) {
    const auto it = ids.find(id);
    return it != ids.end() && it->second.op == op_function;
  };
  if (!is_function(main_function)) return false;
  for (std::uint32_t f : called)
    if (!is_function(f)) return false;
  // Bytes a push-constant type takes; 0 when this check does not know the type (then
  // only the presence of push constants is checked).
  auto size_of = [&](auto&& self, std::uint32_t t, int depth) -> std::uint64_t {
    const auto it = ids.find(t);
    if (it == ids.end() || depth > 8) return 0;
    const id_info& d = it->second;
    switch (d.op) {
      case op_type_int:
      case op_type_float:
        return d.a / 8;
      case op_type_vector:
        return self(self, d.a, depth + 1) * d.b;
      case op_type_array:
        if (const auto n = ids.find(d.b); d.array_stride >= 0 && n != ids.end() && n->second.op == op_constant) {
          return std::uint64_t(d.array_stride) * n->second.b;
        }
        return 0;
      case op_type_struct: {
        std::uint64_t end = 0;
        const auto m_it = structs.find(t);
        if (m_it == structs.end()) return 0;
        const auto& m = m_it->second;
        for (std::uint32_t j = 0; j < m.size(); ++j) {
          const auto off = offsets.find((std::uint64_t(t) << 32) | j);
          const std::uint64_t size = self(self, m[j], depth + 1);
          if (off == offsets.end() || size == 0) return 0;
          end = std::max<std::uint64_t>(end, off->second + size);
        }
        return end;
      }
      default:
        return 0;
    }
  };
  for (std::uint32_t v : variables) {
    const id_info var = ids[v];
    if (var.b == sc_push_constant) {
      if (k.push_bytes == 0) return false;
      if (const auto ptr = ids.find(var.a); ptr != ids.end() && ptr->second.op == op_type_pointer) {
        const std::uint64_t bytes = size_of(size_of, ptr->second.b, 0);
        if (bytes > k.push_bytes) return false;
      }
      continue;
    }
    if (var.binding < 0 && var.set < 0) continue;  // inputs, shared memory: not resources
    // the parameter buffer, when k has one, is the storage buffer after the operands'
    const std::int64_t bindings = std::int64_t(k.bindings) + (k.params_bytes ? 1 : 0);
    if (var.set != 0 || var.binding < 0 || var.binding >= bindings) return false;
    const bool texel = var.binding < 32 && ((k.texel_bindings >> var.binding) & 1u);
    if (texel ? var.b != sc_uniform_constant : (var.b != sc_storage_buffer && var.b != sc_uniform)) return false;
  }
  return true;
}

KILN_DECL std::string program_identity() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("unknown program") : p.string();
}

KILN_DECL bool preload_enabled() { return !env_off("KILN_CACHE_PRELOAD"); }

struct shader_cache::shared_state {
  disk_cache disk{disk_cache::default_directory()};
  std::condition_variable built;  ///< a build finished, or the warm-start thread did
  std::thread preloader;
};

KILN_DECL shader_cache::shader_cache(VkDevice dev, const device_info& info)
    : dev_(dev), info_(info), shared_(std::make_unique<shared_state>()) {
  // 256 invocations where the device allows, a multiple of the subgroup size.
  std::uint32_t wg = std::min<std::uint32_t>({256u, info.max_workgroup_size[0], info.max_workgroup_invocations});
  if (info.subgroup_size && wg >= info.subgroup_size) wg -= wg % info.subgroup_size;
  workgroup_size_ = std::max<std::uint32_t>(wg, 1);
  // CPU implementations (lavapipe) pay per invocation: give each one several elements.
  elements_per_invocation_ = info.type == device_type::cpu ? 4u : 1u;
  prefix_ = disk_key_prefix();
  open_pipeline_cache();
  start_preload();
}

KILN_DECL shader_cache::~shader_cache() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  if (shared_->preloader.joinable()) shared_->preloader.join();
  save_warm_list();
  for (auto& [key, p] : pipelines_) destroy(*p);
  save_pipeline_cache();
  if (compiler_) shaderc_compiler_release(compiler_);
}

KILN_DECL const pipeline& shader_cache::get(const kernel_spec& k) {
  std::string key = memory_key(k);
  std::unique_lock lock(mutex_);
  for (;;) {
    std::string at = key;
    if (pipeline* p = find(at, k.glsl)) {
      ++stats_.memory_hits;
      if (!p->first_use) p->first_use = ++uses_;
      return *p;
    }
    key = std::move(at);
    if (!building_.contains(key)) break;
    shared_->built.wait(lock);  // the warm-start thread is building it: cheaper than a second build
  }
  ++stats_.memory_misses;
  if (std::string why = beyond_limits(k); !why.empty()) {
    std::string msg = "kiln::vulkan: kernel '" + std::string(k.name) + "'";
    if (!k.expression.empty()) msg += " generated for " + std::string(k.expression);
    throw shader_error(msg + " " + why);
  }
  building_.insert(key);  // so that the warm-start thread leaves it alone
  lock.unlock();
  std::unique_ptr<pipeline> p;
  double seconds = 0;
  try {
    bool from_disk = false;
    std::vector<std::uint32_t> spirv = spirv_for(k, from_disk);
    p = make_pipeline(k);
    try {
      seconds = build(*p, k, spirv);
    } catch (const device_error&) {
      if (!from_disk) throw;
      // The driver refused SPIR-V that the disk gave: drop the entry and build from
      // source, so that a kernel never fails because of what is on disk.
      destroy(*p);
      p = make_pipeline(k);
      shared_->disk.evict(spirv_key(k), "spv");
      spirv = compile(k);
      shared_->disk.store(spirv_key(k), "spv", std::as_bytes(std::span(spirv)));
      seconds = build(*p, k, spirv);
    }
  } catch (...) {
    if (p) destroy(*p);
    lock.lock();
    building_.erase(key);
    shared_->built.notify_all();
    throw;
  }
  lock.lock();
  building_.erase(key);
  shared_->built.notify_all();
  stats_.pipeline_seconds += seconds;
  p->first_use = ++uses_;
  return *pipelines_.emplace(std::move(key), std::move(p)).first->second;
}

KILN_DECL std::uint64_t shader_cache::wait_preloaded() {
  std::unique_lock lock(mutex_);
  shared_->built.wait(lock, [&] { return preload_done_; });
  return stats_.preloaded;
}

KILN_DECL cache_stats shader_cache::stats() const {
  std::lock_guard lock(mutex_);
  cache_stats s = stats_;
  const auto d = shared_->disk.stats();
  s.disk_hits = d.hits;
  s.disk_misses = d.misses;
  s.disk_rejected = d.rejected;
  s.disk_evicted = d.evictions;
  s.compilations = compilations_;
  s.directory = shared_->disk.directory().string();
  return s;
}

KILN_DECL std::size_t shader_cache::size() const {
  std::lock_guard lock(mutex_);
  return pipelines_.size();
}

KILN_DECL std::string shader_cache::memory_key(const kernel_spec& k) {
  std::string key(k.name);
  for (const auto& d : k.defines) {
    key += '|';
    key += d.name;
    key += '=';
    key += d.value;
  }
  for (std::uint32_t c : k.constants) key += '|' + std::to_string(c);
  key += '#';
  key += std::to_string(std::hash<std::string_view>{}(k.glsl));
  return key;
}

KILN_DECL pipeline* shader_cache::find(std::string& key, std::string_view glsl) {
  auto it = pipelines_.find(key);
  if (it == pipelines_.end()) return nullptr;
  if (std::string_view(it->second->source.glsl) == glsl) return it->second.get();
  key += "#collision";
  auto again = pipelines_.find(key);
  return again == pipelines_.end() ? nullptr : again->second.get();
}

KILN_DECL std::string shader_cache::beyond_limits(const kernel_spec& k) const {
  const std::uint32_t texel = static_cast<std::uint32_t>(std::popcount(k.texel_bindings));
  const std::uint64_t storage = std::uint64_t(k.bindings) - texel + (k.params_bytes ? 1 : 0);
  auto limit = [&](std::uint64_t need, const char* what, std::uint64_t allowed, const char* names) {
    return "needs " + std::to_string(need) + " " + what + "; " + info_.label() + " allows " + std::to_string(allowed) +
           " (" + names + ")";
  };
  if (k.bindings < 32 && (k.texel_bindings >> k.bindings) != 0) {
    return "marks a binding beyond its " + std::to_string(k.bindings) + " as a texel buffer";
  }
  if (storage > info_.max_storage_buffers) {
    return limit(storage, "storage-buffer descriptors", info_.max_storage_buffers,
                 "maxPerStageDescriptorStorageBuffers / maxDescriptorSetStorageBuffers");
  }
  if (texel > info_.max_texel_buffers) {
    return limit(texel, "uniform-texel-buffer descriptors", info_.max_texel_buffers,
                 "maxPerStageDescriptorSampledImages / maxDescriptorSetSampledImages");
  }
  if (storage + texel > info_.max_resources) {
    return limit(storage + texel, "descriptors", info_.max_resources, "maxPerStageResources");
  }
  if (k.push_bytes > info_.max_push_constants) {
    return limit(k.push_bytes, "bytes of push constants", info_.max_push_constants, "maxPushConstantsSize");
  }
  if (k.local_size > info_.max_workgroup_invocations || k.local_size > info_.max_workgroup_size[0]) {
    return limit(k.local_size, "invocations per workgroup", std::min(info_.max_workgroup_invocations, info_.max_workgroup_size[0]),
                 "maxComputeWorkGroupInvocations / maxComputeWorkGroupSize[0]");
  }
  if (k.params_bytes > info_.max_storage_buffer_range) {
    return limit(k.params_bytes, "bytes of parameters", info_.max_storage_buffer_range, "maxStorageBufferRange");
  }
  return {};
}

KILN_DECL std::unique_ptr<pipeline> shader_cache::make_pipeline(const kernel_spec& k) {
  auto p = std::make_unique<pipeline>();
  p->source = kernel_record(k);
  return p;
}

KILN_DECL std::string shader_cache::warm_list_key() const { return prefix_ + "warm list\n" + program_identity(); }

KILN_DECL void shader_cache::start_preload() {
  if (!shared_->disk.enabled() || !preload_enabled()) return;
  auto blob = shared_->disk.load(warm_list_key(), "warm");
  if (!blob) return;
  warm_list_loaded_ = *blob;
  auto records = parse_warm_list(*blob);
  if (records.empty()) return;
  preload_done_ = false;
  try {
    shared_->preloader = std::thread([this, r = std::move(records)] { preload(r); });
  } catch (...) {  // no thread: start cold
    preload_done_ = true;
  }
}

KILN_DECL void shader_cache::preload(const std::vector<kernel_record>& records) noexcept {
  try {
    std::vector<define> views;
    for (const auto& r : records) {
      const kernel_spec k = r.spec(views);
      std::string key = memory_key(k);
      {
        std::lock_guard lock(mutex_);
        if (stop_) break;
        if (find(key, k.glsl) || building_.contains(key) || key.ends_with("#collision")) continue;
        building_.insert(key);
      }
      std::unique_ptr<pipeline> p;
      double seconds = 0;
      bool ok = false;
      try {
        if (beyond_limits(k).empty()) {
          if (auto spirv = load_spirv(k)) {
            p = make_pipeline(k);
            seconds = build(*p, k, *spirv);
            ok = true;
          }
        }
      } catch (...) {  // a failure here only means the caller builds it when needed
        if (p) destroy(*p);
      }
      std::lock_guard lock(mutex_);
      building_.erase(key);  // first, so that nobody waits on it whatever happens next
      if (ok) {
        try {
          pipelines_.emplace(std::move(key), std::move(p));
          ++stats_.preloaded;
          stats_.preload_seconds += seconds;
        } catch (...) {
          if (p) destroy(*p);
        }
      }
      shared_->built.notify_all();
    }
  } catch (...) {  // out of memory: stop here; callers build what they need
  }
  std::lock_guard lock(mutex_);
  preload_done_ = true;
  shared_->built.notify_all();
}

KILN_DECL void shader_cache::save_warm_list() noexcept {
  if (!shared_->disk.enabled() || !preload_enabled()) return;
  try {
    std::vector<const pipeline*> used;
    for (const auto& [key, p] : pipelines_)
      if (p->first_use) used.push_back(p.get());
    if (used.empty()) return;
    std::sort(used.begin(), used.end(), [](const pipeline* a, const pipeline* b) { return a->first_use < b->first_use; });
    if (used.size() > max_warm_kernels) used.resize(max_warm_kernels);
    std::vector<const kernel_record*> sources;
    for (const pipeline* p : used) sources.push_back(&p->source);
    const auto bytes = serialize_warm_list(sources);
    if (bytes != warm_list_loaded_) shared_->disk.store(warm_list_key(), "warm", bytes);
  } catch (...) {  // the list is only a hint
  }
}

KILN_DECL std::vector<std::uint32_t> shader_cache::compile(const kernel_spec& k) {
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
  // the float controls the device offers, appended (a global declaration: the source's
  // line numbers stay those of k.glsl)
  const std::string modes = float_modes();
  std::string with_modes;
  std::string_view src = k.glsl;
  if (!modes.empty()) {
    with_modes.reserve(k.glsl.size() + modes.size() + 1);
    with_modes.append(k.glsl);
    if (!with_modes.empty() && with_modes.back() != '\n') with_modes += '\n';
    with_modes += modes;
    src = with_modes;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const bool injected = fault_injection::fail(fault_injection::shader_compile);
  shaderc_compilation_result_t res =
      injected ? nullptr
               : shaderc_compile_into_spv(compiler_, src.data(), src.size(), shaderc_compute_shader, file.c_str(),
                                          "main", opts);
  shaderc_compile_options_release(opts);
  ++compilations_;
  {
    std::lock_guard lock(mutex_);
    stats_.compile_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (!res || shaderc_result_get_compilation_status(res) != shaderc_compilation_status_success) {
    std::string log = injected ? "compilation failed (injected by kiln::detail::vk::fault_injection)"
                      : res      ? shaderc_result_get_error_message(res)
                                 : "shaderc returned no result";
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

KILN_DECL double shader_cache::build(pipeline& p, const kernel_spec& k, const std::vector<std::uint32_t>& spirv) {
  const std::uint32_t n = k.bindings + (k.params_bytes ? 1 : 0);  // the parameter buffer last
  std::vector<VkDescriptorSetLayoutBinding> binds(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const VkDescriptorType type = i < 32 && (k.texel_bindings >> i) & 1u ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                                                                         : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    binds[i] = VkDescriptorSetLayoutBinding{i, type, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  }
  VkDescriptorSetLayoutCreateInfo dl{};
  dl.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  dl.bindingCount = n;
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

  std::vector<std::uint32_t> constants{workgroup_size_, elements_per_invocation_};
  constants.insert(constants.end(), k.constants.begin(), k.constants.end());
  std::vector<VkSpecializationMapEntry> entries(constants.size());
  for (std::uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, 4 * i, 4};
  VkSpecializationInfo spec{static_cast<std::uint32_t>(entries.size()), entries.data(), constants.size() * 4,
                            constants.data()};
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = &spec;
  ci.layout = p.layout;
  const auto t0 = std::chrono::steady_clock::now();
  const VkResult r = fault_injection::fail(fault_injection::pipeline_creation)
                         ? VK_ERROR_UNKNOWN
                         : vkCreateComputePipelines(dev_, pipeline_cache_, 1, &ci, nullptr, &p.handle);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  vkDestroyShaderModule(dev_, module, nullptr);  // the pipeline keeps what it needs
  check(r, "vkCreateComputePipelines");
  return seconds;
}

KILN_DECL std::string shader_cache::float_modes() const {
  std::string m;
  if (info_.f32_nan_preserve) m += "spirv_execution_mode(capabilities = [4466], 4461, 32);  // SignedZeroInfNanPreserve\n";
  if (info_.f32_denorm_preserve) m += "spirv_execution_mode(capabilities = [4464], 4459, 32);  // DenormPreserve\n";
  if (!m.empty()) m = "#extension GL_EXT_spirv_intrinsics : require\n" + m;
  return m;
}

KILN_DECL std::string shader_cache::disk_key_prefix() const {
  unsigned spv = 0, rev = 0;
  shaderc_get_spv_version(&spv, &rev);
  char buf[160];
  std::snprintf(buf, sizeof buf, "kiln %s | vendor %04x device %04x driver %u/%u | spv %u.%u | vulkan1.2 O | wg %u epi %u | fc %d%d\n",
                KILN_VERSION_STRING, info_.vendor_id, info_.device_id, info_.driver_id, info_.driver_version, spv, rev,
                workgroup_size_, elements_per_invocation_, int(info_.f32_nan_preserve), int(info_.f32_denorm_preserve));
  std::string s(buf);
  for (auto b : info_.uuid) {
    std::snprintf(buf, sizeof buf, "%02x", unsigned(b));
    s += buf;
  }
  return s + "\n";
}

KILN_DECL std::string shader_cache::spirv_key(const kernel_spec& k) const {
  std::string key = prefix_;
  for (const auto& d : k.defines) {
    key += d.name;
    key += '=';
    key += d.value;
    key += '\n';
  }
  key += k.glsl;
  return key;
}

KILN_DECL std::optional<std::vector<std::uint32_t>> shader_cache::load_spirv(const kernel_spec& k) {
  const std::string key = spirv_key(k);
  auto blob = shared_->disk.load(key, "spv");
  if (!blob) return std::nullopt;
  if (blob->size() % 4 == 0) {
    std::vector<std::uint32_t> words(blob->size() / 4);
    std::memcpy(words.data(), blob->data(), blob->size());
    if (spirv_fits(words, k)) return words;
  }
  shared_->disk.evict(key, "spv");
  std::lock_guard lock(mutex_);
  ++stats_.spirv_rejected;
  return std::nullopt;
}

KILN_DECL std::vector<std::uint32_t> shader_cache::spirv_for(const kernel_spec& k, bool& from_disk) {
  from_disk = false;
  if (auto words = load_spirv(k)) {
    from_disk = true;
    return std::move(*words);
  }
  std::vector<std::uint32_t> words = compile(k);
  shared_->disk.store(spirv_key(k), "spv", std::as_bytes(std::span(words)));
  return words;
}

KILN_DECL void shader_cache::open_pipeline_cache() {
  VkPipelineCacheCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  std::optional<std::vector<std::byte>> blob = shared_->disk.load(prefix_ + "pipeline cache", "pipeline");
  if (blob) {
    if (pipeline_cache_header_fits(*blob)) {
      ci.initialDataSize = blob->size();
      ci.pInitialData = blob->data();
    } else {
      stats_.pipeline_cache_rejected = true;
    }
  }
  VkResult r = vkCreatePipelineCache(dev_, &ci, nullptr, &pipeline_cache_);
  if (r != VK_SUCCESS && ci.initialDataSize) {  // the driver refused the data: start empty
    stats_.pipeline_cache_rejected = true;
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    r = vkCreatePipelineCache(dev_, &ci, nullptr, &pipeline_cache_);
  }
  if (r != VK_SUCCESS) {
    pipeline_cache_ = VK_NULL_HANDLE;  // still correct without one, only slower
  } else {
    stats_.pipeline_cache_loaded = ci.initialDataSize > 0;
  }
}

KILN_DECL bool shader_cache::pipeline_cache_header_fits(std::span<const std::byte> blob) const {
  constexpr std::size_t header_bytes = 16 + VK_UUID_SIZE;
  if (blob.size() < header_bytes) return false;
  std::uint32_t h[4];
  std::memcpy(h, blob.data(), sizeof h);
  return h[0] == header_bytes && h[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && h[2] == info_.vendor_id &&
         h[3] == info_.device_id && std::memcmp(blob.data() + 16, info_.uuid.data(), info_.uuid.size()) == 0;
}

KILN_DECL void shader_cache::save_pipeline_cache() noexcept {
  if (!pipeline_cache_) return;
  // Nothing new to save otherwise; a rejected blob is replaced in any case.
  if (shared_->disk.enabled() && (stats_.memory_misses > 0 || stats_.pipeline_cache_rejected)) {
    std::size_t size = 0;
    if (vkGetPipelineCacheData(dev_, pipeline_cache_, &size, nullptr) == VK_SUCCESS && size) {
      try {
        std::vector<std::byte> data(size);
        if (vkGetPipelineCacheData(dev_, pipeline_cache_, &size, data.data()) == VK_SUCCESS) {
          data.resize(size);
          shared_->disk.store(prefix_ + "pipeline cache", "pipeline", data);
        }
      } catch (...) {  // out of memory while saving: the cache is only an optimisation
      }
    }
  }
  vkDestroyPipelineCache(dev_, pipeline_cache_, nullptr);
  pipeline_cache_ = VK_NULL_HANDLE;
}

KILN_DECL void shader_cache::destroy(pipeline& p) noexcept {
  if (p.handle) vkDestroyPipeline(dev_, p.handle, nullptr);
  if (p.layout) vkDestroyPipelineLayout(dev_, p.layout, nullptr);
  if (p.set_layout) vkDestroyDescriptorSetLayout(dev_, p.set_layout, nullptr);
}

}  // namespace kiln::detail::vk
