// kiln/vulkan/ops/cumsum.hpp — a statement holding kiln::cumsum as kernels/reduce/cumsum.comp
// with the statement's prologue and epilogue spliced in (the structural codegen's,
// codegen/structural.hpp): lines shorter than 64Ki elements in ONE dispatch, a workgroup
// per line scanning it in steps and carrying the running total; longer lines in two
// (the split pass, as the reduce family's): the sum of each chunk of a line into a small
// temporary, then each chunk scanned from the sum of the chunks before it. So many
// workgroups share a long line, and no invocation loops past what lavapipe allows.
// ctx.kernels_launched() counts 1, or 2 for lines of 64Ki elements and more. A line along
// another axis than the last is walked with its axis innermost, as every row op.
// Layouts (kiln::kernel_variant "vulkan.cumsum <layout>", "+ split" for two dispatches),
// from the device; KILN_VULKAN_CUMSUM=lanes|subgroup|shared forces one the device allows:
//   lanes     CPU devices (lavapipe) with subgroup shuffles: a workgroup is one subgroup
//             (as the reduce family's lanes layout)
//   subgroup  GPUs with subgroup shuffles: 64 or 256 invocations
//   shared    no subgroup shuffles: a shared-memory scan
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>  // std::getenv
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kiln/core/tensor.hpp"
#include "kiln/expr/layout.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/ops/reduce/cumsum.hpp"
#include "kiln/vulkan/codegen/structural.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/ops/reduce.hpp"
#include "kiln/vulkan/ops/structural.hpp"

namespace kiln::detail::vk {

/// kiln::cumsum's kernel (vk_structural_kernel, ops/structural.hpp).
template <>
struct vk_structural_kernel<cumsum_op> {
  enum class layout : std::uint8_t { lanes, subgroup, shared };

  /// Elements an invocation scans serially in a step (KILN_PER): on CPU devices (lanes)
  /// 16, which spreads a step's shuffles over more elements (lavapipe, 4096 x 4096 rows:
  /// 27% of a copy's speed with 4, 38% with 16), else 4.
  static std::uint32_t per_of(layout how) { return how == layout::lanes ? 16 : 4; }
  /// Lines at least this long take the split pass.
  static constexpr index_t split_from = index_t(1) << 16;

  /// Elements of a chunk of the split pass for lines of `extent` under a workgroup of wg
  /// (0: one dispatch): about 64 chunks a line, each 16 to 512 steps (an invocation's
  /// loops stay in the low thousands of iterations, partials included).
  static index_t chunk_of(index_t extent, std::uint32_t wg, layout how) {
    if (extent < split_from) return 0;
    const index_t step = index_t(wg) * per_of(how);
    const index_t want = (extent + 63) / 64;
    return std::clamp<index_t>((want + step - 1) / step, 16, 512) * step;
  }

  /// The layout and workgroup size for lines of `extent` elements under opt.
  struct choice {
    layout how = layout::shared;
    std::uint32_t wg = 64;
  };
  static choice choose(const device_caps& opt, index_t extent) {
    const std::uint32_t max_wg = pow2_floor(std::max<std::uint32_t>(std::min<std::uint32_t>(opt.workgroup_limit(), 256), 1));
    const std::uint32_t sg = opt.shuffle_subgroup();
    const bool shuffles = sg > 1 && (sg & (sg - 1)) == 0 && sg <= max_wg;
    choice c;
    c.wg = std::min<std::uint32_t>(max_wg, extent >= 1024 ? 256 : 64);
    c.how = opt.lanes && shuffles ? layout::lanes : shuffles && c.wg % sg == 0 ? layout::subgroup : layout::shared;
    if (const char* v = std::getenv("KILN_VULKAN_CUMSUM"); v && *v) {
      const std::string_view f(v);
      if (f == "shared") c.how = layout::shared;
      else if (f == "lanes" && shuffles) c.how = layout::lanes;
      else if (f == "subgroup" && shuffles && c.wg % sg == 0) c.how = layout::subgroup;
    }
    if (c.how == layout::lanes) c.wg = sg;
    return c;
  }
  static const char* layout_name(layout how) {
    return how == layout::lanes ? "lanes" : how == layout::subgroup ? "subgroup" : "shared";
  }

  /// "vulkan.cumsum lanes", "vulkan.cumsum subgroup" or "vulkan.cumsum shared", with
  /// " split" for the split pass's two dispatches.
  template <class S>
  static std::string variant(const S& s) {
    const context_state* ctx = node_context(s);
    const device_caps opt = ctx ? device_caps_of(*ctx) : device_caps{};
    const index_t extent = s.split().extent;
    const choice c = choose(opt, extent);
    return std::string("vulkan.cumsum ") + layout_name(c.how) + (chunk_of(extent, c.wg, c.how) ? " split" : "");
  }

