#version 450
// tests/vulkan/kernels/scale.comp — y = a * scale (embedded by kiln_embed_kernels()).
// Bindings:  0 = a (readonly float[]), 1 = y (writeonly float[]).
// Push:      count, scale (8 bytes).
// Workgroup: local_size_x = specialisation constant 0; grid-stride loop.
// Layout:    contiguous, both bound at their allocation's start.
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer a_buffer { float a[]; };
layout(std430, binding = 1) writeonly buffer y_buffer { float y[]; };
layout(push_constant) uniform params {
  uint count;
  float scale;
} p;

void main() {
  for (uint i = gl_GlobalInvocationID.x; i < p.count; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) y[i] = a[i] * p.scale;
}
