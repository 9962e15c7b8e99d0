// kiln/vulkan/codegen.hpp — an expression tree -> one GLSL compute shader (umbrella of
// codegen/: types, plan, emitter, args, elementwise, structural, source_cache).
//
// Pure text generation (no Vulkan headers), so it is tested without a device. The
// generated source depends only on what must be compiled in: the expression's types and
// op bodies, the collapsed rank, how each operand is indexed (linear, constant or
// strided), which leaves share a buffer or a whole view, and the vector variant. Everything
// else — element count, offsets, extents, strides and scalar values — goes into push
// constants, so new sizes and scalar values reuse the compiled kernel. The source is the
// cache key.
//
// Shader shape: bindings 0..B-1 are the distinct buffers (the output first); one push
// constant block; `kiln_compute(leaves...)` is the expression for one element (each op one
// statement, repeated sub-expressions computed once); main() runs a grid-stride loop, one
// element per step, or four (vec4 loads/stores) when every operand is linear and aligned,
// or eight when moreover every operand is 32-bit, 8-element aligned and the device has
// 64-bit integers: each step then moves 32 bytes per operand as one u64vec4 (bit-cast to
// two vec4s). A driver that loads and stores lane by lane (lavapipe: one scalar access per
// invocation and component) then does half the accesses: the fused gelu chain runs ~1.4x
// and a copy ~1.6x faster there; on a GPU it is two 16-byte accesses per invocation.
// Texel reads (plan_options::texel_reads, chosen by the context): in the vector variants,
// a binding only read, by 32-bit leaves, becomes a uniform texel buffer (an R32G32B32A32_UINT
// view of the tensor's memory) read with texelFetch, bit-cast to float or int. lavapipe
// serves a texel fetch as one SIMD gather per component, a storage-buffer load lane by
// lane: with the two points below, the fused gelu chain runs ~1.9x faster there.
// Single step (plan_options::max_invocations): when one dispatch can give every step an
// invocation of its own, main() is straight-line code under one `if` instead of the
// grid-stride loop. lavapipe pays for the loop's structure even at one iteration (the
// fused gelu chain: ~1.15x faster without it). Sizes that are a whole number of vector
// steps get no tail code at all (kernel_plan::tail; another ~1.25x there).
// Many operands (plan_options' limits, the device's): parameters that do not fit in push
// constants go to a storage buffer bound after the operands (same members, same std430
// offsets, so make_args serves both); inputs beyond the device's storage-buffer
// descriptors are read through texel views in any variant, where every input has one.
#pragma once

#include "kiln/vulkan/codegen/types.hpp"
#include "kiln/vulkan/codegen/plan.hpp"
#include "kiln/vulkan/codegen/emitter.hpp"
#include "kiln/vulkan/codegen/args.hpp"
#include "kiln/vulkan/codegen/elementwise.hpp"
#include "kiln/vulkan/codegen/structural.hpp"
#include "kiln/vulkan/codegen/gemm.hpp"
#include "kiln/vulkan/codegen/source_cache.hpp"
