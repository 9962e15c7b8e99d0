// kernels/attention/paged.comp — kiln::paged_attention: decode.comp's kernel with keys
// and values found through block tables. A fragment after the generated part
// (vulkan/ops/paged_attention.hpp: the parameter block `p`, KILN_D / KILN_DV / KILN_D4 /
// KILN_DVL / KILN_UNROLL_Q / KILN_SUBGROUP / KILN_RESULT, the hooks kiln_prologue,
// kiln_epilogue, float kiln_k(uint e), float kiln_v(uint e), int kiln_table(uint b,
// uint j), int kiln_len(uint b), and the check buffer `uint kiln_check[]`).
// Bindings: the statement's operands (generated: output, epilogue, prologue, then the k
//   pool, v pool, tables, lengths), the check buffer after them.
// Push constants: B, Hq, Sq, group (Hq / Hkv), rows (B * Hq * Sq), N (pool blocks), bs
//   (block size), M (table width), causal, scale, softcap, the input's, the pools'
//   offsets and block / head / row strides (koff, ks0..2, voff, vs0..2), the tables'
//   and lengths' (toff, ts0, ts1, loff, ls0), the output's. uint arithmetic throughout:
//   a negative stride wraps to the right element.
// Workgroup: local_size_x = WG (specialisation constant 2); one workgroup per query row
//   of [B, Hq, Sq], numbered gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x.
// Each invocation finds its key's block once a tile and shares the value row's offset
// (kiln_vrow), so p v costs what decode's does. Numerics are decode.comp's (the same q vec4s, dot products, workgroup max, weights and
// accumulation order per key), so a row gives what decode gives over the same keys.
// Checks (no host read-back): the workgroup of head 0, query 0 of each sequence checks
// its length (0 .. M * bs) and, when that is good, the table entries of the blocks the
// length uses (0 .. N - 1): each bad one goes to kiln_check[1 + position] (one writer a
// position; entry [b, j] is position b * M + j, length b is B * M + b) and lowers
// kiln_check[0] to its position (atomicMin: the first wins); the host throws at its next
// synchronisation. Every workgroup clamps lengths and entries, so nothing is read out of
// bounds.
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 64;

shared float kiln_p[WG];
shared float kiln_red[WG];
shared uint kiln_vrow[WG];  // the tile's value rows (element offsets), found once a key

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

// The pool block of sequence b's position j, clamped into the pool.
uint kiln_block(uint b, uint j) {
  return uint(clamp(kiln_table(b, j / p.bs), 0, int(p.N) - 1));
}

void main() {
  uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (row >= p.rows) return;  // whole workgroups: uniform
  uint i = row % p.Sq, head = row / p.Sq;
  uint b = head / p.Hq, h = head % p.Hq, hk = h / p.group;
  uint lid = gl_LocalInvocationIndex;
  uint cap = p.M * p.bs;
  int raw = kiln_len(b);
  if (h == 0u && i == 0u) {
    if (raw < 0 || uint(raw) > cap) {
      if (lid == 0u) {
        kiln_check[1u + p.B * p.M + b] = uint(raw);
        atomicMin(kiln_check[0], p.B * p.M + b);
      }
    } else {
      uint nb = (uint(raw) + p.bs - 1u) / p.bs;
      for (uint j = lid; j < nb; j += WG) {
        int e = kiln_table(b, j);
        if (e < 0 || uint(e) >= p.N) {
          kiln_check[1u + b * p.M + j] = uint(e);
          atomicMin(kiln_check[0], b * p.M + j);
        }
      }
    }
  }
  uint len = p.N == 0u ? 0u : uint(clamp(raw, 0, int(cap)));
  uint ke = len;
  if (p.causal != 0u) ke = uint(clamp(int(i) + int(len) - int(p.Sq) + 1, 0, int(len)));

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
  uint kh = p.koff + hk * p.ks1, vh = p.voff + hk * p.vs1;

  for (uint k0 = 0u; k0 < ke; k0 += WG) {
    uint j = k0 + lid;
    float x = kiln_ninf;
    uint vrow = 0u;
    if (j < ke) {
      uint blk = kiln_block(b, j), at = j % p.bs;
      uint e = kh + blk * p.ks0 + at * p.ks2;
      vrow = vh + blk * p.vs0 + at * p.vs2;
      vec4 d4 = vec4(0.0);
      KILN_UNROLL_Q for (uint c = 0u; c < KILN_D4; ++c) {
        vec4 kv = vec4(0.0);
        [[unroll]] for (uint t = 0u; t < 4u; ++t)
          if (4u * c + t < KILN_D) kv[t] = kiln_k(e + 4u * c + t);
        d4 += q[c] * kv;
      }
      x = d4.x + d4.y + d4.z + d4.w;
      if (p.softcap > 0.0) x = p.softcap * tanh(x / p.softcap);
      if (isnan(x)) x = kiln_pinf;  // max() may drop a NaN: +inf keeps the row NaN, not "no key"
    }
    float mn = max(m, kiln_wg_max(x, lid));
    if (mn == kiln_ninf) continue;  // uniform: nothing visible yet
    kiln_p[lid] = exp(x - mn);      // x = -inf: 0
    kiln_vrow[lid] = vrow;
    barrier();
    float alpha = exp(m - mn);
    l *= alpha;
    [[unroll]] for (uint t = 0u; t < KILN_DVL; ++t) acc[t] *= alpha;
    uint n = min(WG, ke - k0);
    for (uint jj = 0u; jj < n; ++jj) {
      float pj = kiln_p[jj];
      l += pj;
      uint e = kiln_vrow[jj];
      [[unroll]] for (uint t = 0u; t < KILN_DVL; ++t) {
        uint d = lid + t * WG;
        if (d < KILN_DV) acc[t] += pj * kiln_v(e + d);
      }
    }
    m = mn;
    barrier();
  }

  float inv = l > 0.0 ? 1.0 / l : 0.0;
  if (isnan(l)) inv = l;
  [[unroll]] for (uint t = 0u; t < KILN_DVL; ++t) {
    uint d = lid + t * WG;
    if (d < KILN_DV) kiln_epilogue(KILN_RESULT(acc[t] * inv), row * KILN_DV + d);
  }
}
