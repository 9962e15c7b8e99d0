// kernels/gemm/coopmat.comp — the matmul on cooperative matrices (GL_NV_cooperative_matrix;
// a fragment after the generated part: kiln_prologue, kiln_epilogue, kiln_batch, kiln_b,
// kiln_a_vec4, kiln_b_vec4 and the parameters p, as tiled.comp).
// Sizes are #defines of the generated part (cooperative-matrix types need constant sizes):
//   KILN_BM x KILN_BN   the workgroup's output tile; KILN_BK the k depth staged at a time
//   KILN_SGM x KILN_SGN subgroups per workgroup; each owns a (BM / SGM) x (BN / SGN) block
//   KILN_CM x KILN_CN x KILN_CK  the cooperative-matrix product the driver reports
//   KILN_CM_BT          b staged [n][k] (1) or [k][n] (0, when read four n at a time)
// Workgroup: local_size_x = WG (specialisation constant 2) = SGM * SGN * subgroup size;
//   one workgroup per task (batch, tile row, tile column; n fastest), numbered as tiled.comp.
// Each k step stages BM x BK of a (through the prologue) and BK x BN of b in shared memory
// as f16 (a and b are f16 tensors, so nothing is rounded that was not f16 already), rows
// padded by 8 halves (16 bytes) so that the matrix loads stay aligned; out-of-range
// elements stage as zeros. The step's elements are read into registers one step ahead
// (kiln_fetch before the products of the step before), so that the global loads' latency
// hides behind the subgroups' products rather than stalling them at every step. Accumulators are f32. At the end each subgroup stores one
// accumulator at a time into its own CM x CN shared tile, and its invocations apply the
// epilogue to each element in range, so any fused epilogue runs exactly as in tiled.comp.
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 128;

const uint AS = KILN_BK + 8u;  // a row stride in shared memory (halves)
shared float16_t kiln_as[KILN_BM * AS];  // [m][k]
#if KILN_CM_BT
const uint BS = KILN_BK + 8u;
shared float16_t kiln_bs[KILN_BN * BS];  // [n][k]
#else
const uint BS = KILN_BN + 8u;
shared float16_t kiln_bs[KILN_BK * BS];  // [k][n]
#endif
const uint TMI = KILN_BM / KILN_SGM / KILN_CM;  // matrices per subgroup along m
const uint TNI = KILN_BN / KILN_SGN / KILN_CN;  // ... along n
shared float kiln_cs[KILN_SGM * KILN_SGN * KILN_CM * KILN_CN];

// One k step of a and b, read into registers as f16 (kiln_fetch) and written to shared
// memory (kiln_stage): the next step's global loads overlap this step's products.
#if KILN_A4
const uint A_ITEMS = KILN_BM * (KILN_BK / 4u);
f16vec4 kiln_ra[(A_ITEMS + WG - 1u) / WG];
#else
const uint A_ITEMS = KILN_BM * KILN_BK;
float16_t kiln_ra[(A_ITEMS + WG - 1u) / WG];
#endif
#if KILN_B4N
const uint B_ITEMS = KILN_BK * (KILN_BN / 4u);
f16vec4 kiln_rb[(B_ITEMS + WG - 1u) / WG];
#elif KILN_B4K
const uint B_ITEMS = KILN_BN * (KILN_BK / 4u);
f16vec4 kiln_rb[(B_ITEMS + WG - 1u) / WG];
#else
const uint B_ITEMS = KILN_BK * KILN_BN;
float16_t kiln_rb[(B_ITEMS + WG - 1u) / WG];
#endif

