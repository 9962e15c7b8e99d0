// kernels/reduce/columns.comp — column mode of the reduce family (a fragment after
// ops.comp): the axis is not the last (inner > 1), so the outputs [outer, inner] are one
// invocation each, walking the axis: output t = o * p.inner + j reads input positions
// (o * p.extent + r) * p.inner + j for r in [0, p.extent), neighbouring invocations
// neighbouring elements (coalesced). No shared memory, no transposing copy.
// Workgroup: local_size_x = KILN_WG; workgroups numbered as in rows.comp (2-D grid).
// The host sends only axes of at most 16384 here (codegen/structural.hpp): llvmpipe /
// lavapipe end a shader loop after 65535 iterations (a guard against endless loops), so
// longer axes go to rows.comp over the input walked with the axis innermost.
layout(local_size_x = KILN_WG) in;

void main() {
  uint t = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * KILN_WG + gl_LocalInvocationIndex;
  if (t >= p.rows * p.inner) return;
  uint o = t / p.inner, j = t % p.inner;
  kiln_stats s = stats_empty();
  uint at = o * p.extent * p.inner + j;
  for (uint r = 0u; r < p.extent; ++r, at += p.inner) stats_add(s, kiln_prologue(at), r);
  kiln_epilogue(stats_result(s, float(p.extent)), t);
}
