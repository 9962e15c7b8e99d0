// kernels/quant/tiled.comp — x [..., K] times a quantized [N, K] weight's transpose for
// more rows of x than the matvec kernel takes (prefill, a batch; ops/quant/qmatmul.hpp
// gives the formula, matvec.comp the same arithmetic a row at a time): one workgroup per
// tile of BM rows of x by BN output columns, numbered gl_WorkGroupID.y *
// gl_NumWorkGroups.x + gl_WorkGroupID.x = tile row * tiles + tile column.
//   1. max|x_m| of the tile's rows through the prologue, WG / BM invocations a row (a
//      shared-memory tree each), then inv and the row scale per row (kiln_row_scale,
//      common.comp: exact divisions, NaN / Inf rows give NaN outputs).
//   2. K in chunks of BK weights (a multiple of 128): the BM rows' x_q (kiln_xword, x
//      re-read per chunk) and the BN weight rows' code words (uvec4 reads, the offset
//      flipped out) staged in shared memory, rows padded by a word (GPU banks).
//   3. invocation (ty, tx) takes rows ty + i * (BM / TM) and columns tx + j * (BN / TN),
//      i < TM, j < TN (register blocking: each staged word read and unpacked once for
//      TN or TM outputs): int32 sums per scale group over 32-weight field blocks, as
//      matvec.comp; KILN_QF 1 (CPU devices) multiplies the unpacked codes as floats with
//      a fused multiply-add and converts each field block's sum (an integer below 2^24:
//      at most 32 products of 127 * 127, so exact) to int: the same int32 sums. Each
//      group's sum is converted to float once: acc += scale[n, g] * float(isum_g); the
//      output is row scale * acc through the epilogue, once. KILN_DOT 1 (KILN_QF 0): each
//      staged x word and field of a code word as four signed bytes into one packed dot
//      product (common.comp's KILN_DOT4, kiln_sfield), the same int32 sums.
// Rows past M and columns past N stage zeros and are not stored; code words past a
// row's end stage zeros against x_q = 0.
// Generated before it (codegen/quant.hpp): the parameter block `p` (rows = M, tiles =
// column tiles), the hooks kiln_prologue (x at m * K + k), kiln_epilogue, kiln_code4
// (code words w .. w + 3, w a multiple of 4) and kiln_scale; then common.comp.
layout(local_size_x_id = 2) in;
layout(constant_id = 2) const uint WG = 256;  // (BM / TM) * (BN / TN), at least BM
layout(constant_id = 3) const uint BM = 64;   // rows of x a tile
layout(constant_id = 4) const uint BN = 64;   // output columns a tile
layout(constant_id = 5) const uint BK = 128;  // weights of K staged at a time (a multiple of 128)
layout(constant_id = 6) const uint TM = 4;    // rows an invocation
layout(constant_id = 7) const uint TN = 4;    // columns an invocation

const uint XS = BK / 4u + 1u;                  // words a staged x row
const uint WQ = BK * uint(KILN_BITS) / 128u;   // uvec4 code words a weight row per chunk of K
const uint WS = WQ + 1u;
const uint LANES = WG / BM;                    // invocations a row in step 1

shared uint kiln_xq[BM * XS];
shared uvec4 kiln_wq[BN * WS];
shared float kiln_max[WG];
shared uint kiln_bad[WG];
shared float kiln_inv[BM];
shared float kiln_xsc[BM];

