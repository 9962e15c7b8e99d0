// tests/codegen/codegen_test.cpp — GLSL generated from expression trees (no GPU needed).
// Golden files pin the exact source (the kernel cache key) for a handful of expressions;
// KILN_UPDATE_GOLDEN=1 rewrites them. When glslc is installed, every generated shader is
// also compiled to SPIR-V, so a body that is not valid GLSL fails here first.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>
#include <kiln/vulkan/codegen.hpp>
#include <kiln/vulkan/codegen/gemm.hpp>
#include <kiln/vulkan/codegen/position.hpp>
#include <kiln/vulkan/kernels_embedded.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backends.hpp"
#include "scoped_env.hpp"

#ifndef KILN_CODEGEN_GOLDEN_DIR
#error "KILN_CODEGEN_GOLDEN_DIR must name tests/codegen/golden"
#endif

namespace {

using cpu = kiln_test::cpu;
namespace vk = kiln::detail::vk;

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Compiles src with glslc when it is on PATH; returns "" on success, else the log.
std::string glslc_errors(const std::string& src, const std::string& name) {
  if (std::system("command -v glslc >/dev/null 2>&1") != 0) return "";
  const std::string dir = ::testing::TempDir();
  const std::string in = dir + "/kiln_" + name + ".comp", out = dir + "/kiln_" + name + ".spv";
  std::ofstream(in) << src;
  const std::string cmd = "glslc --target-env=vulkan1.2 -fshader-stage=compute -o " + out + " " + in + " 2>&1";
  std::string log;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof buf, p)) log += buf;
    if (pclose(p) == 0) return "";
  }
  return log.empty() ? "glslc failed" : log;
}

void check_golden_text(const std::string& glsl, const std::string& name) {
  const std::string path = std::string(KILN_CODEGEN_GOLDEN_DIR) + "/" + name + ".comp";
  if (const char* u = std::getenv("KILN_UPDATE_GOLDEN"); u && *u == '1') {
    std::ofstream(path) << glsl;
  }
  const std::string want = read_file(path);
  EXPECT_EQ(glsl, want) << "generated GLSL for " << name << " differs from " << path
                        << " (KILN_UPDATE_GOLDEN=1 rewrites it after review)";
  EXPECT_EQ(glslc_errors(glsl, name), "") << glsl;
}

/// A device with workgroups of up to max_wg invocations, subgroups of `subgroup` (0:
/// none), `shared` bytes of shared memory and `push` bytes of push constants (0: no limit).
vk::device_caps caps(std::uint32_t max_wg, std::uint32_t subgroup, std::uint32_t shared, std::uint32_t push) {
  vk::device_caps c;
  c.max_invocations = c.max_wg_x = max_wg;
  c.subgroup = subgroup;
  c.shared_bytes = shared;
  c.max_push_bytes = push;
  return c;
}

/// The structural kernel of `out = e` (planned as assign would) on a device with
/// subgroups of 8 and 32 KiB of shared memory.
template <class T, class B, class E>
vk::structural_kernel structural(const kiln::tensor<T, B>& out, const E& e, vk::device_caps o = caps(256, 8, 32768, 128)) {
  const auto planned = kiln::detail::plan_node<true>(e);
  return vk::make_structural_kernel(out, planned, o, vk::kernels::reduce_ops, vk::kernels::reduce_rows,
                                    vk::kernels::reduce_columns);
}

void check_golden(const vk::kernel& k, const std::string& name) {
  const std::string path = std::string(KILN_CODEGEN_GOLDEN_DIR) + "/" + name + ".comp";
  if (const char* u = std::getenv("KILN_UPDATE_GOLDEN"); u && *u == '1') {
    std::ofstream(path) << k.source.glsl;
  }
  const std::string want = read_file(path);
  EXPECT_EQ(k.source.glsl, want) << "generated GLSL for " << name << " differs from " << path
                                 << " (KILN_UPDATE_GOLDEN=1 rewrites it after review)";
  EXPECT_EQ(glslc_errors(k.source.glsl, name), "") << k.source.glsl;
}

/// y = y * cast<float>(i) + s over n elements, with s a broadcast 1-element tensor: in
/// place, an int32 leaf and a constant leaf.
vk::kernel in_place_int_scalar(kiln::context<cpu>& ctx, kiln::index_t n, vk::plan_options opt) {
  auto y = kiln::zeros<float>(ctx, {n});
  auto i = kiln::zeros<std::int32_t>(ctx, {n});
  auto s = kiln::zeros<float>(ctx, {1});
  return vk::make_kernel(y, y * kiln::cast<float>(i) + kiln::broadcast_to(s, {n}), opt);
}

}  // namespace

struct bad_op {
  static constexpr std::string_view name = "bad";
  template <class V>
  static V apply(const V& v) { return v; }
  static constexpr std::string_view glsl = "({0} + {3})";
};

class codegen : public ::testing::Test {
 protected:
  kiln::context<cpu>& ctx = kiln_test::ctx<cpu>();
};

