// kernels/gemm/matvec.comp — matmul for a few rows of a (M <= 4: the decode step), a
// fragment after the generated part (kiln_prologue, kiln_epilogue, kiln_batch, kiln_b,
// kiln_a_vec4, kiln_b_vec4 and the parameters p).
// Bindings: the statement's operands (generated). Push constants (or the parameter
//   buffer): M, N, K, batches, kchunk, kchunks, tiles_m (row groups), tiles_n (column
//   groups), the batch dimensions, then the generated operand members.
// Workgroup: local_size_x = WG (specialisation constant 2, a power of two); one workgroup
//   per (batch, group of MR rows (constant 4), group of columns; columns fastest),
//   numbered gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x.
// KILN_MV_COLUMNS 0 (k-reduce; b k-contiguous, as an nn.Linear weight [N, K] is read, or
//   any layout): a group is NR (constant 3) columns; the workgroup's invocations stride
//   over K together (four k a step with KILN_A4 and KILN_B4K), then the MR x NR sums are
//   reduced across the workgroup (subgroupAdd with KILN_SUBGROUP, then shared memory;
//   else a shared-memory tree).
// KILN_MV_COLUMNS 1 (b n-contiguous, row-major [K, N]): a group is GX (constant 3) * 4
//   columns; invocation (x = lid % GX, y = lid / GX) owns four columns and the k-slice
//   k = y, y + WG / GX, ...; the WG / GX slices are merged by a shared-memory tree.
// Each finished sum goes through the epilogue once.
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 128;
layout(constant_id = 3) const uint NR = 4;  // k-reduce: columns per workgroup; columns: GX
layout(constant_id = 4) const uint MR = 1;

void kiln_output(uint bo, uint m, uint n, float v) {
  if (m < p.M && n < p.N) kiln_epilogue(v, (bo * p.M + m) * p.N + n);
}

#if !KILN_MV_COLUMNS
#if KILN_SUBGROUP
shared float kiln_red[WG * MR * NR];  // [subgroup][j]: only gl_NumSubgroups rows used
#else
shared float kiln_red[WG * MR * NR];  // [j][invocation]
#endif

void main() {
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  uint ng = task % p.tiles_n, rest = task / p.tiles_n;
  uint mg = rest % p.tiles_m, bo = rest / p.tiles_m;
  if (bo >= p.batches) return;  // whole workgroups: uniform
  uint n0 = ng * NR, m0 = mg * MR;
  uint apos, belem;
  kiln_batch(bo, apos, belem);
  uint lid = gl_LocalInvocationIndex;
  float acc[MR * NR];
  for (uint j = 0u; j < MR * NR; ++j) acc[j] = 0.0;
#if KILN_A4 && KILN_B4K
  // two steps of k an iteration, both steps' loads issued before either's products (a
  // GPU keeps twice the reads in flight); the sums are added in the same order as one
  // step an iteration
  for (uint k = lid * 4u; k < p.K; k += WG * 8u) {
    uint k2 = k + WG * 4u;
    bool two = k2 < p.K;
    vec4 bv[NR], bv2[NR];
    for (uint r = 0u; r < NR; ++r) {
      uint n = n0 + r;
      bv[r] = n < p.N ? kiln_b_vec4(uint(int(belem) + int(n) * p.bsn + int(k))) : vec4(0.0);
      bv2[r] = n < p.N && two ? kiln_b_vec4(uint(int(belem) + int(n) * p.bsn + int(k2))) : vec4(0.0);
    }
    vec4 av[MR], av2[MR];
    for (uint i = 0u; i < MR; ++i) {
      uint m = m0 + i;
      av[i] = m < p.M ? kiln_a_vec4(apos + m * p.K + k) : vec4(0.0);
      av2[i] = m < p.M && two ? kiln_a_vec4(apos + m * p.K + k2) : vec4(0.0);
    }
    for (uint i = 0u; i < MR; ++i) {
      for (uint r = 0u; r < NR; ++r) acc[i * NR + r] += dot(av[i], bv[r]);
    }
    if (two) {
      for (uint i = 0u; i < MR; ++i) {
        for (uint r = 0u; r < NR; ++r) acc[i * NR + r] += dot(av2[i], bv2[r]);
      }
    }
  }
#else
  for (uint k = lid; k < p.K; k += WG) {
    float bv[NR];
    for (uint r = 0u; r < NR; ++r) {
      uint n = n0 + r;
      bv[r] = n < p.N ? kiln_b(uint(int(belem) + int(k) * p.bsk + int(n) * p.bsn)) : 0.0;
    }
    for (uint i = 0u; i < MR; ++i) {
      uint m = m0 + i;
      float av = m < p.M ? kiln_prologue(apos + m * p.K + k) : 0.0;
      for (uint r = 0u; r < NR; ++r) acc[i * NR + r] += av * bv[r];
    }
  }
#endif
#if KILN_SUBGROUP
  for (uint j = 0u; j < MR * NR; ++j) acc[j] = subgroupAdd(acc[j]);
  if (subgroupElect()) {
    for (uint j = 0u; j < MR * NR; ++j) kiln_red[gl_SubgroupID * (MR * NR) + j] = acc[j];
  }
  barrier();
  if (lid < MR * NR) {
    float s = 0.0;
    for (uint g = 0u; g < gl_NumSubgroups; ++g) s += kiln_red[g * (MR * NR) + lid];
    kiln_output(bo, m0 + lid / NR, n0 + lid % NR, s);
  }
#else
  for (uint j = 0u; j < MR * NR; ++j) kiln_red[j * WG + lid] = acc[j];
  barrier();
  for (uint w = WG / 2u; w > 0u; w >>= 1) {
    if (lid < w) {
      for (uint j = 0u; j < MR * NR; ++j) kiln_red[j * WG + lid] += kiln_red[j * WG + lid + w];
    }
    barrier();
  }
  if (lid < MR * NR) kiln_output(bo, m0 + lid / NR, n0 + lid % NR, kiln_red[lid * WG]);
#endif
}

