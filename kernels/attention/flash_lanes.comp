// kernels/attention/flash_lanes.comp — flash attention for CPU devices (lavapipe); a
// fragment after the generated part, with the hooks, parameters and #defines of flash.comp
// plus KILN_K4 / KILN_V4 (1: kiln_k4 / kiln_v4 read four elements of a key / value row
// as one vec4: f32, contiguous along D, 4-aligned).
// KILN_UNROLL_D: [[unroll]] for head dims up to 128, else [[dont_unroll]] (q, the
// accumulators and the key / value rows then stay in memory: lavapipe took 39 s to
// compile the unrolled form at D = 256, 0.5 s the rolled one, and ran it 18% slower).
// Bindings: the statement's operands (generated).
// Push constants (or the parameter buffer): as flash.comp.
// Workgroup: local_size_x = WG (specialisation constant 2) = the subgroup size, so the
//   workgroup is one subgroup; one workgroup per task (batch, query head, block of WG
//   query rows), numbered gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x, tasks
//   past the last skipped.
// Why not flash.comp: on lavapipe a workgroup runs as SIMD over its invocations, and every
// shared-memory or buffer read whose address is not provably uniform is a loop over the
// lanes, while register arrays larger than a few vectors spill. flash.comp reads each
// staged K/V vector from shared memory once per row block (a lane loop per vec4) and
// keeps RQ rows of q and accumulators per invocation. Here invocation lid owns one query
// row (q and its accumulators in registers) and, per tile of WG keys, loads key
// k0 + lid and its value row straight from the buffers; the other invocations get them
// through subgroupShuffle (a register permute on lavapipe), so each K/V element is read
// from memory once per block and nothing goes through shared memory. Scores, online
// softmax (running max m, sum l, accumulators rescaled once per tile), the causal bound
// (bottom-right) and the masks follow flash.comp; a row that sees no key writes zeros.
// The loops of scores and p v take four keys an iteration (lavapipe rewrites every
// loop-carried register under the execution mask once an iteration; fully unrolled, its
// compile time explodes); the small ones are unrolled. lavapipe ends a shader after 65535
// loop iterations in all (one count for every loop of an invocation): a workgroup takes
// WG / 2 + 1 per tile of WG keys (plus 2 * D / 4 where k / v are read by elements), rows
// of up to about 100000 keys (WG 8, vec4 rows).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 8;

#define kiln_ninf uintBitsToFloat(0xff800000u)
#define kiln_pinf uintBitsToFloat(0x7f800000u)

