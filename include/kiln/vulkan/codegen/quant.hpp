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
//
// The family's parameter block: rows (N, or M for matvec), N, K, words (code words per
// row), group (weights per scale; K for one per row or tensor), srs (the scales' row
// stride: G, or 0 for one per tensor), tiles (matvec: column blocks per row of x), then
// the input's members, then coff (matvec: the codes' first element) and soff (the
// scales'). Hooks: float kiln_scale(uint e) (scale element e); matvec also
// uvec4 kiln_code4(uint w) (code words w .. w + 3 of the codes, w a multiple of 4).
// Sizes (WG, SEG, NC) are specialisation constants; the whole source is the cache key.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/expr/layout.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/ops/quant/qmatmul.hpp"
#include "kiln/ops/quant/quantize.hpp"
#include "kiln/ops/quant/scheme.hpp"
#include "kiln/vulkan/codegen/structural.hpp"

namespace kiln::detail::vk {

enum class quant_kind : std::uint8_t { pack = 1, dequantize = 2, matvec = 3 };

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

/// What the device allows a quant kernel (from its limits; see ops/quant.hpp).
struct quant_device {
  std::uint32_t max_invocations = 256;  // min(maxComputeWorkGroupInvocations, Size[0])
  std::uint32_t shared_bytes = 16384;   // maxComputeSharedMemorySize
  bool cpu = false;                     // a CPU device (lavapipe): several columns per invocation
};

/// A chosen kernel and its sizes.
struct quant_choice {
  quant_kind kind = quant_kind::pack;
  std::uint32_t wg = 64;    // invocations per workgroup (a power of two)
  std::uint32_t seg = 128;  // matvec: weights of x's row held in shared memory at a time (a multiple of 128)
  std::uint32_t nc = 1;     // matvec: output columns per invocation

