// kiln/vulkan/codegen/source_cache.hpp — generated sources once per process for each
// (expression type, plan): source_cache (the one cache every kernel family keeps its
// sources in), plan_key, cached_source, and make_kernel (plan + source + arguments of one
// statement).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "kiln/core/dtype.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/detail/hash.hpp"
#include "kiln/expr/assign.hpp"
#include "kiln/expr/layout.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/vulkan/codegen/args.hpp"
#include "kiln/vulkan/codegen/elementwise.hpp"
#include "kiln/vulkan/codegen/plan.hpp"

namespace kiln::detail::vk {

/// A statement's kernel: its source (the cache key; generated once per process for each
/// expression type and plan, see cached_source) and this dispatch's arguments.
struct kernel {
  const kernel_source& source;
  kernel_args args;
};

/// Generated sources of one kind (kernel_source, structural_source) by plan key, each
/// made once: the one lookup every kernel family's cache uses (source_cache_for).
/// Thread-safe; make() runs under the lock, so no key is generated twice; entries live
/// until exit.
template <class Source>
class source_cache {
 public:
  /// The source under key, made by make() (returning a Source) the first time.
  template <class Make>
  const Source& get(std::string key, Make&& make) {
    std::lock_guard lock(mutex_);
    if (auto it = sources_.find(key); it != sources_.end()) return *it->second;
    auto src = std::make_unique<const Source>(make());  // may throw shader_error: nothing stored
    return *sources_.emplace(std::move(key), std::move(src)).first->second;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<const Source>> sources_;
};

/// The cache of the sources generated for Types (the statement's expression types): one
/// per process for each, as a source's text depends on nothing else but its plan (see the
/// top of this file; an op's GLSL is a property of its type).
template <class Source, class... Types>
source_cache<Source>& source_cache_for() {
  static source_cache<Source> cache;
  return cache;
}

/// The plan as a compact byte string (a map key).
KILN_DECL std::string plan_key(const kernel_plan& plan);

/// generate<T>(n, plan, params), once per process for each (T, N, plan) (the plan decides
/// the block's members), so a statement seen before skips all text work.
template <class T, class N>
const kernel_source& cached_source(const N& n, const kernel_plan& plan, const param_block& params) {
  return source_cache_for<kernel_source, T, N>().get(plan_key(plan), [&] {
    kernel_source src = generate<T>(n, plan, params);  // may throw shader_error
    char name[24];
    std::snprintf(name, sizeof name, "fused_%016llx", static_cast<unsigned long long>(fnv1a(src.glsl)));
    src.name = name;
    return src;
  });
}

/// Plans and generates the kernel for `out = n` (shapes and aliasing already checked);
/// opt: what the device and context allow (the wide variant, texel reads).
template <class T, class B, class N>
kernel make_kernel(const tensor<T, B>& out, const N& n, plan_options opt = {}) {
  constexpr std::size_t L = leaf_count_v<N>;
  const auto lay = make_layout(out, n);
  dtype types[L + 1];
  index_t offsets[L + 1];
  const void* storage[L + 1];
  strides views[L + 1];
  types[0] = dtype_traits<T>::value;
  offsets[0] = out.offset();
  storage[0] = out.storage().get();
  views[0] = out.strides();
  std::size_t k = 1;
  for_each_leaf(n, [&](const auto& t) {
    using U = typename std::remove_cvref_t<decltype(t)>::value_type;
    types[k] = dtype_traits<U>::value;
    offsets[k] = t.offset();
    storage[k] = t.storage().get();
    views[k] = broadcast_strides(t, out.shape());
    ++k;
  });
  kernel_plan plan = make_plan<L>(lay, types, offsets, storage, views, opt);
  param_block params = make_params<L>(lay, offsets, plan, n);
  plan.params_buffer = opt.max_push_bytes && params.bytes() > opt.max_push_bytes;
  fit_storage_buffers(plan, opt);
  const kernel_source& src = cached_source<T>(n, plan, params);
  index_t elements = 1;
  for (int d = 0; d < lay.rank; ++d) elements *= lay.extent[d];
  return kernel{src, kernel_args{params.take_words(), static_cast<std::uint64_t>(elements)}};
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/codegen/impl/source_cache.ipp"
#endif
