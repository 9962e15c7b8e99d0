#version 450
// kiln generated kernel: where(gt(cast<f32>(a), s0), b, cast<f16>(mul(cast<f32>(c), s1)))
// operands: out f16, a i8, b f16, c bf16; rank 1
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) writeonly buffer kiln_buf0 { float16_t kiln_b0[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_buf1 { int8_t kiln_b1[]; };
layout(std430, set = 0, binding = 2) readonly buffer kiln_buf2 { float16_t kiln_b2[]; };
layout(std430, set = 0, binding = 3) readonly buffer kiln_buf3 { uint16_t kiln_b3[]; };

layout(push_constant) uniform kiln_params {
  uint n;
  uint off0;
  uint off1;
  uint off2;
  uint off3;
  float s0;
  float s1;
} p;

uint kiln_to_bf16(float v) {
  uint x = floatBitsToUint(v);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}
float kiln_round_f16(float v) {
  uint x = floatBitsToUint(v), s = x & 0x80000000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return v;
  if (a >= 0x477ff000u) return uintBitsToFloat(s | 0x7f800000u);
  if (a < 0x38800000u) return uintBitsToFloat(s | floatBitsToUint(roundEven(uintBitsToFloat(a) * 16777216.0) * 5.9604644775390625e-8));
  return uintBitsToFloat(s | ((a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u));
}
float kiln_compute(int l0, float l1, float l2) {
  float v0 = float(l0);
  bool v1 = (v0 > p.s0);
  float v2 = float(l2);
  float v3 = (v2 * p.s1);
  float v4 = kiln_round_f16(float(v3));
  float v5 = (v1 ? l1 : v4);
  return v5;
}

void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += step) {
    int l0 = int(kiln_b1[p.off1 + i]);
    float l1 = float(kiln_b2[p.off2 + i]);
    float l2 = uintBitsToFloat(uint(kiln_b3[p.off3 + i]) << 16);
    float r = kiln_compute(l0, l1, l2);
    kiln_b0[p.off0 + i] = float16_t(r);
  }
}
