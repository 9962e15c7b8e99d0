// kiln/vulkan/ops/paged_attention.hpp — kiln::paged_attention and kiln::paged_write on
// Vulkan: one dispatch each of kernels/attention/paged.comp (decode.comp's kernel, keys
// and values through the block tables: one workgroup a query row, any Sq) and
// kernels/attention/paged_write.comp (one invocation an element), with the statement's
// prologue and epilogue spliced in by the structural codegen. Recording never reads the
// tables or lengths back: the kernels check them on the device into a check buffer and
// the next synchronisation throws kiln::index_error with the CPU's message
// (context_state::dispatch_checked, as kiln::embedding). Not done here (yet): the split
// over keys of decode.comp's split variant for few rows over long contexts, and the
// flash kernels for long prefill chunks. vk_structural_kernel<paged_attention_op> and
// <paged_write_op> plan them; ops/structural.hpp records them.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/ops/attention/paged_attention.hpp"
#include "kiln/ops/attention/paged_write.hpp"
#include "kiln/vulkan/codegen/structural.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/ops/structural.hpp"

namespace kiln::detail::vk {

/// What a paged kernel is compiled for (sizes and strides go to its parameters).
struct paged_plan {
  structural_plan base;     // operands; the op's parameter tensors as params 0.. in the op's order
  bool write = false;       // paged_write.comp (else paged.comp)
  index_t D = 0, Dv = 0;
  std::uint32_t wg = 64;
  std::uint32_t dvl = 1;    // output columns per invocation (ceil(Dv / wg))
  bool subgroup = false;    // subgroupMax for a tile's max
  bool rolled = false;      // a CPU device past D 128: loops over q rolled (decode.comp's reason)
};

KILN_DECL std::string paged_plan_key(const paged_plan& a);

/// The paged family's part of the generated source: defines, the check buffer, the
/// hooks kiln_k, kiln_v (attention), kiln_table and kiln_len.
KILN_DECL structural_family_text paged_family_text(const paged_plan& a, std::string_view result_type);

namespace paged_detail {

/// The parameter tensor's storage as a strided operand of the plan.
template <class U, class B>
void add_param(structural_plan& plan, structural_detail::binder& bind, const tensor<U, B>& t) {
  plan.params.push_back(operand_plan{dtype_traits<U>::value, bind(t.storage().get()), access::strided, -1});
}

/// Throws kiln::shape_error past the kernels' 32-bit indexing.
inline void check_limit(std::uint64_t n, const std::string& what, index_limit which) {
  if (n > UINT32_MAX) throw_index_limit(what, which, "the Vulkan paged kernels", "the batch or the pool");
}

}  // namespace paged_detail

/// kiln::paged_attention's kernel (vk_structural_kernel, ops/structural.hpp).
template <class KT, class VT>
struct vk_structural_kernel<paged_attention_op<KT, VT>> {
  template <class S>
  static std::string variant(const S&) {
    return "vulkan.paged_attention";
  }