#else  // KILN_MV_COLUMNS
shared vec4 kiln_red[WG * MR];  // [slice][row][x]

void main() {
  const uint GX = NR, GY = WG / NR;
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  uint ng = task % p.tiles_n, rest = task / p.tiles_n;
  uint mg = rest % p.tiles_m, bo = rest / p.tiles_m;
  if (bo >= p.batches) return;  // whole workgroups: uniform
  uint lid = gl_LocalInvocationIndex;
  uint x = lid % GX, y = lid / GX;
  uint n = ng * GX * 4u + x * 4u, m0 = mg * MR;
  uint apos, belem;
  kiln_batch(bo, apos, belem);
  vec4 acc[MR];
  for (uint i = 0u; i < MR; ++i) acc[i] = vec4(0.0);
  for (uint k = y; k < p.K; k += GY) {
    int row = int(belem) + int(k) * p.bsk;
#if KILN_B4N
    vec4 bv = n < p.N ? kiln_b_vec4(uint(row + int(n))) : vec4(0.0);  // N % 4 == 0
#else
    vec4 bv = vec4(0.0);
    for (uint c = 0u; c < 4u; ++c) {
      if (n + c < p.N) bv[c] = kiln_b(uint(row + int(n + c) * p.bsn));
    }
#endif
    for (uint i = 0u; i < MR; ++i) {
      uint m = m0 + i;
      float av = m < p.M ? kiln_prologue(apos + m * p.K + k) : 0.0;
      acc[i] += av * bv;
    }
  }
  for (uint i = 0u; i < MR; ++i) kiln_red[(y * MR + i) * GX + x] = acc[i];
  barrier();
  for (uint w = GY / 2u; w > 0u; w >>= 1) {
    if (y < w) {
      for (uint i = 0u; i < MR; ++i) kiln_red[(y * MR + i) * GX + x] += kiln_red[((y + w) * MR + i) * GX + x];
    }
    barrier();
  }
  if (y == 0u) {
    for (uint i = 0u; i < MR; ++i) {
      vec4 s = kiln_red[i * GX + x];
      for (uint c = 0u; c < 4u; ++c) kiln_output(bo, m0 + i, n + c, s[c]);
    }
  }
}
#endif
