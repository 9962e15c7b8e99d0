// kiln/vulkan/codegen/gemm.hpp — the source of a matmul kernel (contract family): the
// statement's prologue (a's expression, read by position) and epilogue (the elementwise
// tree around the product, applied to each accumulator before its one store) from the
// structural codegen, b read in place through its strides, then kernels/gemm/*.comp.
//
// Variants (select_gemm; kiln::kernel_variant names the one a statement runs):
//   naive   shared-memory tiles, one output per invocation (the floor; only when forced)
//   tiled   BM x BN tiles staged in shared memory, TM x TN outputs per invocation, vec4
//           loads of a (K % 4 == 0) and of b (n- or k-contiguous f32, aligned); on CPU
//           devices (lavapipe) up to 128x128 tiles of 32x16 blocks, BK 32
//   matvec  M <= 4 (decode): a workgroup per group of outputs; over K either reduced
//           across the workgroup (b k-contiguous, the nn.Linear [N, K] layout, or any
//           other layout) or split in k-slices per column group (b n-contiguous)
//   splitk  a small M x N with a long K: the tiled kernel over K chunks writes partial
//           sums, a second dispatch merges them in order and applies the epilogue
// Tile and workgroup sizes are specialisation constants (one SPIR-V module per source,
// a pipeline per size); the source depends on the kind, the vec4 paths, the batch rank.
// KILN_VULKAN_GEMM=naive|tiled|matvec|splitk forces a variant (tests, benchmarks).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/ops/linalg/matmul.hpp"
#include "kiln/vulkan/codegen/structural.hpp"

namespace kiln::detail::vk {

enum class gemm_kind : std::uint8_t { naive = 1, tiled = 2, matvec = 3, splitk = 4 };

/// What the device allows a matmul kernel (from its limits; see ops/gemm.hpp).
struct gemm_device {
  std::uint32_t max_invocations = 256;  // maxComputeWorkGroupInvocations
  std::uint32_t max_wg_x = 256;         // maxComputeWorkGroupSize[0]
  std::uint32_t shared_bytes = 16384;   // maxComputeSharedMemorySize
  std::uint32_t subgroup = 0;           // nonzero: subgroup arithmetic in compute, of this size
  bool shuffle = false;                 // subgroupShuffle in compute (with subgroup nonzero)
  bool cpu = false;                     // a CPU device (lavapipe): larger register blocks
};

/// A chosen variant and its sizes.
struct gemm_choice {
  gemm_kind kind = gemm_kind::tiled;
  std::uint32_t wg = 256;                         // invocations per workgroup
  std::uint32_t bm = 64, bn = 64, bk = 16, tm = 4, tn = 4;  // tiles (naive: bm = bn = bk = tile)
  std::uint32_t splits = 1;                       // splitk: K chunks (maybe 1: still two dispatches)
  std::uint64_t kchunk = 0;                       // splitk: K per chunk, a whole number of bk
  bool columns = false;                           // matvec: b n-contiguous, k-slices per column group
  std::uint32_t mr = 1, nr = 4;                   // matvec: rows and outputs per workgroup (columns: 4 per invocation)
  std::uint32_t gx = 64;                          // matvec columns: invocations along n

