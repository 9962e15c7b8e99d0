// kiln/vulkan/ops/sample.hpp — a statement holding kiln::sample as ONE dispatch of
// kernels/sampling/sample.comp with the statement's prologue and epilogue spliced in (the
// structural codegen's, codegen/structural.hpp): a workgroup per row (the row's length
// rounded up to a power of two, 32 to 256 invocations), the whole chain in it (the top-k
// and top-p cut-offs by 16-bin passes over the float keys, the draw by a workgroup scan
// in index order); the history is the node's parameter tensor (sorted, each id once).
// ctx.kernels_launched() counts 1. kiln::kernel_variant: "vulkan.sample".
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <bit>  // std::bit_ceil
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/tensor.hpp"
#include "kiln/expr/layout.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/ops/sampling/sample.hpp"
#include "kiln/vulkan/codegen/structural.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/ops/reduce.hpp"  // pow2_floor
#include "kiln/vulkan/ops/structural.hpp"

namespace kiln::detail::vk {

/// kiln::sample's kernel (vk_structural_kernel, ops/structural.hpp).
template <>
struct vk_structural_kernel<sample_op> {
  template <class S>
  static std::string variant(const S&) {
    return "vulkan.sample";
  }

  /// The generated part particular to this kernel: its defines and the history hook.
  static structural_family_text family_text(const structural_plan& sp, std::string_view result_type) {
    structural_family_text f;
    f.comment = "// sample, a workgroup a row, " + std::to_string(sp.wg) + " invocations" +
                (sp.params_buffer ? "; parameter buffer" : "") + "\n";
    auto def = [&](std::string_view name, const std::string& v) { f.defines += "#define " + std::string(name) + " " + v + "\n"; };
    def("KILN_WG", std::to_string(sp.wg) + "u");
    def("KILN_ACC", "float");
    def("KILN_RESULT", std::string(result_type));
    f.hooks += "int kiln_hist(uint k) { return " + structural_text::load(sp.params[0], "p.poff0 + k") + "; }\n";
    return f;
  }

  template <class T, class B, class N>
  static planned_kernel plan(const tensor<T, B>& out, const N& n) {
    using namespace structural_detail;
    const context_state& ctx = *out.storage()->ctx;
    const auto& s = find_structural(n);
    constexpr std::size_t LI = leaf_count_v<decltype(s.arg)>, LO = leaf_count_v<N>;
    const auto& hist = std::get<0>(s.params).t;
    std::vector<const storage*> operands = collect_operands(out, n, "sample");

    structural_kernel kn;
    const axis_split sp = s.split();
    const index_t rows = sp.outer * sp.inner, V = sp.extent;
    if (rows == 0 || V == 0) {
      kn.empty = true;
      return planned(std::move(operands), kn);
    }
    if (s.input_shape.numel() > index_t(UINT32_MAX) - index_t(1 << 20)) {
      throw_index_limit("kiln::sample on vulkan: " + s.arg.describe(), index_limit::elements, "its kernel", "the tensor");
    }
    const auto in_lay = make_input_layout(s.input_shape, s.arg);
    const auto out_lay = make_layout(out, n);
    const auto ops = gather_operands(out, n, s);
    const device_caps dev = device_caps_of(ctx);

    structural_plan plan;
    plan.acc_float = true;
    // 256 invocations, fewer for short rows (32 at least: a subgroup or more on any GPU)
    const auto want = std::uint32_t(std::clamp<index_t>(index_t(std::bit_ceil(std::uint64_t(V))), 32, 256));
    plan.wg = std::min<std::uint32_t>(pow2_floor(std::max<std::uint32_t>(dev.workgroup_limit(), 1)), want);
    binder bind;
    plan_operands(plan, ops, in_lay, out_lay, bind);
    plan.params.push_back(operand_plan{dtype::i32, bind(hist.storage().get()), access::strided, -1});
    plan.bindings = static_cast<std::uint32_t>(bind.storages.size());

    const sampling_options& o = s.op.opt;
    param_block pb("its kernel");
    pb.u32("rows", rows, "row count");
    pb.u32("extent", V, "vocabulary");
    pb.u32("hist", s.op.history, "history length");
    pb.u32("topk", o.top_k, "top_k");
    pb.u32("seed", index_t(o.seed & 0xffffffffu), "seed", 0);
    pb.u32("seed", index_t(o.seed >> 32), "seed", 1);
    pb.u32("step", index_t(s.op.step & 0xffffffffu), "step", 0);
    pb.u32("step", index_t(s.op.step >> 32), "step", 1);
    pb.f32("temp", o.temperature);
    pb.f32("topp", o.top_p);
    pb.f32("minp", o.min_p);
    pb.f32("repeat", o.repeat_penalty);
    pb.f32("presence", o.presence_penalty);
    input_params<LI>(pb, ops.in, in_lay, plan.in);
    pb.u32("poff", hist.offset(), "element offset", 0);
    output_params<LO>(pb, ops.out, out_lay, plan.out, n, s);
    plan.params_buffer = dev.max_push_bytes && pb.bytes() > dev.max_push_bytes;

    kn.first = &cached_family_source<T>(n, s, plan, structural_plan_key(plan), sample_op::name, pb,
                                        [&](std::string_view result_type) { return family_text(plan, result_type); },
                                        {kernels::sampling_sample});
    kn.first_tasks = static_cast<std::uint64_t>(rows);
    kn.push = pb.take_words();
    return planned(std::move(operands), kn);
  }
};

}  // namespace kiln::detail::vk
