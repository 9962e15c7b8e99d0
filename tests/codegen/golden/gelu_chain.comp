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

float kiln_gelu(float x) {
  float a = abs(x);
  float c = min(a, 5.656854153e+00);
  float t = c * c;
  float e = mix(c * fma(fma(fma(fma(fma(2.211375616e-08, t, 6.249753824e-06), t, 1.680841087e-04), t, 4.671523813e-03), t, 3.388284147e-02), t, 3.989422917e-01)
                  / fma(fma(fma(fma(fma(1.171352665e-06, t, 7.289681525e-05), t, 1.880740630e-03), t, 2.864346094e-02), t, 2.515981197e-01), t, 1.000000000e+00),
                0.5, 5.543717384e+00 <= a);  // a select, not a branch
  return fma(a, e, 0.5 * x);  // NaN x: a is NaN, whatever GLSL's min made of c
}
float kiln_compute(float l0, float l1, float l2) {
  float v0 = (l0 * l1);
  float v1 = (v0 + l2);
  float v2 = kiln_gelu(v1);
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
    r.x = kiln_compute(l0v.x, l1v.x, l2v.x);
    r.y = kiln_compute(l0v.y, l1v.y, l2v.y);
    r.z = kiln_compute(l0v.z, l1v.z, l2v.z);
    r.w = kiln_compute(l0v.w, l1v.w, l2v.w);
    kiln_v0[p.off0 / 4u + q] = r;
  }
}