TEST_F(codegen, gelu_chain_is_linear_vec4) {
  auto a = kiln::zeros<float>(ctx, {1024}), b = kiln::zeros<float>(ctx, {1024}), c = kiln::zeros<float>(ctx, {1024});
  auto y = kiln::empty<float>(ctx, {1024});
  const auto k = vk::make_kernel(y, kiln::gelu(a * b + c));
  EXPECT_EQ(k.source.expression, "gelu(add(mul(a, b), c))");
  EXPECT_TRUE(k.source.plan.vec4);
  EXPECT_EQ(k.source.plan.bindings, 4u);
  check_golden(k, "gelu_chain");
}

TEST_F(codegen, on_a_device_with_int64_aligned_32_bit_operands_move_eight_per_step) {
  auto a = kiln::zeros<float>(ctx, {1024}), b = kiln::zeros<float>(ctx, {1024}), c = kiln::zeros<float>(ctx, {1024});
  auto y = kiln::empty<float>(ctx, {1024});
  const vk::plan_options int64{.int64 = true};
  const auto k = vk::make_kernel(y, kiln::gelu(a * b + c), int64);
  EXPECT_TRUE(k.source.plan.vec4);
  EXPECT_TRUE(k.source.plan.wide);
  check_golden(k, "gelu_chain_wide");

  // an int32 leaf and a broadcast scalar leaf stay wide; the store is in place; 1029
  // elements: 128 steps and a tail of five
  const auto ki = in_place_int_scalar(ctx, 1029, int64);
  EXPECT_TRUE(ki.source.plan.wide);
  EXPECT_TRUE(ki.source.plan.tail);
  check_golden(ki, "wide_int_scalar_in_place");

  // four elements per step when an operand is 16-bit, or only 4-element aligned
  auto h = kiln::zeros<kiln::half>(ctx, {1024});
  EXPECT_FALSE(vk::make_kernel(y, a + kiln::cast<float>(h), int64).source.plan.wide);
  EXPECT_TRUE(vk::make_kernel(y, a + kiln::cast<float>(h), int64).source.plan.vec4);
  auto big = kiln::zeros<float>(ctx, {1028});
  const auto shifted = kiln::slice(big, 0, 4, 1028);
  const auto k4 = vk::make_kernel(y, a + shifted, int64);
  EXPECT_TRUE(k4.source.plan.vec4);
  EXPECT_FALSE(k4.source.plan.wide);
  // and not at all without int64
  EXPECT_FALSE(vk::make_kernel(y, kiln::gelu(a * b + c)).source.plan.wide);
}

TEST_F(codegen, texel_reads_cover_bindings_only_read_by_32_bit_leaves_in_the_vector_variants) {
  auto a = kiln::zeros<float>(ctx, {1024}), b = kiln::zeros<float>(ctx, {1024}), c = kiln::zeros<float>(ctx, {1024});
  auto y = kiln::empty<float>(ctx, {1024});
  // as on lavapipe: one dispatch covers the 128 steps, so no grid-stride loop
  const auto k = vk::make_kernel(y, kiln::gelu(a * b + c), vk::plan_options{.int64 = true, .texel_reads = true, .max_invocations = 128});
  EXPECT_TRUE(k.source.plan.wide);
  EXPECT_TRUE(k.source.plan.single_step);
  EXPECT_EQ(k.source.plan.texel_bindings, 0b1110u);  // every input; never the output
  check_golden(k, "gelu_chain_texel");

  // four per step; in place: the output's binding stays a storage buffer, the int32 and
  // broadcast scalar leaves (the scalar read once, before the loop) are texel reads
  // (1027 elements: 256 steps and a tail of three, read element by element)
  const vk::plan_options texel{.texel_reads = true};
  const auto ki = in_place_int_scalar(ctx, 1027, texel);
  EXPECT_TRUE(ki.source.plan.vec4);
  EXPECT_TRUE(ki.source.plan.tail);
  EXPECT_FALSE(k.source.plan.tail);
  EXPECT_FALSE(ki.source.plan.wide);
  EXPECT_EQ(ki.source.plan.texel_bindings, 0b110u);
  check_golden(ki, "texel_int_scalar_in_place");

  // a 16-bit leaf's binding is a storage buffer; the 32-bit one beside it a texel read
  auto h = kiln::zeros<kiln::half>(ctx, {1024});
  const auto kh = vk::make_kernel(y, a + kiln::cast<float>(h), texel);
  EXPECT_EQ(kh.source.plan.texel_bindings, 1u << kh.source.plan.operands[1].binding);
  EXPECT_EQ(glslc_errors(kh.source.glsl, "texel_half"), "") << kh.source.glsl;
  // none for strided operands (no vector variant), nor without the option
  auto m = kiln::zeros<float>(ctx, {32, 32});
  auto ym = kiln::empty<float>(ctx, {32, 32});
  EXPECT_EQ(vk::make_kernel(ym, kiln::transpose(m) + 1.0f, texel).source.plan.texel_bindings, 0u);
  EXPECT_EQ(vk::make_kernel(y, kiln::gelu(a * b + c)).source.plan.texel_bindings, 0u);
}

