// kernels/position/rope.comp — kiln::rope (row family): one invocation per pair of a row,
// which reads both elements, turns them and writes both (so `x = rope(x, pos)` in place
// is safe). Generated before it (codegen/position.hpp): #version, KILN_* defines, the
// buffers, the parameter block `p` (rows, extent = D, seq = S, then the operands'
// offsets, extents and strides and the scalars), and the hooks
//   float kiln_prologue(uint pos)                  x's expression at input position pos
//   void kiln_epilogue(KILN_RESULT value, uint pos)
//   int kiln_position(uint s), float kiln_inv_freq(uint i)
// Row r (input positions r * D ..) is at sequence index r % S. Pairs: (i, i + D/2), or
// (2i, 2i + 1) with KILN_INTERLEAVED. Workgroups numbered as in kernels/reduce/rows.comp
// (2-D grid past maxComputeWorkGroupCount[0]).
layout(local_size_x = KILN_WG) in;

// cos and sin of a float angle to about an ulp on every device: GLSL's own sin and cos
// promise only 2^-11 absolute error, inside [-pi, pi]. The angle is reduced to
// r = a - j * pi/2 in [-pi/4, pi/4], then minimax polynomials on r. Up to 2^17 * pi/2
// (about 205887 radians): pi/2 split into four parts of at most 7 significant bits
// (exact products for |j| < 2^17, each step cancelling exactly) and a float fifth.
// Past that (any finite float, e.g. positions past 205887 on the first frequency):
// Payne-Hanek, |a| = M 2^E (M < 2^24) times the 96 bits of 2/pi that matter for it
// (those worth less than 4 and more than 2^-70), in 32-bit integer products.

// 2/pi * 2^-8 (eight leading zero bits, so that the window below starts at bit 0 or
// later for every |a| >= 2^17): 8 words, most significant first
const uint kiln_two_over_pi[8] = uint[8](0x00A2F983u, 0x6E4E4415u, 0x29FC2757u, 0xD1F534DDu, 0xC0DB6295u,
                                         0x993C4390u, 0x41FE5163u, 0xABDEBBC5u);

// |a| = M 2^E with |a| >= 2^17 (E >= -6): the quadrant j mod 4 and r = |a| - j pi/2
void kiln_reduce_large(float a, out uint quadrant, out float r) {
  uint bits = floatBitsToUint(abs(a));
  int E = int(bits >> 23u) - 150;            // 127 + 23
  uint M = (bits & 0x7FFFFFu) | 0x800000u;
  // bits k of the table (from 1) with k <= E + 6 give multiples of 4 (dropped); the 96
  // bits from k = E + 7 are words w0..w2, and |a| 2/pi mod 4 = M W 2^-94
  uint first = uint(E + 6), q = first >> 5u, sh = first & 31u;
  uint w[3];
  for (uint t = 0u; t < 3u; ++t)
    w[t] = sh == 0u ? kiln_two_over_pi[q + t]
                    : (kiln_two_over_pi[q + t] << sh) | (kiln_two_over_pi[q + t + 1u] >> (32u - sh));
  // P = M W: 120 bits in r3..r0 (least significant last)
  uint h0, l0, h1, l1, h2, l2;
  umulExtended(M, w[0], h0, l0);
  umulExtended(M, w[1], h1, l1);
  umulExtended(M, w[2], h2, l2);
  uint c1, c2, c3;
  uint r0 = l2;
  uint r1 = uaddCarry(h2, l1, c1);
  uint r2 = uaddCarry(h1, l0, c2);
  r2 = uaddCarry(r2, c1, c3);
  // bits 95, 94 of P: the quadrant; bits 93..30: the fraction of a quarter turn
  quadrant = r2 >> 30u;
  uint fh = (r2 << 2u) | (r1 >> 30u), fl = (r1 << 2u) | (r0 >> 30u);
  if (fh >= 0x80000000u) quadrant += 1u;  // fraction >= 1/2: the next multiple (fh, fl negative)
  float f = (float(int(fh)) + float(fl) * 2.3283064365386963e-10) * 2.3283064365386963e-10;  // 2^-32
  r = f * 1.57079637050628662 - f * 4.37113900018624e-8;  // pi/2 as float + remainder
}

void kiln_sincos(float a, out float c, out float s) {
  if (isnan(a) || isinf(a)) {
    c = a - a;  // NaN
    s = c;
    return;
  }
  float j = floor(a * 0.636619772 + 0.5);
  precise float r;
  int q;
  if (abs(j) >= 131072.0) {
    uint quadrant;
    float rr;
    kiln_reduce_large(a, quadrant, rr);
    // a < 0: sin(a) = -sin(|a|), cos(a) = cos(|a|): the angle -(j pi/2 + r)
    r = a < 0.0 ? -rr : rr;
    q = a < 0.0 ? -int(quadrant & 3u) : int(quadrant & 3u);
  } else {
    r = a - j * 1.5625;
    r = r - j * 0.0081787109375;
    r = r - j * 0.00011730194091796875;
    r = r - j * 3.129243850708008e-07;
    r = r - j * 9.92093629470503e-10;
    q = int(j);
  }
  float z = r * r;
  float sp = r + r * z * ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1);
  float cp = 1.0 - 0.5 * z + z * z * ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2);
  q &= 3;
  if (q == 0) { s = sp; c = cp; }
  else if (q == 1) { s = cp; c = -sp; }
  else if (q == 2) { s = -sp; c = -cp; }
  else { s = -cp; c = sp; }
}

void main() {
  uint t = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * KILN_WG + gl_LocalInvocationIndex;
  uint h = p.extent >> 1u;
  if (t >= p.rows * h) return;
  uint row = t / h, i = t - row * h;
  float a = float(kiln_position(row % p.seq)) * kiln_inv_freq(i);  // the float angle, as Hugging Face's
  float c, s;
  kiln_sincos(a, c, s);
#if KILN_INTERLEAVED
  uint j0 = row * p.extent + 2u * i, j1 = j0 + 1u;
#else
  uint j0 = row * p.extent + i, j1 = j0 + h;
#endif
  float x0 = kiln_prologue(j0), x1 = kiln_prologue(j1);
  kiln_epilogue(KILN_RESULT(x0 * c - x1 * s), j0);
  kiln_epilogue(KILN_RESULT(x1 * c + x0 * s), j1);
}
