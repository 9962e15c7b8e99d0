// kiln/vulkan/codegen/impl/attention.ipp — definitions of kiln/vulkan/codegen/attention.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/codegen/attention.hpp"

namespace kiln::detail::vk {

KILN_DECL std::uint32_t slice_vec4s(index_t n, std::uint32_t lanes) {
  return static_cast<std::uint32_t>(((n + 3) / 4 + lanes - 1) / lanes);
}

KILN_DECL std::uint32_t attention_choice::bq() const {
  return kind == attention_kind::flash_slices ? wg / lanes : wg * rq;
}

KILN_DECL std::uint32_t attention_choice::shared_bytes(index_t d, index_t dv) const {
  const auto d4 = static_cast<std::uint32_t>((d + 3) / 4), dv4 = static_cast<std::uint32_t>((dv + 3) / 4);
  if (kind == attention_kind::flash) return bkv * (d4 + dv4) * 16;
  if (kind == attention_kind::flash_slices) return bkv * (slice_vec4s(d, lanes) + slice_vec4s(dv, lanes)) * lanes * 16;
  if (kind == attention_kind::flash_lanes) return 0;
  return 2 * wg * 4;
}

KILN_DECL std::vector<std::uint32_t> attention_choice::constants() const {
  if (kind == attention_kind::flash) return {wg, rq, bkv};
  return {wg};  // flash_lanes, flash_slices (its tile is a #define), decode, split
}

KILN_DECL std::string attention_choice::name() const {
  switch (kind) {
    case attention_kind::flash: return "vulkan.attention.flash " + std::to_string(bq()) + "x" + std::to_string(bkv);
    case attention_kind::flash_lanes: return "vulkan.attention.flash_lanes " + std::to_string(wg) + "x" + std::to_string(wg);
    case attention_kind::flash_slices:
      return "vulkan.attention.flash_slices " + std::to_string(bq()) + "x" + std::to_string(bkv) + " (" +
             std::to_string(lanes) + (lanes == 1 ? " invocation a row)" : " invocations a row)");
    case attention_kind::decode: return "vulkan.attention.decode";
    case attention_kind::split: return "vulkan.attention.split " + std::to_string(splits) + " (2 dispatches)";
  }
  return {};
}

KILN_DECL bool attention_lanes_fit(const device_caps& dev) {
  const std::uint32_t sg = dev.arithmetic_subgroup();
  return dev.cpu && sg && dev.subgroup_shuffle && sg >= 4 && sg <= 64 && sg <= dev.workgroup_limit();
}

KILN_DECL bool attention_slices_fit(const device_caps& dev) {
  const std::uint32_t sg = dev.arithmetic_subgroup();
  return sg && dev.subgroup_shuffle && sg >= 1 && sg <= 128 && 128 % sg == 0 && dev.workgroup_limit() >= 128;
}

KILN_DECL attention_choice select_attention(const attention_dims& d, const device_caps& dev, std::string_view forced,
                                            const std::string& what) {
  using gemm_detail::ceil_div;
  const std::uint32_t max_wg = dev.workgroup_limit();
  const std::uint32_t sg = dev.arithmetic_subgroup();
  attention_choice c;
  // "flash_slices:LxBKV" also fixes flash_slices' invocations a row and keys a tile (tuning)
  std::uint32_t want_lanes = 0, want_bkv = 0;
  if (forced.starts_with("flash_slices:")) {
    const std::string_view shape = forced.substr(13);
    const char* const end = shape.data() + shape.size();
    const auto lanes = std::from_chars(shape.data(), end, want_lanes);
    if (lanes.ec != std::errc() || lanes.ptr == end || *lanes.ptr != 'x' ||
        std::from_chars(lanes.ptr + 1, end, want_bkv).ptr != end) {
      want_lanes = want_bkv = 0;  // not LxBKV: refused below
    }
    const auto pow2 = [](std::uint32_t n) { return n != 0 && (n & (n - 1)) == 0; };
    if (!pow2(want_lanes) || want_lanes > 8 || !pow2(want_bkv) || want_bkv < 4 || want_bkv > 128) {
      throw device_error(what + ": KILN_VULKAN_ATTENTION is '" + std::string(forced) +
                         "'; flash_slices:LxBKV needs L in 1, 2, 4, 8 (invocations a row) and BKV a power of 2 "
                         "from 4 to 128 (keys a tile)");
    }
    forced = "flash_slices";
  }
  if (forced == "flash") c.kind = attention_kind::flash;
  else if (forced == "flash_lanes") c.kind = attention_kind::flash_lanes;
  else if (forced == "flash_slices") c.kind = attention_kind::flash_slices;
  else if (forced == "decode") c.kind = attention_kind::decode;
  else if (forced == "split") c.kind = attention_kind::split;
  else if (!forced.empty()) {
    throw device_error(what + ": KILN_VULKAN_ATTENTION is '" + std::string(forced) +
                       "'; it must be flash, flash_lanes, flash_slices, decode or split (or unset: chosen by shape)");
  } else if (d.Sq <= 4) {
    c.kind = attention_kind::decode;
  } else if (attention_lanes_fit(dev)) {
    c.kind = attention_kind::flash_lanes;
  } else if (attention_slices_fit(dev)) {
    c.kind = attention_kind::flash_slices;
  }
  const auto fail = [&](const std::string& kind) -> attention_choice {
    throw device_error(what + ": no " + kind + " attention kernel fits the device (the smallest needs " +
                       std::to_string(c.wg) + " invocations and " + std::to_string(c.shared_bytes(d.D, d.Dv)) +
                       " bytes of shared memory; it allows " + std::to_string(max_wg) +
                       " (maxComputeWorkGroupInvocations / Size[0]) and " + std::to_string(dev.shared_bytes) +
                       " (maxComputeSharedMemorySize))");
  };
  if (c.kind == attention_kind::flash_lanes) {
    if (!attention_lanes_fit(dev)) {
      throw device_error(what + ": KILN_VULKAN_ATTENTION is flash_lanes, which needs a CPU device with subgroup "
                                "shuffles in compute shaders and a subgroup of 4 to 64 invocations");
    }
    c.wg = sg;  // the workgroup is one subgroup: subgroupShuffle reaches every invocation
    c.rq = 1;
    c.bkv = c.wg;
    return c;
  }
  if (c.kind == attention_kind::flash_slices) {
    if (!attention_slices_fit(dev)) {
      throw device_error(what + ": KILN_VULKAN_ATTENTION is flash_slices, which needs subgroup shuffles in compute "
                                "shaders and workgroups of 128 invocations made of whole subgroups");
    }
    c.wg = 128;
    if (want_lanes != 0) {
      c.lanes = want_lanes;
      c.bkv = want_bkv;
      if (c.lanes > sg || c.shared_bytes(d.D, d.Dv) > dev.shared_bytes) return fail("flash_slices");
      return c;
    }
    // the fewest invocations a row (a power of 2, within a subgroup) that leave each at
    // most 16 vec4s of q and of the accumulators (D = 128: 2 a row), and tiles of 16 keys
    // where the tasks fill a GPU several times over (fewer registers: more resident
    // warps), else 32 (fewer barriers a key). On an H200 (B1 S2048 D128 causal f32):
    // H 32 (1024 tasks) 2x16 2.47 ms, 2x32 2.85, 4x32 3.45, 8x32 3.73, 1x32 5.1 (spilled);
    // H 4 (128 tasks) 2x32 0.76 ms, 2x16 1.05, 4x32 0.85.
    const std::uint32_t most = std::min<std::uint32_t>(8, pow2_floor(sg));
    for (c.lanes = 1; c.lanes < most && std::max(slice_vec4s(d.D, c.lanes), slice_vec4s(d.Dv, c.lanes)) > 16;) c.lanes *= 2;
    const std::uint64_t tasks = std::uint64_t(d.B) * std::uint64_t(d.Hq) * ceil_div(std::uint64_t(std::max<index_t>(d.Sq, 1)), c.bq());
    for (c.bkv = tasks >= 512 ? 16 : 32; c.bkv >= 4; c.bkv /= 2)
      if (c.shared_bytes(d.D, d.Dv) <= dev.shared_bytes) return c;
    c.bkv = 4;
    return fail("flash_slices");
  }
  if (c.kind == attention_kind::flash) {
    c.wg = std::min<std::uint32_t>(dev.cpu ? 8 : 64, pow2_floor(max_wg));
    c.rq = dev.cpu ? 4 : 1;
    // registers: at most 256 vec4s of q and accumulators per invocation (D = Dv = 128 x 4 rows)
    const std::uint64_t vecs = std::uint64_t((d.D + 3) / 4 + (d.Dv + 3) / 4);
    while (c.rq > 1 && c.rq * vecs > 256) c.rq /= 2;
    // few query rows: smaller blocks so the block's rows are mostly real
    while (c.rq > 1 && std::uint64_t(c.wg) * c.rq / 2 >= std::uint64_t(std::max<index_t>(d.Sq, 1))) c.rq /= 2;
    for (c.bkv = 32; c.bkv >= 4; c.bkv /= 2)
      if (c.shared_bytes(d.D, d.Dv) <= dev.shared_bytes) return c;
    c.bkv = 4;
    return fail("flash");
  }
  c.wg = std::min<std::uint32_t>(64, pow2_floor(max_wg));
  if (c.shared_bytes(d.D, d.Dv) > dev.shared_bytes) return fail("decode");
  const std::uint64_t rows = std::uint64_t(d.B) * std::uint64_t(d.Hq) * std::uint64_t(std::max<index_t>(d.Sq, 1));
  const std::uint64_t keys = std::uint64_t(std::max<index_t>(d.Skv, 1));
  if (forced == "decode") return c;
  if (forced != "split") {
    // automatic: split when the rows alone leave the device idle (a CPU device runs a
    // workgroup per thread: fewer rows than a few threads; a GPU: fewer than a few
    // hundred workgroups) and each chunk keeps at least min_chunk keys; otherwise the
    // one-dispatch decode kernel (the merge costs a dispatch and a pass over partials)
    const std::uint64_t target = dev.cpu ? 8 : 512, min_chunk = dev.cpu ? 512 : 256;
    const std::uint64_t want = std::min<std::uint64_t>({ceil_div(target, rows), keys / min_chunk, 256});
    if (want < 2) {
      c.kind = attention_kind::decode;
      return c;
    }
    c.kind = attention_kind::split;
    c.splits = static_cast<std::uint32_t>(want);
  } else {
    c.splits = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(keys / c.wg, 1, 16));
  }
  c.chunk = ceil_div(ceil_div(keys, c.splits), c.wg) * c.wg;
  c.splits = static_cast<std::uint32_t>(ceil_div(keys, c.chunk));
  return c;
}

