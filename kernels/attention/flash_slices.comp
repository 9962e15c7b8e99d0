// kernels/attention/flash_slices.comp — flash attention with each query row spread over
// KILN_L invocations of one subgroup (a fragment after the generated part, with the
// hooks, parameters and #defines of flash.comp plus KILN_L, KILN_DS / KILN_DVS (vec4s of
// q / the output per invocation), KILN_BKV (keys per tile: a constant, so that the loops
// over a tile unroll and the scores stay in registers) and KILN_K4 / KILN_V4 (kiln_k4 /
// kiln_v4: four elements of a key / value row as one vec4)).
// KILN_UNROLL_KV: [[unroll]] on GPUs; [[dont_unroll]] on CPU devices (compile time).
// Bindings: the statement's operands (generated).
// Push constants (or the parameter buffer): as flash.comp.
// Workgroup: local_size_x = WG (specialisation constant 2), a multiple of the subgroup
//   size; one workgroup per task (batch, query head, block of WG / KILN_L query rows),
//   numbered gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x, tasks past the
//   last skipped. KILN_L divides the subgroup size.
// Why not flash.comp on a GPU: there an invocation keeps a whole row's q and output
// accumulators in registers, 2 D floats (256 at D = 128, past the 255 registers an
// NVIDIA thread has: spilled), which also leaves few warps resident. Here the KILN_L
// invocations of a row (neighbours in one subgroup) each hold the vec4s c * KILN_L + s
// of q and of the accumulators (s: the invocation's place in its row, c < KILN_DS): 32
// floats of each at D = 128 with KILN_L = 4. A score is the slices' partial dot products
// summed by subgroupShuffleXor (log2 KILN_L steps), after which every invocation of the
// row holds it; the online softmax runs in each of them alike, and p v adds each
// invocation's own slice. K / V tiles of BKV keys are staged in shared memory as vec4s,
// each row padded with zeros to KILN_DS * KILN_L vectors; the KILN_L invocations of a row
// read neighbouring vectors of a staged key, and the rows of a subgroup the same ones
// (broadcast). Causal (bottom-right), masks, softcap and a row that sees no key (zeros)
// as in flash.comp.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 128;
#define BKV KILN_BKV

#define KILN_DP4 (KILN_DS * KILN_L)   // staged vec4s of a key row
#define KILN_DVP4 (KILN_DVS * KILN_L) // of a value row
shared vec4 kiln_ks[BKV * KILN_DP4];   // [key][d / 4]
shared vec4 kiln_vs[BKV * KILN_DVP4];  // [key][dv / 4]

#define kiln_ninf uintBitsToFloat(0xff800000u)
#define kiln_pinf uintBitsToFloat(0x7f800000u)

