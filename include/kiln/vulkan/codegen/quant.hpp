// kiln/vulkan/codegen/quant.hpp — the source of the quantized-weight kernels (the quant
// family: kiln::quantize's packing, kiln::dequantize, and matmul / linear / bitlinear with
// a qtensor): the structural codegen's prologue, epilogue, operand buffers and parameters
// (codegen/structural.hpp) with this file's family text, then kernels/quant/*.comp.
//
//   pack        one invocation per code word (4 bytes): the weights it covers through the
//               prologue, times the reciprocal scale, rounded half to even and clamped;
//               padded positions (k >= K) get the offset (ops/quant/scheme.hpp's format)
//   dequantize  one invocation per code word: each weight it holds (k < K) as
//               (code - offset) * scale, through the epilogue
//   matvec      one workgroup per (row of x, block of WG * NC output columns): max|x| of
//               the row, the row quantized to int8 into shared memory (in segments of SEG
//               weights when K does not fit the device's shared memory), then each
//               invocation takes NC output columns: integer dot products over its weight
//               row read as uvec4 words, int32 sums per scale group, one float per group
//   matvec split (GPUs) the same product with K split over up to 32 invocations a
//               column (neighbouring invocations read neighbouring 32-byte chunks), the
//               per-group int32 sums added in shared memory, the groups then walked in
//               order by one invocation a column: the same bits (matvec_split.comp)
//   tiled       for more than quant_matvec_rows rows of x: one workgroup per tile of BM
//               rows of x by BN columns, x_q and the code words staged in shared memory in
//               chunks of BK weights of K, TM x TN outputs an invocation (register
//               blocking), the same int32 sums per scale group and rescaling as matvec
//               (both kernels take the row scale and x_q from kernels/quant/common.comp,
//               so their results agree bit for bit)
//   dot         (matvec and tiled, quant_choice::dot) each x word and code field as four
//               signed bytes into one packed 4x8-bit dot product (OpSDot, declared through
//               GL_EXT_spirv_intrinsics); the same int32 sums as the plain path's
//               multiply-adds, so the same bits
//
// The family's parameter block: rows (N, or M for the products), N, K, words (code words
// per row), group (weights per scale; K for one per row or tensor), srs (the scales' row
// stride: G, or 0 for one per tensor), tiles (matvec: column blocks per row of x; tiled:
// column tiles), then the input's members, then coff (the products: the codes' first
// element) and soff (the scales'). Hooks: float kiln_scale(uint e) (scale element e);
// the products also uvec4 kiln_code4(uint w) (code words w .. w + 3 of the codes, w a
// multiple of 4). Sizes (WG, SEG, NC; tiled: WG, BM, BN, BK, TM, TN) are specialisation
// constants; the whole source is the cache key.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/layout.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/ops/quant/qmatmul.hpp"
#include "kiln/ops/quant/quantize.hpp"
#include "kiln/ops/quant/scheme.hpp"
#include "kiln/vulkan/codegen/caps.hpp"
#include "kiln/vulkan/codegen/structural.hpp"

