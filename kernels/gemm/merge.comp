// kernels/gemm/merge.comp — split-K's second dispatch (a fragment after the generated
// part): each output's partial sums, K chunk by K chunk in order, then the epilogue.
// Bindings: the statement's operands (generated), the partial sums after them (readonly,
//   kiln_partial[kc * outputs + position], written by tiled.comp's phase 1).
// Push constants: as tiled.comp (the same block: both dispatches take the same words).
// Workgroup: local_size_x = WG (specialisation constant 2); one invocation per output,
//   workgroups numbered gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x.
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 256;

void main() {
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  uint outputs = p.batches * p.M * p.N;
  uint pos = task * WG + gl_LocalInvocationIndex;
  if (pos >= outputs) return;
  float s = 0.0;
  for (uint kc = 0u; kc < p.kchunks; ++kc) s += kiln_partial[kc * outputs + pos];
  kiln_epilogue(s, pos);
}