  template <class T, class B, class N>
  static planned_kernel plan(const tensor<T, B>& out, const N& n) {
    using namespace structural_detail;
    const auto& s = find_structural(n);
    constexpr std::size_t LI = leaf_count_v<decltype(s.arg)>, LO = leaf_count_v<N>;
    const auto& kt = std::get<0>(s.params).t;
    const auto& vt = std::get<1>(s.params).t;
    const auto& tt = std::get<2>(s.params).t;
    const auto& lt = std::get<3>(s.params).t;
    planned_kernel k;
    k.operands = collect_operands(out, n, "paged_attention");
    const paged_dims d = paged_attention_dims_of(s);
    const std::uint64_t rows = std::uint64_t(d.B) * std::uint64_t(d.Hq) * std::uint64_t(d.Sq);
    if (rows * std::uint64_t(d.Dv) == 0) return k;
    const std::string what = "kiln::paged_attention on vulkan: " + paged_attention_operands(s);
    paged_detail::check_limit(rows * std::uint64_t(d.Dv), what, index_limit::elements);
    paged_detail::check_limit(std::uint64_t(s.input_shape.numel()), what, index_limit::elements);
    paged_detail::check_limit(std::uint64_t(kt.numel()) + std::uint64_t(vt.numel()), what, index_limit::elements);
    paged_detail::check_limit(std::uint64_t(d.B) * std::uint64_t(d.M) + std::uint64_t(d.B) + 1, what, index_limit::elements);
    // (the kernel clamps lengths, int32 like the lengths themselves, to M * bs)
    paged_detail::check_limit(2 * std::uint64_t(d.M) * std::uint64_t(d.bs), what, index_limit::elements);

    const device_caps dev = device_caps_of(*out.storage()->ctx);
    const auto in_lay = make_input_layout(s.input_shape, s.arg);
    const auto out_lay = make_layout(out, n);
    const auto ops = gather_operands(out, n, s);
    paged_plan a;
    a.D = d.D;
    a.Dv = d.Dv;
    a.wg = std::min<std::uint32_t>(64, pow2_floor(dev.workgroup_limit()));  // decode.comp's
    a.dvl = static_cast<std::uint32_t>((std::max<index_t>(d.Dv, 1) + a.wg - 1) / a.wg);
    a.subgroup = dev.arithmetic_subgroup() > 1 && a.wg % dev.arithmetic_subgroup() == 0;
    a.rolled = dev.cpu && d.D > 128;
    if (3u * a.wg * 4u > dev.shared_bytes) {
      throw device_error(what + ": the kernel needs " + std::to_string(3 * a.wg * 4) +
                         " bytes of shared memory; the device allows " + std::to_string(dev.shared_bytes));
    }
    binder bind;
    plan_operands(a.base, ops, in_lay, out_lay, bind);
    a.base.acc_float = true;
    paged_detail::add_param(a.base, bind, kt);
    paged_detail::add_param(a.base, bind, vt);
    paged_detail::add_param(a.base, bind, tt);
    paged_detail::add_param(a.base, bind, lt);
    a.base.bindings = static_cast<std::uint32_t>(bind.storages.size());
    a.base.wg = a.wg;

    param_block pb("the Vulkan paged kernels");
    pb.u32("B", d.B, "batch");
    pb.u32("Hq", d.Hq, "query heads");
    pb.u32("Sq", d.Sq, "query length");
    pb.u32("group", d.group(), "group");
    pb.u32("rows", index_t(rows), "rows");
    pb.u32("N", d.N, "pool blocks");
    pb.u32("bs", d.bs, "block size");
    pb.u32("M", d.M, "table width");
    pb.u32("causal", s.op.causal ? 1 : 0, "causal");
    pb.f32("scale", s.op.scale);
    pb.f32("softcap", s.op.softcap);
    input_params<LI>(pb, ops.in, in_lay, a.base.in);
    pb.u32("koff", kt.offset(), "element offset");
    for (int i = 0; i < 3; ++i) pb.u32("ks", kt.strides()[i], "stride", i);
    pb.u32("voff", vt.offset(), "element offset");
    for (int i = 0; i < 3; ++i) pb.u32("vs", vt.strides()[i], "stride", i);
    pb.u32("toff", tt.offset(), "element offset");
    pb.u32("ts0", tt.strides()[0], "stride");
    pb.u32("ts1", tt.strides()[1], "stride");
    pb.u32("loff", lt.offset(), "element offset");
    pb.u32("ls0", lt.strides()[0], "stride");
    output_params<LO>(pb, ops.out, out_lay, a.base.out, n, s);
    a.base.params_buffer = dev.max_push_bytes && pb.bytes() > dev.max_push_bytes;

    const structural_source& src = cached_family_source<T>(
        n, s, a.base, paged_plan_key(a), paged_attention_op<KT, VT>::name, pb,
        [&](std::string_view result_type) { return paged_family_text(a, result_type); }, {kernels::attention_paged});
    k.first = {&src, a.wg, {a.wg}, rows};
    k.push = pb.take_words();
    k.check_words = 1 + std::uint64_t(d.B) * std::uint64_t(d.M) + std::uint64_t(d.B);
    k.check = [d, operands = paged_attention_operands(s)](std::uint64_t at, std::int64_t value) {
      constexpr std::string_view op = paged_attention_op<KT, VT>::name;
      return paged_index_message(op, paged_check_sentence(op, at, value, d.B, d.M, d.N, d.bs, 0), operands);
    };
    return k;
  }
};

/// kiln::paged_write's kernel (vk_structural_kernel, ops/structural.hpp).
template <>
struct vk_structural_kernel<paged_write_op> {
  template <class S>
  static std::string variant(const S&) {
    return "vulkan.paged_write";
  }

