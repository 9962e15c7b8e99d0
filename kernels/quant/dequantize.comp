// kernels/quant/dequantize.comp — kiln::dequantize: one invocation per code word
// t = n * words + w (ops/quant/scheme.hpp's format): bytes j0 .. j0 + 3 of chunk
// c = w / 8 (j0 = 4 (w % 8)), field s of byte j weight c * CHUNK + 32 s + j; each weight
// (k < K) is (code - OFFSET) * scale of its group (one a field: its four weights lie in
// one group), through the epilogue at n * K + k. Generated before it (codegen/quant.hpp):
// the parameter block `p`, the hooks kiln_prologue (the codes, int word at t),
// kiln_epilogue and kiln_scale (element e of the scales).
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
  if (k0 >= p.K) return;  // a word of padding
  uint word = uint(kiln_prologue(t));
  for (uint s = 0u; s < KILN_FIELDS; ++s) {
    uint ks = k0 + 32u * s;
    if (ks >= p.K) break;
    float scale = kiln_scale(n * p.srs + ks / p.group);
    for (uint b = 0u; b < 4u && ks + b < p.K; ++b) {
      uint code = bitfieldExtract(word, int(8u * b + uint(KILN_BITS) * s), KILN_BITS);
      kiln_epilogue(KILN_RESULT(float(int(code) - KILN_OFFSET) * scale), n * p.K + ks + b);
    }
  }
}