void kiln_fetch(uint k0, uint m0, uint n0, uint apos, uint belem, uint lid) {
  // a: BM rows x BK k (out-of-range elements as zeros)
  [[unroll]] for (uint r = 0u; r < (A_ITEMS + WG - 1u) / WG; ++r) {
    uint i = r * WG + lid;
#if KILN_A4
    vec4 v = vec4(0.0);
    if (A_ITEMS % WG == 0u || i < A_ITEMS) {
      uint m = i / (KILN_BK / 4u), kq = (i % (KILN_BK / 4u)) * 4u;
      uint gm = m0 + m, gk = k0 + kq;
      if (gm < p.M && gk < p.K) v = kiln_a_vec4(apos + gm * p.K + gk);  // K % 4 == 0: all four in range
    }
    kiln_ra[r] = f16vec4(v);
#else
    float v = 0.0;
    if (A_ITEMS % WG == 0u || i < A_ITEMS) {
      uint m = i / KILN_BK, kk = i % KILN_BK;
      uint gm = m0 + m, gk = k0 + kk;
      if (gm < p.M && gk < p.K) v = kiln_prologue(apos + gm * p.K + gk);
    }
    kiln_ra[r] = float16_t(v);
#endif
  }
  // b: BK k x BN columns
  [[unroll]] for (uint r = 0u; r < (B_ITEMS + WG - 1u) / WG; ++r) {
    uint i = r * WG + lid;
#if KILN_B4N
    vec4 v = vec4(0.0);
    if (B_ITEMS % WG == 0u || i < B_ITEMS) {
      uint kk = i / (KILN_BN / 4u), nq = (i % (KILN_BN / 4u)) * 4u;
      uint gk = k0 + kk, gn = n0 + nq;
      if (gk < p.K && gn < p.N) v = kiln_b_vec4(uint(int(belem) + int(gk) * p.bsk + int(gn)));
    }
    kiln_rb[r] = f16vec4(v);
#elif KILN_B4K
    vec4 v = vec4(0.0);
    if (B_ITEMS % WG == 0u || i < B_ITEMS) {
      uint n = i / (KILN_BK / 4u), kq = (i % (KILN_BK / 4u)) * 4u;
      uint gn = n0 + n, gk = k0 + kq;
      if (gn < p.N && gk < p.K) v = kiln_b_vec4(uint(int(belem) + int(gn) * p.bsn + int(gk)));
    }
    kiln_rb[r] = f16vec4(v);
#else
    float v = 0.0;
    if (B_ITEMS % WG == 0u || i < B_ITEMS) {
      uint n = i / KILN_BK, kk = i % KILN_BK;  // consecutive invocations along k
      uint gk = k0 + kk, gn = n0 + n;
      if (gk < p.K && gn < p.N) v = kiln_b(uint(int(belem) + int(gk) * p.bsk + int(gn) * p.bsn));
    }
    kiln_rb[r] = float16_t(v);
#endif
  }
}

void kiln_stage(uint lid) {
  [[unroll]] for (uint r = 0u; r < (A_ITEMS + WG - 1u) / WG; ++r) {
    uint i = r * WG + lid;
    if (A_ITEMS % WG == 0u || i < A_ITEMS) {
#if KILN_A4
      uint at = (i / (KILN_BK / 4u)) * AS + (i % (KILN_BK / 4u)) * 4u;
      kiln_as[at] = kiln_ra[r].x;
      kiln_as[at + 1u] = kiln_ra[r].y;
      kiln_as[at + 2u] = kiln_ra[r].z;
      kiln_as[at + 3u] = kiln_ra[r].w;
#else
      kiln_as[(i / KILN_BK) * AS + i % KILN_BK] = kiln_ra[r];
#endif
    }
  }
  [[unroll]] for (uint r = 0u; r < (B_ITEMS + WG - 1u) / WG; ++r) {
    uint i = r * WG + lid;
    if (B_ITEMS % WG == 0u || i < B_ITEMS) {
#if KILN_B4N
      uint at = (i / (KILN_BN / 4u)) * BS + (i % (KILN_BN / 4u)) * 4u;  // !KILN_CM_BT: [k][n]
#elif KILN_B4K
      uint at = (i / (KILN_BK / 4u)) * BS + (i % (KILN_BK / 4u)) * 4u;  // KILN_CM_BT: [n][k]
#endif
#if KILN_B4N || KILN_B4K
      kiln_bs[at] = kiln_rb[r].x;
      kiln_bs[at + 1u] = kiln_rb[r].y;
      kiln_bs[at + 2u] = kiln_rb[r].z;
      kiln_bs[at + 3u] = kiln_rb[r].w;
#else
      kiln_bs[(i / KILN_BK) * BS + i % KILN_BK] = kiln_rb[r];  // KILN_CM_BT: [n][k]
#endif
    }
  }
}