void main() {
  kiln_block blk;
  if (!kiln_block_of(WG, blk)) return;  // whole workgroups: uniform
  uint head = blk.head, b = blk.b, h = blk.h, q0 = blk.q0, kend = blk.kend;
  int kbase = blk.kbase, vbase = blk.vbase, shift = blk.shift;
  uint lid = gl_LocalInvocationIndex;

  uint i = q0 + lid;
  bool live = i < p.Sq;
  vec4 q[KILN_D4];
  vec4 acc[KILN_DV4];
  {
    uint qpos = ((head * p.Sq) + (live ? i : 0u)) * KILN_D;
    // q through the prologue: loops kept rolled (each call is a copy of the prologue)
    [[dont_unroll]] for (uint c = 0u; c < KILN_D4; ++c) {
      vec4 v = vec4(0.0);
      [[dont_unroll]] for (uint t = 0u; t < 4u; ++t)
        if (live && 4u * c + t < KILN_D) v[t] = kiln_prologue(qpos + 4u * c + t);
      q[c] = v * p.scale;
    }
  }
  KILN_UNROLL_D for (uint c = 0u; c < KILN_DV4; ++c) acc[c] = vec4(0.0);
  float m = kiln_ninf, l = 0.0;
  int lastkey = !live ? -1 : p.causal != 0u ? min(int(i) + shift, int(p.Skv) - 1) : int(p.Skv) - 1;
#if KILN_MASK
  int mrow = int(p.moff) + int(b) * p.ms0 + int(h) * p.ms1 + int(live ? i : 0u) * p.ms2;
#endif

  float sc[WG];
  for (uint k0 = 0u; k0 < kend; k0 += WG) {
    // this invocation's key: k0 + lid (zeros past the end)
    uint gk = k0 + lid;
    bool kin = gk < kend;
    vec4 kr[KILN_D4];
    {
      int e = kbase + int(kin ? gk : 0u) * p.ks2;
#if KILN_K4
      // e is key 0's row past the end (kend > 0 here): in range, read unconditionally
      KILN_UNROLL_D for (uint c = 0u; c < KILN_D4; ++c) {
        vec4 v = kiln_k4(e + int(4u * c));
        kr[c] = kin ? v : vec4(0.0);
      }
#else
      [[dont_unroll]] for (uint c = 0u; c < KILN_D4; ++c) {
        vec4 v = vec4(0.0);
        [[unroll]] for (uint t = 0u; t < 4u; ++t)
          if (kin && 4u * c + t < KILN_D) v[t] = kiln_k(e + int(4u * c + t) * p.ks3);
        kr[c] = v;
      }
#endif
    }
    // scores of this row against the tile's keys, key j from invocation j
    // (four keys a step, as p v below)
    [[dont_unroll]] for (uint j = 0u; j < WG; j += 4u) {
      vec4 dot4[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
      KILN_UNROLL_D for (uint c = 0u; c < KILN_D4; ++c) {
        [[unroll]] for (uint u = 0u; u < 4u; ++u) dot4[u] += q[c] * subgroupShuffle(kr[c], j + u);
      }
      [[unroll]] for (uint u = 0u; u < 4u; ++u) {
        int gj = int(k0 + j + u);
        float x = kiln_ninf;
        if (gj <= lastkey) {
          x = dot4[u].x + dot4[u].y + dot4[u].z + dot4[u].w;
          if (p.softcap > 0.0) x = p.softcap * tanh(x / p.softcap);
#if KILN_MASK
          x += kiln_m(mrow + gj * p.ms3);
#endif
          if (isnan(x)) x = kiln_pinf;  // max() may drop a NaN: +inf keeps the row NaN, not "no key"
        }
        sc[j + u] = x;
      }
    }
    // online softmax: the tile's max, the rescale, p = exp(s - m')
    float mt = kiln_ninf;
    [[unroll]] for (uint j = 0u; j < WG; ++j) mt = max(mt, sc[j]);
    float mn = max(m, mt);
    bool none = mn == kiln_ninf;  // nothing visible yet: p = 0 for the whole tile
    float alpha = none ? 1.0 : exp(m - mn);  // m = -inf: 0
    float sum = 0.0;
    [[unroll]] for (uint j = 0u; j < WG; ++j) {
      float e = none ? 0.0 : exp(sc[j] - mn);
      sc[j] = e;
      sum += e;
    }
    l = l * alpha + sum;
    m = mn;
    KILN_UNROLL_D for (uint c = 0u; c < KILN_DV4; ++c) acc[c] *= alpha;
    // p v: this invocation's value row (key k0 + lid), row j from invocation j
    vec4 vr[KILN_DV4];
    {
      int e = vbase + int(kin ? gk : 0u) * p.vs2;
#if KILN_V4
      KILN_UNROLL_D for (uint c = 0u; c < KILN_DV4; ++c) {
        vec4 v = kiln_v4(e + int(4u * c));
        vr[c] = kin ? v : vec4(0.0);
      }
#else
      [[dont_unroll]] for (uint c = 0u; c < KILN_DV4; ++c) {
        vec4 v = vec4(0.0);
        [[unroll]] for (uint t = 0u; t < 4u; ++t)
          if (kin && 4u * c + t < KILN_DV) v[t] = kiln_v(e + int(4u * c + t) * p.vs3);
        vr[c] = v;
      }
#endif
    }
    // four keys a step (WG is a power of 2, at least 4): the accumulators, rewritten once
    // per loop iteration under lavapipe's execution mask, are loaded and stored a quarter
    // as often
    [[dont_unroll]] for (uint j = 0u; j < WG; j += 4u) {
      float p0 = sc[j], p1 = sc[j + 1u], p2 = sc[j + 2u], p3 = sc[j + 3u];
      KILN_UNROLL_D for (uint c = 0u; c < KILN_DV4; ++c)
        acc[c] += p0 * subgroupShuffle(vr[c], j) + p1 * subgroupShuffle(vr[c], j + 1u) +
                  p2 * subgroupShuffle(vr[c], j + 2u) + p3 * subgroupShuffle(vr[c], j + 3u);
    }
  }

  if (!live) return;
  float inv = l > 0.0 ? 1.0 / l : 0.0;
  if (isnan(l)) inv = l;
  uint opos = (head * p.Sq + i) * KILN_DV;
  [[dont_unroll]] for (uint c = 0u; c < KILN_DV4; ++c) {
    vec4 o = acc[c] * inv;
    [[dont_unroll]] for (uint t = 0u; t < 4u; ++t)
      if (4u * c + t < KILN_DV) kiln_epilogue(KILN_RESULT(o[t]), opos + 4u * c + t);
  }
}
