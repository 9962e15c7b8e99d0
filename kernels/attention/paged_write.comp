// kernels/attention/paged_write.comp — kiln::paged_write: each element of the new rows
// [B, Hkv, S, D] (the prologue at its position) to its pool position through the block
// table. A fragment after the generated part (vulkan/ops/paged_attention.hpp: the
// parameter block `p`, KILN_WG, KILN_RESULT, the hooks kiln_prologue, kiln_epilogue, int
// kiln_table(uint b, uint j), int kiln_len(uint b) (here the sequence's first written
// position), and the check buffer `uint kiln_check[]`).
// Bindings: the statement's operands (generated: the pool as output, the prologue's
//   tensors, the tables, the starts), the check buffer after them.
// Push constants: B, Hkv, Sq (rows a sequence), D, N (pool blocks), bs, M (table width),
//   total (B * Hkv * Sq * D), the input's offsets, the tables' and starts' (toff, ts0,
//   ts1, loff, ls0), the output's.
// Workgroup: local_size_x = KILN_WG; one invocation per element, numbered
//   (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * KILN_WG + local index.
// Checks as paged.comp's: a start whose rows pass M * bs (reported by the sequence's
// element 0: position B * M + b), or a table entry outside [0, N) of a block written
// (reported by the element 0 of head 0 of the first row landing in that block: position
// b * M + j); the element is then not written (nothing is written out of bounds or to a
// wrong block), and the host throws at its next synchronisation.
layout(local_size_x = KILN_WG) in;

void main() {
  uint t = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * KILN_WG + gl_LocalInvocationIndex;
  if (t >= p.total) return;
  uint d = t % p.D, r = t / p.D;
  uint s = r % p.Sq, bh = r / p.Sq;
  uint h = bh % p.Hkv, b = bh / p.Hkv;
  int start = kiln_len(b);
  if (start < 0 || uint(start) + p.Sq > p.M * p.bs) {
    if (h == 0u && s == 0u && d == 0u) {
      kiln_check[1u + p.B * p.M + b] = uint(start);
      atomicMin(kiln_check[0], p.B * p.M + b);
    }
    return;
  }
  uint pos = uint(start) + s, j = pos / p.bs;
  int e = kiln_table(b, j);
  if (e < 0 || uint(e) >= p.N) {
    if (h == 0u && d == 0u && (s == 0u || pos % p.bs == 0u)) {
      kiln_check[1u + b * p.M + j] = uint(e);
      atomicMin(kiln_check[0], b * p.M + j);
    }
    return;
  }
  kiln_epilogue(KILN_RESULT(kiln_prologue(t)), ((uint(e) * p.Hkv + h) * p.bs + pos % p.bs) * p.D + d);
}