TEST_F(codegen, single_step_when_one_dispatch_gives_every_step_an_invocation) {
  auto a = kiln::zeros<float>(ctx, {1027}), y = kiln::empty<float>(ctx, {1027});
  auto m = kiln::zeros<float>(ctx, {7, 9}), ym = kiln::empty<float>(ctx, {9, 7});
  // 1027 = 256 steps of four and a tail of three: 256 invocations
  EXPECT_EQ(vk::invocations_needed(vk::make_kernel(y, a + 1.0f).source.plan, 1027), 256u);
  EXPECT_TRUE(vk::make_kernel(y, a + 1.0f, vk::plan_options{.max_invocations = 256}).source.plan.single_step);
  EXPECT_FALSE(vk::make_kernel(y, a + 1.0f, vk::plan_options{.max_invocations = 255}).source.plan.single_step);
  EXPECT_FALSE(vk::make_kernel(y, a + 1.0f).source.plan.single_step);  // unknown limit: the loop
  // eight a step with int64; one element a step for strided operands
  EXPECT_TRUE(vk::make_kernel(y, a + 1.0f, vk::plan_options{.int64 = true, .max_invocations = 128}).source.plan.single_step);
  const auto ks = vk::make_kernel(ym, kiln::transpose(m) * 2.0f, vk::plan_options{.max_invocations = 63});
  EXPECT_TRUE(ks.source.plan.single_step);
  EXPECT_EQ(ks.source.glsl.find("for ("), std::string::npos) << ks.source.glsl;
  EXPECT_EQ(glslc_errors(ks.source.glsl, "single_step_strided"), "") << ks.source.glsl;
  EXPECT_FALSE(vk::make_kernel(ym, kiln::transpose(m) * 2.0f, vk::plan_options{.max_invocations = 62}).source.plan.single_step);
}

TEST_F(codegen, scalars_are_push_constants_so_values_reuse_the_kernel) {
  auto x = kiln::zeros<float>(ctx, {33});
  auto y = kiln::empty<float>(ctx, {33});
  const auto k1 = vk::make_kernel(y, kiln::leaky_relu(x * 2.0f, 0.1f) + 1.0f);
  const auto k2 = vk::make_kernel(y, kiln::leaky_relu(x * 3.0f, 0.2f) + 5.0f);
  EXPECT_EQ(k1.source.glsl, k2.source.glsl);
  EXPECT_NE(k1.args.push, k2.args.push);
  EXPECT_EQ(k1.args.push.size(), 1u + 2u + 3u);  // n, two offsets, three scalars
  check_golden(k1, "leaky_relu_scalars");
}

TEST_F(codegen, tensor_used_twice_is_bound_and_read_once_and_subexpressions_computed_once) {
  auto x = kiln::zeros<float>(ctx, {64});
  auto y = kiln::empty<float>(ctx, {64});
  const auto k = vk::make_kernel(y, x * kiln::sigmoid(x) + kiln::sigmoid(x));
  EXPECT_EQ(k.source.plan.bindings, 2u);
  EXPECT_EQ(k.source.plan.operands[2].same_as, 0);
  const std::string& g = k.source.glsl;
  EXPECT_EQ(g.find("exp(-"), g.rfind("exp(-")) << "sigmoid computed twice:\n" << g;
  check_golden(k, "silu_cse");
}

TEST_F(codegen, broadcast_and_strided_operands) {
  auto m = kiln::zeros<float>(ctx, {6, 10});
  auto row = kiln::zeros<float>(ctx, {10});
  auto col = kiln::zeros<float>(ctx, {6, 1});
  auto y = kiln::empty<float>(ctx, {10, 6});
  const auto k = vk::make_kernel(y, kiln::transpose(m) * kiln::transpose(col) + kiln::transpose(kiln::broadcast_to(row, {6, 10})));
  EXPECT_FALSE(k.source.plan.vec4);
  EXPECT_EQ(k.source.plan.operands[1].how, vk::access::strided);
  check_golden(k, "transpose_broadcast");
}

TEST_F(codegen, in_place_shares_the_output_binding) {
  auto x = kiln::zeros<float>(ctx, {100});
  const auto k = vk::make_kernel(x, x * 2.0f);
  EXPECT_EQ(k.source.plan.bindings, 1u);
  EXPECT_NE(k.source.glsl.find("binding = 0) buffer"), std::string::npos) << k.source.glsl;
  check_golden(k, "in_place");
}

TEST_F(codegen, mixed_dtypes_masks_and_casts) {
  auto h = kiln::zeros<kiln::half>(ctx, {7});
  auto b = kiln::zeros<kiln::bfloat16>(ctx, {7});
  auto i = kiln::zeros<std::int8_t>(ctx, {7});
  auto m = kiln::empty<std::uint8_t>(ctx, {7});
  auto y = kiln::empty<kiln::half>(ctx, {7});
  check_golden(vk::make_kernel(y, kiln::where(kiln::cast<float>(i) > 0.0f, h, kiln::cast<kiln::half>(kiln::cast<float>(b) * 0.5f))),
               "mixed_dtypes");
  check_golden(vk::make_kernel(m, kiln::cast<float>(h) >= 1.0f), "mask_store");
  auto q = kiln::empty<std::int8_t>(ctx, {7});
  check_golden(vk::make_kernel(q, kiln::cast<std::int8_t>(kiln::cast<float>(h) * 100.0f) / i), "int8_div");
}

