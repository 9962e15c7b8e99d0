#version 450
// kernels/copy.comp — strided copy: materialises any view (transposed, sliced,
// broadcast) into any strided destination, element for element.
// Bindings:  0 = source buffer (readonly), 1 = destination buffer (writeonly); both are
//            arrays of ELEM bound at their allocation's start.
// Push:      rank, count, src_offset, dst_offset, extent[8], src_stride[8],
//            dst_stride[8] (uints, 112 bytes); offsets and strides count elements.
// Workgroup: local_size_x = specialisation constant 0 (from device caps); each
//            invocation copies ELEMS (constant 1) elements a workgroup apart, and the
//            grid loops when count exceeds the dispatched groups.
// Layout:    row-major, innermost dimension last; the host merges dimensions first, so
//            contiguous copies arrive as rank 1. A stride of 0 broadcasts.
// Variants:  KILN_ELEM_BITS = 8, 16 or 32 picks the element type (raw bits, no conversion).
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

layout(std430, binding = 0) readonly buffer src_buffer { ELEM src[]; };
layout(std430, binding = 1) writeonly buffer dst_buffer { ELEM dst[]; };

layout(push_constant) uniform params {
  uint rank;
  uint count;
  uint src_offset;
  uint dst_offset;
  uint extent[8];
  uint src_stride[8];
  uint dst_stride[8];
} p;

void main() {
  const uint wg = gl_WorkGroupSize.x;
  const uint step = gl_NumWorkGroups.x * wg * ELEMS;
  for (uint base = gl_WorkGroupID.x * wg * ELEMS + gl_LocalInvocationID.x; base < p.count; base += step) {
    for (uint k = 0u; k < ELEMS; ++k) {
      const uint i = base + k * wg;
      if (i >= p.count) break;
      uint s = p.src_offset;
      uint d = p.dst_offset;
      if (p.rank == 1u) {
        s += i * p.src_stride[0];
        d += i * p.dst_stride[0];
      } else {
        uint rem = i;
        for (int r = int(p.rank) - 1; r >= 0; --r) {
          const uint q = rem / p.extent[r];
          const uint c = rem - q * p.extent[r];
          s += c * p.src_stride[r];
          d += c * p.dst_stride[r];
          rem = q;
        }
      }
      dst[d] = src[s];
    }
  }
}