void main() {
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  uint tm = task / p.tiles, tn = task - tm * p.tiles;
  uint m0 = tm * BM, n0 = tn * BN;
  if (m0 >= p.rows) return;  // whole workgroups: uniform
  uint lid = gl_LocalInvocationIndex;

  // 1. max|x_m| of the tile's rows
  {
    uint r = lid / LANES, lane = lid - r * LANES;
    float amax = 0.0;
    uint bad = 0u;
    if (m0 + r < p.rows) {
      uint xrow = (m0 + r) * p.K;
      for (uint k = lane; k < p.K; k += LANES) {
        float a = abs(kiln_prologue(xrow + k));
        if (isnan(a) || isinf(a)) bad = 1u;
        else amax = max(amax, a);
      }
    }
    kiln_max[lid] = amax;
    kiln_bad[lid] = bad;
    barrier();
    for (uint w = LANES / 2u; w > 0u; w >>= 1u) {
      if (lane < w) {
        kiln_max[lid] = max(kiln_max[lid], kiln_max[lid + w]);
        kiln_bad[lid] |= kiln_bad[lid + w];
      }
      barrier();
    }
    if (lid < BM) {
      float inv, xscale;
      kiln_row_scale(kiln_max[lid * LANES], kiln_bad[lid * LANES], inv, xscale);
      kiln_inv[lid] = inv;
      kiln_xsc[lid] = xscale;
    }
    barrier();
  }

  uint tx = lid % (BN / TN), ty = lid / (BN / TN);
  uint sbase[TN];  // the columns' first scales (a column past N reads row 0's)
  [[unroll]] for (uint j = 0u; j < TN; ++j) {
    uint n = n0 + tx + j * (BN / TN);
    sbase[j] = (n < p.N ? n : 0u) * p.srs;
  }
  float acc[TM * TN];
  int gsum[TM * TN];  // the current scale group's integer sums
  [[unroll]] for (uint i = 0u; i < TM * TN; ++i) {
    acc[i] = 0.0;
    gsum[i] = 0;
  }
  uint gidx = 0u, gend = min(p.group, p.K);  // the current group's index and end (exclusive)
  for (uint k0 = 0u; k0 < p.K; k0 += BK) {
    // 2. stage x_q and the code words of the chunk
    barrier();  // the previous chunk's reads are done
    for (uint i = lid; i < BM * (BK / 4u); i += WG) {
      uint r = i / (BK / 4u), w = i - r * (BK / 4u);
      uint m = m0 + r;
      kiln_xq[r * XS + w] = m < p.rows ? kiln_xword(m * p.K, k0 + 4u * w, kiln_inv[r]) : 0u;
    }
    uint cw0 = k0 / 32u * uint(KILN_BITS);  // the chunk's first code word in a row
    for (uint i = lid; i < BN * WQ; i += WG) {
      uint r = i / WQ, q = i - r * WQ;
      uint n = n0 + r, w = cw0 + 4u * q;
      uvec4 v = uvec4(0u);
      if (n < p.N && w < p.words) v = kiln_code4(n * p.words + w) ^ uvec4(KILN_FLIP);
      kiln_wq[r * WS + q] = v;
    }
    barrier();
    // 3. the invocation's outputs over the chunk's field blocks
    uint kn = min(BK, p.K - k0);
    for (uint c = 0u; c * KILN_CHUNK < kn; ++c) {
      for (uint s = 0u; s < KILN_FIELDS; ++s) {
        uint ks = k0 + c * KILN_CHUNK + 32u * s;  // the field block's first weight
        if (ks >= p.K) break;                     // uniform
#if KILN_QF
        float part[TM * TN];
        [[unroll]] for (uint i = 0u; i < TM * TN; ++i) part[i] = 0.0;
#endif
        [[unroll]] for (uint h = 0u; h < 2u; ++h) {
          uvec4 wv[TN];
          [[unroll]] for (uint j = 0u; j < TN; ++j) wv[j] = kiln_wq[(tx + j * (BN / TN)) * WS + c * 2u + h];
          [[unroll]] for (uint e = 0u; e < 4u; ++e) {
            uint xw = c * (KILN_CHUNK / 4u) + 8u * s + 4u * h + e;  // the x word of code word 4h + e, field s
#if KILN_DOT
            uint xd[TM];
            [[unroll]] for (uint i = 0u; i < TM; ++i) xd[i] = kiln_xq[(ty + i * (BM / TM)) * XS + xw];
            [[unroll]] for (uint j = 0u; j < TN; ++j) {
              uint sw = kiln_sfield(wv[j][e], s);
              [[unroll]] for (uint i = 0u; i < TM; ++i) gsum[i * TN + j] += KILN_DOT4(xd[i], sw);
            }
#else
#if KILN_QF
            float xv[TM * 4u];
#else
            int xv[TM * 4u];
#endif
            [[unroll]] for (uint i = 0u; i < TM; ++i) {
              int x4 = int(kiln_xq[(ty + i * (BM / TM)) * XS + xw]);
              [[unroll]] for (uint b = 0u; b < 4u; ++b) {
#if KILN_QF
                xv[i * 4u + b] = float(bitfieldExtract(x4, int(8u * b), 8));
#else
                xv[i * 4u + b] = bitfieldExtract(x4, int(8u * b), 8);
#endif
              }
            }
            [[unroll]] for (uint j = 0u; j < TN; ++j) {
              uint cw = wv[j][e];
              [[unroll]] for (uint b = 0u; b < 4u; ++b) {
                int cv = kiln_code(cw, b, s);
#if KILN_QF
                float cf = float(cv);
                [[unroll]] for (uint i = 0u; i < TM; ++i) part[i * TN + j] = fma(xv[i * 4u + b], cf, part[i * TN + j]);
#else
                [[unroll]] for (uint i = 0u; i < TM; ++i) gsum[i * TN + j] += xv[i * 4u + b] * cv;
#endif
              }
            }
#endif  // KILN_DOT
          }
        }
#if KILN_QF
        [[unroll]] for (uint i = 0u; i < TM * TN; ++i) gsum[i] += int(part[i]);
#endif
        if (ks + 32u >= gend) {  // the scale group ends with this field block
          [[unroll]] for (uint j = 0u; j < TN; ++j) {
            float sc = kiln_scale(sbase[j] + gidx);
            [[unroll]] for (uint i = 0u; i < TM; ++i) {
              acc[i * TN + j] += sc * float(gsum[i * TN + j]);
              gsum[i * TN + j] = 0;
            }
          }
          ++gidx;
          gend = min(gend + p.group, p.K);
        }
      }
    }
  }
  [[unroll]] for (uint i = 0u; i < TM; ++i) {
    uint r = ty + i * (BM / TM), m = m0 + r;
    float xscale = kiln_xsc[r];
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      uint n = n0 + tx + j * (BN / TN);
      if (m < p.rows && n < p.N) kiln_epilogue(KILN_RESULT(xscale * acc[i * TN + j]), m * p.N + n);
    }
  }
}
