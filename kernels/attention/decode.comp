// kernels/attention/decode.comp — attention for few query rows (decoding), and phase 1 of
// the split-KV variant (flash-decoding). A fragment after the generated part (see
// flash.comp; KILN_DVL: output columns per invocation, KILN_SUBGROUP: subgroupMax).
// Bindings: the statement's operands (generated); phase 1: the partial results after them
//   (writeonly, kiln_partial[(row * splits + split) * (Dv + 2) + {0: max, 1: sum, 2 + d}]).
// Push constants: as flash.comp (the same block; chunk: keys per split, a multiple of WG).
// Workgroup: local_size_x = WG (specialisation constant 2); one workgroup per task
//   (query row of [B, Hq, Sq], split), numbered gl_WorkGroupID.y * gl_NumWorkGroups.x +
//   gl_WorkGroupID.x, tasks past the last skipped.
// Keys go WG at a time: invocation lid scores key k0 + lid (q in registers, the same row
// in every invocation), the tile's max is a workgroup reduction (subgroupMax, then
// shared memory across subgroups; shared memory alone without subgroup arithmetic), the
// weights p = exp(s - m') go to shared memory, and then invocation lid accumulates output
// columns lid, lid + WG, ... over the tile's keys (reads of v rows spread over the
// workgroup) with the sum l kept alike in every invocation.
// KILN_UNROLL_Q: the loops over q's vec4s, [[unroll]] (q in registers) or, on a CPU
//   device past D 128, [[dont_unroll]] (compile time).
// KILN_PHASE 0: output = acc / l through the epilogue (zeros when no key is visible);
//   1: the split's max, sum and unnormalised output go to kiln_partial (merge.comp).
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 64;

shared float kiln_p[WG];
shared float kiln_red[WG];

#define kiln_ninf uintBitsToFloat(0xff800000u)
#define kiln_pinf uintBitsToFloat(0x7f800000u)

float kiln_wg_max(float x, uint lid) {
#if KILN_SUBGROUP
  x = subgroupMax(x);
  if (gl_NumSubgroups == 1u) return x;
  if (subgroupElect()) kiln_red[gl_SubgroupID] = x;
  barrier();
  float r = kiln_red[0];
  for (uint s = 1u; s < gl_NumSubgroups; ++s) r = max(r, kiln_red[s]);
  barrier();
  return r;
#else
  kiln_red[lid] = x;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) kiln_red[lid] = max(kiln_red[lid], kiln_red[lid + s]);
    barrier();
  }
  float r = kiln_red[0];
  barrier();
  return r;
#endif
}

