// kernels/sampling/sample.comp — kiln::sample (reduce family): one token id drawn from each
// row of logits, the chain of kiln/ops/sampling/sample.hpp in the order and arithmetic of
// the CPU kernel (cpu/sampling/sample.hpp). Generated before it (vk_structural_kernel<
// sample_op>, vulkan/ops/sample.hpp): #version, the KILN_* defines (KILN_WG, KILN_RESULT =
// int), the buffers, the parameter block `p` (rows, extent = V, hist = history length,
// topk, seed0, seed1, step0, step1, temp, topp, minp, repeat, presence, then the operands'
// offsets, extents and strides, the history's offset poff0, and the scalars) and the hooks
//   float kiln_prologue(uint pos)               the logits expression at input position pos
//   void kiln_epilogue(int value, uint pos)     the output expression at output position pos
//   int kiln_hist(uint k)                       history id k (sorted, each once)
// Layout: local_size_x = KILN_WG (a power of two); a workgroup per row (task = row,
// gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; tasks past the last return);
// row r is input positions r * V + i. Every pass walks the row with invocation lid on
// elements lid, lid + KILN_WG, ...; the logits are read through the prologue in each pass
// (nothing of the row is kept but running totals). An invocation's elements increase, so
// it finds its history ids by walking the sorted history alongside (no search per element:
// llvmpipe / lavapipe end a shader after 65535 loop iterations in all, which is also why
// the passes are few: one for the maximum, eight 16-bin passes each for the top-k and top-p
// cut-offs, one for top-p's total, one for the draw's total, one for the draw).
// Reductions go through shared memory, their results the same in every invocation, so
// every decision after them is uniform.
layout(local_size_x = KILN_WG) in;

shared float kiln_sf[KILN_WG];
shared uint kiln_su[KILN_WG];
shared uint kiln_pick;

const float kiln_big = 3.4028234663852886e38;

// The sum of v over the workgroup, in every invocation. Called in uniform control flow.
float kiln_sum(float v) {
  uint lid = gl_LocalInvocationIndex;
  barrier();  // the previous reduction's result has been read
  kiln_sf[lid] = v;
  barrier();
  for (uint s = KILN_WG / 2u; s > 0u; s >>= 1) {
    if (lid < s) kiln_sf[lid] += kiln_sf[lid + s];
    barrier();
  }
  return kiln_sf[0];
}

// The largest v over the workgroup and the smallest index holding it (i = 0xffffffff for
// nothing), in every invocation. Uniform control flow.
void kiln_max_arg(inout float v, inout uint i) {
  uint lid = gl_LocalInvocationIndex;
  barrier();
  kiln_sf[lid] = v;
  kiln_su[lid] = i;
  barrier();
  for (uint s = KILN_WG / 2u; s > 0u; s >>= 1) {
    if (lid < s) {
      float a = kiln_sf[lid], b = kiln_sf[lid + s];
      uint ia = kiln_su[lid], ib = kiln_su[lid + s];
      if (ib != 0xffffffffu && (ia == 0xffffffffu || b > a || (b == a && ib < ia))) {
        kiln_sf[lid] = b;
        kiln_su[lid] = ib;
      }
    }
    barrier();
  }
  v = kiln_sf[0];
  i = kiln_su[0];
}

// Philox4x32-10 (kiln/ops/sampling/philox.hpp).
uvec4 kiln_philox(uvec4 c, uvec2 k) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) k += uvec2(0x9E3779B9u, 0xBB67AE85u);
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c.x, hi0, lo0);
    umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
    c = uvec4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
  }
  return c;
}

// The key that orders floats (kiln::detail::sample_key): -0 as +0.
uint kiln_key(float f) {
  uint b = floatBitsToUint(f);
  if (b == 0x80000000u) b = 0u;
  return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
}

// The penalised logit of element i of the row at `base`; hp walks the sorted history
// (the caller's elements increase). NaN is -inf (never drawn); +inf the largest float.
float kiln_logit(uint base, uint i, inout uint hp) {
  float v = float(kiln_prologue(base + i));
  if (isnan(v)) v = uintBitsToFloat(0xff800000u);
  if (v > kiln_big) v = kiln_big;
  while (hp < p.hist && uint(kiln_hist(hp)) < i) ++hp;
  if (hp < p.hist && uint(kiln_hist(hp)) == i) {
    v = v > 0.0 ? v / p.repeat : v * p.repeat;
    v -= p.presence;
  }
  return v;
}

bool kiln_finite_low(float v) { return v != uintBitsToFloat(0xff800000u); }

