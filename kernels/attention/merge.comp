// kernels/attention/merge.comp — the split-KV variant's second dispatch (a fragment after
// the generated part): each output column of a row combines the row's splits, each
// split's max m_s, sum l_s and unnormalised output o_s (decode.comp phase 1), as
// sum_s o_s exp(m_s - M) / sum_s l_s exp(m_s - M) with M the largest m_s, then the
// epilogue. A row no split saw a key of (M = -inf) gives zeros.
// Bindings: the statement's operands (generated), the partial results after them (readonly,
//   kiln_partial[(row * splits + split) * (Dv + 2) + {0: max, 1: sum, 2 + d}]).
// Push constants: as flash.comp (the same block as the first dispatch).
// Workgroup: local_size_x = WG (specialisation constant 2); one invocation per output
//   element (row * Dv + d), workgroups numbered gl_WorkGroupID.y * gl_NumWorkGroups.x +
//   gl_WorkGroupID.x.
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 64;

#define kiln_ninf uintBitsToFloat(0xff800000u)

void main() {
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  uint pos = task * WG + gl_LocalInvocationIndex;
  if (pos >= p.rows * KILN_DV) return;
  uint row = pos / KILN_DV, d = pos % KILN_DV;
  uint base = row * p.splits * (KILN_DV + 2u);
  float M = kiln_ninf;
  for (uint s = 0u; s < p.splits; ++s) M = max(M, kiln_partial[base + s * (KILN_DV + 2u)]);
  float l = 0.0, o = 0.0;
  if (M != kiln_ninf) {
    for (uint s = 0u; s < p.splits; ++s) {
      uint at = base + s * (KILN_DV + 2u);
      float w = exp(kiln_partial[at] - M);  // a split that saw nothing: exp(-inf) = 0
      l += kiln_partial[at + 1u] * w;
      o += kiln_partial[at + 2u + d] * w;
    }
  }
  float r = l > 0.0 ? o / l : 0.0;
  if (isnan(l)) r = l;
  kiln_epilogue(KILN_RESULT(r), pos);
}
