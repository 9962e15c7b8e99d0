// kiln/vulkan/ops/structural.hpp — a statement holding one structural op, on Vulkan: the
// protocol every op family's kernel follows and the one recording path they share.
//
// vk_structural_kernel<Op> is the kernel of structural op Op, the counterpart of
// cpu_structural_kernel<Op> (kiln/cpu/structural.hpp). A kernel is found by
// specialisation; nothing here names an op or a family. Each family's header specialises
// it for its op descriptors (ops/reduce.hpp: reductions, argmax / argmin, softmax, the
// norms; ops/gemm.hpp: matmul; ops/attention.hpp: attention; ops/quant.hpp: quantize,
// dequantize, matmul with a qtensor; ops/position.hpp: rope, embedding) with two static
// members:
//
//   template <class S> static std::string variant(const S& s);
//       the kernel node s runs (kiln::kernel_variant), e.g. "vulkan.gemm.tiled 64x64",
//       from the same selection as plan()
//   template <class T, class B, class N>
//   static planned_kernel plan(const tensor<T, B>& out, const N& n);
//       out = n (a planned tree holding one node of the op, its prologue and epilogue
//       spliced in) as one dispatch or two: the operands by binding (collect_operands),
//       the sources, parameter words and workgroups from the family's codegen
//       (vulkan/codegen/<family>.hpp) under device_caps_of(ctx), the one description of
//       the device every family reads (codegen/caps.hpp)
//
// record_planned then binds the operands, allocates what two dispatches pass between
// them and records the dispatches, the same for every family. ctx.kernels_launched()
// counts dispatches. A new family: its specialisation in
// include/kiln/vulkan/ops/<family>.hpp (which includes this header), its kernels under
// kernels/<family>/, and one include line in kiln/vulkan.hpp.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>  // std::getenv
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/kind.hpp"  // unhandled_kind
#include "kiln/expr/plan.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/vulkan/codegen/caps.hpp"
#include "kiln/vulkan/codegen/structural.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/ops/copy.hpp"  // same_context, require_storage_width

