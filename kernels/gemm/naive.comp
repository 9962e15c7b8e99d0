// kernels/gemm/naive.comp — the naive tiled matmul, the floor the other variants are
// measured against (a fragment after the generated part: kiln_prologue, kiln_epilogue,
// kiln_batch, kiln_b and the parameters p).
// Bindings: the statement's operands (generated). Push constants (or the parameter
//   buffer): M, N, K, batches, kchunk, kchunks, tiles_m, tiles_n, batch dimensions, then
//   the generated operand members.
// Workgroup: local_size_x = WG (specialisation constant 2) = TILE * TILE (constant 3);
//   one workgroup per (batch, tile row, tile column), numbered as in tiled.comp.
// Each invocation computes one output: TILE x TILE blocks of a and b go through shared
// memory, then TILE multiply-adds from them; out-of-range elements stage as zeros.
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 256;
layout(constant_id = 3) const uint TILE = 16;

shared float kiln_as[TILE * TILE];
shared float kiln_bs[TILE * TILE];

void main() {
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  uint tiles = p.tiles_m * p.tiles_n;
  uint bo = task / tiles;
  if (bo >= p.batches) return;  // whole workgroups: uniform
  uint t = task % tiles;
  uint m0 = (t / p.tiles_n) * TILE, n0 = (t % p.tiles_n) * TILE;
  uint apos, belem;
  kiln_batch(bo, apos, belem);
  uint lid = gl_LocalInvocationIndex;
  uint tx = lid % TILE, ty = lid / TILE;
  uint m = m0 + ty, n = n0 + tx;
  float acc = 0.0;
  for (uint k0 = 0u; k0 < p.K; k0 += TILE) {
    float a = 0.0, b = 0.0;
    if (m < p.M && k0 + tx < p.K) a = kiln_prologue(apos + m * p.K + k0 + tx);
    if (k0 + ty < p.K && n < p.N) b = kiln_b(uint(int(belem) + int(k0 + ty) * p.bsk + int(n) * p.bsn));
    kiln_as[ty * TILE + tx] = a;
    kiln_bs[ty * TILE + tx] = b;
    barrier();
    for (uint kk = 0u; kk < TILE; ++kk) acc += kiln_as[ty * TILE + kk] * kiln_bs[kk * TILE + tx];
    barrier();
  }
  if (m < p.M && n < p.N) kiln_epilogue(acc, (bo * p.M + m) * p.N + n);
}