  /// The generated part particular to this kernel: its defines and parameter members.
  static structural_family_text family_text(const structural_plan& sp, layout how) {
    structural_family_text f;
    f.comment = std::string("// cumsum, phase ") + std::to_string(sp.phase) + ", " + std::to_string(sp.wg) +
                " invocations, " + layout_name(how) + (sp.params_buffer ? "; parameter buffer" : "") + "\n";
    if (how != layout::shared) {
      f.extensions += "#extension GL_KHR_shader_subgroup_basic : require\n";
      f.extensions += "#extension GL_KHR_shader_subgroup_shuffle : require\n";
    }
    auto def = [&](std::string_view name, const std::string& v) { f.defines += "#define " + std::string(name) + " " + v + "\n"; };
    def("KILN_WG", std::to_string(sp.wg) + "u");
    def("KILN_PER", std::to_string(per_of(how)) + "u");
    def("KILN_LANES", how == layout::lanes ? "1" : "0");
    def("KILN_SUBGROUP", how == layout::subgroup ? "1" : "0");
    def("KILN_PHASE", std::to_string(sp.phase));
    def("KILN_ACC_FLOAT", sp.acc_float ? "1" : "0");
    def("KILN_ACC", sp.acc_float ? "float" : "int");
    def("KILN_RESULT", sp.acc_float ? "float" : "int");
    if (sp.phase) {  // the partials, bound after the operands (record_planned)
      f.buffers = "layout(std430, set = 0, binding = " + std::to_string(sp.bindings) + ") " +
                  (sp.phase == 1 ? "writeonly " : "readonly ") + "buffer kiln_partial_buf { vec4 kiln_partial[]; };\n";
      f.extra_bindings = 1;
    }
    return f;
  }

  /// The kernel's source under plan (the family cache: once per process per (T, N, S),
  /// plan and layout).
  template <class T, class N, class S>
  static const structural_source& source(const N& n, const S& s, const structural_plan& plan, const param_block& params,
                                         layout how) {
    std::string key = structural_plan_key(plan);
    key += static_cast<char>(how);
    return cached_family_source<T>(n, s, plan, std::move(key), cumsum_op::name, params,
                                   [&](std::string_view) { return family_text(plan, how); }, {kernels::reduce_cumsum});
  }

  template <class T, class B, class N>
  static planned_kernel plan(const tensor<T, B>& out, const N& n) {
    using namespace structural_detail;
    const context_state& ctx = *out.storage()->ctx;
    const auto& s = find_structural(n);
    using S = std::remove_cvref_t<decltype(s)>;
    constexpr std::size_t LI = leaf_count_v<decltype(s.arg)>, LO = leaf_count_v<N>;
    std::vector<const storage*> operands = collect_operands(out, n, "cumsum");

    structural_kernel kn;
    axis_split sp = s.split();
    dim_order perm;
    if (sp.inner > 1) {  // walk the axis innermost: lines are rows
      perm = dim_order::axis_last(s.input_shape.rank(), s.axis);
      sp = {sp.outer * sp.inner, sp.extent, 1};
    }
    const index_t R = sp.extent, elements = sp.outer * R;
    if (elements == 0) {
      kn.empty = true;
      return planned(std::move(operands), kn);
    }
    // (positions of a step may pass the line's end by a step: 2^20 of headroom)
    if (elements > index_t(UINT32_MAX) - (index_t(1) << 20)) {
      throw_index_limit("kiln::cumsum on vulkan: " + s.arg.describe(), index_limit::elements, "its kernel", "the tensor");
    }
    const auto in_lay = make_input_layout(s.input_shape, s.arg, perm);
    const auto out_lay = make_layout(out, n, perm);
    const auto ops = gather_operands(out, n, s);

    const device_caps opt = device_caps_of(ctx);
    const choice c = choose(opt, R);
    const index_t chunk = chunk_of(R, c.wg, c.how), chunks = chunk ? (R + chunk - 1) / chunk : 1;
    if (sp.outer * chunks > index_t(UINT32_MAX)) {
      throw_index_limit("kiln::cumsum on vulkan: " + s.arg.describe(), index_limit::workgroups, {}, "the tensor");
    }
    structural_plan plan;
    plan.row_op = true;
    plan.acc_float = is_floating_v<typename S::input_type>;
    plan.wg = c.wg;
    plan.lanes = c.how == layout::lanes;  // (assemble_structural: `p` copied to registers)
    plan.subgroup = c.how == layout::subgroup;
    binder bind;
    plan_operands(plan, ops, in_lay, out_lay, bind);
    plan.bindings = static_cast<std::uint32_t>(bind.storages.size());

    param_block pb("its kernel");
    pb.u32("rows", sp.outer, "row count");
    pb.u32("extent", R, "extent");
    pb.u32("chunk", chunk ? chunk : R, "chunk");
    pb.u32("chunks", chunks, "chunk count");
    input_params<LI>(pb, ops.in, in_lay, plan.in);
    output_params<LO>(pb, ops.out, out_lay, plan.out, n, s);
    plan.params_buffer = opt.max_push_bytes && pb.bytes() > opt.max_push_bytes;

    if (!chunk) {
      kn.first = &source<T>(n, s, plan, pb, c.how);
      kn.first_tasks = static_cast<std::uint64_t>(sp.outer);
    } else {
      plan.phase = 1;
      kn.first = &source<T>(n, s, plan, pb, c.how);
      plan.phase = 2;
      kn.second = &source<T>(n, s, plan, pb, c.how);
      kn.first_tasks = kn.second_tasks = static_cast<std::uint64_t>(sp.outer * chunks);
      kn.partials = kn.first_tasks;
    }
    kn.push = pb.take_words();
    return planned(std::move(operands), kn);
  }
};

}  // namespace kiln::detail::vk