void main() {
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  uint row = task / p.splits;
  if (row >= p.rows) return;  // whole workgroups: uniform
  uint split = task % p.splits;
  uint i = row % p.Sq, head = row / p.Sq;
  uint b = head / p.Hq, h = head % p.Hq, hk = h / p.group;
  uint lid = gl_LocalInvocationIndex;
  int kbase = int(p.koff) + int(b) * p.ks0 + int(hk) * p.ks1;
  int vbase = int(p.voff) + int(b) * p.vs0 + int(hk) * p.vs1;
#if KILN_MASK
  int mrow = int(p.moff) + int(b) * p.ms0 + int(h) * p.ms1 + int(i) * p.ms2;
#endif
  int kend_i = int(p.Skv);
  if (p.causal != 0u) kend_i = clamp(int(i) + int(p.Skv) - int(p.Sq) + 1, 0, int(p.Skv));
  uint kb = split * p.chunk;
  uint ke = min(uint(kend_i), kb + p.chunk);

  vec4 q[KILN_D4];
  uint qpos = row * KILN_D;
  KILN_UNROLL_Q for (uint c = 0u; c < KILN_D4; ++c) {
    vec4 v = vec4(0.0);
    [[unroll]] for (uint t = 0u; t < 4u; ++t)
      if (4u * c + t < KILN_D) v[t] = kiln_prologue(qpos + 4u * c + t);
    q[c] = v * p.scale;
  }
  float acc[KILN_DVL];
  [[unroll]] for (uint t = 0u; t < KILN_DVL; ++t) acc[t] = 0.0;
  float m = kiln_ninf, l = 0.0;

  for (uint k0 = kb; k0 < ke; k0 += WG) {
    uint j = k0 + lid;
    float x = kiln_ninf;
    if (j < ke) {
      int e = kbase + int(j) * p.ks2;
      vec4 d4 = vec4(0.0);
      KILN_UNROLL_Q for (uint c = 0u; c < KILN_D4; ++c) {
        vec4 kv = vec4(0.0);
        [[unroll]] for (uint t = 0u; t < 4u; ++t)
          if (4u * c + t < KILN_D) kv[t] = kiln_k(e + int(4u * c + t) * p.ks3);
        d4 += q[c] * kv;
      }
      x = d4.x + d4.y + d4.z + d4.w;
      if (p.softcap > 0.0) x = p.softcap * tanh(x / p.softcap);
#if KILN_MASK
      x += kiln_m(mrow + int(j) * p.ms3);
#endif
      if (isnan(x)) x = kiln_pinf;  // max() may drop a NaN: +inf keeps the row NaN, not "no key"
    }
    float mn = max(m, kiln_wg_max(x, lid));
    if (mn == kiln_ninf) continue;  // uniform: nothing visible yet
    kiln_p[lid] = exp(x - mn);      // x = -inf: 0
    barrier();
    float alpha = exp(m - mn);
    l *= alpha;
    [[unroll]] for (uint t = 0u; t < KILN_DVL; ++t) acc[t] *= alpha;
    uint n = min(WG, ke - k0);
    uint jj = 0u;
    // four keys an iteration: their v reads issued together (a GPU would otherwise wait
    // out a read's latency per key), then added in key order as one key an iteration
    for (; jj + 4u <= n; jj += 4u) {
      float vv[4 * KILN_DVL];
      [[unroll]] for (uint u = 0u; u < 4u; ++u) {
        int e = vbase + int(k0 + jj + u) * p.vs2;
        [[unroll]] for (uint t = 0u; t < KILN_DVL; ++t) {
          uint d = lid + t * WG;
          vv[u * KILN_DVL + t] = d < KILN_DV ? kiln_v(e + int(d) * p.vs3) : 0.0;
        }
      }
      [[unroll]] for (uint u = 0u; u < 4u; ++u) {
        float pj = kiln_p[jj + u];
        l += pj;
        [[unroll]] for (uint t = 0u; t < KILN_DVL; ++t) {
          uint d = lid + t * WG;
          if (d < KILN_DV) acc[t] += pj * vv[u * KILN_DVL + t];
        }
      }
    }
    for (; jj < n; ++jj) {
      float pj = kiln_p[jj];
      l += pj;
      int e = vbase + int(k0 + jj) * p.vs2;
      [[unroll]] for (uint t = 0u; t < KILN_DVL; ++t) {
        uint d = lid + t * WG;
        if (d < KILN_DV) acc[t] += pj * kiln_v(e + int(d) * p.vs3);
      }
    }
    m = mn;
    barrier();
  }

#if KILN_PHASE == 1
  uint base = (row * p.splits + split) * (KILN_DV + 2u);
  if (lid == 0u) {
    kiln_partial[base] = m;
    kiln_partial[base + 1u] = l;
  }
  [[unroll]] for (uint t = 0u; t < KILN_DVL; ++t) {
    uint d = lid + t * WG;
    if (d < KILN_DV) kiln_partial[base + 2u + d] = acc[t];
  }
#else
  float inv = l > 0.0 ? 1.0 / l : 0.0;
  if (isnan(l)) inv = l;
  [[unroll]] for (uint t = 0u; t < KILN_DVL; ++t) {
    uint d = lid + t * WG;
    if (d < KILN_DV) kiln_epilogue(KILN_RESULT(acc[t] * inv), row * KILN_DV + d);
  }
#endif
}
