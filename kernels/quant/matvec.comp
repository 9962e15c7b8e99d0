// kernels/quant/matvec.comp — x [..., K] times a quantized [N, K] weight's transpose
// (kiln::matmul / linear / bitlinear with a qtensor; ops/quant/qmatmul.hpp gives the
// formula): one workgroup per (row m of x, block of WG * NC output columns), numbered
// gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x = m * tiles + block.
//   1. max|x_m| over the row through the prologue (a shared-memory tree), and whether
//      the row holds a NaN or an infinity; inv and the row's scale from kiln_row_scale
//      (common.comp: exact divisions; a NaN / Inf row's outputs are NaN).
//   2. the row quantized to int8, x_q = clamp(roundEven(x * inv), -127, 127), four a
//      word into shared memory, SEG weights at a time (specialisation constant 3, a
//      multiple of 128: all of K when it fits, else K in segments, x re-read per segment).
//   3. invocation i takes columns n_j = block * WG * NC + j * WG + i (j < NC, specialisation
//      constant 4: each x word read and unpacked once for NC columns): codes read as uvec4 words, each
//      field unpacked with a shift and a mask (code - OFFSET: int8 and int4 by an XOR
//      with the offset and a sign-extending extract, ternary by a subtraction), int32
//      sums per 32-weight field block, added up per scale group and converted to float
//      once per group: acc += scale[n, g] * float(isum_g); the output is
//      row scale * acc through the epilogue, once. KILN_DOT 1: each x word and field of
//      a code word as four signed bytes into one packed dot product (common.comp's
//      KILN_DOT4, kiln_sfield), the same int32 sums.
// Generated before it (codegen/quant.hpp): the parameter block `p` (rows = M), the hooks
// kiln_prologue (x at m * K + k), kiln_epilogue, kiln_code4 (code words w .. w + 3 of
// the codes) and kiln_scale (element e of the scales); then common.comp.
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 64;
layout(constant_id = 3) const uint SEG = 128;
layout(constant_id = 4) const uint NC = 1;  // output columns per invocation

shared uint kiln_xq[SEG / 4u];  // x_q of the segment, four int8 a word (little-endian)
shared float kiln_max[WG];
shared uint kiln_bad[WG];

void main() {
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  uint m = task / p.tiles, block = task - m * p.tiles;
  if (m >= p.rows) return;  // whole workgroups: uniform
  uint lid = gl_LocalInvocationIndex;
  uint xrow = m * p.K;

  // 1. max|x_m|
  float amax = 0.0;
  uint bad = 0u;
  for (uint k = lid; k < p.K; k += WG) {
    float a = abs(kiln_prologue(xrow + k));
    if (isnan(a) || isinf(a)) bad = 1u;
    else amax = max(amax, a);
  }
  kiln_max[lid] = amax;
  kiln_bad[lid] = bad;
  barrier();
  for (uint w = WG / 2u; w > 0u; w >>= 1u) {
    if (lid < w) {
      kiln_max[lid] = max(kiln_max[lid], kiln_max[lid + w]);
      kiln_bad[lid] |= kiln_bad[lid + w];
    }
    barrier();
  }
  float inv, xscale;
  kiln_row_scale(kiln_max[0], kiln_bad[0], inv, xscale);

  // columns n_j = block * WG * NC + j * WG + lid; one past N computes on row 0 and is dropped
  uint cbase[NC], sbase[NC];
  float acc[NC];
  int gsum[NC];  // the current scale group's integer sums
  for (uint j = 0u; j < NC; ++j) {
    uint n = block * WG * NC + j * WG + lid;
    cbase[j] = (n < p.N ? n : 0u) * p.words;
    sbase[j] = (n < p.N ? n : 0u) * p.srs;
    acc[j] = 0.0;
    gsum[j] = 0;
  }
  uint gidx = 0u, gend = min(p.group, p.K);  // the current group's index and end (exclusive)
  for (uint k0 = 0u; k0 < p.K; k0 += SEG) {
    uint kn = min(SEG, p.K - k0);                                  // weights of the segment
    uint fill = min(SEG, (kn + KILN_CHUNK - 1u) / KILN_CHUNK * KILN_CHUNK) / 4u;  // whole chunks' x words
    // 2. x_q of the segment
    barrier();  // the previous segment's reads are done
    for (uint i = lid; i < fill; i += WG) kiln_xq[i] = kiln_xword(xrow, k0 + i * 4u, inv);
    barrier();
    // 3. the invocation's columns over the segment's chunks
    for (uint c = k0 / KILN_CHUNK; c * KILN_CHUNK < k0 + kn; ++c) {
      uvec4 w0[NC], w1[NC];
      for (uint j = 0u; j < NC; ++j) {
        w0[j] = kiln_code4(cbase[j] + c * 8u) ^ uvec4(KILN_FLIP);
        w1[j] = kiln_code4(cbase[j] + c * 8u + 4u) ^ uvec4(KILN_FLIP);
      }
      uint xb = (c * KILN_CHUNK - k0) >> 2u;  // the chunk's first x word in the segment
      int part[NC * KILN_FIELDS];
      for (uint i = 0u; i < NC * KILN_FIELDS; ++i) part[i] = 0;
      [[unroll]] for (uint qw = 0u; qw < 8u; ++qw) {
        [[unroll]] for (uint s = 0u; s < KILN_FIELDS; ++s) {
#if KILN_DOT
          uint xd = kiln_xq[xb + 8u * s + qw];
          [[unroll]] for (uint j = 0u; j < NC; ++j) {
            uint cw = qw < 4u ? w0[j][qw] : w1[j][qw - 4u];
            part[j * KILN_FIELDS + s] += KILN_DOT4(xd, kiln_sfield(cw, s));
          }
#else
          int xw = int(kiln_xq[xb + 8u * s + qw]);
          int xv[4];
          [[unroll]] for (uint b = 0u; b < 4u; ++b) xv[b] = bitfieldExtract(xw, int(8u * b), 8);
          [[unroll]] for (uint j = 0u; j < NC; ++j) {
            uint cw = qw < 4u ? w0[j][qw] : w1[j][qw - 4u];
            int sum = 0;
            [[unroll]] for (uint b = 0u; b < 4u; ++b) {
              int cv = kiln_code(cw, b, s);
              sum += xv[b] * cv;
            }
            part[j * KILN_FIELDS + s] += sum;
          }
#endif
        }
      }
      for (uint s = 0u; s < KILN_FIELDS; ++s) {
        uint ks = c * KILN_CHUNK + 32u * s;  // the field block's first weight
        if (ks < p.K) {
          bool ends = ks + 32u >= gend;  // its scale group ends here
          for (uint j = 0u; j < NC; ++j) {
            gsum[j] += part[j * KILN_FIELDS + s];
            if (ends) {
              acc[j] += kiln_scale(sbase[j] + gidx) * float(gsum[j]);
              gsum[j] = 0;
            }
          }
          if (ends) {
            ++gidx;
            gend = min(gend + p.group, p.K);
          }
        }
      }
    }
  }
  for (uint j = 0u; j < NC; ++j) {
    uint n = block * WG * NC + j * WG + lid;
    if (n < p.N) kiln_epilogue(KILN_RESULT(xscale * acc[j]), m * p.N + n);
  }
}