  template <class T, class B, class N>
  static planned_kernel plan(const tensor<T, B>& out, const N& n) {
    using namespace structural_detail;
    const auto& s = find_structural(n);
    constexpr std::size_t LI = leaf_count_v<decltype(s.arg)>, LO = leaf_count_v<N>;
    const auto& tt = std::get<0>(s.params).t;
    const auto& st = std::get<1>(s.params).t;
    planned_kernel k;
    k.operands = collect_operands(out, n, "paged_write");
    const paged_dims d = paged_write_dims_of(s);
    const auto total = static_cast<std::uint64_t>(s.input_shape.numel());
    if (total == 0 || out.numel() == 0) return k;
    const std::string what = "kiln::paged_write on vulkan: " + paged_write_operands(s);
    paged_detail::check_limit(total, what, index_limit::elements);
    paged_detail::check_limit(std::uint64_t(out.numel()), what, index_limit::elements);
    paged_detail::check_limit(std::uint64_t(d.B) * std::uint64_t(d.M) + std::uint64_t(d.B) + 1, what, index_limit::elements);
    paged_detail::check_limit(std::uint64_t(d.M) * std::uint64_t(d.bs) + std::uint64_t(d.Sq), what, index_limit::elements);

    const device_caps dev = device_caps_of(*out.storage()->ctx);
    const auto in_lay = make_input_layout(s.input_shape, s.arg);
    const auto out_lay = make_layout(out, n);
    const auto ops = gather_operands(out, n, s);
    paged_plan a;
    a.write = true;
    a.D = a.Dv = d.D;
    a.wg = std::min<std::uint32_t>(pow2_floor(std::max<std::uint32_t>(dev.workgroup_limit(), 1)), 128);
    binder bind;
    plan_operands(a.base, ops, in_lay, out_lay, bind);
    a.base.acc_float = true;
    paged_detail::add_param(a.base, bind, tt);
    paged_detail::add_param(a.base, bind, st);
    a.base.bindings = static_cast<std::uint32_t>(bind.storages.size());
    a.base.wg = a.wg;

    param_block pb("the Vulkan paged kernels");
    pb.u32("B", d.B, "batch");
    pb.u32("Hkv", d.Hkv, "kv heads");
    pb.u32("Sq", d.Sq, "rows");
    pb.u32("D", d.D, "head dimension");
    pb.u32("N", d.N, "pool blocks");
    pb.u32("bs", d.bs, "block size");
    pb.u32("M", d.M, "table width");
    pb.u32("total", index_t(total), "elements");
    input_params<LI>(pb, ops.in, in_lay, a.base.in);
    pb.u32("toff", tt.offset(), "element offset");
    pb.u32("ts0", tt.strides()[0], "stride");
    pb.u32("ts1", tt.strides()[1], "stride");
    pb.u32("loff", st.offset(), "element offset");
    pb.u32("ls0", st.strides()[0], "stride");
    output_params<LO>(pb, ops.out, out_lay, a.base.out, n, s);
    a.base.params_buffer = dev.max_push_bytes && pb.bytes() > dev.max_push_bytes;

    const structural_source& src = cached_family_source<T>(
        n, s, a.base, paged_plan_key(a), paged_write_op::name, pb,
        [&](std::string_view result_type) { return paged_family_text(a, result_type); }, {kernels::attention_paged_write});
    k.first = {&src, a.wg, {}, (total + a.wg - 1) / a.wg};
    k.push = pb.take_words();
    k.check_words = 1 + std::uint64_t(d.B) * std::uint64_t(d.M) + std::uint64_t(d.B);
    k.check = [d, operands = paged_write_operands(s)](std::uint64_t at, std::int64_t value) {
      constexpr std::string_view op = paged_write_op::name;
      return paged_index_message(op, paged_check_sentence(op, at, value, d.B, d.M, d.N, d.bs, d.Sq), operands);
    };
    return k;
  }
};

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/ops/impl/paged_attention.ipp"
#endif