KILN_DECL std::string attention_plan_key(const attention_plan& a) {
  std::string k = structural_plan_key(a.base);
  k += '|';
  k += static_cast<char>(a.kind);
  k += static_cast<char>(a.phase);
  k += static_cast<char>(a.subgroup);
  k += static_cast<char>(a.k4 | a.v4 << 1 | a.rolled << 2);
  k += std::to_string(a.D) + "," + std::to_string(a.Dv) + "," + std::to_string(a.dvl) + "," + std::to_string(a.lanes) +
       "," + std::to_string(a.bkv);
  return k;
}

KILN_DECL structural_family_text attention_family_text(const attention_plan& a, std::string_view result_type) {
  using structural_text::load;
  const structural_plan& sp = a.base;
  structural_family_text f;
  static constexpr const char* kinds[] = {"", "flash", "decode", "split", "flash_lanes", "flash_slices"};
  const bool mask = sp.params.size() > 2;
  f.comment = std::string("// attention ") + kinds[static_cast<int>(a.kind)] + ", phase " + std::to_string(a.phase) +
              ", D " + std::to_string(a.D) + ", Dv " + std::to_string(a.Dv) + (mask ? ", additive mask" : "") +
              (a.subgroup ? ", subgroup max" : "") + (a.k4 ? ", vec4 k" : "") + (a.v4 ? ", vec4 v" : "") +
              (sp.params_buffer ? "; parameter buffer" : "") +
              "; sizes are specialisation constants\n";
  f.extensions += "#extension GL_EXT_control_flow_attributes : require\n";  // [[unroll]]
  if (a.subgroup) {
    f.extensions += "#extension GL_KHR_shader_subgroup_basic : require\n";
    f.extensions += "#extension GL_KHR_shader_subgroup_arithmetic : require\n";
  }
  auto def = [&](std::string_view name, const std::string& v) { f.defines += "#define " + std::string(name) + " " + v + "\n"; };
  def("KILN_PHASE", std::to_string(a.phase));
  def("KILN_D", std::to_string(a.D) + "u");
  def("KILN_DV", std::to_string(a.Dv) + "u");
  def("KILN_D4", std::to_string(std::max<index_t>((a.D + 3) / 4, 1)) + "u");
  def("KILN_DV4", std::to_string(std::max<index_t>((a.Dv + 3) / 4, 1)) + "u");
  def("KILN_DVL", std::to_string(a.dvl) + "u");
  // flash_lanes' loops over D: unrolled up to 128, rolled past (its compile time)
  def("KILN_UNROLL_D", std::max(a.D, a.Dv) > 128 ? "[[dont_unroll]]" : "[[unroll]]");
  // decode's loops over q: unrolled (q in registers), rolled where a.rolled says
  def("KILN_UNROLL_Q", a.kind != attention_kind::flash_slices && a.rolled ? "[[dont_unroll]]" : "[[unroll]]");
  def("KILN_MASK", mask ? "1" : "0");
  def("KILN_SUBGROUP", a.subgroup ? "1" : "0");
  def("KILN_K4", a.k4 ? "1" : "0");
  def("KILN_V4", a.v4 ? "1" : "0");
  def("KILN_RESULT", std::string(result_type));
  if (a.kind == attention_kind::flash_slices) {
    def("KILN_L", std::to_string(a.lanes) + "u");
    def("KILN_DS", std::to_string(slice_vec4s(a.D, a.lanes)) + "u");
    def("KILN_DVS", std::to_string(slice_vec4s(a.Dv, a.lanes)) + "u");
    def("KILN_BKV", std::to_string(a.bkv) + "u");
    // GPUs: the loops over a tile and a slice unrolled (the scores stay in registers); a
    // CPU device (lavapipe, where flash_slices only runs when forced) compiles the
    // unrolled form for minutes at D = 128
    def("KILN_UNROLL_KV", a.rolled ? "[[dont_unroll]]" : "[[unroll]]");
  }
  if (a.phase) {
    f.buffers += "layout(std430, set = 0, binding = " + std::to_string(sp.bindings) + ") " +
                 (a.phase == 1 ? "writeonly " : "readonly ") + "buffer kiln_partial_buf { float kiln_partial[]; };\n";
    f.extra_bindings = 1;
  }
  static constexpr const char* names[] = {"k", "v", "m"};
  for (std::size_t q = 0; q < sp.params.size(); ++q) {
    const std::string n = names[q];
    f.hooks += "float kiln_" + n + "(int e) { return " + load(sp.params[q], "uint(e)") + "; }\n";
  }
  // vec4 views of k / v (a second declaration of a binding: Vulkan lets blocks alias;
  // once per binding, k and v may share one); e is a multiple of 4
  std::vector<std::uint32_t> aliased;
  for (std::size_t q = 0; q < 2 && q < sp.params.size(); ++q) {
    if (!(q == 0 ? a.k4 : a.v4)) continue;
    const std::string bs = std::to_string(sp.params[q].binding);
    if (std::find(aliased.begin(), aliased.end(), sp.params[q].binding) == aliased.end()) {
      aliased.push_back(sp.params[q].binding);
      f.buffers += "layout(std430, set = 0, binding = " + bs + ") readonly buffer kiln_buf" + bs + "_v4 { vec4 kiln_b" +
                   bs + "_v4[]; };\n";
    }
    f.hooks += std::string("vec4 kiln_") + names[q] + "4(int e) { return kiln_b" + bs + "_v4[uint(e) >> 2]; }\n";
  }
  return f;
}

KILN_DECL std::string_view forced_attention() {
  const char* v = std::getenv("KILN_VULKAN_ATTENTION");
  return v ? std::string_view(v) : std::string_view();
}

}  // namespace kiln::detail::vk