TEST_F(codegen, every_elementwise_op_generates_valid_glsl) {
  auto x = kiln::zeros<float>(ctx, {5});
  auto z = kiln::zeros<float>(ctx, {5});
  auto n = kiln::zeros<std::int32_t>(ctx, {5});
  auto y = kiln::empty<float>(ctx, {5});
  auto yi = kiln::empty<std::int32_t>(ctx, {5});
  auto src = [&](const auto& e) { return vk::make_kernel(y, e).source.glsl; };
  const std::string all[] = {
      src(kiln::abs(x)), src(x + z), src(x - z), src(x * z), src(x / z), src(-x), src(kiln::clamp(x, -1.0f, 1.0f)),
      src(kiln::where(x == z, x, z)), src(kiln::where(x != z, x, z)), src(kiln::where(x < z, x, z)),
      src(kiln::where(x <= z, x, z)), src(kiln::where(x > z, x, z)), src(kiln::where(x >= z, x, z)),
      src(kiln::exp(x)), src(kiln::erf(x)), src(kiln::log(x)), src(kiln::sqrt(x)), src(kiln::rsqrt(x)),
      src(kiln::pow(x, z)), src(kiln::square(x)), src(kiln::tanh(x)), src(kiln::sigmoid(x)), src(kiln::relu(x)),
      src(kiln::leaky_relu(x, 0.2f)), src(kiln::gelu(x)), src(kiln::gelu_tanh(x)), src(kiln::silu(x)),
      src(kiln::softplus(x)), src(kiln::min(x, z)), src(kiln::max(x, z)),
      vk::make_kernel(yi, kiln::abs(n) / n + kiln::min(n, 3) * kiln::max(n, -3) - kiln::relu(-n)).source.glsl,
      vk::make_kernel(yi, kiln::clamp(kiln::square(n), -5, 5)).source.glsl,
  };
  int idx = 0;
  for (const auto& g : all) EXPECT_EQ(glslc_errors(g, "op" + std::to_string(idx++)), "") << g;
}

TEST_F(codegen, malformed_custom_op_body_is_a_shader_error) {
  auto x = kiln::zeros<float>(ctx, {5});
  auto y = kiln::empty<float>(ctx, {5});
  EXPECT_THROW(vk::make_kernel(y, kiln::map<bad_op>(x)), kiln::shader_error);
}

/// A custom op with a helper function of its own, and one it shares with kiln's tanh.
struct scaled_tanh_op {
  static constexpr std::string_view name = "scaled_tanh";
  template <class V>
  static V apply(const V& v) { return v; }
  static constexpr std::string_view glsl = "my_scale(kiln_tanh({0}))";
  static std::vector<std::string> glsl_functions() {
    return {kiln::detail::tanh_glsl(), "float my_scale(float x) {\n  return 3.0 * x;\n}\n"};
  }
};

TEST_F(codegen, helper_functions_are_emitted_once_per_shader) {
  auto x = kiln::zeros<float>(ctx, {5});
  auto y = kiln::empty<float>(ctx, {5});
  const std::string g = vk::make_kernel(y, kiln::map<scaled_tanh_op>(x) + kiln::tanh(x * 2.0f) +
                                               kiln::gelu_tanh(x) + kiln::map<scaled_tanh_op>(x + 1.0f))
                            .source.glsl;
  auto count = [&](const std::string& what) {
    std::size_t c = 0;
    for (std::size_t at = g.find(what); at != std::string::npos; at = g.find(what, at + 1)) ++c;
    return c;
  };
  EXPECT_EQ(count("float kiln_tanh(float x)"), 1u) << g;
  EXPECT_EQ(count("float my_scale(float x)"), 1u) << g;
  EXPECT_EQ(glslc_errors(g, "shared_helpers"), "") << g;
}

TEST_F(codegen, parameters_past_the_push_constant_limit_go_to_a_storage_buffer) {
  auto m = kiln::zeros<float>(ctx, {6, 10});
  auto row = kiln::zeros<float>(ctx, {10});
  auto col = kiln::zeros<float>(ctx, {6, 1});
  auto y = kiln::empty<float>(ctx, {10, 6});
  auto expr = [&] { return kiln::transpose(m) * kiln::transpose(col) + kiln::transpose(kiln::broadcast_to(row, {6, 10})) * 2.0f; };
  // n, four offsets, two extents, three strided inputs' strides, a scalar: 14 words
  const auto pushed = vk::make_kernel(y, expr(), vk::plan_options{.max_push_bytes = 56});
  EXPECT_FALSE(pushed.source.plan.params_buffer);
  EXPECT_EQ(pushed.args.push.size(), 14u);
  const auto k = vk::make_kernel(y, expr(), vk::plan_options{.max_push_bytes = 52});
  EXPECT_TRUE(k.source.plan.params_buffer);
  EXPECT_EQ(k.args.push, pushed.args.push);  // the same words, in a buffer
  EXPECT_EQ(vk::storage_buffers(k.source.plan), 5u);  // four operands' buffers and the parameters
  check_golden(k, "params_buffer");
  // the source differs in the block's declaration (and the header comment) only
  std::string g = k.source.glsl;
  const std::string decl = "layout(std430, set = 0, binding = 4) readonly buffer kiln_params {";
  ASSERT_NE(g.find(decl), std::string::npos) << g;
  g.replace(g.find(decl), decl.size(), "layout(push_constant) uniform kiln_params {");
  g.replace(g.find("; parameter buffer"), 18, "");
  EXPECT_EQ(g, pushed.source.glsl);
}

