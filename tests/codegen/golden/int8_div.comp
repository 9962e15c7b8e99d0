#version 450
// kiln generated kernel: div(cast<i8>(mul(cast<f32>(a), s0)), b)
// operands: out i8, a f16, b i8; rank 1
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) writeonly buffer kiln_buf0 { int8_t kiln_b0[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_buf1 { float16_t kiln_b1[]; };
layout(std430, set = 0, binding = 2) readonly buffer kiln_buf2 { int8_t kiln_b2[]; };

layout(push_constant) uniform kiln_params {
  uint n;
  uint off0;
  uint off1;
  uint off2;
  float s0;
} p;

int kiln_f2i(float v, float lo, float hi) {
  if (isnan(v)) return 0;
  if (hi > 2147483000.0 && v >= 2147483648.0) return 2147483647;  // int32: its max is not a float
  return int(clamp(v, lo, hi));
}
int kiln_compute(float l0, int l1) {
  float v0 = float(l0);
  float v1 = (v0 * p.s0);
  int v2 = kiln_f2i(v1, -128.000000, 127.000000);
  int v3 = (l1 == 0 ? 0 : (l1 == -1 ? -v2 : v2 / l1));
  return v3;
}

void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += step) {
    float l0 = float(kiln_b1[p.off1 + i]);
    int l1 = int(kiln_b2[p.off2 + i]);
    int r = kiln_compute(l0, l1);
    kiln_b0[p.off0 + i] = int8_t(r);
  }
}
