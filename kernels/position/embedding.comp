// kernels/position/embedding.comp — kiln::embedding (gather family): one invocation per
// output element t = k * D + j: row k's id, clamped to [0, V) (the host has checked
// every id before recording; the clamp keeps a buffer changed since from being read out
// of bounds), then the table's expression at input position id * D + j. Generated before
// it (codegen/position.hpp): the parameter block `p` (rows = number of ids, extent = D,
// seq = V, ...) and the hooks kiln_prologue, kiln_epilogue and int kiln_id(uint k).
layout(local_size_x = KILN_WG) in;

void main() {
  uint t = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * KILN_WG + gl_LocalInvocationIndex;
  if (t >= p.rows * p.extent) return;
  uint k = t / p.extent, j = t - k * p.extent;
  uint id = uint(clamp(kiln_id(k), 0, int(p.seq) - 1));
  kiln_epilogue(KILN_RESULT(kiln_prologue(id * p.extent + j)), t);
}
