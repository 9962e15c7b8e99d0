// kernels/quant/matvec_split.comp — the quantized matvec for GPUs (quant_choice::lanes > 0):
// x [..., K] times a quantized [N, K] weight's transpose, as matvec.comp computes it, with
// K split over LANES invocations per output column so that a decode step has enough
// loads in flight to stream the weights at the memory's rate (matvec.comp gives each
// invocation a whole weight row: a few thousand rows keep a GPU's memory idle).
// One workgroup per (row m of x, block of CW = WG / LANES output columns), numbered
// gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x = m * tiles + block.
//   1. max|x_m| over the row through the prologue and the row's scale (common.comp), as
//      matvec.comp;
//   2. the whole row quantized to int8 into shared memory (SEG >= K, specialisation
//      constant 3);
//   3. invocation lane l of column r = lid / LANES takes the 32-byte code chunks l,
//      l + LANES, ... of its weight row (neighbouring invocations read neighbouring
//      chunks), the same int32 sums per 32-weight field block as matvec.comp, added into
//      the column's per-group integer sums in shared memory (atomicAdd: integer sums in
//      any order are the same sums);
//   4. one invocation per column walks the groups in order, acc += scale[n, g] *
//      float(isum_g), and writes row scale * acc through the epilogue: the float
//      arithmetic of matvec.comp and tiled.comp in the same order, so the three kernels
//      give the same bits.
// GMAX (specialisation constant 5) is the number of scale groups a row holds.
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 256;
layout(constant_id = 3) const uint SEG = 128;
layout(constant_id = 4) const uint LANES = 32;  // invocations per output column (a power of two)
layout(constant_id = 5) const uint GMAX = 1;    // scale groups a row
const uint CW = WG / LANES;                     // output columns a workgroup

shared uint kiln_xq[SEG / 4u];  // x_q of the row, four int8 a word (little-endian)
shared float kiln_max[WG];
shared uint kiln_bad[WG];
shared int kiln_gsum[CW * GMAX];  // [column][group] integer sums

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
  for (uint i = lid; i < CW * GMAX; i += WG) kiln_gsum[i] = 0;
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

  // 2. x_q of the row (whole chunks)
  uint chunks = (p.K + KILN_CHUNK - 1u) / KILN_CHUNK;
  for (uint i = lid; i < chunks * (KILN_CHUNK / 4u); i += WG) kiln_xq[i] = kiln_xword(xrow, i * 4u, inv);
  barrier();

  // 3. the column's chunks, split over its LANES invocations
  uint r = lid / LANES, lane = lid - r * LANES;
  uint n = block * CW + r;
  if (n < p.N) {
    uint cbase = n * p.words;
    int run = 0;      // the integer sum not yet added to kiln_gsum
    uint rung = 0u;   // its group
    for (uint c = lane; c < chunks; c += LANES) {
      uvec4 w0 = kiln_code4(cbase + c * 8u) ^ uvec4(KILN_FLIP);
      uvec4 w1 = kiln_code4(cbase + c * 8u + 4u) ^ uvec4(KILN_FLIP);
      uint xb = (c * KILN_CHUNK) >> 2u;  // the chunk's first x word
      int part[KILN_FIELDS];
      for (uint s = 0u; s < KILN_FIELDS; ++s) part[s] = 0;
      [[unroll]] for (uint qw = 0u; qw < 8u; ++qw) {
        uint cw = qw < 4u ? w0[qw] : w1[qw - 4u];
        [[unroll]] for (uint s = 0u; s < KILN_FIELDS; ++s) {
#if KILN_DOT
          part[s] += KILN_DOT4(kiln_xq[xb + 8u * s + qw], kiln_sfield(cw, s));
#else
          int xw = int(kiln_xq[xb + 8u * s + qw]);
          int sum = 0;
          [[unroll]] for (uint b = 0u; b < 4u; ++b) {
            int xv = bitfieldExtract(xw, int(8u * b), 8);
            int cv = kiln_code(cw, b, s);
            sum += xv * cv;
          }
          part[s] += sum;
#endif
        }
      }
      for (uint s = 0u; s < KILN_FIELDS; ++s) {
        uint ks = c * KILN_CHUNK + 32u * s;  // the field block's first weight
        if (ks < p.K) {
          uint g = ks / p.group;
          if (g != rung) {
            if (run != 0) atomicAdd(kiln_gsum[r * GMAX + rung], run);
            run = 0;
            rung = g;
          }
          run += part[s];
        }
      }
    }
    if (run != 0) atomicAdd(kiln_gsum[r * GMAX + rung], run);
  }
  barrier();

  // 4. the groups in order, as matvec.comp and tiled.comp add them
  if (lane == 0u && n < p.N) {
    uint sbase = n * p.srs;
    uint groups = (p.K + p.group - 1u) / p.group;
    float acc = 0.0;
    for (uint g = 0u; g < groups; ++g) acc += kiln_scale(sbase + g) * float(kiln_gsum[r * GMAX + g]);
    kiln_epilogue(KILN_RESULT(xscale * acc), m * p.N + n);
  }
}
