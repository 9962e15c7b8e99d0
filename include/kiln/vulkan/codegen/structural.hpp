// kiln/vulkan/codegen/structural.hpp — the source of a structural kernel (reductions,
// softmax, norms): generated declarations and hooks spliced in front of hand-written
// GLSL (kernels/reduce/*.comp).
//
// The statement's prologue (the op's input expression) and epilogue (the elementwise tree
// around the op) are emitted by the same emitter as elementwise kernels, each as one
// function: `KILN_ACC kiln_prologue(uint pos)` evaluates the input at input position pos
// (the input layout's walk order, expr/layout.hpp's make_input_layout) and
// `void kiln_epilogue(KILN_RESULT value, uint pos)` writes output position pos given the
// op's result there. Operands are read with scalar loads, linear, constant or strided
// (the elementwise kernels' three ways); buffers are shared across both functions by
// storage. Parameters (geometry, offsets, extents, strides, the scalars of both
// functions) go to push constants, or to a storage buffer when they do not fit, as for
// elementwise kernels. The whole source is the cache key; nothing else decides it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <bit>  // std::bit_cast
#include <climits>
#include <type_traits>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/detail/hash.hpp"
#include "kiln/expr/glsl.hpp"
#include "kiln/expr/layout.hpp"
#include "kiln/expr/plan.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/ops/norm/layer_norm.hpp"
#include "kiln/ops/reduce/argmax.hpp"
#include "kiln/ops/reduce/reducer.hpp"
#include "kiln/ops/reduce/softmax.hpp"
#include "kiln/vulkan/codegen/caps.hpp"
#include "kiln/vulkan/codegen/emitter.hpp"
#include "kiln/vulkan/codegen/params.hpp"
#include "kiln/vulkan/codegen/source_cache.hpp"  // source_cache_for
#include "kiln/vulkan/codegen/plan.hpp"
#include "kiln/vulkan/codegen/types.hpp"

