// kernels/attention/block.comp — the query block of a flash-family workgroup (flash,
// flash_lanes, flash_slices; a fragment after the generated part and before the kernel,
// which reads the parameter block `p` of flash.comp). Workgroups are numbered
// gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x, one per (batch, query head,
// block of `rows` query rows); tasks past the last are skipped.
struct kiln_block {
  uint head, b, h;    // the (batch, query head) pair, its batch and its query head
  uint q0;            // the block's first query row
  int kbase, vbase;   // element 0 of k / v for the query head's kv head (GQA: h / group)
  int shift;          // causal (bottom-right): row i sees keys <= i + shift
  uint kend;          // keys the block visits: all, or (causal) up to its last row's last visible key
};

// This workgroup's block of `rows` query rows; false past the last task (whole
// workgroups: uniform, so the caller may return before its barriers).
bool kiln_block_of(uint rows, out kiln_block k) {
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  k.head = task / p.qblocks;
  if (k.head >= p.B * p.Hq) return false;
  k.b = k.head / p.Hq;
  k.h = k.head % p.Hq;
  uint hk = k.h / p.group;
  k.q0 = (task % p.qblocks) * rows;
  k.kbase = int(p.koff) + int(k.b) * p.ks0 + int(hk) * p.ks1;
  k.vbase = int(p.voff) + int(k.b) * p.vs0 + int(hk) * p.vs1;
  k.shift = int(p.Skv) - int(p.Sq);
  uint last_row = min(p.Sq, k.q0 + rows) - 1u;
  int kend = int(p.Skv);
  if (p.causal != 0u) kend = clamp(int(last_row) + k.shift + 1, 0, int(p.Skv));
  k.kend = uint(kend);
  return true;
}
