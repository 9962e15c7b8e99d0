// kiln/vulkan/codegen/plan.hpp — what a generated kernel is compiled for: how each operand
// is indexed, which operands share bindings or views, the vector variant, texel reads,
// where the parameters live (push constants or a storage buffer); make_plan chooses it
// from a statement's layout and the device's limits.
#pragma once

#include <algorithm>
#include <bit>  // std::popcount, std::bit_floor
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/layout.hpp"

namespace kiln::detail::vk {

/// How generated code indexes an operand, given the output's linear index i.
enum class access : std::uint8_t {
  linear,    // element offset + i
  constant,  // one element for the whole statement (stride 0 everywhere)
  strided,   // offset + sum(index_d * stride_d) over the collapsed dimensions
};

/// One operand (output first, then leaves in for_each_leaf order) as the shader sees it.
struct operand_plan {
  dtype type = dtype::f32;
  std::uint32_t binding = 0;  // buffer binding (operands sharing storage share it)
  access how = access::linear;
  int same_as = -1;           // leaves only: an earlier leaf reading the very same view
};

/// What a kernel is compiled for (everything but the values that go in push constants).
struct kernel_plan {
  int rank = 1;                       // collapsed rank
  bool vec4 = false;                  // four elements per step, vec4 loads and stores
  bool wide = false;                  // (with vec4) eight per step: u64vec4 loads and stores
  std::vector<operand_plan> operands; // [0] output, [1..] leaves
  std::uint32_t bindings = 0;
  std::uint32_t texel_bindings = 0;   // bit b: binding b is read through a uniform texel buffer
  bool single_step = false;           // one step per invocation: no grid-stride loop
  bool tail = true;                   // (vector variants) the element count is not a whole number of steps
  bool params_buffer = false;         // parameters in a storage buffer at binding `bindings`, not push constants
};

/// Bindings a texel_bindings mask can name (kernel_spec carries it as 32 bits).
inline constexpr std::uint32_t max_texel_binding = 32;

/// The largest power of two not above v (1 for v = 0, at most 2^31): the workgroup
/// sizes, tiles and line caches every kernel family halves from a device's limit.
constexpr std::uint32_t pow2_floor(std::uint64_t v) {
  return static_cast<std::uint32_t>(std::bit_floor(std::clamp<std::uint64_t>(v, 1, std::uint64_t(1) << 31)));
}

/// What passes the 32 bits generated kernels index with (throw_index_limit).
enum class index_limit : std::uint8_t {
  value,       // one parameter word: an offset, extent, stride or count
  elements,    // more than 2^32 - 1 elements of an operand or of the result
  positions,   // more than 2^32 - 1 positions (invocations) of a kernel
  workgroups,  // more workgroups than 32-bit task numbers name
};

/// The message for a statement past the 32-bit indexing of Vulkan kernels, in one
/// wording for every family: `subject` names the op and its operands (value: the
/// parameter and its value), `kernels` the kernels whose limit it is (not for
/// workgroups), `split` what to split (empty: no advice), e.g.
///   "kiln::matmul: a is ..., b is ...: more than 2^32 - 1 elements, past the 32-bit
///    indexing of the Vulkan matmul kernels; split the batch"
///   "kiln::vulkan: element offset 4294967296 does not fit the 32-bit indexing of
///    structural kernels"
KILN_DECL std::string index_limit_message(std::string_view subject, index_limit limit, std::string_view kernels,
                                          std::string_view split = {});

/// Throws kiln::shape_error(index_limit_message(...)).
[[noreturn]] KILN_DECL void throw_index_limit(std::string_view subject, index_limit limit, std::string_view kernels,
                                              std::string_view split = {});

/// Elements one step of a kernel of `plan` handles: 8 (wide), 4 (vec4) or 1.
KILN_DECL unsigned step_width(const kernel_plan& plan);

/// Invocations a kernel of `plan` needs over `elements` output elements when single_step:
/// one per step, and one per tail element.
KILN_DECL std::uint64_t invocations_needed(const kernel_plan& plan, std::uint64_t elements);

/// What the device and context allow a plan to use.
struct plan_options {
  bool int64 = false;        // shaderInt64: the wide variant
  bool texel_reads = false;  // every operand's storage has a texel view: read inputs through it
  std::uint64_t max_invocations = 0;  // invocations one dispatch can run (0: always the loop)
  // The device's limits per kernel (0: none, as for codegen tests):
  std::uint32_t max_push_bytes = 0;       // beyond: the parameters go to a storage buffer
  std::uint32_t max_storage_buffers = 0;  // beyond: inputs are read through texel views (texel_views)
  std::uint32_t max_texel_buffers = 0;    // uniform texel buffers
  bool texel_views = false;  // every input can be read through a texel view, should the storage buffers run out
};

/// Whether plan reads binding b through a uniform texel buffer.
KILN_DECL bool texel_binding(const kernel_plan& plan, std::uint32_t b);

/// Whether binding b of plan could be read through a texel buffer: an input's, whose
/// operands are all 32-bit, within what the mask names.
KILN_DECL bool texel_eligible(const kernel_plan& plan, std::uint32_t b);

/// More buffers than the device's storage-buffer descriptors (the parameter buffer
/// included: call it once params_buffer is known): reads inputs through texel views (any
/// variant; strided reads fetch the texel holding the element) until they fit, where
/// opt.texel_views allows.
KILN_DECL void fit_storage_buffers(kernel_plan& plan, const plan_options& opt);

/// Storage-buffer descriptors a kernel of plan binds (its parameter buffer included).
KILN_DECL std::uint32_t storage_buffers(const kernel_plan& plan);

/// A generated kernel.
struct kernel_source {
  std::string glsl;        // the cache key
  std::string expression;  // e.g. "gelu(add(mul(a, b), c))"
  kernel_plan plan;
  std::string name;        // "fused_<hash of glsl>", the kernel's name in errors and on disk
};
/// Chooses how each operand is indexed, which leaves share bindings and views, and
/// whether the vec4 variant applies. Operand o (0 = output) lives in storage[o] and reads
/// views[o]: operands with one storage share a buffer, and those that also have one
/// dtype, offset and view read the very same elements. params_buffer and
/// fit_storage_buffers are left to the caller, which knows the parameter block's size
/// (make_kernel). A template over the operand count only (no per-expression callbacks), so
/// statements share its code.
template <std::size_t L>
kernel_plan make_plan(const iteration_layout<L>& lay, const dtype (&types)[L + 1], const index_t (&offsets)[L + 1],
                      const void* const (&storage)[L + 1], const strides (&views)[L + 1], plan_options opt = {}) {
  auto same_storage = [&](std::size_t a, std::size_t b) { return storage[a] == storage[b]; };
  auto same_view = [&](std::size_t a, std::size_t b) {
    return storage[a] == storage[b] && types[a] == types[b] && offsets[a] == offsets[b] && views[a] == views[b];
  };
  kernel_plan plan;
  plan.rank = lay.rank;
  plan.operands.resize(L + 1);
  for (std::size_t o = 0; o <= L; ++o) {
    auto& op = plan.operands[o];
    op.type = types[o];
    if (lay.constant(o) && o > 0) {
      op.how = access::constant;
    } else {
      bool linear = true;
      index_t expect = 1;
      for (int d = lay.rank - 1; d >= 0 && linear; --d) {
        linear = lay.extent[d] == 1 || lay.stride[o][d] == expect;
        expect *= lay.extent[d];
      }
      op.how = linear ? access::linear : access::strided;
    }
    op.binding = plan.bindings;
    for (std::size_t q = 0; q < o; ++q) {
      if (same_storage(q, o)) {
        op.binding = plan.operands[q].binding;
        break;
      }
    }
    if (op.binding == plan.bindings) ++plan.bindings;
    if (o > 0) {
      for (std::size_t q = 1; q < o; ++q) {
        if (plan.operands[q].same_as < 0 && same_view(q, o)) {
          op.same_as = static_cast<int>(q - 1);
          break;
        }
      }
    }
  }
  // vec4: every operand linear or constant, 4-element aligned, of a dtype with a vec4 form
  bool v4 = true;
  for (std::size_t o = 0; o <= L && v4; ++o) {
    const auto& op = plan.operands[o];
    const bool vec_type = op.type == dtype::f32 || op.type == dtype::i32 || op.type == dtype::f16;
    v4 = op.how == access::constant || (op.how == access::linear && vec_type && offsets[o] % 4 == 0);
  }
  plan.vec4 = v4 && types[0] != dtype::u8;
  // wide: moreover 32-bit and 8-element aligned (u64vec4 = 32 bytes), on a device with int64
  bool w = plan.vec4 && opt.int64;
  for (std::size_t o = 0; o <= L && w; ++o) {
    const auto& op = plan.operands[o];
    w = op.how == access::constant || ((op.type == dtype::f32 || op.type == dtype::i32) && offsets[o] % 8 == 0);
  }
  plan.wide = w;
  // texel reads: bindings other than the output's whose operands are all 32-bit, as many
  // as the device allows and the mask can name
  if (plan.vec4 && opt.texel_reads) {
    const std::uint32_t max_texel = opt.max_texel_buffers ? opt.max_texel_buffers : max_texel_binding;
    std::uint32_t texels = 0;
    for (std::uint32_t b = 0; b < plan.bindings && texels < max_texel; ++b) {
      if (texel_eligible(plan, b)) {
        plan.texel_bindings |= 1u << b;
        ++texels;
      }
    }
  }
  std::uint64_t elements = 1;
  for (int d = 0; d < lay.rank; ++d) elements *= static_cast<std::uint64_t>(lay.extent[d]);
  plan.single_step = opt.max_invocations > 0 && invocations_needed(plan, elements) <= opt.max_invocations;
  plan.tail = plan.vec4 && elements % step_width(plan) != 0;
  return plan;
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/codegen/impl/plan.ipp"
#endif