namespace kiln::detail::vk {

/// How a structural kernel walks its op (kernels/reduce/rows.comp or columns.comp).
enum class structural_mode : std::uint8_t { rows, columns };

/// KILN_OP of kernels/reduce/ops.comp.
enum class structural_op : std::uint8_t { reducer = 1, arg_extreme = 2, softmax = 3, layer_norm = 4, rms_norm = 5 };

/// The names the kernels compare KILN_OP with (`#if KILN_OP == KILN_OP_SOFTMAX`): every
/// reduce-family source defines each from this table, so the numbers live only in the enum.
inline constexpr struct {
  structural_op op;
  std::string_view define;
} structural_op_defines[] = {{structural_op::reducer, "KILN_OP_REDUCER"},
                             {structural_op::arg_extreme, "KILN_OP_ARG_EXTREME"},
                             {structural_op::softmax, "KILN_OP_SOFTMAX"},
                             {structural_op::layer_norm, "KILN_OP_LAYER_NORM"},
                             {structural_op::rms_norm, "KILN_OP_RMS_NORM"}};

/// What a structural kernel is compiled for (everything else goes to its parameters).
struct structural_plan {
  structural_op op = structural_op::reducer;
  bool row_op = false;   // row family: the output is the input's shape
  bool log = false;      // log_softmax
  bool largest = false;  // argmax (else argmin)
  structural_mode mode = structural_mode::rows;
  std::uint8_t phase = 0;      // 0: one dispatch; 1, 2: the split pass's two dispatches
  std::uint32_t wg = 64;       // invocations per workgroup (a power of two)
  std::uint32_t cache = 0;     // row ops: a line of up to this many elements is kept in shared memory
  bool subgroup = false;       // merge statistics with subgroup shuffles first
  bool acc_float = true;       // KILN_ACC: float (else int)
  kernel_plan in;              // the prologue: rank of the input layout; operands [0] unused, [1..] its leaves
  kernel_plan out;             // the epilogue: rank of the output layout; [0] the output, [1..] its operands
  std::size_t value_operand = 0;       // the operand of `out` that is the op's result
  std::vector<operand_plan> params;    // a norm's weight (and bias), read as rank-1 strided
  std::uint32_t bindings = 0;  // operand buffers; the split pass's partials follow, then a parameter buffer
  bool params_buffer = false;
  // CPU devices (lavapipe), reduce and row families: one subgroup a line (wg = the
  // subgroup size), its lanes on neighbouring elements, statistics merged by shuffles
  // alone: no barrier, no line cache (the line is read again instead).
  bool lanes = false;
  bool vec4 = false;                  // (lanes) four elements a step: kiln_prologue4 / kiln_epilogue4
  bool params_vec4 = false;
  // (vec4) bit o: strided operand o of `in` (`out`) is contiguous along the line, each line
  // starting 4-aligned: read four at a time from its line's first index (kiln_row_begin).
  std::uint32_t in_rows = 0, out_rows = 0;           // (vec4) the norm's weight and bias are f32, contiguous, 4-aligned: kiln_weight4 / kiln_bias4
  std::uint32_t texel_bindings = 0;   // (vec4) bit b: binding b is read through a uniform texel buffer
};

/// A generated structural kernel.
struct structural_source {
  std::string glsl;        // the cache key
  std::string expression;  // e.g. "mul(gelu(layer_norm(add(a, b), c, d)), s0)"
  structural_plan plan;
  std::string name;        // "<op>_<hash of glsl>"
};

/// The plan as a compact byte string (a map key).
KILN_DECL std::string structural_plan_key(const structural_plan& sp);

namespace structural_text {

/// body with {0}, {1}, ... replaced by args and {T} by type (a reducer's GLSL).
KILN_DECL std::string substitute(std::string_view body, const std::vector<std::string>& args, std::string_view type,
                                 std::string_view what);

/// Index of operand o of kp at position `pos` (coordinates c0.. already computed when
/// strided); members named <prefix>off<o>, <prefix>st<o>_<d>.
KILN_DECL std::string index_of(const kernel_plan& kp, std::size_t o, const std::string& prefix);

KILN_DECL bool any_strided(const kernel_plan& kp, std::size_t from);

/// `uint cD = ...` for the coordinates of pos over extents <prefix>ext<d>.
KILN_DECL std::string coordinates(const kernel_plan& kp, const std::string& prefix);

KILN_DECL std::string load(const operand_plan& op, const std::string& at);

}  // namespace structural_text

/// vec4(fn(args at x), ..., fn(args at w)): `args` holds {c} where a vector operand's
/// component goes (kiln_prologue4 / kiln_epilogue4 evaluate the scalar body per lane).
KILN_DECL std::string four_calls(std::string_view fn, const std::string& args);

/// The reducer hooks of KILN_OP 1, from a reducer's GLSL spellings (acc: "float" or "int").
struct reducer_text {
  std::string_view identity, combine, finalize;  // finalize empty: the value itself
  std::vector<std::string> functions;
};

/// What an op family adds to the generated part of its kernels (the prologue, epilogue,
/// operand buffers and the parameter block are every family's; the block's members come
/// from the param_block its recording fills): a comment line, extensions, #defines,
/// buffers after the operands' (extra_bindings of them), helper functions (declared once
/// with the ops'), and hooks after the epilogue.
struct structural_family_text {
  std::string comment, extensions, defines, buffers, hooks;
  std::vector<std::string> functions;
  std::uint32_t extra_bindings = 0;
};

/// The reduce and row families' part (kernels/reduce/ops.comp's hooks and defines).
KILN_DECL structural_family_text reduce_family_text(const structural_plan& sp, const reducer_text* red,
                                                    std::string_view result_type);

/// Assembles a structural kernel's source: the generated part (the family's text around
/// the prologue, epilogue, operand buffers and the parameter block `params`), then the
/// family's templates (`templates`, in order). Not a template: one copy serves all.
KILN_DECL structural_source assemble_structural(const structural_plan& sp, const emitter& pro, const std::string& pro_result,
                                                const emitter& epi, const std::string& epi_result,
                                                std::string_view epi_type, std::string_view result_type,
                                                const structural_family_text& fam, const param_block& params,
                                                std::string readable, std::initializer_list<std::string_view> templates);

/// What a structural op is on Vulkan: its KILN_OP and flags (one specialisation per op
/// family; a missing one names the fix).
template <class Op>
struct vk_structural_op {
  static_assert(unhandled_kind<Op>,
                "kiln: this structural op has no vulkan implementation (specialise kiln::detail::vk::vk_structural_op "
                "in include/kiln/vulkan/codegen/structural.hpp, with a kernel under kernels/)");
};
template <class R>
struct vk_structural_op<reduce_op<R>> {
  static constexpr structural_op op = structural_op::reducer;
  static constexpr bool log = false, largest = false;
  static reducer_text text(bool acc_float) {
    reducer_text t;
    t.identity = R::glsl_identity;
    t.combine = R::glsl;
    if constexpr (requires { R::glsl_identity_int; }) if (!acc_float) t.identity = R::glsl_identity_int;
    if constexpr (requires { R::glsl_int; }) if (!acc_float) t.combine = R::glsl_int;
    if constexpr (requires { R::glsl_finalize; }) t.finalize = R::glsl_finalize;
    t.functions = glsl_functions_of<R>();
    return t;
  }
};
template <bool Largest>
struct vk_structural_op<arg_extreme_op<Largest>> {
  static constexpr structural_op op = structural_op::arg_extreme;
  static constexpr bool log = false, largest = Largest;
};
template <bool Log>
struct vk_structural_op<softmax_op<Log>> {
  static constexpr structural_op op = structural_op::softmax;
  static constexpr bool log = Log, largest = false;
};
template <bool Root>
struct vk_structural_op<norm_op<Root>> {
  static constexpr structural_op op = Root ? structural_op::rms_norm : structural_op::layer_norm;
  static constexpr bool log = false, largest = false;
};


/// A statement's structural kernel: one source (phase 0), or the split pass's two, the
/// parameters both take, and the workgroups each needs.
struct structural_kernel {
  const structural_source* first = nullptr;   // phase 0 or 1
  const structural_source* second = nullptr;  // phase 2 (split pass), else null
  std::vector<std::uint32_t> push;
  std::uint64_t first_tasks = 0, second_tasks = 0;  // workgroups of each dispatch
  std::uint64_t partials = 0;                 // the split pass's vec4 partials
  bool empty = false;                         // no output element: nothing to dispatch
};

namespace structural_detail {

template <std::size_t L>
access classify(const iteration_layout<L>& lay, std::size_t o) {
  if (o > 0 && lay.constant(o)) return access::constant;
  index_t expect = 1;
  for (int d = lay.rank - 1; d >= 0; --d) {
    if (lay.extent[d] != 1 && lay.stride[o][d] != expect) return access::strided;
    expect *= lay.extent[d];
  }
  return access::linear;
}

/// Operand facts gathered from the tree, for binding and view sharing.
struct operand_fact {
  dtype type = dtype::f32;
  const void* storage = nullptr;  // null: the op's result (no buffer)
  index_t offset = 0;
  strides view;
};

/// Bindings by storage, over every operand of both functions.
struct binder {
  std::vector<const void*> storages;
  std::uint32_t operator()(const void* st);
};

template <std::size_t L>
void fill_plan(kernel_plan& kp, const iteration_layout<L>& lay, const operand_fact* facts, binder& bind, bool has_output) {
  kp.rank = lay.rank;
  kp.operands.resize(L + 1);
  for (std::size_t o = 0; o <= L; ++o) {
    auto& op = kp.operands[o];
    if (o == 0 && !has_output) continue;  // the prologue's operand 0: positions only
    op.type = facts[o].type;
    op.how = classify(lay, o);
    if (!facts[o].storage) {  // the op's result: contiguous in the walk order
      op.how = access::linear;
      continue;
    }
    op.binding = bind(facts[o].storage);
    if (o == 0) continue;
    for (std::size_t q = 1; q < o; ++q) {
      const auto& a = facts[q];
      if (kp.operands[q].same_as < 0 && a.storage == facts[o].storage && a.type == facts[o].type &&
          a.offset == facts[o].offset && a.view == facts[o].view) {
        op.same_as = static_cast<int>(q - 1);
        break;
      }
    }
  }
}

/// A layout's members when any operand from `from` on is strided: the extents
/// (<prefix>ext<d>), then each strided operand's strides (<prefix>st<o>_<d>).
template <std::size_t L>
void layout_params(param_block& p, const iteration_layout<L>& lay, const kernel_plan& kp, std::size_t from,
                   const char* ext, const char* st) {
  bool strided = false;
  for (std::size_t o = from; o <= L; ++o) strided = strided || kp.operands[o].how == access::strided;
  if (!strided) return;
  for (int d = 0; d < lay.rank; ++d) p.u32(ext, lay.extent[d], "extent", d);
  for (std::size_t o = from; o <= L; ++o) {
    if (kp.operands[o].how != access::strided) continue;
    for (int d = 0; d < lay.rank; ++d) p.i32(st, lay.stride[o][d], "stride", static_cast<int>(o), d);
  }
}

/// A structural statement's operands: the input expression's leaves (in[1..LI]) and
/// the epilogue's (out[0]: the output, out[value_operand]: the op's result).
template <std::size_t LI, std::size_t LO>
struct statement_operands {
  operand_fact in[LI + 1], out[LO + 1];
  std::size_t value_operand = 0;
};

template <class T, class B, class N, class S>
auto gather_operands(const tensor<T, B>& out, const N& n, const S& s) {
  statement_operands<leaf_count_v<decltype(s.arg)>, leaf_count_v<N>> f;
  f.out[0] = {dtype_traits<T>::value, out.storage().get(), out.offset(), out.strides()};
  std::size_t k = 1;
  for_each_leaf(n, [&](const auto& op) {
    using Op = std::remove_cvref_t<decltype(op)>;
    if constexpr (is_tensor<Op>::value) {
      f.out[k] = {dtype_traits<typename Op::value_type>::value, op.storage().get(), op.offset(),
                  broadcast_strides(op, out.shape())};
    } else {
      f.out[k] = {dtype_traits<typename Op::value_type>::value, nullptr, 0, {}};
      f.value_operand = k;
    }
    ++k;
  });
  k = 1;
  for_each_leaf(s.arg, [&](const auto& t) {
    using U = typename std::remove_cvref_t<decltype(t)>::value_type;
    f.in[k++] = {dtype_traits<U>::value, t.storage().get(), t.offset(), broadcast_strides(t, s.input_shape)};
  });
  return f;
}

/// The prologue's and epilogue's operand plans (output first, then the epilogue's
/// operands, then the input's: the binding order every family uses).
template <std::size_t LI, std::size_t LO, std::size_t AI, std::size_t AO>
void plan_operands(structural_plan& plan, const statement_operands<LI, LO>& f, const iteration_layout<AI>& in_lay,
                   const iteration_layout<AO>& out_lay, binder& bind) {
  static_assert(AI == LI && AO == LO);
  plan.value_operand = f.value_operand;
  fill_plan<LO>(plan.out, out_lay, f.out, bind, true);
  fill_plan<LI>(plan.in, in_lay, f.in, bind, false);
}

/// The prologue's members: the input's leaves' offsets (ioff<o>), then its layout when
/// strided (iext<d>, ist<o>_<d>).
template <std::size_t LI>
void input_params(param_block& p, const operand_fact* fin, const iteration_layout<LI>& in_lay, const kernel_plan& kp) {
  for (std::size_t o = 1; o <= LI; ++o) p.u32("ioff", fin[o].offset, "element offset", static_cast<int>(o));
  layout_params<LI>(p, in_lay, kp, 1, "iext", "ist");
}

/// The epilogue's members (offsets off<o>, the layout when strided: ext<d>, st<o>_<d>),
/// then the scalars of both functions (n's s<j>, then s's input's t<j>).
template <std::size_t LO, class N, class S>
void output_params(param_block& p, const operand_fact* fout, const iteration_layout<LO>& out_lay, const kernel_plan& kp,
                   const N& n, const S& s) {
  for (std::size_t o = 0; o <= LO; ++o) p.u32("off", fout[o].offset, "element offset", static_cast<int>(o));
  layout_params<LO>(p, out_lay, kp, 0, "ext", "st");
  int j = 0;
  for_each_scalar(n, [&](const auto& sc) { p.scalar("s", sc, j++); });
  j = 0;
  for_each_scalar(s.arg, [&](const auto& sc) { p.scalar("t", sc, j++); });
}

}  // namespace structural_detail

/// Emits the prologue (s's input expression) and the epilogue (n around s's result) of
/// a structural kernel into pro and epi (made over the plan's `in` and `out`); readable:
/// the statement, e.g. "gelu(add(matmul(a, w0), b))". Shared by every op family.
template <class N, class S>
void emit_structural_hooks(const N& n, const S& s, emitter& pro, emitter& epi, std::string& pro_result,
                           std::string& epi_result, std::string& readable) {
  pro.scalar_prefix = "t";
  std::string in_readable;
  pro_result = pro.emit(s.arg, in_readable);
  epi.structural_readable = std::string(S::op_type::name) + "(" + in_readable;
  for (std::size_t q = 0; q < std::tuple_size_v<decltype(s.params)>; ++q) epi.structural_readable += ", w" + std::to_string(q);
  epi.structural_readable += ")";
  epi_result = epi.emit(n, readable);
}

/// "<op>_<hash of the source>": a generated structural kernel's name.
KILN_DECL std::string structural_kernel_name(std::string_view op, const std::string& glsl);

/// The source of a structural kernel of `out = n` (s: its structural node, T: out's
/// element type) under plan `base`, once per process for each (T, N, S) and `key` (the
/// family's plan as a byte string, everything the text depends on): the statement's
/// prologue and epilogue, the family's text (`family_text(result_type)`, a
/// structural_family_text), the parameter block `params` (its members; the key decides
/// them) and the family's templates, named "<op>_<hash>". Every family's cache; throws
/// kiln::shader_error for a malformed GLSL body.
template <class T, class N, class S, class Text>
const structural_source& cached_family_source(const N& n, const S& s, const structural_plan& base, std::string key,
                                              std::string_view op, const param_block& params, Text&& family_text,
                                              std::initializer_list<std::string_view> templates) {
  return source_cache_for<structural_source, T, N, S>().get(std::move(key), [&] {
    emitter pro(base.in), epi(base.out);
    std::string pro_result, epi_result, readable;
    emit_structural_hooks(n, s, pro, epi, pro_result, epi_result, readable);
    const std::string_view result_type = glsl_compute_type<typename S::value_type>();
    structural_source src = assemble_structural(base, pro, pro_result, epi, epi_result,
                                                glsl_compute_type<typename N::value_type>(), result_type,
                                                family_text(result_type), params, std::move(readable), templates);
    src.name = structural_kernel_name(op, src.glsl);
    return src;
  });
}

/// The source of a reduce- or row-family kernel of `out = n` under plan
/// (kernels/reduce/ops.comp, then the mode's template).
template <class T, class N, class S>
const structural_source& reduce_family_source(const N& n, const S& s, const structural_plan& plan, const param_block& params,
                                              std::string_view ops_glsl, std::string_view mode_glsl) {
  using V = vk_structural_op<typename S::op_type>;
  const auto text = [&](std::string_view result_type) {
    reducer_text red;
    if constexpr (V::op == structural_op::reducer) red = V::text(plan.acc_float);
    return reduce_family_text(plan, V::op == structural_op::reducer ? &red : nullptr, result_type);
  };
  return cached_family_source<T>(n, s, plan, structural_plan_key(plan), S::op_type::name, params, text,
                                 {ops_glsl, mode_glsl});
}

/// How a reduce- or row-family kernel walks its input: the split around the axis (moved
/// innermost when axis_last), the mode, and whether lines take the split pass.
struct structural_walk {
  axis_split split;
  bool axis_last = false;
  structural_mode mode = structural_mode::rows;
  bool split_pass = false;
  /// "vulkan.<op>.rows", ".columns" or ".rows split" (2 dispatches): kiln::kernel_variant.
  std::string name(std::string_view op) const;
};

template <class S>
structural_walk structural_walk_of(const S& s, const device_caps& dev) {
  constexpr bool row_op = S::family == structural_family::row;
  structural_walk w;
  w.split = s.split();
  // Row ops along another axis than the last walk it innermost: rows again. So do
  // reductions over a long axis before the last: one invocation per output would loop
  // past the 65535 iterations llvmpipe / lavapipe allow a shader loop (column mode walks
  // axes up to column_extent_max only). Reduce outputs keep their row-major positions
  // (o * inner + j), which is the order of rows in the axis-last walk.
  constexpr index_t column_extent_max = 16384;
  if constexpr (row_op) w.axis_last = w.split.inner > 1;
  else w.axis_last = w.split.inner > 1 && !s.all && w.split.extent > column_extent_max;
  if (w.axis_last) w.split = {w.split.outer * w.split.inner, w.split.extent, 1};
  w.mode = !row_op && w.split.inner > 1 ? structural_mode::columns : structural_mode::rows;
  w.split_pass = w.mode == structural_mode::rows && dev.split_from > 0 && w.split.extent >= dev.split_from;
  return w;
}

/// Bit o: operand o (from `from` on, at most 31) is contiguous along each line of `extent`
/// elements and every line starts on a multiple of 4 there: its last collapsed dimension
/// (which holds the line) has stride 1, the others and its offset are multiples of 4.
template <std::size_t L>
std::uint32_t row_contiguous(const iteration_layout<L>& lay, const structural_detail::operand_fact* f, index_t extent,
                             std::size_t from) {
  std::uint32_t bits = 0;
  if (lay.rank < 1 || extent <= 0 || extent % 4 != 0 || lay.extent[lay.rank - 1] % extent != 0) return 0;
  for (std::size_t o = from; o <= L && o < 32; ++o) {
    bool ok = lay.stride[o][lay.rank - 1] == 1 && f[o].offset % 4 == 0;
    for (int d = 0; d + 1 < lay.rank; ++d) ok = ok && lay.stride[o][d] % 4 == 0;
    if (ok) bits |= 1u << o;
  }
  return bits;
}

/// A lanes plan's vec4 steps and texel reads: four elements a step where every line
/// starts on a multiple of 4 and every operand is an f32 read (or written) contiguously
/// or a constant; bindings only the prologue reads go through texel views when allowed.
KILN_DECL void plan_lane_steps(structural_plan& plan, const structural_detail::operand_fact* fin,
                               const structural_detail::operand_fact* fout, index_t extent, const device_caps& dev,
                               bool params_four, std::uint32_t in_rows, std::uint32_t out_rows);

/// Plans and generates the structural kernel of `out = n` (a planned tree: one structural
/// node, whose shape is out's; shapes and aliasing checked by assign). ops_glsl, rows_glsl
/// and columns_glsl: kernels/reduce/{ops,rows,columns}.comp. Throws kiln::shape_error where
/// positions or offsets pass the kernels' 32-bit indexing.
template <class T, class B, class N>
structural_kernel make_structural_kernel(const tensor<T, B>& out, const N& n, const device_caps& dev,
                                         std::string_view ops_glsl, std::string_view rows_glsl,
                                         std::string_view columns_glsl) {
  using namespace structural_detail;
  const auto& s = find_structural(n);
  using S = std::remove_cvref_t<decltype(s)>;
  using V = vk_structural_op<typename S::op_type>;
  constexpr std::size_t LI = leaf_count_v<decltype(s.arg)>, LO = leaf_count_v<N>;
  constexpr bool row_op = S::family == structural_family::row;

  structural_kernel kn;
  const structural_walk walk = structural_walk_of(s, dev);
  axis_split sp = walk.split;
  dim_order perm;
  if (walk.axis_last) perm = dim_order::axis_last(s.input_shape.rank(), s.axis);
  const index_t outputs = row_op ? sp.outer * sp.extent : sp.outer * sp.inner;
  if (outputs == 0) {
    kn.empty = true;
    return kn;
  }
  const index_t inputs = sp.outer * sp.extent * sp.inner;
  if (inputs > index_t(UINT32_MAX) || outputs > index_t(UINT32_MAX)) {
    throw_index_limit("kiln::" + std::string(S::op_type::name) + " on vulkan: " + s.arg.describe(), index_limit::elements,
                      "its kernels", "the tensor");
  }
  const auto in_lay = make_input_layout(s.input_shape, s.arg, perm);
  const auto out_lay = row_op ? make_layout(out, n, perm) : make_layout(out, n);

  // operands, both functions; bindings shared by storage
  const auto ops = gather_operands(out, n, s);
  const operand_fact* fin = ops.in;
  const operand_fact* fout = ops.out;

  structural_plan plan;
  plan.op = V::op;
  plan.row_op = row_op;
  plan.log = V::log;
  plan.largest = V::largest;
  plan.acc_float = is_floating_v<typename S::input_type>;
  binder bind;
  plan_operands(plan, ops, in_lay, out_lay, bind);
  std::apply(
      [&](const auto&... q) {
        ((plan.params.push_back(operand_plan{dtype_traits<typename std::remove_cvref_t<decltype(q.t)>::value_type>::value,
                                             bind(q.t.storage().get()), access::strided, -1})),
         ...);
      },
      s.params);
  plan.bindings = static_cast<std::uint32_t>(bind.storages.size());

  // variant
  const index_t R = sp.extent;
  const std::uint32_t max_wg = pow2_floor(std::max<std::uint32_t>(std::min<std::uint32_t>(dev.workgroup_limit(), 256), 1));
  plan.mode = walk.mode;
  index_t chunk = std::max<index_t>(R, 1), chunks = 1;
  if (plan.mode == structural_mode::columns) {
    plan.wg = std::min<std::uint32_t>(max_wg, 64);
  } else {
    plan.wg = std::min<std::uint32_t>(max_wg, R >= 2048 ? 256 : 64);
    const std::uint32_t sg = dev.shuffle_subgroup();
    plan.subgroup = sg > 1 && (sg & (sg - 1)) == 0 && plan.wg % sg == 0;
    if (walk.split_pass) {
      const index_t wg = plan.wg;
      chunk = std::max<index_t>(std::max<index_t>(dev.split_from / 4, wg), (R + 1023) / 1024);
      chunk = (chunk + wg - 1) / wg * wg;
      chunks = (R + chunk - 1) / chunk;
    }
    if (row_op && chunks == 1 && dev.shared_bytes > plan.wg * 16 + 1024) {
      const std::uint32_t cap = pow2_floor(std::min<std::uint64_t>(8192, (dev.shared_bytes - plan.wg * 16 - 1024) / 4));
      if (R <= cap) plan.cache = cap;
    }
    if (chunks == 1 && dev.lanes && sg > 1 && (sg & (sg - 1)) == 0 && sg <= max_wg) {
      plan.lanes = true;
      plan.wg = sg;
      plan.subgroup = true;
      plan.cache = 0;
      bool params_four = true;  // the norm's weight and bias: f32, stride 1, 4-aligned
      std::apply(
          [&](const auto&... q) {
            ((params_four = params_four && std::is_same_v<typename std::remove_cvref_t<decltype(q.t)>::value_type, float> &&
                            q.t.strides()[0] == 1 && q.t.offset() % 4 == 0),
             ...);
          },
          s.params);
      plan_lane_steps(plan, fin, fout, R, dev, params_four, row_contiguous(in_lay, fin, R, 1),
                      row_op ? row_contiguous(out_lay, fout, R, 1) : 0u);
    }
  }
  if (sp.outer * chunks > index_t(UINT32_MAX)) {
    throw_index_limit("kiln::" + std::string(S::op_type::name) + " on vulkan: " + s.arg.describe(),
                      index_limit::workgroups, {}, "the tensor");
  }

  // parameters: the walk, the input's, the op's parameter tensors (poff<q>, pst<q>), the output's
  param_block pb("structural kernels");
  pb.u32("rows", sp.outer, "row count");
  pb.u32("extent", R, "extent");
  pb.u32("inner", sp.inner, "inner extent");
  pb.u32("chunk", chunk, "chunk");
  pb.u32("chunks", chunks, "chunk count");
  if constexpr (requires { s.op.eps; }) pb.f32("eps", s.op.eps);
  input_params<LI>(pb, fin, in_lay, plan.in);
  int q = 0;
  std::apply([&](const auto&... t) { ((pb.u32("poff", t.t.offset(), "element offset", q), pb.i32("pst", t.t.strides()[0], "stride", q), ++q), ...); },
             s.params);
  output_params<LO>(pb, fout, out_lay, plan.out, n, s);
  plan.params_buffer = dev.max_push_bytes && pb.bytes() > dev.max_push_bytes;

  const std::string_view mode_glsl = plan.mode == structural_mode::rows ? rows_glsl : columns_glsl;
  if (plan.mode == structural_mode::columns) {
    kn.first = &reduce_family_source<T>(n, s, plan, pb, ops_glsl, mode_glsl);
    kn.first_tasks = (static_cast<std::uint64_t>(outputs) + plan.wg - 1) / plan.wg;
  } else if (chunks == 1) {
    kn.first = &reduce_family_source<T>(n, s, plan, pb, ops_glsl, mode_glsl);
    kn.first_tasks = static_cast<std::uint64_t>(sp.outer);
  } else {
    plan.phase = 1;
    kn.first = &reduce_family_source<T>(n, s, plan, pb, ops_glsl, mode_glsl);
    plan.phase = 2;
    kn.second = &reduce_family_source<T>(n, s, plan, pb, ops_glsl, mode_glsl);
    kn.first_tasks = static_cast<std::uint64_t>(sp.outer * chunks);
    kn.second_tasks = row_op ? kn.first_tasks : static_cast<std::uint64_t>(sp.outer);
    kn.partials = kn.first_tasks;
  }
  kn.push = pb.take_words();
  return kn;
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/codegen/impl/structural.ipp"
#endif
