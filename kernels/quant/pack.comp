// kernels/quant/pack.comp — kiln::quantize's packing (ops/quant/scheme.hpp gives the
// format): one invocation per code word t = n * words + w, the four bytes j0 .. j0 + 3 of
// chunk c = w / 8 (j0 = 4 (w % 8)); byte j holds 8 / KILN_BITS fields, field s weight
// c * CHUNK + 32 s + j at bits KILN_BITS * s. A weight's code is
// clamp(roundEven(w * inv), -QMAX, QMAX) + OFFSET, inv its group's reciprocal scale (the
// host computed it once, so both backends round alike); a padded position (k >= K) holds
// OFFSET. One scale a field: its four weights lie in one group. Generated before it (codegen/quant.hpp): the parameter block `p`, the hooks
// kiln_prologue (the weights' expression at n * K + k), kiln_epilogue (the word, at t)
// and kiln_scale (element e of the reciprocal scales).
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 64;
layout(constant_id = 3) const uint SEG = 128;  // unused here

#define KILN_FIELDS (8u / uint(KILN_BITS))
#define KILN_CHUNK (32u * KILN_FIELDS)

void main() {
  uint t = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationIndex;
  if (t >= p.rows * p.words) return;
  uint n = t / p.words, w = t - n * p.words;
  uint k0 = (w >> 3) * KILN_CHUNK + (w & 7u) * 4u;
  uint word = 0u;
  for (uint s = 0u; s < KILN_FIELDS; ++s) {
    uint ks = k0 + 32u * s;  // weights ks .. ks + 3: one scale group (groups are 32-weight blocks, or K)
    float inv = ks < p.K ? kiln_scale(n * p.srs + ks / p.group) : 0.0;
    for (uint b = 0u; b < 4u; ++b) {
      uint k = ks + b;
      int code = 0;  // padding: worth 0
      if (k < p.K) code = int(clamp(roundEven(kiln_prologue(n * p.K + k) * inv), -float(KILN_QMAX), float(KILN_QMAX)));
      word |= uint(code + KILN_OFFSET) << (8u * b + uint(KILN_BITS) * s);
    }
  }
  kiln_epilogue(KILN_RESULT(int(word)), t);
}
