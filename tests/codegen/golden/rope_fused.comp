#version 450
// kiln generated kernel: mul(rope(mul(a, t0), w0, w1), s0)
// rope, half-split pairs, one invocation a pair, 128 invocations
#define KILN_WG 128u
#define KILN_RESULT float
#define KILN_INTERLEAVED 0

layout(std430, set = 0, binding = 0) writeonly buffer kiln_buf0 { float kiln_b0[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_buf1 { float kiln_b1[]; };
layout(std430, set = 0, binding = 2) readonly buffer kiln_buf2 { int kiln_b2[]; };
layout(std430, set = 0, binding = 3) readonly buffer kiln_buf3 { float kiln_b3[]; };

layout(push_constant) uniform kiln_params {
  uint rows;
  uint extent;
  uint seq;
  uint ioff1;
  uint poff0;
  int pst0;
  uint poff1;
  uint off0;
  uint off1;
  float s0;
  float t0;
} p;

float kiln_prologue_compute(float l0) {
  float v0 = (l0 * p.t0);
  return v0;
}

float kiln_prologue(uint pos) {
  float l0 = kiln_b1[p.ioff1 + pos];
  return kiln_prologue_compute(l0);
}

float kiln_epilogue_compute(float l0) {
  float v0 = (l0 * p.s0);
  return v0;
}

void kiln_epilogue(KILN_RESULT value, uint pos) {
  float r = kiln_epilogue_compute(value);
  kiln_b0[p.off0 + pos] = r;
}

int kiln_position(uint k) { return kiln_b2[uint(int(p.poff0) + int(k) * p.pst0)]; }
float kiln_inv_freq(uint i) { return kiln_b3[p.poff1 + i]; }

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
// promise only 2^-11 absolute error, inside [-pi, pi]. a - j * pi/2 with pi/2 split into
// four parts of at most 7 significant bits (exact products for |j| < 2^17, each step
// cancelling exactly) and a float fifth, then minimax polynomials on [-pi/4, pi/4].
// Angles past 2^17 * pi/2 (about 205887 radians) fall back to the built-in functions.
void kiln_sincos(float a, out float c, out float s) {
  float j = floor(a * 0.636619772 + 0.5);
  if (abs(j) >= 131072.0) {
    c = cos(a);
    s = sin(a);
    return;
  }
  precise float r = a - j * 1.5625;
  r = r - j * 0.0081787109375;
  r = r - j * 0.00011730194091796875;
  r = r - j * 3.129243850708008e-07;
  r = r - j * 9.92093629470503e-10;
  float z = r * r;
  float sp = r + r * z * ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1);
  float cp = 1.0 - 0.5 * z + z * z * ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2);
  int q = int(j) & 3;
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