TEST_F(codegen, inputs_past_the_storage_buffer_limit_are_read_through_texel_views) {
  std::vector<kiln::tensor<float, cpu>> x;
  for (int i = 0; i < 4; ++i) x.push_back(kiln::zeros<float>(ctx, {9, 7}));
  auto y = kiln::empty<float>(ctx, {7, 9});
  using kiln::transpose;
  auto expr = [&] { return transpose(x[0]) + transpose(x[1]) * transpose(x[2]) - transpose(x[3]); };
  // five buffers, two storage-buffer descriptors: three inputs become texel reads, in the
  // element-by-element variant too
  const auto k = vk::make_kernel(y, expr(), vk::plan_options{.max_storage_buffers = 2, .texel_views = true});
  EXPECT_FALSE(k.source.plan.vec4);
  EXPECT_EQ(k.source.plan.texel_bindings, 0b1110u);
  EXPECT_EQ(vk::storage_buffers(k.source.plan), 2u);
  check_golden(k, "strided_texel_views");
  // no more than the texel-buffer limit (the kernel cache then names the limit it breaks)
  EXPECT_EQ(vk::make_kernel(y, expr(), vk::plan_options{.max_storage_buffers = 2, .max_texel_buffers = 2, .texel_views = true})
                .source.plan.texel_bindings,
            0b110u);
  // none without texel views, nor when the buffers fit
  EXPECT_EQ(vk::make_kernel(y, expr(), vk::plan_options{.max_storage_buffers = 2}).source.plan.texel_bindings, 0u);
  EXPECT_EQ(vk::make_kernel(y, expr(), vk::plan_options{.max_storage_buffers = 5, .texel_views = true}).source.plan.texel_bindings,
            0u);
}

TEST_F(codegen, a_reduction_with_prologue_and_epilogue_splices_both_into_the_rows_template) {
  auto x = kiln::zeros<float>(ctx, {64, 300}), z = kiln::zeros<float>(ctx, {64, 300});
  auto n = kiln::empty<float>(ctx, {64});
  const auto k = structural(n, kiln::sqrt(kiln::mean(kiln::square(x - z), -1) + 1e-6f));
  ASSERT_NE(k.first, nullptr);
  EXPECT_EQ(k.second, nullptr);
  EXPECT_EQ(k.first->expression, "sqrt(add(mean(square(sub(a, b))), s0))");
  EXPECT_EQ(k.first->plan.mode, vk::structural_mode::rows);
  EXPECT_EQ(k.first_tasks, 64u);
  check_golden_text(k.first->glsl, "reduce_mean_rows");
  // over axis 0: the columns template, one invocation per output
  auto c = kiln::empty<float>(ctx, {300});
  const auto kc = structural(c, kiln::amax(x, 0) * 2.0f);
  EXPECT_EQ(kc.first->plan.mode, vk::structural_mode::columns);
  EXPECT_EQ(glslc_errors(kc.first->glsl, "amax_columns"), "") << kc.first->glsl;
}

TEST_F(codegen, softmax_with_a_broadcast_mask_caches_its_line_and_splits_long_lines) {
  auto s = kiln::zeros<float>(ctx, {2, 4, 64, 64}), m = kiln::zeros<float>(ctx, {64, 64});
  auto p = kiln::empty<float>(ctx, {2, 4, 64, 64});
  const auto k = structural(p, kiln::softmax(s * 0.125f + m));
  EXPECT_EQ(k.first->expression, "softmax(add(mul(a, t0), b))");
  EXPECT_GT(k.first->plan.cache, 0u);
  EXPECT_TRUE(k.first->plan.subgroup);
  check_golden_text(k.first->glsl, "softmax_masked");
  // a line of 1M elements: partial statistics, then the output pass
  auto x = kiln::zeros<float>(ctx, {1, 1 << 20});
  auto y = kiln::empty<float>(ctx, {1, 1 << 20});
  const auto ks = structural(y, kiln::log_softmax(x));
  ASSERT_NE(ks.second, nullptr);
  EXPECT_EQ(ks.first->plan.phase, 1);
  EXPECT_EQ(ks.second->plan.phase, 2);
  EXPECT_EQ(ks.first_tasks, ks.second_tasks);
  EXPECT_EQ(glslc_errors(ks.first->glsl, "softmax_phase1"), "") << ks.first->glsl;
  EXPECT_EQ(glslc_errors(ks.second->glsl, "softmax_phase2"), "") << ks.second->glsl;
}

