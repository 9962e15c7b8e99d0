// kernels/attention/flash.comp — flash attention (a fragment after the generated part:
// kiln_prologue (q by position in [B, Hq, Sq, D]), kiln_epilogue (output position in
// [B, Hq, Sq, Dv]), kiln_k / kiln_v / kiln_m (element reads of k, v and the mask) and
// the parameters p; KILN_D, KILN_DV, KILN_D4, KILN_DV4 and KILN_MASK are #defines).
// Bindings: the statement's operands (generated).
// Push constants (or the parameter buffer): B, Hq, Sq, Skv, group, rows, qblocks,
//   splits, chunk, causal, scale, softcap, the input's, k's / v's / mask's offsets and
//   [B, H, S, D] strides (the mask's as [B, Hq, Sq, Skv], 0 where broadcast), the output's.
// Workgroup: local_size_x = WG (specialisation constant 2); one workgroup per task
//   (batch, query head, query block of BQ = WG * RQ rows), numbered
//   gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x, tasks past the last skipped.
// Invocation lid owns rows q0 + r * WG + lid (r < RQ): its q (times the scale) and its f32
// output accumulators stay in registers (the [[unroll]] loops index them by constants).
// Each tile of BKV keys is staged in shared memory as vec4s (D padded with zeros to
// KILN_D4 vectors, so a head dimension that is no multiple of 4 takes the same path);
// every staged vector feeds the RQ rows of an invocation. Per row and tile: the scores,
// capped (softcap > 0) and masked, then the online softmax (the running max m, the sum l,
// the accumulators rescaled by exp(m - m') once per tile). Causal (bottom-right: row i
// sees keys j <= i + Skv - Sq): the block stops at its last row's last visible key.
// A row that sees no key (all scores -inf) keeps l = 0 and writes zeros.
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 64;
layout(constant_id = 3) const uint RQ = 1;
layout(constant_id = 4) const uint BKV = 32;

shared vec4 kiln_ks[BKV * KILN_D4];   // [key][d / 4]
shared vec4 kiln_vs[BKV * KILN_DV4];  // [key][dv / 4]

#define kiln_ninf uintBitsToFloat(0xff800000u)
#define kiln_pinf uintBitsToFloat(0x7f800000u)

