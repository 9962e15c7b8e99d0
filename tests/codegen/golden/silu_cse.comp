#version 450
// kiln generated kernel: add(mul(a, sigmoid(a)), sigmoid(a))
// operands: out f32, a f32, b f32, c f32; rank 1; vec4
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) writeonly buffer kiln_buf0 { float kiln_b0[]; };
layout(std430, set = 0, binding = 0) writeonly buffer kiln_vbuf0 { vec4 kiln_v0[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_buf1 { float kiln_b1[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_vbuf1 { vec4 kiln_v1[]; };

layout(push_constant) uniform kiln_params {
  uint n;
  uint off0;
  uint off1;
  uint off2;
  uint off3;
} p;

float kiln_exp(float x) {
  float c = clamp(x, -1.040000000e+02, 8.900000000e+01);
  float n = roundEven(c * 1.442695022e+00);
  precise float t = c - n * 6.933593750e-01;  // exact
  precise float r = t + n * 2.121944417e-04;
  float e = fma(r * r, fma(fma(fma(fma(1.381461043e-03, r, 8.368710056e-03), r, 4.166838899e-02), r, 1.666652113e-01), r, 4.999999404e-01), r) + 1.0;
  float h = floor(n * 0.5);
  e = e * intBitsToFloat((int(h) + 127) << 23) * intBitsToFloat((int(n - h) + 127) << 23);
  return isnan(x) ? x : e;
}
float kiln_compute(float l0) {
  float v0 = (1.0 / (1.0 + kiln_exp(-l0)));
  float v1 = (l0 * v0);
  float v2 = (v1 + v0);
  return v2;
}

void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uint quads = p.n / 4u;
  for (uint q = gl_GlobalInvocationID.x; q < quads; q += step) {
    vec4 l0v = vec4(kiln_v1[p.off1 / 4u + q]);
    vec4 r;
    r.x = kiln_compute(l0v.x);
    r.y = kiln_compute(l0v.y);
    r.z = kiln_compute(l0v.z);
    r.w = kiln_compute(l0v.w);
    kiln_v0[p.off0 / 4u + q] = r;
  }
}
