#version 450
// kiln generated kernel: add(mul(a, cast<f32>(b)), c)
// operands: out f32, a f32, b i32, c f32; rank 1; vec4; texel reads
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) buffer kiln_buf0 { float kiln_b0[]; };
layout(std430, set = 0, binding = 0) buffer kiln_vbuf0 { vec4 kiln_v0[]; };
layout(set = 0, binding = 1) uniform usamplerBuffer kiln_t1;
layout(set = 0, binding = 2) uniform usamplerBuffer kiln_t2;

layout(push_constant) uniform kiln_params {
  uint n;
  uint off0;
  uint off1;
  uint off2;
  uint off3;
} p;

uint kiln_texel(usamplerBuffer t, uint e) { return texelFetch(t, int(e >> 2u))[e & 3u]; }
float kiln_compute(float l0, int l1, float l2) {
  float v0 = float(l1);
  float v1 = (l0 * v0);
  float v2 = (v1 + l2);
  return v2;
}

void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uint quads = p.n / 4u;
  float l2s = uintBitsToFloat(kiln_texel(kiln_t2, p.off3));
  for (uint q = gl_GlobalInvocationID.x; q < quads; q += step) {
    vec4 l0v = vec4(kiln_v0[p.off1 / 4u + q]);
    ivec4 l1v = ivec4(texelFetch(kiln_t1, int(p.off2 / 4u + q)));
    vec4 r;
    r.x = kiln_compute(l0v.x, l1v.x, l2s);
    r.y = kiln_compute(l0v.y, l1v.y, l2s);
    r.z = kiln_compute(l0v.z, l1v.z, l2s);
    r.w = kiln_compute(l0v.w, l1v.w, l2s);
    kiln_v0[p.off0 / 4u + q] = r;
  }
  uint tail = quads * 4u + gl_GlobalInvocationID.x;
  if (gl_GlobalInvocationID.x < p.n % 4u) {
    uint i = tail;
    float l0 = kiln_b0[p.off1 + i];
    int l1 = int(kiln_texel(kiln_t1, p.off2 + i));
    float r = kiln_compute(l0, l1, l2s);
    kiln_b0[p.off0 + i] = r;
  }
}
