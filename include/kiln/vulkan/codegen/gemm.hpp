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
//   coopmat f16 a and b on a device with cooperative matrices (GL_NV_cooperative_matrix,
//           a shape the driver reports for f16 x f16 + f32): BM x BN tiles staged in
//           shared memory as f16, each subgroup a (BM / SGM) x (BN / SGN) block of
//           cooperative-matrix products accumulated in f32; the epilogue applied to each
//           accumulator through a per-subgroup shared-memory tile
// Tile and workgroup sizes are specialisation constants (one SPIR-V module per source,
// a pipeline per size); the source depends on the kind, the vec4 paths, the batch rank.
// KILN_VULKAN_GEMM=naive|tiled|matvec|splitk|coopmat forces a variant (tests, benchmarks);
// KILN_VULKAN_COOPMAT_TILE=BMxBNxBK/SGMxSGN the cooperative-matrix kernel's tile and
// KILN_VULKAN_TILED_TILE=BMxBNxBK/TMxTN the tiled kernel's (sweeps).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/ops/linalg/matmul.hpp"
#include "kiln/vulkan/codegen/caps.hpp"
#include "kiln/vulkan/codegen/structural.hpp"

namespace kiln::detail::vk {

enum class gemm_kind : std::uint8_t { naive = 1, tiled = 2, matvec = 3, splitk = 4, coopmat = 5 };

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
  std::uint32_t sgm = 2, sgn = 2;                 // coopmat: subgroups along m and n
  std::uint32_t cm_m = 0, cm_n = 0, cm_k = 0;     // coopmat: the cooperative-matrix shape
  std::uint32_t subgroup = 0;                     // coopmat: invocations per subgroup

  /// Shared memory the kernel declares, in bytes.
  std::uint32_t shared_bytes() const;
  /// Specialisation constants 2, 3, ... of the kernel (see kernels/gemm/*.comp).
  std::vector<std::uint32_t> constants() const;
  std::string name() const;
};

namespace gemm_detail {

KILN_DECL std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b);

/// Split-K's chunk of K (a whole number of bk) for about `want` chunks.
KILN_DECL std::uint64_t splitk_chunk(index_t K, std::uint64_t want, std::uint32_t bk);

}  // namespace gemm_detail

/// The variant for a product of dims d with b's k and n strides on device dev: matvec
/// for M <= 4, split-K for few output tiles over a long K, coopmat where `f16_operands`
/// (a's expression and b are f16) and the device has cooperative matrices, else tiled
/// (64x64, or 32x32 when M or N is small; on a CPU device 128x128 when at least 8 such
/// tiles); `forced` (KILN_VULKAN_GEMM) overrides. `what` names the operands for errors:
/// kiln::device_error when no size of the variant fits the device.
KILN_DECL gemm_choice select_gemm(const matmul_dims& d, index_t bsk, index_t bsn, const device_caps& dev,
                                  std::string_view forced, const std::string& what, bool f16_operands = false);

/// What a matmul kernel is compiled for (sizes are specialisation constants, not here).
struct gemm_plan {
  structural_plan base;  // operands (the prologue's, the epilogue's, b as params[0]), parameter placement
  gemm_kind kind = gemm_kind::tiled;
  bool columns = false;  // matvec over column groups
  std::uint8_t phase = 0;  // split-K: 1 partial sums, 2 the merge
  int batch_dims = 0;    // result batch dimensions of extent > 1
  bool a4 = false;         // K % 4 == 0: a read four k at a time (kiln_a_vec4)
  bool a4_direct = false;  // ... as one vec4 load (a is one contiguous, aligned f32 tensor; or f16: a4_half)
  bool a4_half = false;    // a4_direct over an f16 a: four halves as one uvec2
  bool b4n = false;        // b read four n at a time as one vec4 (n-contiguous, aligned; f16/bf16 as a uvec2)
  bool b4k = false;        // b read four k at a time as one vec4 (k-contiguous, aligned; f16/bf16 as a uvec2)
  bool subgroup = false;   // matvec: subgroupAdd before the shared-memory merge
  /// coopmat: BM, BN, BK, SGM, SGN and the cooperative-matrix m, n, k (the kernel's array
  /// and matrix sizes are compile-time constants, so they are part of the source)
  std::array<std::uint16_t, 8> coopmat{};
};

KILN_DECL std::string gemm_plan_key(const gemm_plan& g);

/// The contract family's part of the generated source: parameters, b's reads, the batch
/// decomposition, vec4 views (a second declaration of a binding: Vulkan lets blocks alias).
KILN_DECL structural_family_text gemm_family_text(const gemm_plan& g, std::string_view result_type);

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

/// The source of a matmul kernel under plan g from template tmpl (cached_family_source).
template <class T, class N, class S>
const structural_source& gemm_source(const N& n, const S& s, const gemm_plan& g, const param_block& params,
                                     std::string_view tmpl) {
  return cached_family_source<T>(n, s, g.base, gemm_plan_key(g), "matmul", params,
                                 [&](std::string_view result_type) { return gemm_family_text(g, result_type); }, {tmpl});
}

/// A tile setting's value "AxBxC/DxE" as {A, B, C, D, E}: KILN_VULKAN_COOPMAT_TILE
/// (BMxBNxBK/SGMxSGN, the cooperative-matrix kernel's) and KILN_VULKAN_TILED_TILE
/// (BMxBNxBK/TMxTN, the tiled kernel's), for every product they apply to (measurements;
/// select_gemm throws kiln::device_error where the tile does not fit the device);
/// kiln::error naming `env` and `form` when malformed.
KILN_DECL std::array<std::uint32_t, 5> parse_gemm_tile(std::string_view v, std::string_view env, std::string_view form);