namespace kiln::detail::vk {

/// The kernel of structural op Op on Vulkan; one specialisation per op family (see top).
template <class Op>
struct vk_structural_kernel {
  static_assert(unhandled_kind<Op>,
                "kiln: this structural op has no Vulkan kernel (specialise kiln::detail::vk::vk_structural_kernel "
                "for it in include/kiln/vulkan/ops/<family>.hpp, see kiln/vulkan/ops/structural.hpp, and include "
                "that header in kiln/vulkan.hpp)");
};

/// One dispatch of a planned structural kernel.
struct planned_dispatch {
  const structural_source* source = nullptr;  // null: no such dispatch
  std::uint32_t wg = 0;                       // invocations per workgroup (the source's local_size_x)
  std::vector<std::uint32_t> constants;       // specialisation constants 2, 3, ... (none: the source fixes its sizes)
  std::uint64_t tasks = 0;                    // workgroups
};

/// What a family's plan() hands record_planned: the operands by binding, one dispatch or
/// two (the second merges what the first writes to a temporary), the parameter words
/// both take, and what the kernel checks on its data.
struct planned_kernel {
  std::vector<const storage*> operands;  // binding 0, 1, ... (collect_operands' order)
  planned_dispatch first, second;
  std::vector<std::uint32_t> push;       // push constants, or the parameter buffer's words
  std::uint64_t partials_bytes = 0;      // (second) the temporary between the two dispatches
  /// Nonzero (one dispatch): a check buffer of this many words bound after the operands,
  /// its failures reported by `check` (context_state::dispatch_checked).
  std::uint64_t check_words = 0;
  context_state::check_report check;
  std::shared_ptr<storage> keep;         // an operand plan() made (a contiguous copy): alive until recorded
  /// No output element: nothing to dispatch.
  bool empty() const { return first.source == nullptr; }
};

/// The storages of `out = n`'s operands in binding order, the order every family's
/// codegen binds them in (by storage, each once): the output, the epilogue's tensors,
/// the prologue's (the structural node's input), then the op's parameter tensors:
/// `params` where given (what the kernel reads in their place), else the node's. Throws
/// kiln::device_error naming `op` for a tensor of another context, or of a dtype the
/// device cannot store.
template <class T, class B, class N, class... P>
std::vector<const storage*> collect_operands(const tensor<T, B>& out, const N& n, const char* op, const P&... params) {
  context_state& ctx = *out.storage()->ctx;
  require_storage_width<T>(ctx);
  const auto& s = find_structural(n);
  std::vector<const storage*> stores{out.storage().get()};
  auto add = [&](const auto& t) {
    same_context(out, *t.storage(), op);
    require_storage_width<typename std::remove_cvref_t<decltype(t)>::value_type>(ctx);
    if (std::find(stores.begin(), stores.end(), t.storage().get()) == stores.end()) stores.push_back(t.storage().get());
  };
  for_each_leaf(n, [&](const auto& o) {
    if constexpr (is_tensor<std::remove_cvref_t<decltype(o)>>::value) add(o);
  });
  for_each_leaf(s.arg, add);
  if constexpr (sizeof...(P) > 0) (add(params), ...);
  else std::apply([&](const auto&... q) { (add(q.t), ...); }, s.params);
  return stores;
}

/// The context of structural node s's tensors: its input's first, else its first
/// parameter's; null where it has none.
template <class S>
const context_state* node_context(const S& s) {
  const context_state* ctx = nullptr;
  for_each_leaf(s.arg, [&](const auto& t) {
    if (!ctx) ctx = t.storage()->ctx.get();
  });
  if constexpr (std::tuple_size_v<decltype(s.params)> > 0) {
    if (!ctx) ctx = std::get<0>(s.params).t.storage()->ctx.get();
  }
  return ctx;
}

/// What ctx's device lets every kernel family use: the context's device_caps, with
/// KILN_VULKAN_ROWS ("lanes" or "groups": the rows mode's layout on any device; tests,
/// measurements) applied, as it is read per statement.
KILN_DECL device_caps device_caps_of(const context_state& ctx);

/// A reduce-, row- or position-family kernel (codegen/structural.hpp) over `operands`,
/// planned: each dispatch's workgroup from its plan, the split pass's partials vec4s.
KILN_DECL planned_kernel planned(std::vector<const storage*> operands, const structural_kernel& kn);

/// A kernel whose dispatches carry their own workgroup sizes and specialisation
/// constants, the second merging float partials (gemm_kernel: split-K; attention_kernel:
/// split-KV) over `operands`, planned.
template <class K>
  requires requires(const K& k) {
    k.first_constants;
    k.second_wg;
  }
planned_kernel planned(std::vector<const storage*> operands, const K& kn) {
  planned_kernel k;
  k.operands = std::move(operands);
  if (kn.empty) return k;
  k.first = {kn.first, kn.first_wg, kn.first_constants, kn.first_tasks};
  if (kn.second) k.second = {kn.second, kn.second_wg, kn.second_constants, kn.second_tasks};
  k.push = kn.push;
  k.partials_bytes = kn.partials * sizeof(float);
  return k;
}

/// Records a planned kernel whose output is `out`: a binding per operand (the output's
/// written; uniform texel views where the plan reads them), then the partials'
/// temporary for two dispatches or the check buffer, then the dispatches.
KILN_DECL void record_planned(context_state& ctx, const planned_kernel& k, const storage& out);

/// out = n for a planned tree holding one structural node: its op's kernel, planned and
/// recorded (declared in vulkan/backend.hpp).
template <class T, class B, class N>
void record_structural_kernel(const tensor<T, B>& out, const N& n) {
  using S = std::remove_cvref_t<decltype(find_structural(n))>;
  const planned_kernel k = vk_structural_kernel<typename S::op_type>::plan(out, n);
  if (!k.empty()) record_planned(*out.storage()->ctx, k, *out.storage());
}

/// The kernel a structural node runs (kiln::kernel_variant; declared in vulkan/backend.hpp).
template <class S>
std::string structural_variant(const S& s) {
  return vk_structural_kernel<typename S::op_type>::variant(s);
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/ops/impl/structural.ipp"
#endif
