#version 450
// kiln generated kernel: ge(cast<f32>(a), s0)
// operands: out u8, a f16; rank 1
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) writeonly buffer kiln_buf0 { uint8_t kiln_b0[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_buf1 { float16_t kiln_b1[]; };

layout(push_constant) uniform kiln_params {
  uint n;
  uint off0;
  uint off1;
  float s0;
} p;

bool kiln_compute(float l0) {
  float v0 = float(l0);
  bool v1 = (v0 >= p.s0);
  return v1;
}

void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += step) {
    float l0 = float(kiln_b1[p.off1 + i]);
    bool r = kiln_compute(l0);
    kiln_b0[p.off0 + i] = uint8_t((r ? 1 : 0));
  }
}
