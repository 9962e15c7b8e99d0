// kernels/gemm/tiled.comp — the tiled matmul (a fragment after the generated part:
// kiln_prologue, kiln_epilogue, kiln_batch, kiln_b, kiln_a_vec4, kiln_b_vec4 and the parameters p).
// Bindings: the statement's operands (generated), split-K's partial sums after them.
// Push constants (or the parameter buffer): M, N, K, batches, kchunk, kchunks, tiles_m,
//   tiles_n, the batch dimensions, then the generated operand members.
// Workgroup: local_size_x = WG (specialisation constant 2) = (BM / TM) * (BN / TN); one
//   workgroup per task (batch, K chunk, tile row, tile column; n fastest), numbered
//   gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x, tasks past the last skipped.
// Each task stages BM x BK of a (through the prologue) and BK x BN of b in shared memory,
// k-major, and each invocation accumulates a TM x TN block (TM, TN multiples of 4) from
// vec4 reads of both tiles. KILN_A4: a read four k at a time (K % 4 == 0); KILN_B4N /
// KILN_B4K: b read as vec4 along n / along k. Out-of-range elements stage as zeros, so
// the sums over k never see them; out-of-range outputs are not stored. The loops over the
// register block are [[unroll]] (the accumulators stay in registers: on lavapipe a
// shared-memory vector read is a loop over the SIMD lanes, so large blocks pay); the
// loop over k within a tile is not (compile time), the staging loops are left to the
// compiler.
// KILN_PHASE 0: the epilogue writes each output; 1 (split-K): partial sums over the task's
//   K chunk go to kiln_partial[kc * outputs + position], merged by merge.comp.
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 256;
layout(constant_id = 3) const uint BM = 64;
layout(constant_id = 4) const uint BN = 64;
layout(constant_id = 5) const uint BK = 16;
layout(constant_id = 6) const uint TM = 4;
layout(constant_id = 7) const uint TN = 4;

shared vec4 kiln_as[BK * (BM / 4u)];  // [k][m / 4]
shared vec4 kiln_bs[BK * (BN / 4u)];  // [k][n / 4]