void main() {
  kiln_block blk;
  if (!kiln_block_of(WG * RQ, blk)) return;  // whole workgroups: uniform
  uint head = blk.head, b = blk.b, h = blk.h, q0 = blk.q0, kend = blk.kend;
  int kbase = blk.kbase, vbase = blk.vbase, shift = blk.shift;
  uint lid = gl_LocalInvocationIndex;

  vec4 q[RQ][KILN_D4];
  vec4 acc[RQ][KILN_DV4];
  float m[RQ], l[RQ];
  int lastkey[RQ];  // the row's last visible key (-1: none)
#if KILN_MASK
  int mrow[RQ];
#endif
  [[unroll]] for (uint r = 0u; r < RQ; ++r) {
    uint i = q0 + r * WG + lid;
    bool live = i < p.Sq;
    uint qpos = ((head * p.Sq) + (live ? i : 0u)) * KILN_D;
    // q through the prologue: loops kept rolled (each call is a copy of the prologue)
    [[dont_unroll]] for (uint c = 0u; c < KILN_D4; ++c) {
      vec4 v = vec4(0.0);
      [[dont_unroll]] for (uint t = 0u; t < 4u; ++t)
        if (live && 4u * c + t < KILN_D) v[t] = kiln_prologue(qpos + 4u * c + t);
      q[r][c] = v * p.scale;
    }
    [[unroll]] for (uint c = 0u; c < KILN_DV4; ++c) acc[r][c] = vec4(0.0);
    m[r] = kiln_ninf;
    l[r] = 0.0;
    lastkey[r] = !live ? -1 : p.causal != 0u ? min(int(i) + shift, int(p.Skv) - 1) : int(p.Skv) - 1;
#if KILN_MASK
    mrow[r] = int(p.moff) + int(b) * p.ms0 + int(h) * p.ms1 + int(live ? i : 0u) * p.ms2;
#endif
  }

  float sc[RQ][BKV];
  for (uint k0 = 0u; k0 < kend; k0 += BKV) {
    // stage K and V: BKV keys x D (Dv), zeros past the end and past D
    for (uint it = lid; it < BKV * KILN_D4; it += WG) {
      uint j = it / KILN_D4, c = it % KILN_D4, gj = k0 + j;
      vec4 v = vec4(0.0);
      if (gj < kend) {
        int e = kbase + int(gj) * p.ks2 + int(4u * c) * p.ks3;
        [[unroll]] for (uint t = 0u; t < 4u; ++t)
          if (4u * c + t < KILN_D) v[t] = kiln_k(e + int(t) * p.ks3);
      }
      kiln_ks[it] = v;
    }
    for (uint it = lid; it < BKV * KILN_DV4; it += WG) {
      uint j = it / KILN_DV4, c = it % KILN_DV4, gj = k0 + j;
      vec4 v = vec4(0.0);
      if (gj < kend) {
        int e = vbase + int(gj) * p.vs2 + int(4u * c) * p.vs3;
        [[unroll]] for (uint t = 0u; t < 4u; ++t)
          if (4u * c + t < KILN_DV) v[t] = kiln_v(e + int(t) * p.vs3);
      }
      kiln_vs[it] = v;
    }
    barrier();

    // scores: every staged K vector feeds the RQ rows
    [[dont_unroll]] for (uint j = 0u; j < BKV; ++j) {
      vec4 dot4[RQ];
      [[unroll]] for (uint r = 0u; r < RQ; ++r) dot4[r] = vec4(0.0);
      [[unroll]] for (uint c = 0u; c < KILN_D4; ++c) {
        vec4 kv = kiln_ks[j * KILN_D4 + c];
        [[unroll]] for (uint r = 0u; r < RQ; ++r) dot4[r] += q[r][c] * kv;
      }
      int gj = int(k0 + j);
      [[unroll]] for (uint r = 0u; r < RQ; ++r) {
        float x = kiln_ninf;
        if (gj <= lastkey[r]) {
          x = dot4[r].x + dot4[r].y + dot4[r].z + dot4[r].w;
          if (p.softcap > 0.0) x = p.softcap * tanh(x / p.softcap);
#if KILN_MASK
          x += kiln_m(mrow[r] + gj * p.ms3);
#endif
          if (isnan(x)) x = kiln_pinf;  // max() may drop a NaN: +inf keeps the row NaN, not "no key"
        }
        sc[r][j] = x;
      }
    }
    // online softmax: the tile's max, the rescale, p = exp(s - m')
    [[unroll]] for (uint r = 0u; r < RQ; ++r) {
      float mt = kiln_ninf;
      [[dont_unroll]] for (uint j = 0u; j < BKV; ++j) mt = max(mt, sc[r][j]);
      float mn = max(m[r], mt);
      if (mn == kiln_ninf) {  // nothing visible yet: p = 0 for the whole tile
        [[dont_unroll]] for (uint j = 0u; j < BKV; ++j) sc[r][j] = 0.0;
        continue;
      }
      float alpha = exp(m[r] - mn);  // m = -inf: 0
      l[r] *= alpha;
      [[unroll]] for (uint c = 0u; c < KILN_DV4; ++c) acc[r][c] *= alpha;
      float sum = 0.0;
      [[dont_unroll]] for (uint j = 0u; j < BKV; ++j) {
        float e = exp(sc[r][j] - mn);
        sc[r][j] = e;
        sum += e;
      }
      l[r] += sum;
      m[r] = mn;
    }
    // p v: every staged V vector feeds the RQ rows
    [[dont_unroll]] for (uint j = 0u; j < BKV; ++j) {
      [[unroll]] for (uint c = 0u; c < KILN_DV4; ++c) {
        vec4 vv = kiln_vs[j * KILN_DV4 + c];
        [[unroll]] for (uint r = 0u; r < RQ; ++r) acc[r][c] += sc[r][j] * vv;
      }
    }
    barrier();
  }

  [[unroll]] for (uint r = 0u; r < RQ; ++r) {
    uint i = q0 + r * WG + lid;
    if (i >= p.Sq) continue;
    float inv = l[r] > 0.0 ? 1.0 / l[r] : 0.0;
    if (isnan(l[r])) inv = l[r];
    uint opos = (head * p.Sq + i) * KILN_DV;
    [[dont_unroll]] for (uint c = 0u; c < KILN_DV4; ++c) {
      vec4 o = acc[r][c] * inv;
      [[dont_unroll]] for (uint t = 0u; t < 4u; ++t)
        if (4u * c + t < KILN_DV) kiln_epilogue(KILN_RESULT(o[t]), opos + 4u * c + t);
    }
  }
}
