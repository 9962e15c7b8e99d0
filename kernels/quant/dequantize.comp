// kernels/quant/dequantize.comp — kiln::dequantize: one invocation per output element
// t = n * K + k: weight k's field in row n's codes (chunk c = k / CHUNK, field
// s = (k % CHUNK) / 32 of byte j = k % 32, in word c * 8 + j / 4; ops/quant/scheme.hpp),
// value (code - OFFSET) * scale, then the epilogue. Generated before it
// (codegen/quant.hpp): the parameter block `p`, the hooks kiln_prologue (the codes, int
// word at n * words + w), kiln_epilogue and kiln_scale (element e of the scales).
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 64;
layout(constant_id = 3) const uint SEG = 128;  // unused here

#define KILN_FIELDS (8u / uint(KILN_BITS))
#define KILN_CHUNK (32u * KILN_FIELDS)

void main() {
  uint t = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationIndex;
  if (t >= p.rows * p.K) return;
  uint n = t / p.K, k = t - n * p.K;
  uint c = k / KILN_CHUNK, r = k - c * KILN_CHUNK, s = r >> 5u, j = r & 31u;
  uint word = uint(kiln_prologue(n * p.words + c * 8u + (j >> 2u)));
  uint code = bitfieldExtract(word, int(8u * (j & 3u) + uint(KILN_BITS) * s), KILN_BITS);
  float v = float(int(code) - KILN_OFFSET) * kiln_scale(n * p.srs + k / p.group);
  kiln_epilogue(KILN_RESULT(v), t);
}