// The smallest key present among the kept elements whose heavier keys weigh less than
// thr (cpu_sample::cut_key): four bits at a time from the top. mode 0 weighs each kept
// element 1 (top-k), mode 1 exp(y - m) (top-p). tk: top-k's cut (0: none).
uint kiln_cut(uint base, uint mode, float thr, float m, uint tk) {
  uint lid = gl_LocalInvocationIndex;
  uint prefix = 0u;
  float above = 0.0;
  for (int shift = 28; shift >= 0; shift -= 4) {
    uint high = shift == 28 ? 0u : (0xffffffffu << uint(shift + 4));
    float bin[16];
    for (int d = 0; d < 16; ++d) bin[d] = 0.0;
    uint has = 0u;
    uint hp = 0u;
    for (uint i = lid; i < p.extent; i += KILN_WG) {
      float y = kiln_logit(base, i, hp);
      if (!kiln_finite_low(y)) continue;
      uint k = kiln_key(y);
      if (k < tk || (k & high) != prefix) continue;
      uint d = (k >> uint(shift)) & 15u;
      float w = mode == 0u ? 1.0 : exp(y - m);
      bin[d] += w;
      has |= 1u << d;
    }
    barrier();
    if (lid == 0u) kiln_pick = 0u;
    barrier();
    atomicOr(kiln_pick, has);
    barrier();
    uint all_has = kiln_pick;
    int pick = -1;
    float run = above, at = above;
    for (int d = 15; d >= 0; --d) {
      float t = kiln_sum(bin[d]);
      if ((all_has & (1u << uint(d))) != 0u && run < thr) {
        pick = d;
        at = run;
      }
      run += t;
    }
    if (pick < 0) return prefix;
    prefix |= uint(pick) << uint(shift);
    above = at;
  }
  return prefix;
}

void main() {
  uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (row >= p.rows) return;  // whole workgroups: uniform
  uint lid = gl_LocalInvocationIndex;
  uint n = p.extent, base = row * n;
  float ninf = uintBitsToFloat(0xff800000u);

  // the largest penalised logit (first on ties) and the count of drawable ids
  float m = ninf;
  uint arg = 0xffffffffu;
  float valid = 0.0;
  {
    uint hp = 0u;
    for (uint i = lid; i < n; i += KILN_WG) {
      float y = kiln_logit(base, i, hp);
      if (!kiln_finite_low(y)) continue;
      valid += 1.0;
      if (arg == 0xffffffffu || y > m) {
        m = y;
        arg = i;
      }
    }
  }
  kiln_max_arg(m, arg);
  valid = kiln_sum(valid);
  if (valid == 0.0 || p.temp == 0.0) {
    if (lid == 0u) kiln_epilogue(valid == 0.0 ? -1 : int(arg), row);
    return;
  }

  // top-k, then top-p over what it kept: cut-off keys (0: keep all)
  uint tk = 0u, tp = 0u;
  if (p.topk > 0u && float(p.topk) < valid) tk = kiln_cut(base, 0u, float(p.topk), m, 0u);
  if (p.topp < 1.0) {
    float z = 0.0;
    uint hp = 0u;
    for (uint i = lid; i < n; i += KILN_WG) {
      float y = kiln_logit(base, i, hp);
      if (kiln_finite_low(y) && kiln_key(y) >= tk) z += exp(y - m);
    }
    z = kiln_sum(z);
    tp = kiln_cut(base, 1u, p.topp * z, m, tk);
  }
  uint cut = max(tk, tp);

  // the kept weights at the temperature: their total and the last kept id
  float inv_t = 1.0 / p.temp;
  float wsum = 0.0;
  uint last = 0xffffffffu;
  {
    uint hp = 0u;
    for (uint i = lid; i < n; i += KILN_WG) {
      float y = kiln_logit(base, i, hp);
      if (!kiln_finite_low(y) || kiln_key(y) < cut || exp(y - m) < p.minp) continue;
      wsum += exp((y - m) * inv_t);
      last = i;
    }
  }
  wsum = kiln_sum(wsum);
  barrier();
  if (lid == 0u) kiln_pick = 0u;
  barrier();
  if (last != 0xffffffffu) atomicMax(kiln_pick, last + 1u);
  barrier();
  uint last_kept = kiln_pick - 1u;

  // the draw: the first kept id whose running sum (index order) passes u * wsum
  uvec4 r = kiln_philox(uvec4(p.step0, p.step1, row, 0u), uvec2(p.seed0, p.seed1));
  float target = float(r.x >> 8) * (1.0 / 16777216.0) * wsum;
  float carry = 0.0;
  uint hp = 0u;
  uint chosen = 0xffffffffu;
  for (uint b0 = 0u; b0 < n; b0 += KILN_WG) {
    uint i = b0 + lid;
    float w = 0.0;
    if (i < n) {
      float y = kiln_logit(base, i, hp);
      if (kiln_finite_low(y) && kiln_key(y) >= cut && exp(y - m) >= p.minp) w = exp((y - m) * inv_t);
    }
    // inclusive scan of w over the step (Hillis-Steele)
    barrier();
    kiln_sf[lid] = w;
    barrier();
    for (uint d = 1u; d < KILN_WG; d <<= 1) {
      float o = lid >= d ? kiln_sf[lid - d] : 0.0;
      barrier();
      kiln_sf[lid] += o;
      barrier();
    }
    float incl = carry + kiln_sf[lid];
    float total = kiln_sf[KILN_WG - 1u];
    barrier();
    if (lid == 0u) kiln_pick = 0xffffffffu;
    barrier();
    if (w > 0.0 && incl > target) atomicMin(kiln_pick, i);
    barrier();
    chosen = kiln_pick;
    if (chosen != 0xffffffffu) break;  // the same in every invocation
    carry += total;
  }
  if (lid == 0u) kiln_epilogue(int(chosen != 0xffffffffu ? chosen : last_kept), row);
}