TEST_F(codegen, every_structural_op_generates_valid_glsl) {
  auto x = kiln::zeros<float>(ctx, {5, 40});
  auto w = kiln::zeros<float>(ctx, {40});
  auto b = kiln::zeros<kiln::half>(ctx, {40});
  auto r = kiln::empty<float>(ctx, {5});
  auto y = kiln::empty<float>(ctx, {5, 40});
  auto i = kiln::empty<std::int32_t>(ctx, {5});
  auto xi = kiln::zeros<std::int8_t>(ctx, {5, 40});
  auto h = kiln::empty<kiln::half>(ctx, {5, 40});
  for (const auto& [name, glsl] : std::vector<std::pair<std::string, std::string>>{
           {"sum", structural(r, kiln::sum(x, -1)).first->glsl},
           {"amin", structural(r, kiln::amin(x, 1), caps(64, 0, 0, 0)).first->glsl},
           {"argmin", structural(i, kiln::argmin(x, -1)).first->glsl},
           {"argmax_cols", structural(w, kiln::cast<float>(kiln::argmax(x, 0))).first->glsl},
           {"sum_int8", structural(i, kiln::sum(xi, -1)).first->glsl},
           {"amax_int8_cols", structural(w, kiln::cast<float>(kiln::amax(xi, 0))).first->glsl},
           {"layer_norm", structural(h, kiln::layer_norm(x, w, b)).first->glsl},
           {"rms_norm", structural(y, kiln::rms_norm(x, w) + x, caps(64, 0, 0, 0)).first->glsl},
           {"log_softmax_t", structural(y, kiln::log_softmax(kiln::transpose(kiln::transpose(x)))).first->glsl}}) {
    EXPECT_EQ(glslc_errors(glsl, "structural_" + name), "") << name << "\n" << glsl;
  }
}

namespace {

/// The position kernel (rope, embedding) of `out = e` with its parameters read as given.
template <class T, class B, class E>
vk::structural_kernel position(const kiln::tensor<T, B>& out, const E& e, std::vector<vk::position_param> params) {
  const auto planned = kiln::detail::plan_node<true>(e);
  const auto& s = kiln::detail::find_structural(planned);
  constexpr bool rope = std::is_same_v<typename std::remove_cvref_t<decltype(s)>::op_type, kiln::detail::rope_op>;
  return vk::make_position_kernel(out, planned, caps(256, 8, 32768, 128), params,
                                  rope ? vk::kernels::position_rope : vk::kernels::position_embedding);
}

}  // namespace

TEST_F(codegen, rope_and_embedding_splice_prologue_and_epilogue_into_their_templates) {
  auto q = kiln::zeros<float>(ctx, {2, 4, 9, 16});
  auto pos = kiln::zeros<std::int32_t>(ctx, {9});
  auto y = kiln::empty<float>(ctx, {2, 4, 9, 16});
  auto n = kiln::rope(q * 2.0f, pos);
  const auto& inv = std::get<1>(n.params).t;
  const std::vector<vk::position_param> rp = {{kiln::dtype::i32, pos.storage().get(), 0, 1},
                                              {kiln::dtype::f32, inv.storage().get(), 0, 1}};
  const auto k = position(y, n * 0.5f, rp);
  ASSERT_NE(k.first, nullptr);
  EXPECT_EQ(k.first->expression, "mul(rope(mul(a, t0), w0, w1), s0)");
  EXPECT_EQ(k.first_tasks, (2u * 4 * 9 * 8 + 127) / 128);
  check_golden_text(k.first->glsl, "rope_fused");
  auto h = kiln::empty<kiln::half>(ctx, {2, 4, 9, 16});
  auto qh = kiln::zeros<kiln::half>(ctx, {2, 4, 9, 16});
  EXPECT_EQ(glslc_errors(position(h, kiln::rope(qh, pos, {500000.0f, true}), rp).first->glsl, "rope_interleaved_f16"), "");

  auto table = kiln::zeros<kiln::bfloat16>(ctx, {50, 12});
  auto ids = kiln::zeros<std::int32_t>(ctx, {3, 5});
  auto e = kiln::empty<float>(ctx, {3, 5, 12});
  const auto ke = position(e, kiln::cast<float>(kiln::embedding(table, ids)) * 3.0f,
                           {{kiln::dtype::i32, ids.storage().get(), 0, 1}});
  EXPECT_EQ(ke.first->expression, "mul(cast<f32>(embedding(a, w0)), s0)");
  EXPECT_EQ(ke.first_tasks, (3u * 5 * 12 + 127) / 128);
  check_golden_text(ke.first->glsl, "embedding_fused");
}

