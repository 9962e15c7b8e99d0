// kernels/quant/pack.comp — kiln::quantize's packing (ops/quant/scheme.hpp gives the
// format): one invocation per code word t = n * words + w, the four bytes j0 .. j0 + 3 of
// chunk c = w / 8 (j0 = 4 (w % 8)); byte j holds 8 / KILN_BITS fields, field s weight
// c * CHUNK + 32 s + j at bits KILN_BITS * s. A weight's code is
// clamp(roundEven(w * inv), -QMAX, QMAX) + OFFSET, inv its group's reciprocal scale (the
// host computed it once, so both backends round alike); a padded position (k >= K) holds
// OFFSET. Generated before it (codegen/quant.hpp): the parameter block `p`, the hooks
// kiln_prologue (the weights' expression at n * K + k), kiln_epilogue (the word, at t)
// and kiln_scale (element e of the reciprocal scales).
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 64;
layout(constant_id = 3) const uint SEG = 128;  // unused here

#define KILN_FIELDS (8u / uint(KILN_BITS))
#define KILN_CHUNK (32u * KILN_FIELDS)

uint kiln_code(uint n, uint k) {
  if (k >= p.K) return uint(KILN_OFFSET);
  float inv = kiln_scale(n * p.srs + k / p.group);
  float q = clamp(roundEven(kiln_prologue(n * p.K + k) * inv), -float(KILN_QMAX), float(KILN_QMAX));
  return uint(int(q) + KILN_OFFSET);
}

void main() {
  uint t = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationIndex;
  if (t >= p.rows * p.words) return;
  uint n = t / p.words, w = t - n * p.words;
  uint k0 = (w >> 3) * KILN_CHUNK + (w & 7u) * 4u;
  uint word = 0u;
  for (uint b = 0u; b < 4u; ++b) {
    for (uint s = 0u; s < KILN_FIELDS; ++s) {
      word |= kiln_code(n, k0 + b + 32u * s) << (8u * b + uint(KILN_BITS) * s);
    }
  }
  kiln_epilogue(KILN_RESULT(int(word)), t);
}
