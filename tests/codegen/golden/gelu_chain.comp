#version 450
// kiln generated kernel: gelu(add(mul(a, b), c))
// operands: out f32, a f32, b f32, c f32; rank 1; vec4
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) writeonly buffer kiln_buf0 { float kiln_b0[]; };
layout(std430, set = 0, binding = 0) writeonly buffer kiln_vbuf0 { vec4 kiln_v0[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_buf1 { float kiln_b1[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_vbuf1 { vec4 kiln_v1[]; };
layout(std430, set = 0, binding = 2) readonly buffer kiln_buf2 { float kiln_b2[]; };
layout(std430, set = 0, binding = 2) readonly buffer kiln_vbuf2 { vec4 kiln_v2[]; };
layout(std430, set = 0, binding = 3) readonly buffer kiln_buf3 { float kiln_b3[]; };
layout(std430, set = 0, binding = 3) readonly buffer kiln_vbuf3 { vec4 kiln_v3[]; };

layout(push_constant) uniform kiln_params {
  uint n;
  uint off0;
  uint off1;
  uint off2;
  uint off3;
} p;

float kiln_erf(float x) {
  float c = x < -4.0 ? -4.0 : (4.0 < x ? 4.0 : x);
  float t = c * c;
  float num = fma(fma(fma(fma(fma(fma(-1.336023885e-08, t, 4.715110270e-06), t, 3.808589942e-04), t,
                3.856478083e-03), t, 5.435400415e-02), t, 1.852799982e-01), t, 1.128379168e+00);
  float den = fma(fma(fma(fma(fma(6.340349108e-05, t, 1.310691098e-03), t, 1.547984330e-02), t,
                1.140140140e-01), t, 4.975335208e-01), t, 1.0);
  return c <= -3.92 ? -1.0 : (3.92 <= c ? 1.0 : c * num / den);
}
float kiln_compute(float l0, float l1, float l2) {
  float v0 = (l0 * l1);
  float v1 = (v0 + l2);
  float v2 = (0.5 * v1 * (1.0 + kiln_erf(v1 * 0.70710678118654752)));
  return v2;
}

void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uint quads = p.n / 4u;
  for (uint q = gl_GlobalInvocationID.x; q < quads; q += step) {
    vec4 l0v = vec4(kiln_v1[p.off1 / 4u + q]);
    vec4 l1v = vec4(kiln_v2[p.off2 / 4u + q]);
    vec4 l2v = vec4(kiln_v3[p.off3 / 4u + q]);
    vec4 r;
    for (int k = 0; k < 4; ++k) r[k] = kiln_compute(l0v[k], l1v[k], l2v[k]);
    kiln_v0[p.off0 / 4u + q] = r;
  }
  uint tail = quads * 4u + gl_GlobalInvocationID.x;
  if (gl_GlobalInvocationID.x < p.n % 4u) {
    uint i = tail;
    float l0 = kiln_b1[p.off1 + i];
    float l1 = kiln_b2[p.off2 + i];
    float l2 = kiln_b3[p.off3 + i];
    float r = kiln_compute(l0, l1, l2);
    kiln_b0[p.off0 + i] = r;
  }
}
