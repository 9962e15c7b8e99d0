#version 450
// kiln generated kernel: add(mul(a, cast<f32>(b)), c)
// operands: out f32, a f32, b i32, c f32; rank 1; 8 per step (u64vec4)
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) buffer kiln_buf0 { float kiln_b0[]; };
layout(std430, set = 0, binding = 0) buffer kiln_vbuf0 { u64vec4 kiln_v0[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_buf1 { int kiln_b1[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_vbuf1 { u64vec4 kiln_v1[]; };
layout(std430, set = 0, binding = 2) readonly buffer kiln_buf2 { float kiln_b2[]; };

layout(push_constant) uniform kiln_params {
  uint n;
  uint off0;
  uint off1;
  uint off2;
  uint off3;
} p;

vec4 kiln_f32x4(u64vec2 w) { return uintBitsToFloat(uvec4(unpackUint2x32(w.x), unpackUint2x32(w.y))); }
ivec4 kiln_i32x4(u64vec2 w) { return ivec4(uvec4(unpackUint2x32(w.x), unpackUint2x32(w.y))); }
u64vec2 kiln_pack_f32x4(vec4 v) { uvec4 u = floatBitsToUint(v); return u64vec2(packUint2x32(u.xy), packUint2x32(u.zw)); }
u64vec2 kiln_pack_i32x4(ivec4 v) { uvec4 u = uvec4(v); return u64vec2(packUint2x32(u.xy), packUint2x32(u.zw)); }
float kiln_compute(float l0, int l1, float l2) {
  float v0 = float(l1);
  float v1 = (l0 * v0);
  float v2 = (v1 + l2);
  return v2;
}

void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uint quads = p.n / 8u;
  float l2s = kiln_b2[p.off3];
  for (uint q = gl_GlobalInvocationID.x; q < quads; q += step) {
    u64vec4 l0w = kiln_v0[p.off1 / 8u + q];
    vec4 l0v = kiln_f32x4(l0w.xy), l0h = kiln_f32x4(l0w.zw);
    u64vec4 l1w = kiln_v1[p.off2 / 8u + q];
    ivec4 l1v = kiln_i32x4(l1w.xy), l1h = kiln_i32x4(l1w.zw);
    vec4 rv, rh;
    rv.x = kiln_compute(l0v.x, l1v.x, l2s);
    rv.y = kiln_compute(l0v.y, l1v.y, l2s);
    rv.z = kiln_compute(l0v.z, l1v.z, l2s);
    rv.w = kiln_compute(l0v.w, l1v.w, l2s);
    rh.x = kiln_compute(l0h.x, l1h.x, l2s);
    rh.y = kiln_compute(l0h.y, l1h.y, l2s);
    rh.z = kiln_compute(l0h.z, l1h.z, l2s);
    rh.w = kiln_compute(l0h.w, l1h.w, l2s);
    kiln_v0[p.off0 / 8u + q] = u64vec4(kiln_pack_f32x4(rv), kiln_pack_f32x4(rh));
  }
  uint tail = quads * 8u + gl_GlobalInvocationID.x;
  if (gl_GlobalInvocationID.x < p.n % 8u) {
    uint i = tail;
    float l0 = kiln_b0[p.off1 + i];
    int l1 = kiln_b1[p.off2 + i];
    float r = kiln_compute(l0, l1, l2s);
    kiln_b0[p.off0 + i] = r;
  }
}
