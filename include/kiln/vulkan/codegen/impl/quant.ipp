// kiln/vulkan/codegen/impl/quant.ipp — definitions of kiln/vulkan/codegen/quant.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/codegen/quant.hpp"

namespace kiln::detail::vk {

KILN_DECL quant_forcing parse_quant_forcing(std::string_view v) {
  quant_forcing f;
  auto bad = [&](std::string_view why) {
    return error("kiln::vulkan: KILN_VULKAN_QUANT='" + std::string(v) + "': " + std::string(why) +
                 " (words: matvec, split, tiled, tiled gpu, tiled cpu; dot or plain)");
  };
  std::size_t i = 0;
  while (i < v.size()) {
    if (v[i] == ' ') {
      ++i;
      continue;
    }
    const std::size_t end = std::min(v.find(' ', i), v.size());
    const std::string_view w = v.substr(i, end - i);
    i = end;
    if (w == "matvec" || w == "tiled" || w == "split") {
      if (f.kernel != quant_force::none) throw bad("two kernels");
      f.kernel = w == "matvec" ? quant_force::matvec : w == "split" ? quant_force::split : quant_force::tiled;
    } else if (w == "gpu" || w == "cpu") {
      if (f.kernel != quant_force::tiled) throw bad("'" + std::string(w) + "' follows 'tiled' only");
      f.kernel = w == "gpu" ? quant_force::tiled_gpu : quant_force::tiled_cpu;
    } else if (w == "dot" || w == "plain") {
      if (f.dot) throw bad("two kinds of arithmetic");
      f.dot = w == "dot";
    } else {
      throw bad("unknown word '" + std::string(w) + "'");
    }
  }
  return f;
}

KILN_DECL quant_forcing forced_quant() {
  const char* v = std::getenv("KILN_VULKAN_QUANT");
  return v ? parse_quant_forcing(v) : quant_forcing{};
}

KILN_DECL std::uint32_t quant_choice::shared_bytes(int bits) const {
  if (kind == quant_kind::matvec) return seg + wg * 8 + (lanes ? wg / lanes * groups * 4 : 0);
  if (kind == quant_kind::tiled) {
    return bm * (bk / 4 + 1) * 4 + bn * (bk * std::uint32_t(bits) / 128 + 1) * 16 + wg * 8 + bm * 8;
  }
  return 0;
}

KILN_DECL std::vector<std::uint32_t> quant_choice::constants() const {
  if (kind == quant_kind::tiled) return {wg, bm, bn, bk, tm, tn};
  if (lanes) return {wg, seg, lanes, groups};
  return {wg, seg, nc};
}

KILN_DECL std::string quant_choice::name() const {
  const char* arith = dot ? " dot4x8" : "";
  switch (kind) {
    case quant_kind::pack: return "vulkan.quant.pack";
    case quant_kind::dequantize: return "vulkan.quant.dequantize";
    case quant_kind::matvec: return std::string("vulkan.quant.matvec") + (lanes ? " split" : "") + arith;
    case quant_kind::tiled: return std::string("vulkan.quant.tiled") + arith;
  }
  return {};
}

namespace quant_detail {

KILN_DECL bool tiled_quant_sizes(quant_choice& c, index_t M, index_t K, int bits, const device_caps& dev) {
  c.tm = c.tn = dev.cpu ? 8 : 4;
  c.bn = dev.cpu ? 128 : 64;
  c.bm = 8;
  while (c.bm < 64 && index_t(c.bm) < M) c.bm *= 2;
  const std::uint32_t budget = std::min<std::uint32_t>(dev.shared_bytes, 32768);
  const auto kmax = static_cast<std::uint32_t>(std::min<std::uint64_t>((std::uint64_t(std::max<index_t>(K, 1)) + 127) / 128 * 128, 512));
  const auto fits = [&](const quant_choice& t) { return t.shared_bytes(bits) <= budget; };
  for (;;) {
    c.wg = (c.bm / c.tm) * (c.bn / c.tn);
    c.bk = 128;
    for (quant_choice t = c; t.bk * 2 <= kmax && (t.bk *= 2, fits(t));) c.bk = t.bk;
    if (c.wg >= c.bm && c.wg <= dev.workgroup_limit() && fits(c)) return true;
    if (c.bn / c.tn > c.tm && c.bn >= c.bm) c.bn /= 2;  // keeps wg >= bm: bn / tn >= tm
    else if (c.bm > c.tm) c.bm /= 2;
    else return false;
  }
}

}  // namespace quant_detail

KILN_DECL quant_choice select_quant(quant_kind kind, index_t K, const device_caps& dev, const std::string& what,
                                    index_t N, index_t M, int bits, quant_forcing forced, index_t group) {
  quant_choice c;
  c.kind = kind;
  const quant_force force = forced.kernel;
  if (kind == quant_kind::matvec) {
    if (forced.dot.value_or(false) && !dev.dot) {
      throw shader_error(what + ": KILN_VULKAN_QUANT asks for integer dot products, which the device does not have "
                                "(shaderIntegerDotProduct)");
    }
    c.dot = dev.dot && forced.dot.value_or(dev.dot_fast);
  }
  if (kind == quant_kind::matvec && force != quant_force::matvec && force != quant_force::split &&
      (M > quant_matvec_rows || force != quant_force::none)) {
    device_caps d = dev;
    if (force == quant_force::tiled_gpu || force == quant_force::tiled_cpu) d.cpu = force == quant_force::tiled_cpu;
    quant_choice t = c;
    t.kind = quant_kind::tiled;
    t.qf = d.cpu && !t.dot;
    if (quant_detail::tiled_quant_sizes(t, M, K, bits, d)) return t;
  }
  c.wg = pow2_floor(std::clamp<std::uint32_t>(dev.workgroup_limit(), 1, kind == quant_kind::matvec ? 64 : 128));
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
  // GPUs: K split over up to 32 invocations a column, 256 a workgroup, where the whole row
  // of x and the columns' group sums fit (fewer columns a workgroup while they do not)
  if ((!dev.cpu && force == quant_force::none) || force == quant_force::split) {
    const std::uint64_t chunk = 32u * (8u / std::uint64_t(bits));
    const std::uint64_t chunks = (std::uint64_t(std::max<index_t>(K, 1)) + chunk - 1) / chunk;
    const std::uint64_t g = group > 0 && group < K ? (std::uint64_t(K) + std::uint64_t(group) - 1) / std::uint64_t(group) : 1;
    quant_choice t = c;
    t.wg = pow2_floor(std::clamp<std::uint32_t>(dev.workgroup_limit(), 1, 256));
    t.lanes = 1;
    while (t.lanes < 32 && t.lanes < t.wg && t.lanes < chunks) t.lanes *= 2;
    t.seg = static_cast<std::uint32_t>(row);
    t.groups = static_cast<std::uint32_t>(std::min<std::uint64_t>(g, UINT32_MAX));
    t.nc = 1;
    for (; t.wg >= t.lanes; t.wg /= 2) {
      if (row <= (1u << 20) && t.shared_bytes(bits) <= dev.shared_bytes) return t;
    }
    if (force == quant_force::split) {
      throw shader_error(what + ": KILN_VULKAN_QUANT=split needs x's row (" + std::to_string(row) + " bytes) and " +
                         std::to_string(g) + " group sums a column in shared memory; the device's "
                         "maxComputeSharedMemorySize is " + std::to_string(dev.shared_bytes));
    }
  }
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

KILN_DECL std::string quant_plan_key(const quant_plan& q) {
  std::string k = structural_plan_key(q.base);
  k += '|';
  k += static_cast<char>(q.kind);
  k += static_cast<char>(q.bits);
  k += static_cast<char>(q.codes4);
  k += static_cast<char>(q.qf);
  k += static_cast<char>(q.dot);
  return k;
}

KILN_DECL structural_family_text quant_family_text(const quant_plan& q, std::string_view result_type) {
  using structural_text::load;
  const structural_plan& sp = q.base;
  structural_family_text f;
  static constexpr const char* kinds[] = {"", "pack", "dequantize", "matvec", "tiled"};
  const bool product = is_quant_product(q.kind);
  f.comment = std::string("// quant ") + kinds[static_cast<int>(q.kind)] + ", " + std::to_string(q.bits) + "-bit codes" +
              (q.codes4 ? ", uvec4 code reads" : "") + (q.qf ? ", float multiply-adds" : "") +
              (q.dot ? ", packed 4x8-bit dot products" : "") +
              (sp.params_buffer ? "; parameter buffer" : "") +
              "; sizes are specialisation constants\n";
  auto def = [&](std::string_view name, const std::string& v) { f.defines += "#define " + std::string(name) + " " + v + "\n"; };
  if (product) f.extensions += "#extension GL_EXT_control_flow_attributes : require\n";  // [[unroll]]
  // OpSDot through spirv_instruction (common.comp): this glslang (Debian 12's 12.0) has no
  // GL_EXT_integer_dot_product
  if (q.dot) f.extensions += "#extension GL_EXT_spirv_intrinsics : require\n";
  def("KILN_BITS", std::to_string(q.bits));
  if (product) def("KILN_DOT", q.dot ? "1" : "0");
  if (q.kind == quant_kind::tiled) def("KILN_QF", q.qf ? "1" : "0");
  def("KILN_OFFSET", std::to_string(q.offset));
  def("KILN_QMAX", std::to_string(q.qmax));
  def("KILN_RESULT", std::string(result_type));
  const operand_plan& scales = sp.params[product ? 1 : 0];
  if (product) {
    const operand_plan& codes = sp.params[0];
    const std::string cb = std::to_string(codes.binding);
    if (q.codes4) {
      f.buffers = "layout(std430, set = 0, binding = " + cb + ") readonly buffer kiln_buf" + cb + "_u4 { uvec4 kiln_b" + cb +
                  "_u4[]; };\n";
      f.hooks += "uvec4 kiln_code4(uint w) { return kiln_b" + cb + "_u4[(p.coff + w) >> 2]; }\n";
    } else {
      f.hooks += "uvec4 kiln_code4(uint w) {\n  uint e = p.coff + w;\n  return uvec4(uint(" + load(codes, "e") + "), uint(" +
                 load(codes, "e + 1u") + "), uint(" + load(codes, "e + 2u") + "), uint(" + load(codes, "e + 3u") + "));\n}\n";
    }
  }
  f.hooks += "float kiln_scale(uint e) { return " + load(scales, "p.soff + e") + "; }\n";
  return f;
}

}  // namespace kiln::detail::vk