// CPU devices' rows layout (device_caps::lanes): a subgroup a line, vec4 steps with
// texel reads where every operand is f32 and contiguous along 4-aligned lines (a mask
// broadcast over rows read from its line's base), scalar steps otherwise.
TEST_F(codegen, lanes_rows_take_vec4_steps_where_every_operand_allows_them) {
  vk::device_caps lanes = caps(256, 8, 32768, 128);
  lanes.lanes = true;
  lanes.texel_reads = true;
  auto s = kiln::zeros<float>(ctx, {2, 4, 64, 64}), m = kiln::zeros<float>(ctx, {64, 64});
  auto p = kiln::empty<float>(ctx, {2, 4, 64, 64});
  const auto k = structural(p, kiln::softmax(s * 0.125f + m) * 2.0f, lanes);
  const vk::structural_plan& sp = k.first->plan;
  EXPECT_TRUE(sp.lanes);
  EXPECT_EQ(sp.wg, 8u);
  EXPECT_EQ(sp.cache, 0u);
  EXPECT_TRUE(sp.vec4);
  EXPECT_EQ(sp.in_rows, 0b100u);         // the mask, strided, from its line's base
  EXPECT_EQ(sp.texel_bindings, 0b110u);  // s and m: read by the prologue only
  check_golden_text(k.first->glsl, "softmax_masked_lanes");
  // a line off the 4-element grid: scalar steps, no texel reads
  auto q = kiln::empty<float>(ctx, {2, 4, 64, 63});
  const auto ks = structural(q, kiln::softmax(kiln::slice(s, 3, 1, 64)), lanes);
  EXPECT_TRUE(ks.first->plan.lanes);
  EXPECT_FALSE(ks.first->plan.vec4);
  EXPECT_EQ(ks.first->plan.texel_bindings, 0u);
  EXPECT_EQ(glslc_errors(ks.first->glsl, "softmax_lanes_scalar"), "") << ks.first->glsl;
  // every op in the lanes layout compiles, with vec4 steps and without
  auto x = kiln::zeros<float>(ctx, {5, 40}), w = kiln::zeros<float>(ctx, {40}), y = kiln::empty<float>(ctx, {5, 40});
  auto r = kiln::empty<float>(ctx, {5});
  auto i = kiln::empty<std::int32_t>(ctx, {5});
  auto xi = kiln::zeros<std::int8_t>(ctx, {5, 40});
  auto y39 = kiln::empty<float>(ctx, {5, 39});
  for (const auto& [name, kn] : std::vector<std::pair<std::string, vk::structural_kernel>>{
           {"sum", structural(r, kiln::sum(x, -1), lanes)},
           {"argmax", structural(i, kiln::argmax(x, -1), lanes)},
           {"sum_int8", structural(i, kiln::sum(xi, -1), lanes)},
           {"layer_norm", structural(y, kiln::layer_norm(x, w, w), lanes)},
           {"rms_norm", structural(y, kiln::rms_norm(x, w) + x, lanes)},
           {"log_softmax", structural(y, kiln::log_softmax(x), lanes)},
           {"layer_norm_scalar", structural(y39, kiln::layer_norm(kiln::slice(x, 1, 1, 40)), lanes)}}) {
    EXPECT_TRUE(kn.first->plan.lanes) << name;
    EXPECT_EQ(glslc_errors(kn.first->glsl, "lanes_" + name), "") << name << "\n" << kn.first->glsl;
  }
  EXPECT_TRUE(structural(y, kiln::layer_norm(x, w, w), lanes).first->plan.params_vec4);
  EXPECT_FALSE(structural(i, kiln::sum(xi, -1), lanes).first->plan.vec4);  // int accumulator
}