namespace kiln::detail::vk {

enum class quant_kind : std::uint8_t { pack = 1, dequantize = 2, matvec = 3, tiled = 4 };

/// matmul / linear / bitlinear with a qtensor (matvec or tiled).
constexpr bool is_quant_product(quant_kind k) { return k == quant_kind::matvec || k == quant_kind::tiled; }

/// Rows of x up to which a quantized product runs the matvec kernel; more take the tiled
/// one. lavapipe, x [M, 4096] times [4096, 4096]^T int8 / int4 / ternary: M = 4 matvec
/// 70 / 59 / 45 ms, tiled 90 / 84 / 59 (a tile of 8 rows); M = 6 about even; M = 8
/// matvec 158 / 117 / 89, tiled 92 / 92 / 63.
inline constexpr index_t quant_matvec_rows = 4;

/// The quant-family op Op as a kind and its scheme.
template <class Op>
struct vk_quant_op;
template <class S>
struct vk_quant_op<quant_pack_op<S>> {
  using scheme = S;
  static constexpr quant_kind kind = quant_kind::pack;
};
template <class S>
struct vk_quant_op<dequantize_op<S>> {
  using scheme = S;
  static constexpr quant_kind kind = quant_kind::dequantize;
};
template <class S>
struct vk_quant_op<qmatmul_op<S>> {
  using scheme = S;
  static constexpr quant_kind kind = quant_kind::matvec;
};

/// A product's kernel forced by KILN_VULKAN_QUANT (tests, measurements): "matvec",
/// "tiled", "tiled gpu" / "tiled cpu" (the tiled kernel with a GPU's sizes and integer
/// products, or a CPU device's sizes and float multiply-adds, whatever the device); else
/// chosen by shape.
enum class quant_force : std::uint8_t { none, matvec, tiled, tiled_gpu, tiled_cpu, split };

/// What KILN_VULKAN_QUANT forces: words separated by spaces, a kernel ("matvec": an
/// invocation a column; "split": K split over the invocations of a column, GPUs' matvec;
/// "tiled", "tiled gpu", "tiled cpu") and / or the products' arithmetic ("dot": packed 4x8-bit
/// integer dot products, OpSDot, on a device with shaderIntegerDotProduct; "plain":
/// integer multiply-adds), e.g. "dot", "tiled cpu dot", "matvec plain". Unset: the kernel
/// by shape, dot products where the device reports them accelerated.
struct quant_forcing {
  quant_force kernel = quant_force::none;
  std::optional<bool> dot;  // true: "dot", false: "plain"
};

/// Parses a KILN_VULKAN_QUANT value; throws kiln::error on a word it does not know.
KILN_DECL quant_forcing parse_quant_forcing(std::string_view v);

KILN_DECL quant_forcing forced_quant();

/// A chosen kernel and its sizes.
struct quant_choice {
  quant_kind kind = quant_kind::pack;
  std::uint32_t wg = 64;    // invocations per workgroup (a power of two)
  std::uint32_t seg = 128;  // matvec: weights of x's row held in shared memory at a time (a multiple of 128)
  std::uint32_t nc = 1;     // matvec: output columns per invocation
  std::uint32_t lanes = 0;  // matvec: invocations per output column (K split over them; matvec_split.comp), 0: one
  std::uint32_t groups = 1; // matvec with lanes: scale groups a row (held in shared memory)
  // tiled: rows of x and columns a workgroup, weights of K staged at a time (a multiple of
  // 128), rows and columns an invocation; wg = (bm / tm) * (bn / tn) >= bm
  std::uint32_t bm = 64, bn = 64, bk = 128, tm = 4, tn = 4;
  bool qf = false;  // tiled: the products as float multiply-adds (exact; CPU devices)
  bool dot = false; // matvec, tiled: the products as packed 4x8-bit dot products (OpSDot)

