// kiln/vulkan/codegen/attention.hpp — the source of an attention kernel (attend family):
// the statement's prologue (q's expression, read by position in [B, Hq, Sq, D]) and
// epilogue (the elementwise tree around the result, applied to each output before its
// one store) from the structural codegen, k, v and the optional additive mask read in
// place through their strides, then kernels/attention/*.comp.
//
// Variants (select_attention; kiln::kernel_variant names the one a statement runs):
//   flash   one workgroup per (batch, head, query block): K/V tiles of BKV keys staged
//           in shared memory, RQ query rows per invocation kept in registers (q and the
//           f32 output accumulators), an online softmax per row; causal tiles past a
//           block's last visible key are never visited. Chosen where subgroups cannot
//           shuffle. GPUs: 64 invocations x 1 row; CPU devices (lavapipe: a workgroup is one thread, SIMD across invocations,
//           each shared-memory read a loop over lanes): 8 invocations x 4 rows (2 or 1
//           for head dims past 128), so each staged K/V vector feeds several rows.
//   flash_lanes  CPU devices with subgroup shuffles (lavapipe): the workgroup is one
//           subgroup, one query row per invocation, each tile of WG keys read straight
//           from the buffers (invocation j loads key j, as one vec4 per four elements
//           where k / v allow) and handed round by subgroupShuffle. lavapipe turns every
//           shared-memory read into a loop over the SIMD lanes and spills large register
//           arrays, so flash's staged tiles and RQ rows cost more than they save there
//           (B1 H4 D128 causal on a 2-core EPYC: S 512 35 ms against 58, S 2048 510
//           against 891).
//   flash_slices  GPUs (devices with subgroup shuffles that are not CPUs): each query
//           row spread over L invocations of a subgroup (L = 1, 2, 4, 8 as D grows),
//           each holding a slice of q and of the accumulators (64 floats of each at
//           D = 128, L = 2), scores summed by subgroupShuffleXor; K/V tiles staged in
//           shared memory as flash. flash keeps 2 D floats a row in one invocation's
//           registers (spilled at D = 128): on an H200 (B1 H32 S2048 D128 causal f32)
//           flash_slices took 2.47 ms, flash 6.41, the materialised composition 3.74.
//   decode  Sq <= 4: one workgroup per query row, invocations over keys (a score each,
//           the tile's max by subgroup / shared-memory reduction), then over the output
//           columns for p v. One dispatch.
//   split   decode with the keys spread over N workgroups per row (flash-decoding):
//           each writes its partial max, sum and unnormalised output, a second dispatch
//           (merge.comp) combines them and applies the epilogue. Chosen for few rows
//           over a long Skv.
// D and Dv are compile-time (#defines: register arrays); tile and workgroup sizes are
// specialisation constants; causal, scale and softcap are parameters (no new kernel).
// KILN_VULKAN_ATTENTION=flash|flash_lanes|flash_slices|decode|split forces a variant
// (tests, benchmarks); flash_slices:LxBKV (e.g. flash_slices:4x32) also fixes its L and
// tile length (tuning).
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/ops/attention/attention.hpp"
#include "kiln/vulkan/codegen/caps.hpp"
#include "kiln/vulkan/codegen/gemm.hpp"  // gemm_detail::ceil_div
#include "kiln/vulkan/codegen/structural.hpp"

namespace kiln::detail::vk {

enum class attention_kind : std::uint8_t { flash = 1, decode = 2, split = 3, flash_lanes = 4, flash_slices = 5 };

/// flash_slices: the vec4s of a row of n elements that each of a row's `lanes`
/// invocations holds (the kernel's KILN_DS / KILN_DVS).
KILN_DECL std::uint32_t slice_vec4s(index_t n, std::uint32_t lanes);

/// A chosen attention variant and its sizes.
struct attention_choice {
  attention_kind kind = attention_kind::flash;
  std::uint32_t wg = 64;      // invocations per workgroup
  std::uint32_t rq = 1;       // flash: query rows per invocation (BQ = wg * rq)
  std::uint32_t lanes = 1;    // flash_slices: invocations per query row (BQ = wg / lanes)
  std::uint32_t bkv = 32;     // flash, flash_slices: keys per shared-memory tile
  std::uint32_t splits = 1;   // split: key chunks per row
  std::uint64_t chunk = 0;    // split: keys per chunk (a multiple of wg)