void main() {
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  uint tiles = p.tiles_m * p.tiles_n;
  uint bo = task / tiles;
  if (bo >= p.batches) return;  // whole workgroups: uniform
  uint t = task % tiles;
  uint m0 = (t / p.tiles_n) * KILN_BM, n0 = (t % p.tiles_n) * KILN_BN;
  uint apos, belem;
  kiln_batch(bo, apos, belem);
  uint lid = gl_LocalInvocationIndex;
  uint sg = gl_SubgroupID;
  uint wm = sg / KILN_SGN, wn = sg % KILN_SGN;

  fcoopmatNV<32, gl_ScopeSubgroup, KILN_CM, KILN_CN> acc[TMI * TNI];
  [[unroll]] for (uint i = 0u; i < TMI * TNI; ++i) acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, KILN_CM, KILN_CN>(0.0);

  // the first k step into registers, then per step: registers to shared memory, the next
  // step's loads issued (in flight while the subgroups multiply), the products
  kiln_fetch(0u, m0, n0, apos, belem, lid);
  for (uint k0 = 0u; k0 < p.K; k0 += KILN_BK) {
    kiln_stage(lid);
    barrier();
    if (k0 + KILN_BK < p.K) kiln_fetch(k0 + KILN_BK, m0, n0, apos, belem, lid);
    [[unroll]] for (uint kk = 0u; kk < KILN_BK; kk += KILN_CK) {
      fcoopmatNV<16, gl_ScopeSubgroup, KILN_CM, KILN_CK> af[TMI];
      fcoopmatNV<16, gl_ScopeSubgroup, KILN_CK, KILN_CN> bf[TNI];
      [[unroll]] for (uint i = 0u; i < TMI; ++i) {
        coopMatLoadNV(af[i], kiln_as, (wm * (KILN_BM / KILN_SGM) + i * KILN_CM) * AS + kk, AS, false);
      }
      [[unroll]] for (uint j = 0u; j < TNI; ++j) {
#if KILN_CM_BT
        coopMatLoadNV(bf[j], kiln_bs, (wn * (KILN_BN / KILN_SGN) + j * KILN_CN) * BS + kk, BS, true);
#else
        coopMatLoadNV(bf[j], kiln_bs, kk * BS + wn * (KILN_BN / KILN_SGN) + j * KILN_CN, BS, false);
#endif
      }
      [[unroll]] for (uint i = 0u; i < TMI; ++i) {
        [[unroll]] for (uint j = 0u; j < TNI; ++j) acc[i * TNI + j] = coopMatMulAddNV(af[i], bf[j], acc[i * TNI + j]);
      }
    }
    barrier();
  }

  // the epilogue, one accumulator at a time through this subgroup's tile
  const uint CT = KILN_CM * KILN_CN;
  uint lane = gl_SubgroupInvocationID;
  [[unroll]] for (uint i = 0u; i < TMI; ++i) {
    [[unroll]] for (uint j = 0u; j < TNI; ++j) {
      coopMatStoreNV(acc[i * TNI + j], kiln_cs, sg * CT, KILN_CN, false);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      uint mb = m0 + wm * (KILN_BM / KILN_SGM) + i * KILN_CM, nb = n0 + wn * (KILN_BN / KILN_SGN) + j * KILN_CN;
      for (uint e = lane; e < CT; e += gl_SubgroupSize) {
        uint m = mb + e / KILN_CN, n = nb + e % KILN_CN;
        if (m < p.M && n < p.N) kiln_epilogue(kiln_cs[sg * CT + e], (bo * p.M + m) * p.N + n);
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
    }
  }
}