  /// Shared memory the matvec or tiled kernel declares for codes of `bits` bits, in bytes.
  std::uint32_t shared_bytes(int bits = 8) const;
  /// Specialisation constants 2, 3, ... of the kernel (kernels/quant/*.comp).
  std::vector<std::uint32_t> constants() const;
  /// kiln::kernel_variant's name: "vulkan.quant.matvec", "vulkan.quant.matvec split" (K
  /// split over lanes), with dot products "vulkan.quant.matvec dot4x8".
  std::string name() const;
};

namespace quant_detail {

/// The tiled product's sizes for M rows of x, K weights a row and codes of `bits` bits on
/// dev, or false where no tile fits the device (then the matvec kernel runs). GPUs: tiles
/// of 64 rows by 64 columns, 4 x 4 outputs an invocation (256 invocations); CPU devices:
/// 64 by 128, 8 x 8 (128 invocations: lavapipe runs an invocation's outputs from
/// registers, the larger block reads and unpacks fewer words per product; on
/// [64, 4096] x int8 [4096, 4096]^T 4 x 4 took 1.6 times as long). Fewer rows for a
/// smaller M (the next power of two, at least 8); halved while the workgroup passes the
/// device's invocations or shared memory (kept to 32 KiB), with at least bm invocations
/// (step 1 of the kernel). K is staged 512, 256 or 128 weights at a time, the largest
/// that fits (no more than K needs).
KILN_DECL bool tiled_quant_sizes(quant_choice& c, index_t M, index_t K, int bits, const device_caps& dev);

}  // namespace quant_detail

/// The kernel and sizes for kind over K weights a row, N columns and M rows of x (the
/// products, with codes of `bits` bits) on device dev; what: the operands, for errors
/// (kiln::shader_error when the device's shared memory cannot hold the smallest segment
/// of the matvec kernel). A product of more than quant_matvec_rows rows runs the tiled
/// kernel (tiled_quant_sizes; on a CPU device with float multiply-adds), else matvec. On
/// a CPU device a matvec invocation takes up to 4 columns (each x word read and unpacked
/// once for all of them), while at least 8 workgroups remain. The products take packed
/// 4x8-bit dot products (quant_choice::dot, in place of the tiled kernel's float
/// multiply-adds too) where the device has them and reports the signed one accelerated,
/// or where KILN_VULKAN_QUANT says "dot" (kiln::shader_error on a device without them).
/// On a GPU the matvec splits K over the invocations of a column (quant_choice::lanes,
/// kernels/quant/matvec_split.comp: up to 32 a column, 256 a workgroup; a decode step's
/// few thousand columns would otherwise keep too few loads in flight) where the row of x
/// and the per-group sums (`group` weights a scale; 0: one a row) fit shared memory.
KILN_DECL quant_choice select_quant(quant_kind kind, index_t K, const device_caps& dev, const std::string& what,
                                    index_t N = 0, index_t M = 1, int bits = 8, quant_forcing forced = {},
                                    index_t group = 0);

/// What a quant kernel is compiled for (sizes are specialisation constants, not here).
struct quant_plan {
  structural_plan base;  // operands: the prologue's, the epilogue's; params: scales (pack: reciprocals), matvec: codes then scales
  quant_kind kind = quant_kind::pack;
  int bits = 8, offset = 128, qmax = 127;
  bool codes4 = false;  // the products: the codes read as uvec4 (their first element a multiple of 4)
  bool qf = false;      // tiled: float multiply-adds (quant_choice::qf)
  bool dot = false;     // the products: packed 4x8-bit dot products (quant_choice::dot)
};

KILN_DECL std::string quant_plan_key(const quant_plan& q);

/// The quant family's part of the generated source.
KILN_DECL structural_family_text quant_family_text(const quant_plan& q, std::string_view result_type);

/// A statement's quant kernel: its source, parameters, workgroups and constants.
struct quant_kernel {
  const structural_source* source = nullptr;
  quant_choice choice;
  std::vector<std::uint32_t> push;
  std::uint64_t tasks = 0;  // workgroups
  bool empty = false;       // no output element: nothing to dispatch
};

/// The source of a quant kernel under plan q from templates (the products:
/// kernels/quant/common.comp, then the kernel's; cached_family_source), named
/// "q<op>_<hash>".
template <class T, class N, class S>
const structural_source& quant_source(const N& n, const S& s, const quant_plan& q, const param_block& params,
                                      std::initializer_list<std::string_view> templates) {
  return cached_family_source<T>(n, s, q.base, quant_plan_key(q), std::string("q") + std::string(S::op_type::name), params,
                                 [&](std::string_view result_type) { return quant_family_text(q, result_type); },
                                 templates);
}

/// The operands' description for errors, e.g. "kiln::matmul: x is ..., the weight is ...".
template <class S>
std::string quant_what(const S& s) {
  using V = vk_quant_op<typename S::op_type>;
  const detail::quant_layout& l = s.op.layout;
  const std::string w = std::string(V::scheme::name) + "[" + std::to_string(l.N) + ", " + std::to_string(l.K) + "]";
  if constexpr (V::kind == quant_kind::matvec) return "kiln::matmul: x is " + s.arg.describe() + ", the weight is " + w;
  else if constexpr (V::kind == quant_kind::pack) return "kiln::quantize<" + std::string(V::scheme::name) + ">: the weight is " + s.arg.describe();
  else return "kiln::dequantize: the weight is " + w;
}

/// The kernel a quant node s runs on device dev (shared by recording and kiln::kernel_variant).
template <class S>
quant_choice quant_choice_of(const S& s, const device_caps& dev) {
  using V = vk_quant_op<typename S::op_type>;
  const detail::quant_layout& l = s.op.layout;
  const index_t M = V::kind == quant_kind::matvec && l.K ? s.input_shape.numel() / l.K : 1;
  return select_quant(V::kind, l.K, dev, quant_what(s), l.N, M, V::scheme::bits,
                      V::kind == quant_kind::matvec ? forced_quant() : quant_forcing{}, l.group);
}

/// The kernel texts a quant statement may run (kernels/quant/*.comp).
struct quant_templates {
  std::string_view pack, dequantize, matvec, tiled, common, matvec_split;
};

/// Plans and generates the kernel of `out = n` whose structural node is a quant op, from
/// the template of its kind (the products: common.comp, then matvec.comp or tiled.comp).
/// Throws kiln::shape_error where positions pass the kernels' 32-bit indexing,
/// kiln::shader_error where the device's shared memory is too small.
template <class T, class B, class N>
quant_kernel make_quant_kernel(const tensor<T, B>& out, const N& n, const device_caps& dev, std::uint32_t max_push_bytes,
                               const quant_templates& tmpl) {
  using namespace structural_detail;
  const auto& s = find_structural(n);
  using S = std::remove_cvref_t<decltype(s)>;
  using V = vk_quant_op<typename S::op_type>;
  using Scheme = typename V::scheme;
  constexpr std::size_t LI = leaf_count_v<decltype(s.arg)>, LO = leaf_count_v<N>;
  const detail::quant_layout& l = s.op.layout;
  const std::string what = quant_what(s);

  quant_kernel kn;
  kn.choice = quant_choice_of(s, dev);
  const quant_choice& c = kn.choice;
  const std::uint64_t outputs = std::uint64_t(s.shape().numel());
  if (outputs == 0) {
    kn.empty = true;
    return kn;
  }
  index_t rows = l.N;
  index_t tiles = 1;
  std::uint64_t threads = std::uint64_t(l.N) * std::uint64_t(l.words);  // pack, dequantize: a code word each
  if constexpr (V::kind == quant_kind::matvec) {
    rows = l.K ? s.input_shape.numel() / l.K : s.shape().numel() / std::max<index_t>(l.N, 1);
    if (c.kind == quant_kind::tiled) {
      tiles = (l.N + index_t(c.bn) - 1) / index_t(c.bn);
      threads = std::uint64_t((rows + index_t(c.bm) - 1) / index_t(c.bm)) * std::uint64_t(tiles) * c.wg;
    } else if (c.lanes) {
      const index_t columns = index_t(c.wg / c.lanes);
      tiles = (l.N + columns - 1) / columns;
      threads = std::uint64_t(rows) * std::uint64_t(tiles) * c.wg;
    } else {
      tiles = (l.N + index_t(c.wg * c.nc) - 1) / index_t(c.wg * c.nc);
      threads = std::uint64_t(rows) * std::uint64_t(tiles) * c.wg;
    }
  }
  const std::uint64_t inputs = std::uint64_t(s.input_shape.numel());
  if (outputs > UINT32_MAX || inputs > UINT32_MAX || std::uint64_t(l.N) * std::uint64_t(l.words) > UINT32_MAX) {
    throw_index_limit(what, index_limit::elements, "the Vulkan quant kernels", "the tensor");
  }
  const std::uint64_t tasks = (threads + c.wg - 1) / c.wg;
  if (tasks > UINT32_MAX) throw_index_limit(what, index_limit::workgroups, {}, "the tensor");

  const auto in_lay = make_input_layout(s.input_shape, s.arg);
  const auto out_lay = make_layout(out, n);
  const auto ops = gather_operands(out, n, s);

  quant_plan q;
  q.kind = c.kind;
  q.qf = c.qf;
  q.dot = c.dot;
  q.bits = Scheme::bits;
  q.offset = Scheme::offset;
  q.qmax = Scheme::qmax;
  binder bind;
  plan_operands(q.base, ops, in_lay, out_lay, bind);
  q.base.acc_float = is_floating_v<typename S::input_type>;
  std::apply(
      [&](const auto&... p) {
        ((q.base.params.push_back(operand_plan{dtype_traits<typename std::remove_cvref_t<decltype(p.t)>::value_type>::value,
                                               bind(p.t.storage().get()), access::linear, -1})),
         ...);
      },
      s.params);
  q.base.bindings = static_cast<std::uint32_t>(bind.storages.size());
  q.base.wg = c.wg;

  const auto& scales = std::get<std::tuple_size_v<decltype(s.params)> - 1>(s.params).t;
  // parameters: the geometry, the input's, the codes' and scales' offsets, the output's
  param_block pb("the Vulkan quant kernels");
  pb.u32("rows", rows, "row count");
  pb.u32("N", l.N, "N");
  pb.u32("K", l.K, "K");
  pb.u32("words", l.words, "code words per row");
  pb.u32("group", std::max<index_t>(l.group, 1), "group");
  pb.u32("srs", l.scale_row_stride(), "scale row stride");
  pb.u32("tiles", tiles, "column blocks");
  input_params<LI>(pb, ops.in, in_lay, q.base.in);
  if constexpr (V::kind == quant_kind::matvec) {
    const auto& codes = std::get<0>(s.params).t;
    pb.u32("coff", codes.offset(), "element offset");
    q.codes4 = codes.offset() % 4 == 0;
  }
  pb.u32("soff", scales.offset(), "element offset");
  output_params<LO>(pb, ops.out, out_lay, q.base.out, n, s);
  q.base.params_buffer = max_push_bytes && pb.bytes() > max_push_bytes;

  const std::string_view text = c.kind == quant_kind::pack         ? tmpl.pack
                                : c.kind == quant_kind::dequantize ? tmpl.dequantize
                                : c.kind == quant_kind::tiled      ? tmpl.tiled
                                : c.lanes                          ? tmpl.matvec_split
                                                                   : tmpl.matvec;
  kn.source = is_quant_product(c.kind) ? &quant_source<T>(n, s, q, pb, {tmpl.common, text}) : &quant_source<T>(n, s, q, pb, {text});
  kn.push = pb.take_words();
  kn.tasks = tasks;
  return kn;
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/codegen/impl/quant.ipp"
#endif
