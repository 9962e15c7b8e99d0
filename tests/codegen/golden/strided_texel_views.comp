#version 450
// kiln generated kernel: sub(add(a, mul(b, c)), d)
// operands: out f32, a f32, b f32, c f32, d f32; rank 2; texel reads
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) writeonly buffer kiln_buf0 { float kiln_b0[]; };
layout(set = 0, binding = 1) uniform usamplerBuffer kiln_t1;
layout(set = 0, binding = 2) uniform usamplerBuffer kiln_t2;
layout(set = 0, binding = 3) uniform usamplerBuffer kiln_t3;
layout(std430, set = 0, binding = 4) readonly buffer kiln_buf4 { float kiln_b4[]; };

layout(push_constant) uniform kiln_params {
  uint n;
  uint off0;
  uint off1;
  uint off2;
  uint off3;
  uint off4;
  uint ext0;
  uint ext1;
  int st1_0;
  int st1_1;
  int st2_0;
  int st2_1;
  int st3_0;
  int st3_1;
  int st4_0;
  int st4_1;
} p;

uint kiln_texel(usamplerBuffer t, uint e) { return texelFetch(t, int(e >> 2u))[e & 3u]; }
float kiln_compute(float l0, float l1, float l2, float l3) {
  float v0 = (l1 * l2);
  float v1 = (l0 + v0);
  float v2 = (v1 - l3);
  return v2;
}

void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += step) {
    uint rest = i;
    uint c1 = rest % p.ext1; rest /= p.ext1;
    uint c0 = rest;
    float l0 = uintBitsToFloat(kiln_texel(kiln_t1, uint(int(p.off1) + int(c0) * p.st1_0 + int(c1) * p.st1_1)));
    float l1 = uintBitsToFloat(kiln_texel(kiln_t2, uint(int(p.off2) + int(c0) * p.st2_0 + int(c1) * p.st2_1)));
    float l2 = uintBitsToFloat(kiln_texel(kiln_t3, uint(int(p.off3) + int(c0) * p.st3_0 + int(c1) * p.st3_1)));
    float l3 = kiln_b4[uint(int(p.off4) + int(c0) * p.st4_0 + int(c1) * p.st4_1)];
    float r = kiln_compute(l0, l1, l2, l3);
    kiln_b0[p.off0 + i] = r;
  }
}
