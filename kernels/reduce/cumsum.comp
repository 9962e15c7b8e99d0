// kernels/reduce/cumsum.comp — kiln::cumsum (row family): the inclusive prefix sum of each
// line along the axis. Generated before it (vk_structural_kernel<cumsum_op>,
// vulkan/ops/cumsum.hpp): #version, the KILN_* defines, the buffers, the parameter block
// `p` (rows, extent, chunk, chunks, then the operands' offsets, extents and strides and
// the scalars) and the hooks
//   KILN_ACC kiln_prologue(uint pos)                 the input expression at input position pos
//   void kiln_epilogue(KILN_RESULT value, uint pos)  the output expression at output position pos
// KILN_ACC (= KILN_RESULT): float for f32, f16, bf16 inputs; int for integer inputs (adds
// wrap like int32 arithmetic).
// Layout: local_size_x = KILN_WG; line r holds input and output positions r * p.extent + i
// (the walk order with the axis innermost). A task is a workgroup, numbered
// gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x (the grid may be 2-D past
// maxComputeWorkGroupCount[0]); tasks past the last return.
//   KILN_PHASE 0: one dispatch, a task per line (p.chunks == 1, p.chunk == p.extent).
//   KILN_PHASE 1: long lines, first dispatch: a task per chunk of p.chunk elements of a
//     line (task = r * p.chunks + c) writes the chunk's sum to kiln_partial[task].x.
//   KILN_PHASE 2: second dispatch, the same tasks: the sum of the line's chunks before c
//     (the partials) is the carry into chunk c's scan.
// Partials are vec4s (.x used; int sums as their bits), bound after the operands.
// A scan goes in steps of KILN_WG * KILN_PER elements: an invocation scans KILN_PER
// neighbouring elements serially, the invocations' totals are scanned across the
// workgroup, and the total of the steps before is carried in every invocation:
//   KILN_LANES:    the workgroup is one subgroup: shuffles only, no barrier, no shared memory
//   KILN_SUBGROUP: shuffles within each subgroup, the subgroups' totals through shared memory
//   neither:       a shared-memory (Hillis-Steele) scan
// Each element is read and written by one invocation, its write after every read of its
// step, so `x = cumsum(x)` in place is safe (phase 1 writes no output). The host keeps an
// invocation's loop iterations (steps, and partials in phase 2) in the low thousands:
// llvmpipe / lavapipe end a shader after 65535 loop iterations in all.
layout(local_size_x = KILN_WG) in;

#if !KILN_LANES
shared KILN_ACC kiln_scan[KILN_WG];
#endif

// The sum of v over the invocations before this one (in invocation order), and over all
// of them (total). Called in uniform control flow.
KILN_ACC kiln_workgroup_scan(KILN_ACC v, out KILN_ACC total) {
#if KILN_LANES || KILN_SUBGROUP
  uint lane = gl_SubgroupInvocationID;
  KILN_ACC s = v;  // inclusive, within the subgroup
  for (uint d = 1u; d < gl_SubgroupSize; d <<= 1) {
    KILN_ACC o = subgroupShuffle(s, lane >= d ? lane - d : lane);
    if (lane >= d) s += o;
  }
  KILN_ACC before = subgroupShuffle(s, lane > 0u ? lane - 1u : 0u);
  if (lane == 0u) before = KILN_ACC(0);
#if KILN_LANES
  total = subgroupShuffle(s, gl_SubgroupSize - 1u);
  return before;
#else
  if (lane == gl_SubgroupSize - 1u) kiln_scan[gl_SubgroupID] = s;
  barrier();
  KILN_ACC earlier = KILN_ACC(0), all = KILN_ACC(0);
  for (uint k = 0u; k < gl_NumSubgroups; ++k) {
    KILN_ACC t = kiln_scan[k];
    if (k < gl_SubgroupID) earlier += t;
    all += t;
  }
  barrier();  // kiln_scan is reused by the next step
  total = all;
  return earlier + before;
#endif
#else
  uint lid = gl_LocalInvocationIndex;
  kiln_scan[lid] = v;
  barrier();
  for (uint d = 1u; d < KILN_WG; d <<= 1) {
    KILN_ACC o = lid >= d ? kiln_scan[lid - d] : KILN_ACC(0);
    barrier();
    kiln_scan[lid] += o;
    barrier();
  }
  KILN_ACC before = lid > 0u ? kiln_scan[lid - 1u] : KILN_ACC(0);
  total = kiln_scan[KILN_WG - 1u];
  barrier();  // kiln_scan is reused by the next step
  return before;
#endif
}

#if KILN_ACC_FLOAT
#define KILN_TO_PARTIAL(v) vec4(v, 0.0, 0.0, 0.0)
#define KILN_FROM_PARTIAL(q) (q).x
#else
#define KILN_TO_PARTIAL(v) vec4(intBitsToFloat(v), 0.0, 0.0, 0.0)
#define KILN_FROM_PARTIAL(q) floatBitsToInt((q).x)
#endif

void main() {
#if KILN_LANES
  kiln_copy_params();  // p: a private copy, kept in registers across stores
#endif
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (task >= p.rows * p.chunks) return;  // whole workgroups: uniform
  uint row = task / p.chunks, c = task - row * p.chunks;
  uint lid = gl_LocalInvocationIndex;
  uint n = p.extent, base = row * n;
  uint lo = c * p.chunk, hi = n - lo > p.chunk ? lo + p.chunk : n;  // this task's elements
  uint first = lid * KILN_PER;  // this invocation's elements in a step
  const uint step = KILN_WG * KILN_PER;
  KILN_ACC carry = KILN_ACC(0);
#if KILN_PHASE == 1
  KILN_ACC part = KILN_ACC(0);
  for (uint b0 = lo; b0 < hi; b0 += step) {
    for (uint k = 0u; k < KILN_PER; ++k) {
      uint i = b0 + first + k;
      if (i < hi) part += kiln_prologue(base + i);
    }
  }
  KILN_ACC total;
  kiln_workgroup_scan(part, total);
  if (lid == 0u) kiln_partial[task] = KILN_TO_PARTIAL(total);
#else
#if KILN_PHASE == 2
  {
    KILN_ACC part = KILN_ACC(0);
    for (uint k = lid; k < c; k += KILN_WG) part += KILN_FROM_PARTIAL(kiln_partial[row * p.chunks + k]);
    kiln_workgroup_scan(part, carry);
  }
#endif
  for (uint b0 = lo; b0 < hi; b0 += step) {
    KILN_ACC v[KILN_PER];
    KILN_ACC run = KILN_ACC(0);
    for (uint k = 0u; k < KILN_PER; ++k) {
      uint i = b0 + first + k;
      if (i < hi) run += kiln_prologue(base + i);
      v[k] = run;
    }
    KILN_ACC total;
    KILN_ACC before = carry + kiln_workgroup_scan(run, total);
    for (uint k = 0u; k < KILN_PER; ++k) {
      uint i = b0 + first + k;
      if (i < hi) kiln_epilogue(KILN_RESULT(before + v[k]), base + i);
    }
    carry += total;
  }
#endif
}
