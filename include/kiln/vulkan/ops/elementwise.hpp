// kiln/vulkan/ops/elementwise.hpp — any elementwise expression as ONE generated kernel:
// codegen.hpp writes the GLSL (the cache key), the shader cache compiles it once (memory,
// then disk, then shaderc), and the context records one dispatch with the statement's
// buffers and push constants.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/vulkan/codegen.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/ops/copy.hpp"

namespace kiln::detail::vk {

/// What ctx lets a generated kernel use: the wide variant, texel reads (a statement uses
/// them only where every input can have a texel view), single steps up to the
/// invocations one dispatch can run, and the device's push-constant and descriptor limits.
KILN_DECL plan_options plan_options_for(const context_state& ctx);

/// Records one dispatch of kn writing os and reading the leaves' storages (in
/// for_each_leaf order). Not a template: every statement shares this code.
KILN_DECL void record_kernel(context_state& ctx, const kernel& kn, const storage& os, std::span<const storage* const> leaves);

/// out = n as one generated dispatch (shapes and aliasing already checked by assign).
template <class T, class B, class N>
void record_elementwise_kernel(const tensor<T, B>& out, const N& n) {
  context_state& ctx = *out.storage()->ctx;
  require_storage_width<T>(ctx);
  plan_options opt = plan_options_for(ctx);
  const storage* leaves[leaf_count_v<N> + 1] = {};  // + 1: no zero-length array
  std::size_t k = 0;
  for_each_leaf(n, [&](const auto& in) {
    same_context(out, *in.storage(), "evaluate");
    require_storage_width<typename std::remove_cvref_t<decltype(in)>::value_type>(ctx);
    opt.texel_views = opt.texel_views && ctx.texel_viewable(in.storage()->alloc());
    leaves[k++] = in.storage().get();
  });
  opt.texel_reads = opt.texel_reads && opt.texel_views;
  const kernel kn = make_kernel(out, n, opt);
  record_kernel(ctx, kn, *out.storage(), std::span<const storage* const>(leaves, k));
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/ops/impl/elementwise.ipp"
#endif
