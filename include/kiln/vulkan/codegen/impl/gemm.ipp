// kiln/vulkan/codegen/impl/gemm.ipp — definitions of kiln/vulkan/codegen/gemm.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/codegen/gemm.hpp"

namespace kiln::detail::vk {

KILN_DECL std::uint32_t gemm_choice::shared_bytes() const {
  switch (kind) {
    case gemm_kind::naive: return 2 * bm * bm * 4;
    case gemm_kind::tiled:
    case gemm_kind::splitk: return bk * (bm + bn) * 4;
    case gemm_kind::matvec: return columns ? wg * mr * 16 : wg * mr * nr * 4;
    case gemm_kind::coopmat:  // f16 tiles of a ([m][k]) and b ([n][k] or [k][n]), rows padded by 8; a tile per subgroup
      return 2 * (bm * (bk + 8) + std::max(bn * (bk + 8), bk * (bn + 8))) + sgm * sgn * cm_m * cm_n * 4;
  }
  return 0;
}

KILN_DECL std::vector<std::uint32_t> gemm_choice::constants() const {
  switch (kind) {
    case gemm_kind::naive: return {wg, bm};
    case gemm_kind::tiled:
    case gemm_kind::splitk: return {wg, bm, bn, bk, tm, tn};
    case gemm_kind::matvec: return {wg, columns ? gx : nr, mr};
    case gemm_kind::coopmat: return {wg};  // the sizes are in the source (gemm_plan::coopmat)
  }
  return {};
}

KILN_DECL std::string gemm_choice::name() const {
  const std::string tile = std::to_string(bm) + "x" + std::to_string(bn);
  switch (kind) {
    case gemm_kind::naive: return "vulkan.gemm.naive " + tile;
    case gemm_kind::tiled: return "vulkan.gemm.tiled " + tile;
    case gemm_kind::splitk: return "vulkan.gemm.splitk " + std::to_string(splits) + " " + tile + " (2 dispatches)";
    case gemm_kind::matvec: return std::string("vulkan.gemm.matvec ") + (columns ? "n-columns" : "k-reduce");
    case gemm_kind::coopmat:
      return "vulkan.gemm.coopmat " + tile + " (" + std::to_string(cm_m) + "x" + std::to_string(cm_n) + "x" +
             std::to_string(cm_k) + " f16, " + std::to_string(sgm * sgn) + " subgroups)";
  }
  return {};
}

namespace gemm_detail {

KILN_DECL std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

KILN_DECL std::uint64_t splitk_chunk(index_t K, std::uint64_t want, std::uint32_t bk) {
  const std::uint64_t k = std::max<std::uint64_t>(std::uint64_t(K), 1);
  return ceil_div(ceil_div(k, want), bk) * bk;
}

}  // namespace gemm_detail

KILN_DECL std::array<std::uint32_t, 5> parse_gemm_tile(std::string_view v, std::string_view env, std::string_view form) {
  std::array<std::uint32_t, 5> z{};
  std::size_t i = 0;
  for (std::size_t f = 0; f < z.size(); ++f) {
    const std::size_t start = i;
    std::uint64_t n = 0;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9' && n < 65536) n = n * 10 + std::uint64_t(v[i++] - '0');
    const char sep = f == 2 ? '/' : f == 4 ? '\0' : 'x';
    const bool ends = f == 4 ? i == v.size() : i < v.size() && v[i] == sep;
    if (i == start || n == 0 || n >= 65536 || !ends) {
      throw error("kiln::vulkan: " + std::string(env) + "='" + std::string(v) + "' is not " + std::string(form) +
                  " (positive whole numbers)");
    }
    z[f] = static_cast<std::uint32_t>(n);
    if (f < 4) ++i;
  }
  return z;
}

KILN_DECL gemm_choice select_gemm(const matmul_dims& d, index_t bsk, index_t bsn, const device_caps& dev,
                                  std::string_view forced, const std::string& what, bool f16_operands) {
  using namespace gemm_detail;
  const std::uint32_t max_wg = dev.workgroup_limit();
  const std::uint32_t sg = dev.arithmetic_subgroup();  // coopmat: subgroups of this size
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
    if (const char* tile = std::getenv("KILN_VULKAN_TILED_TILE"); tile && *tile) {
      // "BMxBNxBK/TMxTN" (measurements: scripts/gpu_check.sh's sweep)
      const auto z = parse_gemm_tile(tile, "KILN_VULKAN_TILED_TILE", "BMxBNxBK/TMxTN, e.g. 64x64x16/4x4");
      const sizes w = {z[0], z[1], z[2], z[3], z[4]};
      const bool shape = w[3] % 4 == 0 && w[4] % 4 == 0 && w[0] % w[3] == 0 && w[1] % w[4] == 0 && w[0] % 4 == 0 &&
                         w[1] % 4 == 0 && w[2] % 4 == 0;
      if (shape && at(w)) return c;
      throw device_error(what + ": KILN_VULKAN_TILED_TILE='" + tile + "' does not fit the device: TM and TN multiples of 4 " +
                         "dividing BM and BN, BK a multiple of 4, within " + std::to_string(max_wg) + " invocations (it needs " +
                         std::to_string(shape ? c.wg : 0) + ") and " + std::to_string(dev.shared_bytes) +
                         " bytes of shared memory (it needs " + std::to_string(shape ? c.shared_bytes() : 0) + ")");
    }
    if (dev.cpu) {
      for (std::size_t i = small ? 2 : big_tiles ? 0 : 1; i < std::size(cpu); ++i)
        if (at(cpu[i])) return c;
    } else {
      // large products: 128 x 64 tiles of 8 x 4 (H200, f32 4096^3: 30.7 TFLOP/s against
      // 26.2 for 64 x 64 of 4 x 4, 28.3 for 128 x 128 of 8 x 8; docs/bench/gpu-nvidia-h200.md)
      static constexpr sizes large = {128, 64, 16, 8, 4};
      const bool many = ceil_div(d.M, 128) * ceil_div(d.N, 64) * std::uint64_t(d.batches()) >= 1024;
      if (!small && many && at(large)) return c;
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
  else if (forced == "coopmat") kind = gemm_kind::coopmat;
  else if (!forced.empty()) {
    throw device_error(what + ": KILN_VULKAN_GEMM is '" + std::string(forced) +
                       "'; it must be naive, tiled, matvec, splitk or coopmat (or unset: chosen by shape)");
  } else if (d.M <= 4) {
    kind = gemm_kind::matvec;
  } else {
    const std::uint64_t tiles32 = ceil_div(d.M, 32) * ceil_div(d.N, 32) * std::uint64_t(d.batches());
    kind = tiles32 <= 4 && d.K >= 2048                    ? gemm_kind::splitk
           : f16_operands && dev.cm_m && sg > 0 ? gemm_kind::coopmat
                                                           : gemm_kind::tiled;
  }

  if (kind == gemm_kind::coopmat) {
    if (!f16_operands || !dev.cm_m || !sg) {
      throw device_error(what + ": KILN_VULKAN_GEMM=coopmat needs f16 a and b and a device with cooperative matrices "
                                "(VK_NV_cooperative_matrix reporting f16 x f16 + f32, on kiln's allow-list)" +
                         (f16_operands ? "; this device has none" : ""));
    }
    // {BM, BN, BK, SGM, SGN}: 128 x 128 tiles of 2 x 2 subgroups once there are enough of
    // them to fill a GPU, else 64 x 64 (each subgroup's block a whole number of matrices)
    static constexpr std::uint32_t sizes[][5] = {{128, 128, 32, 2, 2}, {64, 64, 32, 2, 2}};
    const bool big = ceil_div(d.M, 128) * ceil_div(d.N, 128) * std::uint64_t(d.batches()) >= 64;
    gemm_choice c;
    c.kind = kind;
    c.cm_m = dev.cm_m;
    c.cm_n = dev.cm_n;
    c.cm_k = dev.cm_k;
    c.subgroup = sg;
    if (const char* tile = std::getenv("KILN_VULKAN_COOPMAT_TILE"); tile && *tile) {
      // "BMxBNxBK/SGMxSGN" (measurements: scripts/gpu_check.sh's sweep)
      const auto z = parse_gemm_tile(tile, "KILN_VULKAN_COOPMAT_TILE", "BMxBNxBK/SGMxSGN, e.g. 128x128x32/2x2");
      c.bm = z[0];
      c.bn = z[1];
      c.bk = z[2];
      c.sgm = z[3];
      c.sgn = z[4];
      c.wg = c.sgm * c.sgn * sg;
      if ((c.bm / c.sgm) % c.cm_m == 0 && (c.bn / c.sgn) % c.cm_n == 0 && c.bk % c.cm_k == 0 && fits(c)) return c;
      throw device_error(what + ": KILN_VULKAN_COOPMAT_TILE='" + tile + "' does not fit the device: each subgroup's block (" +
                         std::to_string(c.bm / c.sgm) + " x " + std::to_string(c.bn / c.sgn) +
                         ") must be whole " + std::to_string(c.cm_m) + " x " + std::to_string(c.cm_n) +
                         " matrices and BK a multiple of " + std::to_string(c.cm_k) + ", within " + std::to_string(max_wg) +
                         " invocations (it needs " + std::to_string(c.wg) + ") and " + std::to_string(dev.shared_bytes) +
                         " bytes of shared memory (it needs " + std::to_string(c.shared_bytes()) + ")");
    }
    for (std::size_t i = big ? 0 : 1; i < std::size(sizes); ++i) {
      const auto& z = sizes[i];
      c.bm = z[0];
      c.bn = z[1];
      c.bk = z[2];
      c.sgm = z[3];
      c.sgn = z[4];
      c.wg = c.sgm * c.sgn * sg;
      if ((c.bm / c.sgm) % c.cm_m == 0 && (c.bn / c.sgn) % c.cm_n == 0 && c.bk % c.cm_k == 0 && fits(c)) return c;
    }
    return fail("cooperative-matrix", c);
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
  for (std::uint32_t wg = pow2_floor(std::min<std::uint32_t>(max_wg, c.columns ? 256 : 128)); wg >= 1; wg /= 2) {
    c.wg = wg;
    c.nr = 4;
    c.gx = std::min<std::uint32_t>(wg, 64);
    if (fits(c)) return c;
    if (wg == 1) break;
  }
  return fail("matrix-vector", c);
}

KILN_DECL std::string gemm_plan_key(const gemm_plan& g) {
  std::string k = structural_plan_key(g.base);
  k += '|';
  k += static_cast<char>(g.kind);
  k += static_cast<char>(g.columns | g.a4 << 1 | g.a4_direct << 2 | g.b4n << 3 | g.b4k << 4 | g.subgroup << 5 |
                          g.a4_half << 6);
  k += static_cast<char>(g.phase);
  k += static_cast<char>(g.batch_dims);
  for (std::uint16_t v : g.coopmat) k += std::to_string(v) + ',';
  return k;
}

KILN_DECL structural_family_text gemm_family_text(const gemm_plan& g, std::string_view result_type) {
  using structural_text::load;
  const structural_plan& sp = g.base;
  structural_family_text f;
  static constexpr const char* kinds[] = {"", "naive", "tiled", "matvec", "splitk", "coopmat"};
  f.comment = std::string("// gemm ") + kinds[static_cast<int>(g.kind)] + (g.columns ? " columns" : "") + ", phase " +
              std::to_string(g.phase) + (g.a4_half ? ", uvec2 a" : g.a4_direct ? ", vec4 a" : g.a4 ? ", a by fours" : "") +
              (g.b4n ? ", vec4 b along n" : g.b4k ? ", vec4 b along k" : "") +
              (sp.params_buffer ? "; parameter buffer" : "") +
              (g.kind == gemm_kind::coopmat ? "; sizes are #defines\n" : "; sizes are specialisation constants\n");
  if (g.kind == gemm_kind::tiled || g.kind == gemm_kind::splitk || g.kind == gemm_kind::coopmat) {
    f.extensions += "#extension GL_EXT_control_flow_attributes : require\n";  // [[unroll]]
  }
  if (g.kind == gemm_kind::coopmat) {
    f.extensions += "#extension GL_NV_cooperative_matrix : require\n";
    f.extensions += "#extension GL_KHR_memory_scope_semantics : require\n";
    f.extensions += "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n";
    f.extensions += "#extension GL_KHR_shader_subgroup_basic : require\n";
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
  if (g.kind == gemm_kind::coopmat) {
    static constexpr const char* names[] = {"KILN_BM", "KILN_BN", "KILN_BK", "KILN_SGM", "KILN_SGN", "KILN_CM", "KILN_CN", "KILN_CK"};
    for (std::size_t i = 0; i < g.coopmat.size(); ++i) def(names[i], std::to_string(g.coopmat[i]) + "u");
    def("KILN_CM_BT", g.b4n ? "0" : "1");  // b staged [n][k] unless it is read four n at a time
  }

  const operand_plan& b = sp.params[0];
  const std::uint32_t ab = g.a4_direct ? sp.in.operands[1].binding : UINT32_MAX;
  auto alias = [&](std::uint32_t binding) {
    const std::string bs = std::to_string(binding);
    f.buffers += "layout(std430, set = 0, binding = " + bs + ") readonly buffer kiln_buf" + bs + "_v4 { vec4 kiln_b" + bs +
                 "_v4[]; };\n";
  };
  auto alias_u2 = [&](std::uint32_t binding) {  // four 16-bit elements as one uvec2
    const std::string bs = std::to_string(binding);
    f.buffers += "layout(std430, set = 0, binding = " + bs + ") readonly buffer kiln_buf" + bs + "_u2 { uvec2 kiln_b" + bs +
                 "_u2[]; };\n";
  };
  if (g.a4_direct) g.a4_half ? alias_u2(ab) : alias(ab);
  const bool b16 = b.type == dtype::f16 || b.type == dtype::bf16;
  if ((g.b4n || g.b4k) && b16) {  // unpacked in kiln_b_vec4
    if (!(g.a4_half && b.binding == ab)) alias_u2(b.binding);
  } else if ((g.b4n || g.b4k) && b.binding != ab) {
    alias(b.binding);
  }
  if (g.phase) {
    f.buffers += "layout(std430, set = 0, binding = " + std::to_string(sp.bindings) + ") " +
                 (g.phase == 1 ? "writeonly " : "readonly ") + "buffer kiln_partial_buf { float kiln_partial[]; };\n";
    f.extra_bindings = 1;
  }

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
  if (g.a4_half) {
    h += "vec4 kiln_a_vec4(uint pos) {\n  uvec2 u = kiln_b" + std::to_string(ab) +
         "_u2[(p.ioff1 + pos) >> 2];\n  return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));\n}\n";
  } else if (g.a4_direct) {
    h += "vec4 kiln_a_vec4(uint pos) { return kiln_b" + std::to_string(ab) + "_v4[(p.ioff1 + pos) >> 2]; }\n";
  } else {
    h += "vec4 kiln_a_vec4(uint pos) {\n  return vec4(kiln_prologue(pos), kiln_prologue(pos + 1u), kiln_prologue(pos + 2u), "
         "kiln_prologue(pos + 3u));\n}\n";
  }
  return f;
}

KILN_DECL std::string_view forced_gemm() {
  const char* v = std::getenv("KILN_VULKAN_GEMM");
  return v ? std::string_view(v) : std::string_view();
}

}  // namespace kiln::detail::vk