void main() {
  kiln_block blk;
  if (!kiln_block_of(WG / KILN_L, blk)) return;  // whole workgroups: uniform
  uint head = blk.head, b = blk.b, h = blk.h, q0 = blk.q0, kend = blk.kend;
  int kbase = blk.kbase, vbase = blk.vbase, shift = blk.shift;
  uint lid = gl_LocalInvocationIndex;
  // the row and the slice from the subgroup, which holds the row's KILN_L invocations
  uint rows_per_subgroup = gl_SubgroupSize / KILN_L;
  uint rl = gl_SubgroupID * rows_per_subgroup + gl_SubgroupInvocationID / KILN_L;
  uint sl = gl_SubgroupInvocationID % KILN_L;

  uint i = q0 + rl;
  bool live = i < p.Sq;
  vec4 q[KILN_DS];
  vec4 acc[KILN_DVS];
  {
    uint qpos = ((head * p.Sq) + (live ? i : 0u)) * KILN_D;
    // q's slice through the prologue: loops kept rolled (each call is a copy of the prologue)
    [[dont_unroll]] for (uint c = 0u; c < KILN_DS; ++c) {
      uint d4 = c * KILN_L + sl;
      vec4 v = vec4(0.0);
      [[dont_unroll]] for (uint t = 0u; t < 4u; ++t)
        if (live && 4u * d4 + t < KILN_D) v[t] = kiln_prologue(qpos + 4u * d4 + t);
      q[c] = v * p.scale;
    }
  }
  KILN_UNROLL_KV for (uint c = 0u; c < KILN_DVS; ++c) acc[c] = vec4(0.0);
  float m = kiln_ninf, l = 0.0;
  int lastkey = !live ? -1 : p.causal != 0u ? min(int(i) + shift, int(p.Skv) - 1) : int(p.Skv) - 1;
#if KILN_MASK
  int mrow = int(p.moff) + int(b) * p.ms0 + int(h) * p.ms1 + int(live ? i : 0u) * p.ms2;
#endif

  float sc[BKV];
  for (uint k0 = 0u; k0 < kend; k0 += BKV) {
    // stage K and V: BKV keys x D (Dv), zeros past the end and past D
    for (uint it = lid; it < BKV * KILN_DP4; it += WG) {
      uint j = it / KILN_DP4, c = it % KILN_DP4, gj = k0 + j;
      vec4 v = vec4(0.0);
      if (gj < kend && c < KILN_D4) {
        int e = kbase + int(gj) * p.ks2;
#if KILN_K4
        v = kiln_k4(e + int(4u * c));
#else
        e += int(4u * c) * p.ks3;
        [[unroll]] for (uint t = 0u; t < 4u; ++t)
          if (4u * c + t < KILN_D) v[t] = kiln_k(e + int(t) * p.ks3);
#endif
      }
      kiln_ks[it] = v;
    }
    for (uint it = lid; it < BKV * KILN_DVP4; it += WG) {
      uint j = it / KILN_DVP4, c = it % KILN_DVP4, gj = k0 + j;
      vec4 v = vec4(0.0);
      if (gj < kend && c < KILN_DV4) {
        int e = vbase + int(gj) * p.vs2;
#if KILN_V4
        v = kiln_v4(e + int(4u * c));
#else
        e += int(4u * c) * p.vs3;
        [[unroll]] for (uint t = 0u; t < 4u; ++t)
          if (4u * c + t < KILN_DV) v[t] = kiln_v(e + int(t) * p.vs3);
#endif
      }
      kiln_vs[it] = v;
    }
    barrier();

    // scores: the slice's partial dot, summed over the row's invocations
    KILN_UNROLL_KV for (uint j = 0u; j < BKV; ++j) {
      vec4 d4 = vec4(0.0);
      KILN_UNROLL_KV for (uint c = 0u; c < KILN_DS; ++c) d4 += q[c] * kiln_ks[j * KILN_DP4 + c * KILN_L + sl];
      float x = (d4.x + d4.y) + (d4.z + d4.w);
      [[unroll]] for (uint o = 1u; o < KILN_L; o *= 2u) x += subgroupShuffleXor(x, o);
      int gj = int(k0 + j);
      if (gj <= lastkey) {
        if (p.softcap > 0.0) x = p.softcap * tanh(x / p.softcap);
#if KILN_MASK
        x += kiln_m(mrow + gj * p.ms3);
#endif
        if (isnan(x)) x = kiln_pinf;  // max() may drop a NaN: +inf keeps the row NaN, not "no key"
      } else {
        x = kiln_ninf;
      }
      sc[j] = x;
    }
    // online softmax: the tile's max, the rescale, p = exp(s - m')
    float mt = kiln_ninf;
    KILN_UNROLL_KV for (uint j = 0u; j < BKV; ++j) mt = max(mt, sc[j]);
    float mn = max(m, mt);
    bool none = mn == kiln_ninf;  // nothing visible yet: p = 0 for the whole tile
    float alpha = none ? 1.0 : exp(m - mn);  // m = -inf: 0
    float sum = 0.0;
    KILN_UNROLL_KV for (uint j = 0u; j < BKV; ++j) {
      float e = none ? 0.0 : exp(sc[j] - mn);
      sc[j] = e;
      sum += e;
    }
    l = l * alpha + sum;
    m = mn;
    KILN_UNROLL_KV for (uint c = 0u; c < KILN_DVS; ++c) acc[c] *= alpha;
    // p v: this invocation's slice of the staged value rows
    KILN_UNROLL_KV for (uint j = 0u; j < BKV; ++j) {
      float pj = sc[j];
      KILN_UNROLL_KV for (uint c = 0u; c < KILN_DVS; ++c) acc[c] += pj * kiln_vs[j * KILN_DVP4 + c * KILN_L + sl];
    }
    barrier();
  }

  if (!live) return;
  float inv = l > 0.0 ? 1.0 / l : 0.0;
  if (isnan(l)) inv = l;
  uint opos = (head * p.Sq + i) * KILN_DV;
  [[dont_unroll]] for (uint c = 0u; c < KILN_DVS; ++c) {
    uint d4 = c * KILN_L + sl;
    vec4 o = acc[c] * inv;
    [[dont_unroll]] for (uint t = 0u; t < 4u; ++t)
      if (4u * d4 + t < KILN_DV) kiln_epilogue(KILN_RESULT(o[t]), opos + 4u * d4 + t);
  }
}