  std::uint32_t bq() const;
  /// Shared memory the kernel declares, in bytes, for head dims d and dv.
  std::uint32_t shared_bytes(index_t d, index_t dv) const;
  /// Specialisation constants 2, 3, ... (see kernels/attention/*.comp).
  std::vector<std::uint32_t> constants() const;
  std::string name() const;
};

/// Whether device dev runs flash_lanes: a CPU device whose subgroup (shuffles in compute)
/// fits a workgroup.
KILN_DECL bool attention_lanes_fit(const device_caps& dev);

/// Whether device dev runs flash_slices: subgroup shuffles in compute shaders and a
/// workgroup of 128 invocations that whole subgroups fill.
KILN_DECL bool attention_slices_fit(const device_caps& dev);

/// The variant for dims d on device dev; `forced` (KILN_VULKAN_ATTENTION) overrides.
/// `what` names the operands for errors: kiln::device_error when nothing fits the device.
KILN_DECL attention_choice select_attention(const attention_dims& d, const device_caps& dev, std::string_view forced,
                                            const std::string& what);

/// What an attention kernel is compiled for (sizes are specialisation constants).
struct attention_plan {
  structural_plan base;  // operands (the prologue's, the epilogue's; k, v, mask as params 0..2)
  attention_kind kind = attention_kind::flash;
  std::uint8_t phase = 0;  // split: 1 partial results, 2 the merge
  index_t D = 0, Dv = 0;
  std::uint32_t dvl = 1;   // decode / split: output columns per invocation (ceil(Dv / wg))
  bool subgroup = false;   // decode / split: subgroupMax for the tile's max
  bool k4 = false, v4 = false;  // flash_lanes, flash_slices: k / v rows read as vec4s (f32, contiguous along D, 4-aligned)
  std::uint32_t lanes = 1, bkv = 0;  // flash_slices: invocations a row, keys a tile (#defines)
  bool rolled = false;  // flash_slices on a CPU device (tests only), decode / split past D 128 on one: loops kept rolled (lavapipe's compile time)
};

KILN_DECL std::string attention_plan_key(const attention_plan& a);

/// The attend family's part of the generated source: parameters, k / v / mask reads.
KILN_DECL structural_family_text attention_family_text(const attention_plan& a, std::string_view result_type);

/// A statement's attention kernel: one source, or split's two; the parameters (both take
/// the same), workgroups and specialisation constants of each.
struct attention_kernel {
  const structural_source* first = nullptr;
  const structural_source* second = nullptr;  // split's merge
  attention_choice choice;
  std::vector<std::uint32_t> push;
  std::vector<std::uint32_t> first_constants, second_constants;
  std::uint32_t first_wg = 0, second_wg = 0;
  std::uint64_t first_tasks = 0, second_tasks = 0;
  std::uint64_t partials = 0;  // split: floats of partial results
  bool empty = false;          // no output element: nothing to dispatch
};

/// The source of an attention kernel under plan a from templates (the flash family:
/// kernels/attention/block.comp, then the variant's; cached_family_source).
template <class T, class N, class S>
const structural_source& attention_source(const N& n, const S& s, const attention_plan& a, const param_block& params,
                                          std::initializer_list<std::string_view> templates) {
  return cached_family_source<T>(n, s, a.base, attention_plan_key(a), "attention", params,
                                 [&](std::string_view result_type) { return attention_family_text(a, result_type); },
                                 templates);
}

/// The forced variant (KILN_VULKAN_ATTENTION), or "".
KILN_DECL std::string_view forced_attention();

template <class S>
std::string attention_what(const S& s) {
  std::string w = "kiln::attention: q is " + s.arg.describe() + ", k is " + std::get<0>(s.params).t.describe() +
                  ", v is " + std::get<1>(s.params).t.describe();
  if constexpr (S::op_type::has_mask) w += ", mask is " + std::get<2>(s.params).t.describe();
  return w;
}

/// The variant an attention node s runs on a device dev (shared by recording and
/// kiln::kernel_variant).
template <class S>
attention_choice attention_choice_of(const S& s, const device_caps& dev) {
  return select_attention(attention_dims_of(s), dev, forced_attention(), attention_what(s) + " on vulkan");
}

/// Plans and generates the attention kernel of `out = n` (a planned tree whose structural
/// node is an attention). templates: kernels/attention/{block,flash,flash_lanes,flash_slices,decode,merge}.comp. Throws
/// kiln::shape_error where sizes pass the kernels' 32-bit indexing, kiln::device_error
/// where no variant fits the device.
template <class T, class B, class N>
attention_kernel make_attention_kernel(const tensor<T, B>& out, const N& n, const device_caps& dev,
                                       std::uint32_t max_push_bytes, std::string_view block_glsl, std::string_view flash_glsl,
                                       std::string_view flash_lanes_glsl, std::string_view flash_slices_glsl,
                                       std::string_view decode_glsl,
                                       std::string_view merge_glsl) {
  using namespace structural_detail;
  using gemm_detail::ceil_div;
  const auto& s = find_structural(n);
  using S = std::remove_cvref_t<decltype(s)>;
  constexpr std::size_t LI = leaf_count_v<decltype(s.arg)>, LO = leaf_count_v<N>;
  const attention_dims d = attention_dims_of(s);
  const std::string what = attention_what(s) + " on vulkan";

  attention_kernel kn;
  kn.choice = attention_choice_of(s, dev);
  const attention_choice& c = kn.choice;
  const std::uint64_t rows = std::uint64_t(d.B) * std::uint64_t(d.Hq) * std::uint64_t(d.Sq);
  const std::uint64_t outputs = rows * std::uint64_t(d.Dv);
  if (outputs == 0) {
    kn.empty = true;
    return kn;
  }
  if (outputs > UINT32_MAX || std::uint64_t(s.input_shape.numel()) > UINT32_MAX ||
      (c.kind == attention_kind::split && rows * c.splits * std::uint64_t(d.Dv + 2) > UINT32_MAX)) {
    throw_index_limit(what, index_limit::elements, "the Vulkan attention kernels", "the batch");
  }

  const auto in_lay = make_input_layout(s.input_shape, s.arg);
  const auto out_lay = make_layout(out, n);
  const auto ops = gather_operands(out, n, s);

  attention_plan a;
  a.kind = c.kind;
  a.D = d.D;
  a.Dv = d.Dv;
  const bool flashy = c.kind == attention_kind::flash || c.kind == attention_kind::flash_lanes ||
                      c.kind == attention_kind::flash_slices;
  a.dvl = flashy ? 1 : static_cast<std::uint32_t>(ceil_div(std::uint64_t(std::max<index_t>(d.Dv, 1)), c.wg));
  a.subgroup = !flashy && dev.arithmetic_subgroup() > 1 && c.wg % dev.arithmetic_subgroup() == 0;
  binder bind;
  plan_operands(a.base, ops, in_lay, out_lay, bind);
  a.base.acc_float = true;
  std::apply(
      [&](const auto&... q) {
        ((a.base.params.push_back(operand_plan{dtype_traits<typename std::remove_cvref_t<decltype(q.t)>::value_type>::value,
                                               bind(q.t.storage().get()), access::strided, -1})),
         ...);
      },
      s.params);
  a.base.bindings = static_cast<std::uint32_t>(bind.storages.size());
  if (c.kind == attention_kind::flash_slices) {
    a.lanes = c.lanes;
    a.bkv = c.bkv;
    a.rolled = dev.cpu;
  }
  // decode / split keep q in an array walked by unrolled loops: past D 128 a CPU device
  // compiles those for seconds (lavapipe, D 256: 2.8 s), rolled 0.35 s at the same speed
  if ((c.kind == attention_kind::decode || c.kind == attention_kind::split) && dev.cpu && d.D > 128) a.rolled = true;
  if (c.kind == attention_kind::flash_lanes || c.kind == attention_kind::flash_slices) {
    // vec4 rows: f32, contiguous along D, every row start a multiple of 4 elements
    const auto rows4 = [](const auto& t, index_t dim) {
      if constexpr (!std::is_same_v<typename std::remove_cvref_t<decltype(t)>::value_type, float>) {
        return false;
      } else {
        bool ok = dim % 4 == 0 && t.strides()[3] == 1 && t.offset() % 4 == 0;
        for (int i = 0; i < 3; ++i) ok = ok && (t.shape()[i] == 1 || t.strides()[i] % 4 == 0);
        return ok;
      }
    };
    a.k4 = rows4(std::get<0>(s.params).t, d.D);
    a.v4 = rows4(std::get<1>(s.params).t, d.Dv);
  }

  // geometry
  const std::uint64_t qblocks = flashy ? ceil_div(std::uint64_t(d.Sq), c.bq()) : 1;
  const std::uint64_t tasks =
      flashy ? std::uint64_t(d.B) * std::uint64_t(d.Hq) * qblocks : rows * c.splits;
  if (tasks > UINT32_MAX) throw_index_limit(what, index_limit::workgroups, {}, "the batch");

  // parameters: the geometry and options, the input's, k's, v's and the mask's (<t>off, <t>s<d>), the output's
  param_block pb("the Vulkan attention kernels");
  pb.u32("B", d.B, "batch");
  pb.u32("Hq", d.Hq, "query heads");
  pb.u32("Sq", d.Sq, "query length");
  pb.u32("Skv", d.Skv, "key length");
  pb.u32("group", d.group(), "group");
  pb.u32("rows", index_t(rows), "rows");
  pb.u32("qblocks", index_t(qblocks), "query blocks");
  pb.u32("splits", index_t(c.splits), "splits");
  pb.u32("chunk", index_t(c.kind == attention_kind::split ? c.chunk : std::uint64_t(std::max<index_t>(d.Skv, 1))), "chunk");
  pb.u32("causal", s.op.causal ? 1 : 0, "causal");
  pb.f32("scale", s.op.scale);
  pb.f32("softcap", s.op.softcap);
  input_params<LI>(pb, ops.in, in_lay, a.base.in);
  const auto strided4 = [&](const char* off, const char* st, const auto& t) {  // k, v: rank 4
    pb.u32(off, t.offset(), "element offset");
    for (int i = 0; i < 4; ++i) pb.i32(st, t.shape()[i] == 1 ? 0 : t.strides()[i], "stride", i);
  };
  strided4("koff", "ks", std::get<0>(s.params).t);
  strided4("voff", "vs", std::get<1>(s.params).t);
  if constexpr (S::op_type::has_mask) {
    const auto& m = std::get<2>(s.params).t;
    pb.u32("moff", m.offset(), "element offset");
    int i = 0;
    for (index_t st : attention_mask_strides(m)) pb.i32("ms", st, "stride", i++);
  }
  output_params<LO>(pb, ops.out, out_lay, a.base.out, n, s);
  a.base.params_buffer = max_push_bytes && pb.bytes() > max_push_bytes;

  kn.first_constants = c.constants();
  kn.first_wg = c.wg;
  kn.first_tasks = tasks;
  if (c.kind == attention_kind::flash) {
    kn.first = &attention_source<T>(n, s, a, pb, {block_glsl, flash_glsl});
  } else if (c.kind == attention_kind::flash_lanes) {
    kn.first = &attention_source<T>(n, s, a, pb, {block_glsl, flash_lanes_glsl});
  } else if (c.kind == attention_kind::flash_slices) {
    kn.first = &attention_source<T>(n, s, a, pb, {block_glsl, flash_slices_glsl});
  } else if (c.kind == attention_kind::decode) {
    kn.first = &attention_source<T>(n, s, a, pb, {decode_glsl});
  } else {
    a.phase = 1;
    kn.first = &attention_source<T>(n, s, a, pb, {decode_glsl});
    a.phase = 2;
    kn.second = &attention_source<T>(n, s, a, pb, {merge_glsl});
    kn.second_wg = pow2_floor(std::min<std::uint32_t>({64u, dev.max_invocations, dev.max_wg_x}));
    kn.second_constants = {kn.second_wg};
    kn.second_tasks = ceil_div(outputs, kn.second_wg);
    kn.partials = rows * c.splits * std::uint64_t(d.Dv + 2);
  }
  kn.push = pb.take_words();
  return kn;
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/codegen/impl/attention.ipp"
#endif
