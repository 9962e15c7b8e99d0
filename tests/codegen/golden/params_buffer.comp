#version 450
// kiln generated kernel: add(mul(a, b), mul(c, s0))
// operands: out f32, a f32, b f32, c f32; rank 2; parameter buffer
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) writeonly buffer kiln_buf0 { float kiln_b0[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_buf1 { float kiln_b1[]; };
layout(std430, set = 0, binding = 2) readonly buffer kiln_buf2 { float kiln_b2[]; };
layout(std430, set = 0, binding = 3) readonly buffer kiln_buf3 { float kiln_b3[]; };

layout(std430, set = 0, binding = 4) readonly buffer kiln_params {
  uint n;
  uint off0;
  uint off1;
  uint off2;
  uint off3;
  uint ext0;
  uint ext1;
  int st1_0;
  int st1_1;
  int st2_0;
  int st2_1;
  int st3_0;
  int st3_1;
  float s0;
} p;

float kiln_compute(float l0, float l1, float l2) {
  float v0 = (l0 * l1);
  float v1 = (l2 * p.s0);
  float v2 = (v0 + v1);
  return v2;
}

void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += step) {
    uint rest = i;
    uint c1 = rest % p.ext1; rest /= p.ext1;
    uint c0 = rest;
    float l0 = kiln_b1[uint(int(p.off1) + int(c0) * p.st1_0 + int(c1) * p.st1_1)];
    float l1 = kiln_b2[uint(int(p.off2) + int(c0) * p.st2_0 + int(c1) * p.st2_1)];
    float l2 = kiln_b3[uint(int(p.off3) + int(c0) * p.st3_0 + int(c1) * p.st3_1)];
    float r = kiln_compute(l0, l1, l2);
    kiln_b0[p.off0 + i] = r;
  }
}
