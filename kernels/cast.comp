#version 450
// kernels/cast.comp — element type conversion f32 <-> f16 over strided views, with the
// exact rules of kiln/core/half.hpp: f32 -> f16 rounds to nearest even, overflows to
// infinity, keeps NaN quiet (top payload bits); f16 -> f32 is exact (subnormals too).
// The conversions are integer bit manipulation, so no driver rounding mode or
// denormal flushing can change a result.
// Bindings:  0 = source buffer (readonly), 1 = destination buffer (writeonly); both
//            bound at their allocation's start.
// Push:      rank, count, src_offset, dst_offset, extent[8], src_stride[8],
//            dst_stride[8] (uints, 112 bytes); offsets and strides count elements.
// Workgroup: local_size_x = specialisation constant 0 (from device caps); each
//            invocation converts ELEMS (constant 1) elements a workgroup apart, and the
//            grid loops when count exceeds the dispatched groups.
// Layout:    row-major, innermost dimension last; contiguous views arrive as rank 1.
// Variants:  KILN_CAST_F32_TO_F16 = 1 (src uint = f32 bits, dst uint16_t = f16 bits) or
//            0 (the reverse).
#extension GL_EXT_shader_16bit_storage : require

#if KILN_CAST_F32_TO_F16
#define SRC uint
#define DST uint16_t
#else
#define SRC uint16_t
#define DST uint
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ELEMS = 1;

layout(std430, binding = 0) readonly buffer src_buffer { SRC src[]; };
layout(std430, binding = 1) writeonly buffer dst_buffer { DST dst[]; };

layout(push_constant) uniform params {
  uint rank;
  uint count;
  uint src_offset;
  uint dst_offset;
  uint extent[8];
  uint src_stride[8];
  uint dst_stride[8];
} p;

uint f32_to_f16(uint x) {
  const uint sign = (x >> 16) & 0x8000u;
  const uint ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN
    return sign | 0x7c00u | (ax > 0x7f800000u ? (0x200u | ((ax >> 13) & 0x3ffu)) : 0u);
  }
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  const uint e = ax >> 23;
  if (e < 113u) {  // below 2^-14: f16 subnormal or zero
    if (e < 102u) return sign;
    const uint m = (ax & 0x7fffffu) | 0x800000u;
    const uint shift = 126u - e;  // 14..24
    uint r = m >> shift;
    const uint rem = m & ((1u << shift) - 1u);
    const uint halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (r & 1u) != 0u)) ++r;
    return sign | r;
  }
  uint h = ((e - 112u) << 10) | ((ax >> 13) & 0x3ffu);
  const uint rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) ++h;  // a carry moves into the exponent
  return sign | h;
}

uint f16_to_f32(uint h) {
  const uint sign = (h & 0x8000u) << 16;
  uint e = (h >> 10) & 0x1fu;
  uint m = h & 0x3ffu;
  if (e == 0u) {
    if (m == 0u) return sign;
    e = 113u;  // normalise the subnormal: value = m * 2^-24
    while ((m & 0x400u) == 0u) {
      m <<= 1;
      --e;
    }
    return sign | (e << 23) | ((m & 0x3ffu) << 13);
  }
  if (e == 31u) return sign | 0x7f800000u | (m << 13) | (m != 0u ? 0x400000u : 0u);
  return sign | ((e + 112u) << 23) | (m << 13);
}

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
#if KILN_CAST_F32_TO_F16
      dst[d] = uint16_t(f32_to_f16(src[s]));
#else
      dst[d] = f16_to_f32(uint(src[s]));
#endif
    }
  }
}
