// kernels/position/embedding.comp — kiln::embedding (gather family): one invocation per
// output element t = k * D + j: row k's id, clamped to [0, V) so that nothing is read out
// of bounds, then the table's expression at input position id * D + j. The ids are
// checked here, not by the host (which would wait for them): the invocation of column 0
// of a row whose id is outside [0, V) writes the id to kiln_check[1 + k] (one writer a
// row) and lowers kiln_check[0] to k (atomicMin: the first bad position wins); the host
// reads both at its next synchronisation (context_state::dispatch_checked) and throws
// kiln::index_error. No barrier and no atomic where every id is good. A table of no rows
// (V = 0) is never read: every id is bad, and the output gets zeros.
// Generated before it (codegen/position.hpp): the parameter block `p` (rows = number of
// ids, extent = D, seq = V, ...), the check buffer `uint kiln_check[]` (1 + rows words)
// and the hooks kiln_prologue, kiln_epilogue and int kiln_id(uint k).
layout(local_size_x = KILN_WG) in;

void main() {
  uint t = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * KILN_WG + gl_LocalInvocationIndex;
  if (t >= p.rows * p.extent) return;
  uint k = t / p.extent, j = t - k * p.extent;
  int raw = kiln_id(k);
  bool bad = raw < 0 || uint(raw) >= p.seq;
  if (bad && j == 0u) {
    kiln_check[1u + k] = uint(raw);
    atomicMin(kiln_check[0], k);
  }
  uint id = !bad ? uint(raw) : (raw < 0 ? 0u : p.seq - 1u);
  KILN_RESULT v = KILN_RESULT(0);
  if (p.seq != 0u) v = KILN_RESULT(kiln_prologue(id * p.extent + j));
  kiln_epilogue(v, t);
}