// The cooperative-matrix GEMM (GL_NV_cooperative_matrix): chosen for f16 a and b on a
// device that reports an f16 x f16 + f32 shape, never otherwise; its source (prologue and
// epilogue spliced in, b in either staging layout, batches) compiles with glslc. Numerics
// need a device that has cooperative matrices (tests/vulkan/matmul_test.cpp).
TEST_F(codegen, cooperative_matrix_gemm_is_chosen_for_f16_operands_and_compiles) {
  vk::device_caps dev;
  dev.subgroup = 32;
  dev.shared_bytes = 49152;
  dev.max_invocations = dev.max_wg_x = 1024;
  dev.cm_m = dev.cm_n = dev.cm_k = 16;
  const auto gemm = [&](const auto& out, const auto& e) {
    const auto planned = kiln::detail::plan_node<true>(e);
    return vk::make_gemm_kernel(out, planned, dev, 128, vk::kernels::gemm_naive, vk::kernels::gemm_tiled,
                                vk::kernels::gemm_matvec, vk::kernels::gemm_merge, vk::kernels::gemm_coopmat);
  };
  auto a = kiln::zeros<kiln::half>(ctx, {3, 200, 72}), b = kiln::zeros<kiln::half>(ctx, {72, 96});
  auto w = kiln::zeros<kiln::half>(ctx, {96, 72}), bias = kiln::zeros<kiln::half>(ctx, {96});
  auto y = kiln::empty<kiln::half>(ctx, {3, 200, 96}), yf = kiln::empty<kiln::half>(ctx, {3, 200, 96});
  const auto k1 = gemm(yf, kiln::gelu(kiln::matmul(a * 2.0f, b) + bias));  // b along n: [k][n] staging
  EXPECT_EQ(k1.choice.kind, vk::gemm_kind::coopmat);
  EXPECT_EQ(k1.choice.name(), "vulkan.gemm.coopmat 64x64 (16x16x16 f16, 4 subgroups)");
  EXPECT_EQ(k1.first_wg, 128u);
  EXPECT_EQ(glslc_errors(k1.first->glsl, "gemm_coopmat_b_rows"), "") << k1.first->glsl;
  const auto k2 = gemm(y, kiln::matmul(a, kiln::transpose(w)));  // nn.Linear's layout: [n][k] staging
  EXPECT_EQ(k2.choice.kind, vk::gemm_kind::coopmat);
  EXPECT_NE(k2.first->glsl.find("#define KILN_CM_BT 1"), std::string::npos);
  EXPECT_EQ(glslc_errors(k2.first->glsl, "gemm_coopmat_b_columns"), "") << k2.first->glsl;
  auto odd = kiln::zeros<kiln::half>(ctx, {37, 33}), odd_b = kiln::zeros<kiln::half>(ctx, {33, 19});
  auto yo = kiln::empty<kiln::half>(ctx, {37, 19});
  const auto k3 = gemm(yo, kiln::matmul(odd, odd_b));  // no vec4 reads
  EXPECT_EQ(k3.choice.kind, vk::gemm_kind::coopmat);
  EXPECT_EQ(glslc_errors(k3.first->glsl, "gemm_coopmat_scalar"), "") << k3.first->glsl;
  {  // KILN_VULKAN_COOPMAT_TILE: another tile (8 subgroups), checked against the device
    kiln_test::scoped_env tile("KILN_VULKAN_COOPMAT_TILE", "128x256x32/2x4");
    const auto k4 = gemm(y, kiln::matmul(a, kiln::transpose(w)));
    EXPECT_EQ(k4.choice.name(), "vulkan.gemm.coopmat 128x256 (16x16x16 f16, 8 subgroups)");
    EXPECT_EQ(k4.first_wg, 256u);
    EXPECT_NE(k4.first->glsl.find("#define KILN_BN 256u"), std::string::npos);
    EXPECT_EQ(glslc_errors(k4.first->glsl, "gemm_coopmat_tile"), "") << k4.first->glsl;
    kiln_test::scoped_env odd_tile("KILN_VULKAN_COOPMAT_TILE", "128x120x32/2x2");  // 60 columns a subgroup
    try {
      (void)gemm(y, kiln::matmul(a, kiln::transpose(w)));
      ADD_FAILURE() << "no exception";
    } catch (const kiln::device_error& e) {
      EXPECT_NE(std::string(e.what()).find("KILN_VULKAN_COOPMAT_TILE='128x120x32/2x2' does not fit"), std::string::npos)
          << e.what();
    }
  }
  for (const char* bad : {"128x128x32", "128x128x32/2x2x", "0x128x32/2x2", "128x128/32/2x2", "axbxc/dxe", ""}) {
    try {
      (void)vk::parse_gemm_tile(bad, "KILN_VULKAN_COOPMAT_TILE", "BMxBNxBK/SGMxSGN");
      ADD_FAILURE() << "'" << bad << "': no exception";
    } catch (const kiln::error& e) {
      EXPECT_NE(std::string(e.what()).find("KILN_VULKAN_COOPMAT_TILE='" + std::string(bad) + "' is not BMxBNxBK/SGMxSGN"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(vk::parse_gemm_tile("64x32x16/2x1", "E", "F"), (std::array<std::uint32_t, 5>{64, 32, 16, 2, 1}));
  // f32 operands keep the f32 kernel; so does a device without cooperative matrices
  auto af = kiln::zeros<float>(ctx, {200, 72}), bf = kiln::zeros<float>(ctx, {72, 96});
  auto y2 = kiln::empty<float>(ctx, {200, 96});
  EXPECT_EQ(gemm(y2, kiln::matmul(af, bf)).choice.kind, vk::gemm_kind::tiled);
  {  // a GPU's tiled kernel: 128 x 64 tiles of 8 x 4 for large products, else 64 x 64
    auto a4 = kiln::zeros<float>(ctx, {4096, 512}), b4 = kiln::zeros<float>(ctx, {512, 4096});
    auto y4 = kiln::empty<float>(ctx, {4096, 4096});
    const auto large = gemm(y4, kiln::matmul(a4, b4));
    EXPECT_EQ(large.choice.name(), "vulkan.gemm.tiled 128x64");
    EXPECT_EQ(large.first_wg, 256u);
    EXPECT_EQ(glslc_errors(large.first->glsl, "gemm_tiled_large"), "") << large.first->glsl;
    auto a5 = kiln::zeros<float>(ctx, {512, 512});
    auto y5 = kiln::empty<float>(ctx, {512, 4096});
    EXPECT_EQ(gemm(y5, kiln::matmul(a5, b4)).choice.name(), "vulkan.gemm.tiled 64x64");
  }
  {  // KILN_VULKAN_TILED_TILE: the tiled kernel's tile, checked against the device
    kiln_test::scoped_env tile("KILN_VULKAN_TILED_TILE", "128x128x16/8x8");
    const auto k5 = gemm(y2, kiln::matmul(af, bf));
    EXPECT_EQ(k5.choice.name(), "vulkan.gemm.tiled 128x128");
    EXPECT_EQ(k5.first_wg, 256u);
    EXPECT_EQ(k5.choice.tm, 8u);
    EXPECT_EQ(glslc_errors(k5.first->glsl, "gemm_tiled_tile"), "") << k5.first->glsl;
    for (const char* bad : {"64x64x16/6x4", "64x64x16/2x2", "256x256x64/4x4"}) {  // TM 6; 1024 invocations; shared memory
      kiln_test::scoped_env t("KILN_VULKAN_TILED_TILE", bad);
      try {
        (void)gemm(y2, kiln::matmul(af, bf));
        ADD_FAILURE() << bad << ": no exception";
      } catch (const kiln::device_error& e) {
        EXPECT_NE(std::string(e.what()).find("KILN_VULKAN_TILED_TILE='" + std::string(bad) + "' does not fit"), std::string::npos)
            << e.what();
      }
    }
  }
  dev.cm_m = dev.cm_n = dev.cm_k = 0;
  EXPECT_EQ(gemm(yf, kiln::matmul(a, b)).choice.kind, vk::gemm_kind::tiled);
}