/// The forced variant (KILN_VULKAN_GEMM), or "".
KILN_DECL std::string_view forced_gemm();

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
gemm_choice gemm_choice_of(const S& s, const device_caps& dev) {
  const matmul_dims d = matmul_dims_of(s);
  const auto& b = std::get<0>(s.params).t;
  index_t bsk = 0, bsn = 0;
  gemm_b_strides(b, d, bsk, bsn);
  using AT = typename std::remove_cvref_t<decltype(s.arg)>::value_type;
  using BT = typename std::remove_cvref_t<decltype(b)>::value_type;
  return select_gemm(d, bsk, bsn, dev, forced_gemm(), "kiln::matmul: a is " + s.arg.describe() + ", b is " + b.describe(),
                     std::is_same_v<AT, half> && std::is_same_v<BT, half>);
}

/// Plans and generates the matmul kernel of `out = n` (a planned tree whose structural
/// node is a matmul). templates: kernels/gemm/{naive,tiled,matvec,merge,coopmat}.comp. Throws
/// kiln::shape_error where positions pass the kernels' 32-bit indexing, kiln::device_error
/// where no variant fits the device.
template <class T, class B, class N>
gemm_kernel make_gemm_kernel(const tensor<T, B>& out, const N& n, const device_caps& dev, std::uint32_t max_push_bytes,
                             std::string_view naive_glsl, std::string_view tiled_glsl, std::string_view matvec_glsl,
                             std::string_view merge_glsl, std::string_view coopmat_glsl) {
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
    throw_index_limit(what, index_limit::elements, "the Vulkan matmul kernels", "the batch");
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
      using AV = typename A0::value_type;
      g.a4_direct = g.a4 && (std::is_same_v<AV, float> || std::is_same_v<AV, half>) &&
                    g.base.in.operands[1].how == access::linear && s.arg.t.offset() % 4 == 0;
      g.a4_half = g.a4_direct && std::is_same_v<AV, half>;
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
  const std::uint32_t sg = dev.arithmetic_subgroup();
  g.subgroup = c.kind == gemm_kind::matvec && !c.columns && sg > 1 && c.wg % sg == 0;

  // geometry
  std::uint64_t tiles_m = 1, tiles_n = 1, kchunk = std::uint64_t(d.K), kchunks = 1;
  switch (c.kind) {
    case gemm_kind::naive:
    case gemm_kind::tiled:
    case gemm_kind::splitk:
    case gemm_kind::coopmat:
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
  if (tasks > UINT32_MAX) throw_index_limit(what, index_limit::workgroups, {}, "the batch");

  // parameters: the geometry, the batch dimensions (bx<d>, ba<d>, bb<d>), the input's, b's, the output's
  param_block pb("the Vulkan matmul kernels");
  pb.u32("M", d.M, "M");
  pb.u32("N", d.N, "N");
  pb.u32("K", d.K, "K");
  pb.u32("batches", d.batches(), "batch count");
  pb.u32("kchunk", index_t(kchunk), "K chunk");
  pb.u32("kchunks", index_t(kchunks), "K chunk count");
  pb.u32("tiles_m", index_t(tiles_m), "tile rows");
  pb.u32("tiles_n", index_t(tiles_n), "tile columns");
  for (int k = 0; k < static_cast<int>(bd.size()); ++k) {
    pb.u32("bx", bd[k].extent, "batch extent", k);
    pb.u32("ba", bd[k].a, "batch stride", k);
    pb.i32("bb", bd[k].b, "stride", k);
  }
  input_params<LI>(pb, ops.in, in_lay, g.base.in);
  pb.u32("boff", b.offset(), "element offset");
  pb.i32("bsk", bsk, "stride");
  pb.i32("bsn", bsn, "stride");
  output_params<LO>(pb, ops.out, out_lay, g.base.out, n, s);
  g.base.params_buffer = max_push_bytes && pb.bytes() > max_push_bytes;

  if (c.kind == gemm_kind::coopmat) {
    g.coopmat = {std::uint16_t(c.bm), std::uint16_t(c.bn),   std::uint16_t(c.bk),   std::uint16_t(c.sgm),
                 std::uint16_t(c.sgn), std::uint16_t(c.cm_m), std::uint16_t(c.cm_n), std::uint16_t(c.cm_k)};
  }
  const std::string_view tmpl = c.kind == gemm_kind::naive     ? naive_glsl
                                : c.kind == gemm_kind::matvec  ? matvec_glsl
                                : c.kind == gemm_kind::coopmat ? coopmat_glsl
                                                               : tiled_glsl;
  kn.first_constants = c.constants();
  kn.first_wg = c.wg;
  kn.first_tasks = tasks;
  if (c.kind == gemm_kind::splitk) {
    g.phase = 1;
    kn.first = &gemm_source<T>(n, s, g, pb, tmpl);
    g.phase = 2;
    kn.second = &gemm_source<T>(n, s, g, pb, merge_glsl);
    kn.second_wg = pow2_floor(std::min<std::uint32_t>({256u, dev.max_invocations, dev.max_wg_x}));
    kn.second_constants = {kn.second_wg};
    kn.second_tasks = ceil_div(outputs, kn.second_wg);
    kn.partials = outputs * kchunks;
  } else {
    kn.first = &gemm_source<T>(n, s, g, pb, tmpl);
  }
  kn.push = pb.take_words();
  return kn;
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/codegen/impl/gemm.ipp"
#endif