  /// Shared memory the kernel declares, in bytes.
  std::uint32_t shared_bytes() const {
    switch (kind) {
      case gemm_kind::naive: return 2 * bm * bm * 4;
      case gemm_kind::tiled:
      case gemm_kind::splitk: return bk * (bm + bn) * 4;
      case gemm_kind::matvec: return columns ? wg * mr * 16 : wg * mr * nr * 4;
    }
    return 0;
  }
  /// Specialisation constants 2, 3, ... of the kernel (see kernels/gemm/*.comp).
  std::vector<std::uint32_t> constants() const {
    switch (kind) {
      case gemm_kind::naive: return {wg, bm};
      case gemm_kind::tiled:
      case gemm_kind::splitk: return {wg, bm, bn, bk, tm, tn};
      case gemm_kind::matvec: return {wg, columns ? gx : nr, mr};
    }
    return {};
  }
  std::string name() const {
    const std::string tile = std::to_string(bm) + "x" + std::to_string(bn);
    switch (kind) {
      case gemm_kind::naive: return "vulkan.gemm.naive " + tile;
      case gemm_kind::tiled: return "vulkan.gemm.tiled " + tile;
      case gemm_kind::splitk: return "vulkan.gemm.splitk " + std::to_string(splits) + " " + tile + " (2 dispatches)";
      case gemm_kind::matvec: return std::string("vulkan.gemm.matvec ") + (columns ? "n-columns" : "k-reduce");
    }
    return {};
  }
};

namespace gemm_detail {

inline std::uint32_t pow2_at_most(std::uint32_t v) {
  std::uint32_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

/// Split-K's chunk of K (a whole number of bk) for about `want` chunks.
inline std::uint64_t splitk_chunk(index_t K, std::uint64_t want, std::uint32_t bk) {
  const std::uint64_t k = std::max<std::uint64_t>(std::uint64_t(K), 1);
  return ceil_div(ceil_div(k, want), bk) * bk;
}

}  // namespace gemm_detail

/// The variant for a product of dims d with b's k and n strides on device dev: matvec
/// for M <= 4, split-K for few output tiles over a long K, else tiled (64x64, or 32x32
/// when M or N is small; on a CPU device 128x128 when at least 8 such tiles); `forced` (KILN_VULKAN_GEMM) overrides. `what` names the
/// operands for errors: kiln::device_error when no size of the variant fits the device.
inline gemm_choice select_gemm(const matmul_dims& d, index_t bsk, index_t bsn, const gemm_device& dev,
                               std::string_view forced, const std::string& what) {
  using namespace gemm_detail;
  const std::uint32_t max_wg = std::min(dev.max_invocations, dev.max_wg_x);
  const auto fits = [&](const gemm_choice& c) { return c.wg <= max_wg && c.shared_bytes() <= dev.shared_bytes; };
  const auto fail = [&](const std::string& kind, const gemm_choice& c) -> gemm_choice {
    throw device_error(what + ": no " + kind + " matmul kernel fits the device (the smallest needs " +
                       std::to_string(c.wg) + " invocations and " + std::to_string(c.shared_bytes()) +
                       " bytes of shared memory; it allows " + std::to_string(max_wg) +
                       " (maxComputeWorkGroupInvocations / Size[0]) and " + std::to_string(dev.shared_bytes) +
                       " (maxComputeSharedMemorySize))");
  };
  // Tiles {BM, BN, BK, TM, TN}, largest first (each tried while it does not fit the device).
  // GPUs: 64x64 (or 32x32 for a small M or N), 4x4 outputs per invocation. CPU devices
  // (lavapipe runs a workgroup on a thread, SIMD across invocations, and each shared-memory
  // read of a vector costs a loop over the lanes): far larger blocks per invocation and
  // BK 32 (fewer barriers), 128x128 tiles once there are enough of them to go round.
  const auto tiled = [&](gemm_kind kind, bool small) {
    using sizes = std::uint32_t[5];
    static constexpr sizes gpu[] = {{64, 64, 16, 4, 4}, {32, 32, 16, 4, 4}, {16, 16, 16, 4, 4}, {8, 8, 16, 4, 4}};
    static constexpr sizes cpu[] = {{128, 128, 32, 32, 16}, {64, 64, 32, 16, 16}, {32, 32, 32, 8, 8},
                                    {32, 32, 16, 8, 8},     {16, 16, 16, 4, 4},   {8, 8, 16, 4, 4}};
    const bool big_tiles = ceil_div(d.M, 128) * ceil_div(d.N, 128) * std::uint64_t(d.batches()) >= 8;
    gemm_choice c;
    c.kind = kind;
    const auto at = [&](const sizes& z) {
      c.bm = z[0];
      c.bn = z[1];
      c.bk = z[2];
      c.tm = z[3];
      c.tn = z[4];
      c.wg = (c.bm / c.tm) * (c.bn / c.tn);
      return fits(c);
    };
    if (dev.cpu) {
      for (std::size_t i = small ? 2 : big_tiles ? 0 : 1; i < std::size(cpu); ++i)
        if (at(cpu[i])) return c;
    } else {
      for (std::size_t i = small ? 1 : 0; i < std::size(gpu); ++i)
        if (at(gpu[i])) return c;
    }
    return fail("tiled", c);
  };
  gemm_kind kind;
  if (forced == "naive") kind = gemm_kind::naive;
  else if (forced == "tiled") kind = gemm_kind::tiled;
  else if (forced == "matvec") kind = gemm_kind::matvec;
  else if (forced == "splitk") kind = gemm_kind::splitk;
  else if (!forced.empty()) {
    throw device_error(what + ": KILN_VULKAN_GEMM is '" + std::string(forced) +
                       "'; it must be naive, tiled, matvec or splitk (or unset: chosen by shape)");
  } else if (d.M <= 4) {
    kind = gemm_kind::matvec;
  } else {
    const std::uint64_t tiles32 = ceil_div(d.M, 32) * ceil_div(d.N, 32) * std::uint64_t(d.batches());
    kind = tiles32 <= 4 && d.K >= 2048 ? gemm_kind::splitk : gemm_kind::tiled;
  }

  if (kind == gemm_kind::naive) {
    gemm_choice c;
    c.kind = kind;
    for (std::uint32_t t : {16u, 8u, 4u}) {
      c.bm = c.bn = c.bk = t;
      c.wg = t * t;
      if (fits(c)) return c;
    }
    return fail("naive", c);
  }
  if (kind == gemm_kind::tiled) return tiled(kind, d.M < 64 || d.N < 64);
  if (kind == gemm_kind::splitk) {
    gemm_choice c = tiled(kind, !dev.cpu);  // CPU: the parallelism is in the K chunks, 64x64 tiles
    const std::uint64_t want = std::clamp<std::uint64_t>(std::uint64_t(d.K) / 1024, 2, 32);
    c.kchunk = splitk_chunk(d.K, want, c.bk);
    c.splits = static_cast<std::uint32_t>(ceil_div(std::max<std::uint64_t>(std::uint64_t(d.K), 1), c.kchunk));
    return c;
  }
  // matvec
  gemm_choice c;
  c.kind = kind;
  c.mr = static_cast<std::uint32_t>(std::clamp<index_t>(d.M, 1, 4));
  c.columns = bsk != 1 && bsn == 1 && d.N > 1;
  for (std::uint32_t wg = pow2_at_most(std::min<std::uint32_t>(max_wg, c.columns ? 256 : 128)); wg >= 1; wg /= 2) {
    c.wg = wg;
    c.nr = 4;
    c.gx = std::min<std::uint32_t>(wg, 64);
    if (fits(c)) return c;
    if (wg == 1) break;
  }
  return fail("matrix-vector", c);
}

/// What a matmul kernel is compiled for (sizes are specialisation constants, not here).
struct gemm_plan {
  structural_plan base;  // operands (the prologue's, the epilogue's, b as params[0]), parameter placement
  gemm_kind kind = gemm_kind::tiled;
  bool columns = false;  // matvec over column groups
  std::uint8_t phase = 0;  // split-K: 1 partial sums, 2 the merge
  int batch_dims = 0;    // result batch dimensions of extent > 1
  bool a4 = false;         // K % 4 == 0: a read four k at a time (kiln_a_vec4)
  bool a4_direct = false;  // ... as one vec4 load (a is one contiguous, aligned f32 tensor)
  bool b4n = false;        // b read four n at a time as one vec4 (n-contiguous, aligned; f16/bf16 as a uvec2)
  bool b4k = false;        // b read four k at a time as one vec4 (k-contiguous, aligned; f16/bf16 as a uvec2)
  bool subgroup = false;   // matvec: subgroupAdd before the shared-memory merge
};

inline std::string gemm_plan_key(const gemm_plan& g) {
  std::string k = structural_plan_key(g.base);
  k += '|';
  k += static_cast<char>(g.kind);
  k += static_cast<char>(g.columns | g.a4 << 1 | g.a4_direct << 2 | g.b4n << 3 | g.b4k << 4 | g.subgroup << 5);
  k += static_cast<char>(g.phase);
  k += static_cast<char>(g.batch_dims);
  return k;
}

/// The contract family's part of the generated source: parameters, b's reads, the batch
/// decomposition, vec4 views (a second declaration of a binding: Vulkan lets blocks alias).
inline structural_family_text gemm_family_text(const gemm_plan& g, std::string_view result_type) {
  using structural_text::load;
  const structural_plan& sp = g.base;
  structural_family_text f;
  static constexpr const char* kinds[] = {"", "naive", "tiled", "matvec", "splitk"};
  f.comment = std::string("// gemm ") + kinds[static_cast<int>(g.kind)] + (g.columns ? " columns" : "") + ", phase " +
              std::to_string(g.phase) + (g.a4_direct ? ", vec4 a" : g.a4 ? ", a by fours" : "") +
              (g.b4n ? ", vec4 b along n" : g.b4k ? ", vec4 b along k" : "") +
              (sp.params_buffer ? "; parameter buffer" : "") + "; sizes are specialisation constants\n";
  if (g.kind == gemm_kind::tiled || g.kind == gemm_kind::splitk) {
    f.extensions += "#extension GL_EXT_control_flow_attributes : require\n";  // [[unroll]]
  }
  if (g.subgroup) {
    f.extensions += "#extension GL_KHR_shader_subgroup_basic : require\n";
    f.extensions += "#extension GL_KHR_shader_subgroup_arithmetic : require\n";
  }
  auto def = [&](std::string_view name, const std::string& v) { f.defines += "#define " + std::string(name) + " " + v + "\n"; };
  def("KILN_PHASE", std::to_string(g.phase));
  def("KILN_A4", g.a4 ? "1" : "0");
  def("KILN_B4N", g.b4n ? "1" : "0");
  def("KILN_B4K", g.b4k ? "1" : "0");
  def("KILN_SUBGROUP", g.subgroup ? "1" : "0");
  def("KILN_MV_COLUMNS", g.columns ? "1" : "0");
  def("KILN_RESULT", std::string(result_type));

  const operand_plan& b = sp.params[0];
  const std::uint32_t ab = g.a4_direct ? sp.in.operands[1].binding : UINT32_MAX;
  auto alias = [&](std::uint32_t binding) {
    const std::string bs = std::to_string(binding);
    f.buffers += "layout(std430, set = 0, binding = " + bs + ") readonly buffer kiln_buf" + bs + "_v4 { vec4 kiln_b" + bs +
                 "_v4[]; };\n";
  };
  if (g.a4_direct) alias(ab);
  const bool b16 = b.type == dtype::f16 || b.type == dtype::bf16;
  if ((g.b4n || g.b4k) && b16) {  // four 16-bit elements as one uvec2, unpacked in kiln_b_vec4
    const std::string bs = std::to_string(b.binding);
    f.buffers += "layout(std430, set = 0, binding = " + bs + ") readonly buffer kiln_buf" + bs + "_u2 { uvec2 kiln_b" + bs +
                 "_u2[]; };\n";
  } else if ((g.b4n || g.b4k) && b.binding != ab) {
    alias(b.binding);
  }
  if (g.phase) {
    f.buffers += "layout(std430, set = 0, binding = " + std::to_string(sp.bindings) + ") " +
                 (g.phase == 1 ? "writeonly " : "readonly ") + "buffer kiln_partial_buf { float kiln_partial[]; };\n";
    f.extra_bindings = 1;
  }

  f.members = "  uint M;\n  uint N;\n  uint K;\n  uint batches;\n  uint kchunk;\n  uint kchunks;\n"
              "  uint tiles_m;\n  uint tiles_n;\n";
  for (int d = 0; d < g.batch_dims; ++d) {
    const std::string ds = std::to_string(d);
    f.members += "  uint bx" + ds + ";\n  uint ba" + ds + ";\n  int bb" + ds + ";\n";
  }
  f.param_members = "  uint boff;\n  int bsk;\n  int bsn;\n";

  std::string& h = f.hooks;
  h += "// batch bo: a's first position, b's first element\n";
  h += "void kiln_batch(uint bo, out uint apos, out uint belem) {\n  uint rest = bo;\n  apos = 0u;\n  int be = int(p.boff);\n";
  for (int d = g.batch_dims - 1; d >= 0; --d) {
    const std::string ds = std::to_string(d);
    h += "  { uint i = rest % p.bx" + ds + "; rest /= p.bx" + ds + "; apos += i * p.ba" + ds + "; be += int(i) * p.bb" + ds +
         "; }\n";
  }
  h += "  belem = uint(be);\n}\n";
  h += "float kiln_b(uint e) { return " + load(b, "e") + "; }\n";
  if ((g.b4n || g.b4k) && b.type == dtype::f16) {
    h += "vec4 kiln_b_vec4(uint e) {\n  uvec2 u = kiln_b" + std::to_string(b.binding) +
         "_u2[e >> 2];\n  return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));\n}\n";
  } else if ((g.b4n || g.b4k) && b.type == dtype::bf16) {
    h += "vec4 kiln_b_vec4(uint e) {\n  uvec2 u = kiln_b" + std::to_string(b.binding) +
         "_u2[e >> 2];\n  return vec4(uintBitsToFloat(u.x << 16), uintBitsToFloat(u.x & 0xffff0000u), "
         "uintBitsToFloat(u.y << 16), uintBitsToFloat(u.y & 0xffff0000u));\n}\n";
  } else if (g.b4n || g.b4k) {
    h += "vec4 kiln_b_vec4(uint e) { return kiln_b" + std::to_string(b.binding) + "_v4[e >> 2]; }\n";
  }
  if (g.a4_direct) {
    h += "vec4 kiln_a_vec4(uint pos) { return kiln_b" + std::to_string(ab) + "_v4[(p.ioff1 + pos) >> 2]; }\n";
  } else {
    h += "vec4 kiln_a_vec4(uint pos) {\n  return vec4(kiln_prologue(pos), kiln_prologue(pos + 1u), kiln_prologue(pos + 2u), "
         "kiln_prologue(pos + 3u));\n}\n";
  }
  return f;
}

/// A statement's matmul kernel: one source, or split-K's two; parameters (both take the
/// same), workgroups and specialisation constants of each.
struct gemm_kernel {
  const structural_source* first = nullptr;
  const structural_source* second = nullptr;  // split-K's merge
  gemm_choice choice;
  std::vector<std::uint32_t> push;
  std::vector<std::uint32_t> first_constants, second_constants;
  std::uint32_t first_wg = 0, second_wg = 0;
  std::uint64_t first_tasks = 0, second_tasks = 0;
  std::uint64_t partials = 0;  // split-K: floats of partial sums
  bool empty = false;          // no output element: nothing to dispatch
};

/// The source of a matmul kernel under plan g, once per process per (T, N, plan).
template <class T, class N, class S>
const structural_source& cached_gemm_source(const N& n, const S& s, const gemm_plan& g, std::string_view tmpl) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::unique_ptr<const structural_source>> sources;
  std::string key = gemm_plan_key(g);
  std::lock_guard lock(mutex);
  if (auto it = sources.find(key); it != sources.end()) return *it->second;
  emitter pro(g.base.in), epi(g.base.out);
  std::string pro_result, epi_result, readable;
  emit_structural_hooks(n, s, pro, epi, pro_result, epi_result, readable);
  const std::string_view result_type = glsl_compute_type<typename S::value_type>();
  auto src = std::make_unique<structural_source>(
      assemble_structural(g.base, pro, pro_result, epi, epi_result, glsl_compute_type<typename N::value_type>(),
                          result_type, gemm_family_text(g, result_type), std::move(readable), {tmpl}));
  src->name = structural_kernel_name("matmul", src->glsl);
  return *sources.emplace(std::move(key), std::move(src)).first->second;
}

/// The forced variant (KILN_VULKAN_GEMM), or "".
inline std::string_view forced_gemm() {
  const char* v = std::getenv("KILN_VULKAN_GEMM");
  return v ? std::string_view(v) : std::string_view();
}

/// b's k and n strides, in elements (a 1-D b: [K], n stride 0).
template <class Bt>
void gemm_b_strides(const Bt& b, const matmul_dims& d, index_t& bsk, index_t& bsn) {
  const int r = b.rank();
  if (d.b_vector) {
    bsk = b.strides()[0];
    bsn = 0;
  } else {
    bsk = b.strides()[r - 2];
    bsn = b.strides()[r - 1];
  }
}

/// The variant a matmul node s runs on a device dev (shared by recording and
/// kiln::kernel_variant).
template <class S>
gemm_choice gemm_choice_of(const S& s, const gemm_device& dev) {
  const matmul_dims d = matmul_dims_of(s);
  const auto& b = std::get<0>(s.params).t;
  index_t bsk = 0, bsn = 0;
  gemm_b_strides(b, d, bsk, bsn);
  return select_gemm(d, bsk, bsn, dev, forced_gemm(),
                     "kiln::matmul: a is " + s.arg.describe() + ", b is " + b.describe());
}

/// Plans and generates the matmul kernel of `out = n` (a planned tree whose structural
/// node is a matmul). templates: kernels/gemm/{naive,tiled,matvec,merge}.comp. Throws
/// kiln::shape_error where positions pass the kernels' 32-bit indexing, kiln::device_error
/// where no variant fits the device.
template <class T, class B, class N>
gemm_kernel make_gemm_kernel(const tensor<T, B>& out, const N& n, const gemm_device& dev, std::uint32_t max_push_bytes,
                             std::string_view naive_glsl, std::string_view tiled_glsl, std::string_view matvec_glsl,
                             std::string_view merge_glsl) {
  using namespace structural_detail;
  using gemm_detail::ceil_div;
  const auto& s = find_structural(n);
  constexpr std::size_t LI = leaf_count_v<decltype(s.arg)>, LO = leaf_count_v<N>;
  const auto& b = std::get<0>(s.params).t;
  using BT = typename std::remove_cvref_t<decltype(b)>::value_type;
  const matmul_dims d = matmul_dims_of(s);
  const std::string what = "kiln::matmul: a is " + s.arg.describe() + ", b is " + b.describe();

  gemm_kernel kn;
  kn.choice = gemm_choice_of(s, dev);
  const gemm_choice& c = kn.choice;
  const std::uint64_t outputs = std::uint64_t(d.batches()) * std::uint64_t(d.M) * std::uint64_t(d.N);
  if (outputs == 0) {
    kn.empty = true;
    return kn;
  }
  const std::uint64_t a_positions = std::uint64_t(s.input_shape.numel());
  if (outputs > UINT32_MAX || a_positions > UINT32_MAX ||
      (c.kind == gemm_kind::splitk && outputs * c.splits > UINT32_MAX)) {
    throw shape_error(what + ": more than 2^32 - 1 elements, past the 32-bit indexing of the Vulkan matmul kernels; "
                             "split the batch");
  }
  index_t bsk = 0, bsn = 0;
  gemm_b_strides(b, d, bsk, bsn);

  const auto in_lay = make_input_layout(s.input_shape, s.arg);
  const auto out_lay = make_layout(out, n);
  const auto ops = gather_operands(out, n, s);

  gemm_plan g;
  g.kind = c.kind;
  g.columns = c.kind == gemm_kind::matvec && c.columns;
  binder bind;
  plan_operands(g.base, ops, in_lay, out_lay, bind);
  g.base.acc_float = true;
  g.base.params.push_back(operand_plan{dtype_traits<BT>::value, bind(b.storage().get()), access::strided, -1});
  g.base.bindings = static_cast<std::uint32_t>(bind.storages.size());

  // batch dimensions of the result with extent > 1: a's position stride, b's element stride
  struct bdim {
    index_t extent, a, b;
  };
  std::vector<bdim> bd;
  {
    const kiln::shape& as = s.input_shape;
    const int ra = d.a_vector ? 0 : as.rank() - 2, rb = d.b_vector ? 0 : b.rank() - 2, r = d.batch.rank();
    index_t apos_stride = d.M * d.K;
    std::vector<index_t> astr(static_cast<std::size_t>(r), 0);
    for (int i = r - 1; i >= 0; --i) {  // a's own batch dims, innermost first
      const int ia = i - (r - ra);
      if (ia < 0) break;
      astr[static_cast<std::size_t>(i)] = as[ia] == 1 ? 0 : apos_stride;
      apos_stride *= as[ia];
    }
    for (int i = 0; i < r; ++i) {
      if (d.batch[i] == 1) continue;
      const int ib = i - (r - rb);
      const index_t bs = ib >= 0 && b.shape()[ib] != 1 ? b.strides()[ib] : 0;
      bd.push_back({d.batch[i], astr[static_cast<std::size_t>(i)], bs});
    }
  }
  g.batch_dims = static_cast<int>(bd.size());

  // vec4 paths
  // f32, or f16/bf16 read four at a time as one uvec2 (8-byte aligned like a vec4's 16)
  constexpr bool b_vec = std::is_same_v<BT, float> || std::is_same_v<BT, half> || std::is_same_v<BT, bfloat16>;
  bool b_aligned = b.offset() % 4 == 0;
  for (const bdim& x : bd) b_aligned = b_aligned && x.b % 4 == 0;
  g.a4 = d.K % 4 == 0 && c.kind != gemm_kind::naive;
  if constexpr (LI == 1) {
    using A0 = typename std::remove_cvref_t<decltype(s.arg)>;
    if constexpr (kind_of_v<A0> == node_kind::leaf) {
      g.a4_direct = g.a4 && std::is_same_v<typename A0::value_type, float> && g.base.in.operands[1].how == access::linear &&
                    s.arg.t.offset() % 4 == 0;
    }
  }
  if (c.kind != gemm_kind::naive && b_vec && b_aligned) {
    const bool n4 = bsn == 1 && d.N % 4 == 0 && bsk % 4 == 0;
    const bool k4 = bsk == 1 && d.K % 4 == 0 && (bsn % 4 == 0 || d.N == 1);
    if (c.kind == gemm_kind::matvec) {
      if (c.columns) g.b4n = n4;
      else g.b4k = k4 && g.a4;  // the k-reduce loop reads a and b four k at a time together
    } else {
      g.b4n = n4;
      g.b4k = !n4 && k4;
    }
  }
  g.subgroup = c.kind == gemm_kind::matvec && !c.columns && dev.subgroup > 1 && c.wg % dev.subgroup == 0;

  // geometry
  std::uint64_t tiles_m = 1, tiles_n = 1, kchunk = std::uint64_t(d.K), kchunks = 1;
  switch (c.kind) {
    case gemm_kind::naive:
    case gemm_kind::tiled:
    case gemm_kind::splitk:
      tiles_m = ceil_div(d.M, c.bm);
      tiles_n = ceil_div(d.N, c.bn);
      break;
    case gemm_kind::matvec:
      tiles_m = ceil_div(d.M, c.mr);
      tiles_n = ceil_div(d.N, c.columns ? c.gx * 4 : c.nr);
      break;
  }
  if (c.kind == gemm_kind::splitk) {  // always two dispatches, whatever K (c.splits chunks, maybe 1)
    kchunk = c.kchunk;
    kchunks = c.splits;
  }
  const std::uint64_t tasks = std::uint64_t(d.batches()) * kchunks * tiles_m * tiles_n;
  if (tasks > UINT32_MAX) throw shape_error(what + ": more workgroups than 32-bit task numbers name; split the batch");

  // parameters: members, the input's, b's (param_members), the output's and the scalars
  std::vector<std::uint32_t>& w = kn.push;
  word(w, d.M, "M");
  word(w, d.N, "N");
  word(w, d.K, "K");
  word(w, d.batches(), "batch count");
  word(w, index_t(kchunk), "K chunk");
  word(w, index_t(kchunks), "K chunk count");
  word(w, index_t(tiles_m), "tile rows");
  word(w, index_t(tiles_n), "tile columns");
  const auto sword = [&](index_t v, const char* what_) {
    if (v < INT32_MIN || v > INT32_MAX) word(w, index_t(UINT32_MAX) + 1, what_);
    w.push_back(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)));
  };
  for (const bdim& x : bd) {
    word(w, x.extent, "batch extent");
    word(w, x.a, "batch stride");
    sword(x.b, "stride");
  }
  input_words<LI>(w, ops.in, in_lay, g.base.in);
  word(w, b.offset(), "element offset");
  sword(bsk, "stride");
  sword(bsn, "stride");
  [[maybe_unused]] const std::size_t scalars = output_words<LO>(w, ops.out, out_lay, g.base.out, n, s);
  g.base.params_buffer = max_push_bytes && w.size() * 4 > max_push_bytes;

  const std::string_view tmpl = c.kind == gemm_kind::naive    ? naive_glsl
                                : c.kind == gemm_kind::matvec ? matvec_glsl
                                                              : tiled_glsl;
  kn.first_constants = c.constants();
  kn.first_wg = c.wg;
  kn.first_tasks = tasks;
  if (c.kind == gemm_kind::splitk) {
    g.phase = 1;
    kn.first = &cached_gemm_source<T>(n, s, g, tmpl);
    g.phase = 2;
    kn.second = &cached_gemm_source<T>(n, s, g, merge_glsl);
    kn.second_wg = gemm_detail::pow2_at_most(std::min<std::uint32_t>({256u, dev.max_invocations, dev.max_wg_x}));
    kn.second_constants = {kn.second_wg};
    kn.second_tasks = ceil_div(outputs, kn.second_wg);
    kn.partials = outputs * kchunks;
  } else {
    kn.first = &cached_gemm_source<T>(n, s, g, tmpl);
  }
  return kn;
}

}  // namespace kiln::detail::vk