void main() {
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  uint tiles = p.tiles_m * p.tiles_n;
  uint bo = task / (tiles * p.kchunks);
  if (bo >= p.batches) return;  // whole workgroups: uniform
  uint rest = task % (tiles * p.kchunks);
  uint kc = rest / tiles, t = rest % tiles;
  uint m0 = (t / p.tiles_n) * BM, n0 = (t % p.tiles_n) * BN;
  uint apos, belem;
  kiln_batch(bo, apos, belem);
  uint lid = gl_LocalInvocationIndex;
  uint tx = lid % (BN / TN), ty = lid / (BN / TN);

  vec4 acc[TM * (TN / 4u)];
  [[unroll]] for (uint i = 0u; i < TM * (TN / 4u); ++i) acc[i] = vec4(0.0);
  uint kb = kc * p.kchunk, ke = min(p.K, kb + p.kchunk);

  for (uint k0 = kb; k0 < ke; k0 += BK) {
    // a: BM rows x BK k (constant trip counts, so the loops unroll)
#if KILN_A4
    const uint A_ITEMS = BM * (BK / 4u);
    for (uint r = 0u; r < (A_ITEMS + WG - 1u) / WG; ++r) {
      uint i = r * WG + lid;
      if (A_ITEMS % WG == 0u || i < A_ITEMS) {
        uint m = i / (BK / 4u), kq = (i % (BK / 4u)) * 4u;
        uint gm = m0 + m, gk = k0 + kq;
        vec4 v = vec4(0.0);
        if (gm < p.M && gk < ke) v = kiln_a_vec4(apos + gm * p.K + gk);  // K % 4 == 0: all four in range
        uint at = kq * (BM / 4u) + m / 4u;
        kiln_as[at][m % 4u] = v.x;
        kiln_as[at + BM / 4u][m % 4u] = v.y;
        kiln_as[at + 2u * (BM / 4u)][m % 4u] = v.z;
        kiln_as[at + 3u * (BM / 4u)][m % 4u] = v.w;
      }
    }
#else
    const uint A_ITEMS = BM * BK;
    for (uint r = 0u; r < (A_ITEMS + WG - 1u) / WG; ++r) {
      uint i = r * WG + lid;
      if (A_ITEMS % WG == 0u || i < A_ITEMS) {
        uint m = i / BK, kk = i % BK;
        uint gm = m0 + m, gk = k0 + kk;
        float v = 0.0;
        if (gm < p.M && gk < ke) v = kiln_prologue(apos + gm * p.K + gk);
        kiln_as[kk * (BM / 4u) + m / 4u][m % 4u] = v;
      }
    }
#endif
    // b: BK k x BN columns
#if KILN_B4N
    const uint B_ITEMS = BK * (BN / 4u);
    for (uint r = 0u; r < (B_ITEMS + WG - 1u) / WG; ++r) {
      uint i = r * WG + lid;
      if (B_ITEMS % WG == 0u || i < B_ITEMS) {
        uint kk = i / (BN / 4u), nq = (i % (BN / 4u)) * 4u;
        uint gk = k0 + kk, gn = n0 + nq;
        vec4 v = vec4(0.0);
        if (gk < ke && gn < p.N) v = kiln_b_vec4(uint(int(belem) + int(gk) * p.bsk + int(gn)));
        kiln_bs[i] = v;
      }
    }
#elif KILN_B4K
    const uint B_ITEMS = BN * (BK / 4u);
    for (uint r = 0u; r < (B_ITEMS + WG - 1u) / WG; ++r) {
      uint i = r * WG + lid;
      if (B_ITEMS % WG == 0u || i < B_ITEMS) {
        uint n = i / (BK / 4u), kq = (i % (BK / 4u)) * 4u;
        uint gn = n0 + n, gk = k0 + kq;
        vec4 v = vec4(0.0);
        if (gn < p.N && gk < ke) v = kiln_b_vec4(uint(int(belem) + int(gn) * p.bsn + int(gk)));
        uint at = kq * (BN / 4u) + n / 4u;
        kiln_bs[at][n % 4u] = v.x;
        kiln_bs[at + BN / 4u][n % 4u] = v.y;
        kiln_bs[at + 2u * (BN / 4u)][n % 4u] = v.z;
        kiln_bs[at + 3u * (BN / 4u)][n % 4u] = v.w;
      }
    }
#else
    const uint B_ITEMS = BK * BN;
    for (uint r = 0u; r < (B_ITEMS + WG - 1u) / WG; ++r) {
      uint i = r * WG + lid;
      if (B_ITEMS % WG == 0u || i < B_ITEMS) {
        uint kk = i / BN, n = i % BN;
        uint gk = k0 + kk, gn = n0 + n;
        float v = 0.0;
        if (gk < ke && gn < p.N) v = kiln_b(uint(int(belem) + int(gk) * p.bsk + int(gn) * p.bsn));
        kiln_bs[kk * (BN / 4u) + n / 4u][n % 4u] = v;
      }
    }
#endif
    barrier();
    [[dont_unroll]] for (uint kk = 0u; kk < BK; ++kk) {
      vec4 av[TM / 4u];
      vec4 bv[TN / 4u];
      [[unroll]] for (uint i = 0u; i < TM / 4u; ++i) av[i] = kiln_as[kk * (BM / 4u) + ty * (TM / 4u) + i];
      [[unroll]] for (uint j = 0u; j < TN / 4u; ++j) bv[j] = kiln_bs[kk * (BN / 4u) + tx * (TN / 4u) + j];
      [[unroll]] for (uint i = 0u; i < TM; ++i) {
        float a = av[i / 4u][i % 4u];
        [[unroll]] for (uint j = 0u; j < TN / 4u; ++j) acc[i * (TN / 4u) + j] += a * bv[j];
      }
    }
    barrier();
  }

  uint outputs = p.batches * p.M * p.N;
  [[unroll]] for (uint i = 0u; i < TM; ++i) {
    uint m = m0 + ty * TM + i;
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      uint n = n0 + tx * TN + j;
      if (m >= p.M || n >= p.N) continue;
      float v = acc[i * (TN / 4u) + j / 4u][j % 4u];
      uint pos = (bo * p.M + m) * p.N + n;
#if KILN_PHASE == 1
      kiln_partial[kc * outputs + pos] = v;
#else
      kiln_epilogue(v, pos);
#endif
    }
  }
}
