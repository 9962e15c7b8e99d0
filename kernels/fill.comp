#version 450
// kernels/fill.comp — sets every element of a strided destination to one value.
// Bindings:  0 = destination buffer (writeonly), an array of ELEM bound at its
//            allocation's start.
// Push:      rank, count, dst_offset, value, extent[8], dst_stride[8] (uints, 80 bytes);
//            value holds the element's bits in its low KILN_ELEM_BITS bits; offsets and
//            strides count elements.
// Workgroup: local_size_x = specialisation constant 0 (from device caps); each
//            invocation writes ELEMS (constant 1) elements a workgroup apart, and the
//            grid loops when count exceeds the dispatched groups.
// Layout:    row-major, innermost dimension last; contiguous targets arrive as rank 1.
// Variants:  KILN_ELEM_BITS = 8, 16 or 32 picks the element type.
#extension GL_EXT_shader_8bit_storage : enable
#extension GL_EXT_shader_16bit_storage : enable

#if KILN_ELEM_BITS == 8
#define ELEM uint8_t
#elif KILN_ELEM_BITS == 16
#define ELEM uint16_t
#else
#define ELEM uint
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ELEMS = 1;

layout(std430, binding = 0) writeonly buffer dst_buffer { ELEM dst[]; };

layout(push_constant) uniform params {
  uint rank;
  uint count;
  uint dst_offset;
  uint value;
  uint extent[8];
  uint dst_stride[8];
} p;

void main() {
  const uint wg = gl_WorkGroupSize.x;
  const uint step = gl_NumWorkGroups.x * wg * ELEMS;
  for (uint base = gl_WorkGroupID.x * wg * ELEMS + gl_LocalInvocationID.x; base < p.count; base += step) {
    for (uint k = 0u; k < ELEMS; ++k) {
      const uint i = base + k * wg;
      if (i >= p.count) break;
      uint d = p.dst_offset;
      if (p.rank == 1u) {
        d += i * p.dst_stride[0];
      } else {
        uint rem = i;
        for (int r = int(p.rank) - 1; r >= 0; --r) {
          const uint q = rem / p.extent[r];
          d += (rem - q * p.extent[r]) * p.dst_stride[r];
          rem = q;
        }
      }
      dst[d] = ELEM(p.value);  // 8/16-bit storage allows only the conversion on store
    }
  }
}