  /// Shared memory the matvec kernel declares, in bytes.
  std::uint32_t shared_bytes() const { return kind == quant_kind::matvec ? seg + wg * 8 : 0; }
  /// Specialisation constants 2, 3, 4 of the kernel (kernels/quant/*.comp).
  std::vector<std::uint32_t> constants() const { return {wg, seg, nc}; }
  /// kiln::kernel_variant's name.
  std::string name() const {
    switch (kind) {
      case quant_kind::pack: return "vulkan.quant.pack";
      case quant_kind::dequantize: return "vulkan.quant.dequantize";
      case quant_kind::matvec: return "vulkan.quant.matvec";
    }
    return {};
  }
};

namespace quant_detail {

inline std::uint32_t pow2_at_most(std::uint32_t v) {
  std::uint32_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

}  // namespace quant_detail

/// The kernel and sizes for kind over K weights a row, N columns and M rows of x (matvec)
/// on device dev; what: the operands, for errors (kiln::shader_error when the device's
/// shared memory cannot hold the smallest segment of the matvec kernel). On a CPU device
/// an invocation takes up to 4 columns (each x word read and unpacked once for all of
/// them), while at least 8 workgroups remain.
inline quant_choice select_quant(quant_kind kind, index_t K, const quant_device& dev, const std::string& what,
                                 index_t N = 0, index_t M = 1) {
  quant_choice c;
  c.kind = kind;
  c.wg = quant_detail::pow2_at_most(std::clamp<std::uint32_t>(dev.max_invocations, 1, kind == quant_kind::matvec ? 64 : 128));
  if (kind != quant_kind::matvec) return c;
  // x's row as int8: all of it when it fits, else the largest whole number of 128-weight
  // blocks that does (the kernel then walks K in segments, re-reading x per segment).
  const std::uint64_t row = (std::uint64_t(std::max<index_t>(K, 1)) + 127) / 128 * 128;
  const std::uint64_t other = std::uint64_t(c.wg) * 8;
  const std::uint64_t room = dev.shared_bytes > other ? (dev.shared_bytes - other) / 128 * 128 : 0;
  if (room < 128) {
    throw shader_error(what + ": the quantized matmul kernel needs at least " + std::to_string(128 + other) +
                       " bytes of shared memory (" + std::to_string(c.wg) +
                       " invocations and 128 int8 activations); the device's maxComputeSharedMemorySize is " +
                       std::to_string(dev.shared_bytes));
  }
  c.seg = static_cast<std::uint32_t>(std::min<std::uint64_t>(row, std::min<std::uint64_t>(room, 1u << 20)));
  if (dev.cpu) {
    const auto blocks = [&](std::uint32_t nc) { return std::uint64_t(M) * ((std::uint64_t(N) + c.wg * nc - 1) / (c.wg * nc)); };
    for (std::uint32_t nc : {4u, 2u}) {
      if (blocks(nc) >= 8) {
        c.nc = nc;
        break;
      }
    }
  }
  return c;
}

/// What a quant kernel is compiled for (sizes are specialisation constants, not here).
struct quant_plan {
  structural_plan base;  // operands: the prologue's, the epilogue's; params: scales (pack: reciprocals), matvec: codes then scales
  quant_kind kind = quant_kind::pack;
  int bits = 8, offset = 128, qmax = 127;
  bool codes4 = false;  // matvec: the codes read as uvec4 (their first element a multiple of 4)
};

inline std::string quant_plan_key(const quant_plan& q) {
  std::string k = structural_plan_key(q.base);
  k += '|';
  k += static_cast<char>(q.kind);
  k += static_cast<char>(q.bits);
  k += static_cast<char>(q.codes4);
  return k;
}

/// The quant family's part of the generated source.
inline structural_family_text quant_family_text(const quant_plan& q, std::string_view result_type) {
  using structural_text::load;
  const structural_plan& sp = q.base;
  structural_family_text f;
  static constexpr const char* kinds[] = {"", "pack", "dequantize", "matvec"};
  f.comment = std::string("// quant ") + kinds[static_cast<int>(q.kind)] + ", " + std::to_string(q.bits) + "-bit codes" +
              (q.codes4 ? ", uvec4 code reads" : "") + (sp.params_buffer ? "; parameter buffer" : "") +
              "; sizes are specialisation constants\n";
  auto def = [&](std::string_view name, const std::string& v) { f.defines += "#define " + std::string(name) + " " + v + "\n"; };
  if (q.kind == quant_kind::matvec) f.extensions += "#extension GL_EXT_control_flow_attributes : require\n";  // [[unroll]]
  def("KILN_BITS", std::to_string(q.bits));
  def("KILN_OFFSET", std::to_string(q.offset));
  def("KILN_QMAX", std::to_string(q.qmax));
  def("KILN_RESULT", std::string(result_type));
  f.members = "  uint rows;\n  uint N;\n  uint K;\n  uint words;\n  uint group;\n  uint srs;\n  uint tiles;\n";
  const operand_plan& scales = sp.params[q.kind == quant_kind::matvec ? 1 : 0];
  if (q.kind == quant_kind::matvec) {
    const operand_plan& codes = sp.params[0];
    const std::string cb = std::to_string(codes.binding);
    f.param_members = "  uint coff;\n";
    if (q.codes4) {
      f.buffers = "layout(std430, set = 0, binding = " + cb + ") readonly buffer kiln_buf" + cb + "_u4 { uvec4 kiln_b" + cb +
                  "_u4[]; };\n";
      f.hooks += "uvec4 kiln_code4(uint w) { return kiln_b" + cb + "_u4[(p.coff + w) >> 2]; }\n";
    } else {
      f.hooks += "uvec4 kiln_code4(uint w) {\n  uint e = p.coff + w;\n  return uvec4(uint(" + load(codes, "e") + "), uint(" +
                 load(codes, "e + 1u") + "), uint(" + load(codes, "e + 2u") + "), uint(" + load(codes, "e + 3u") + "));\n}\n";
    }
  }
  f.param_members += "  uint soff;\n";
  f.hooks += "float kiln_scale(uint e) { return " + load(scales, "p.soff + e") + "; }\n";
  return f;
}

/// A statement's quant kernel: its source, parameters, workgroups and constants.
struct quant_kernel {
  const structural_source* source = nullptr;
  quant_choice choice;
  std::vector<std::uint32_t> push;
  std::uint64_t tasks = 0;  // workgroups
  bool empty = false;       // no output element: nothing to dispatch
};

/// The source of a quant kernel under plan q, once per process per (T, N, plan).
template <class T, class N, class S>
const structural_source& cached_quant_source(const N& n, const S& s, const quant_plan& q, std::string_view tmpl) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::unique_ptr<const structural_source>> sources;
  std::string key = quant_plan_key(q);
  std::lock_guard lock(mutex);
  if (auto it = sources.find(key); it != sources.end()) return *it->second;
  emitter pro(q.base.in), epi(q.base.out);
  std::string pro_result, epi_result, readable;
  emit_structural_hooks(n, s, pro, epi, pro_result, epi_result, readable);
  const std::string_view result_type = glsl_compute_type<typename S::value_type>();
  auto src = std::make_unique<structural_source>(
      assemble_structural(q.base, pro, pro_result, epi, epi_result, glsl_compute_type<typename N::value_type>(),
                          result_type, quant_family_text(q, result_type), std::move(readable), {tmpl}));
  src->name = structural_kernel_name(std::string("q") + std::string(S::op_type::name), src->glsl);
  return *sources.emplace(std::move(key), std::move(src)).first->second;
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
quant_choice quant_choice_of(const S& s, const quant_device& dev) {
  using V = vk_quant_op<typename S::op_type>;
  const detail::quant_layout& l = s.op.layout;
  const index_t M = V::kind == quant_kind::matvec && l.K ? s.input_shape.numel() / l.K : 1;
  return select_quant(V::kind, l.K, dev, quant_what(s), l.N, M);
}

/// Plans and generates the kernel of `out = n` whose structural node is a quant op; tmpl:
/// kernels/quant/{pack,dequantize,matvec}.comp for its kind. Throws kiln::shape_error
/// where positions pass the kernels' 32-bit indexing, kiln::shader_error where the
/// device's shared memory is too small.
template <class T, class B, class N>
quant_kernel make_quant_kernel(const tensor<T, B>& out, const N& n, const quant_device& dev, std::uint32_t max_push_bytes,
                               std::string_view tmpl) {
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
    tiles = (l.N + index_t(c.wg * c.nc) - 1) / index_t(c.wg * c.nc);
    threads = std::uint64_t(rows) * std::uint64_t(tiles) * c.wg;
  }
  const std::uint64_t inputs = std::uint64_t(s.input_shape.numel());
  if (outputs > UINT32_MAX || inputs > UINT32_MAX || std::uint64_t(l.N) * std::uint64_t(l.words) > UINT32_MAX) {
    throw shape_error(what + ": more than 2^32 - 1 elements, past the 32-bit indexing of the Vulkan quant kernels; "
                             "split the tensor");
  }
  const std::uint64_t tasks = (threads + c.wg - 1) / c.wg;
  if (tasks > UINT32_MAX) throw shape_error(what + ": more workgroups than 32-bit task numbers name; split the tensor");

  const auto in_lay = make_input_layout(s.input_shape, s.arg);
  const auto out_lay = make_layout(out, n);
  const auto ops = gather_operands(out, n, s);

  quant_plan q;
  q.kind = V::kind;
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
  std::vector<std::uint32_t>& w = kn.push;
  word(w, rows, "row count");
  word(w, l.N, "N");
  word(w, l.K, "K");
  word(w, l.words, "code words per row");
  word(w, std::max<index_t>(l.group, 1), "group");
  word(w, l.scale_row_stride(), "scale row stride");
  word(w, tiles, "column blocks");
  input_words<LI>(w, ops.in, in_lay, q.base.in);
  if constexpr (V::kind == quant_kind::matvec) {
    const auto& codes = std::get<0>(s.params).t;
    word(w, codes.offset(), "element offset");
    q.codes4 = codes.offset() % 4 == 0;
  }
  word(w, scales.offset(), "element offset");
  (void)output_words<LO>(w, ops.out, out_lay, q.base.out, n, s);
  q.base.params_buffer = max_push_bytes && w.size() * 4 > max_push_bytes;

  kn.source = &cached_quant_source<T>(n, s, q, tmpl);
  kn.tasks = tasks;
  return kn;
}

}  // namespace kiln::detail::vk
