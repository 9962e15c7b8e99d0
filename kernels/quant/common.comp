// kernels/quant/common.comp — what the quantized-product kernels (matvec.comp, tiled.comp)
// share, so that both give the same bits: the code layout's constants, the row scale of
// x by exact division, and x quantized to int8 four weights a word. A fragment after the
// generated part (kiln_prologue, KILN_BITS, KILN_OFFSET) and before the kernel.
//   kiln_row_scale  from max|x_m| and whether the row holds a NaN or an infinity: inv =
//                   127 / max|x_m| and the row's scale max|x_m| / 127 as correctly
//                   rounded divisions (kiln_div, in integers: a GPU's division need not be
//                   exact, and the CPU kernels divide in IEEE arithmetic); a NaN / Inf row
//                   gets inv = 0 and scale NaN (its outputs are NaN), an all-zero row 0, 0
//   kiln_code       the plain path's code - OFFSET of one weight of a code word
//   kiln_xword      x_q = clamp(roundEven(x * inv), -127, 127) of weights k .. k + 3 of
//                   the row starting at position xrow (0 past K), little-endian bytes
//   KILN_DOT 1      (a device with shaderIntegerDotProduct): KILN_DOT4(a, b), the dot
//                   product of two words of four signed bytes (OpSDot with
//                   PackedVectorFormat4x8Bit: exact, no saturation, the sum the plain
//                   path's four multiply-adds give), and kiln_sfield(cw, s), field s of a
//                   code word (KILN_FLIP applied) as four signed bytes code - OFFSET

#define KILN_FIELDS (8u / uint(KILN_BITS))  // fields a code byte
#define KILN_CHUNK (32u * KILN_FIELDS)       // weights a 32-byte chunk of codes
#if KILN_BITS == 8
#define KILN_FLIP 0x80808080u  // XOR with it: the stored (unsigned) codes as two's complement
#elif KILN_BITS == 4 && !KILN_DOT
#define KILN_FLIP 0x88888888u
#else
#define KILN_FLIP 0u
#endif

#if KILN_DOT
// OpSDot (SPV_KHR_integer_dot_product; capabilities DotProduct, DotProductInput4x8BitPacked)
// of 32-bit operands read as four signed bytes: format is PackedVectorFormat4x8Bit, 0.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int kiln_sdot(uint a, uint b, spirv_literal int format);
#define KILN_DOT4(a, b) kiln_sdot(a, b, 0)

// Field s of code word cw as four signed bytes code - OFFSET. int8: the flipped word
// itself. int4 and ternary (not flipped): each field masked to a byte u, then
// (u + 128 - OFFSET) ^ 0x80 is u - OFFSET in two's complement; the addition carries out
// of no byte (u + 128 - OFFSET <= 0x87).
uint kiln_sfield(uint cw, uint s) {
#if KILN_BITS == 8
  return cw;
#else
  uint u = (cw >> (uint(KILN_BITS) * s)) & (KILN_BITS == 4 ? 0x0f0f0f0fu : 0x03030303u);
  return (u + (128u - uint(KILN_OFFSET)) * 0x01010101u) ^ 0x80808080u;
#endif
}
#endif

// The plain path's code: weight b (0..3) of field s of code word cw (KILN_FLIP applied) as
// code - OFFSET: ternary by a subtraction, int8 and int4 by a sign-extending extract of
// the flipped field (matvec.comp, matvec_split.comp and tiled.comp, so they agree).
int kiln_code(uint cw, uint b, uint s) {
#if KILN_BITS == 2
  return int(bitfieldExtract(cw, int(8u * b + 2u * s), 2)) - 1;
#else
  return bitfieldExtract(int(cw), int(8u * b + uint(KILN_BITS) * s), KILN_BITS);
#endif
}

// a (finite, > 0) as m * 2^e with m in [2^23, 2^24)
uint kiln_split(float a, out int e) {
  uint bits = floatBitsToUint(a);
  int be = int(bits >> 23u);
  uint m = bits & 0x7fffffu;
  if (be == 0) {
    be = 1;
    while (m < 0x800000u) {
      m <<= 1u;
      --be;
    }
  } else {
    m |= 0x800000u;
  }
  e = be - 150;
  return m;
}

// a / b rounded to nearest even, as IEEE division, for finite a, b > 0 (by long division
// of the significands; a result below the normal range falls back to the GPU's division).
float kiln_div(float a, float b) {
  int ea, eb;
  uint ma = kiln_split(a, ea), mb = kiln_split(b, eb);
  int e = ea - eb;  // a / b = (ma / mb) * 2^e
  if (ma < mb) {
    ma <<= 1u;
    --e;
  }
  uint q = 0u, r = ma;  // ma / mb in [1, 2)
  for (int i = 0; i < 25; ++i) {
    q <<= 1u;
    if (r >= mb) {
      q |= 1u;
      r -= mb;
    }
    r <<= 1u;
  }
  uint sig = q >> 1u;  // 24 bits, then the rounding bit q & 1 and the sticky remainder r
  if ((q & 1u) != 0u && (r != 0u || (sig & 1u) != 0u)) ++sig;
  if (sig == 0x1000000u) {
    sig >>= 1u;
    ++e;
  }
  int be = e + 127;
  if (be >= 255) return uintBitsToFloat(0x7f800000u);
  if (be <= 0) return a / b;
  return uintBitsToFloat(uint(be) << 23u | (sig & 0x7fffffu));
}

void kiln_row_scale(float amax, uint bad, out float inv, out float xscale) {
  inv = 0.0;
  xscale = 0.0;
  if (bad != 0u) {
    xscale = uintBitsToFloat(0x7fc00000u);  // NaN
  } else if (amax > 0.0) {
    inv = kiln_div(127.0, amax);
    xscale = kiln_div(amax, 127.0);
  }
}

uint kiln_xword(uint xrow, uint k, float inv) {
  uint word = 0u;
  for (uint b = 0u; b < 4u; ++b) {
    if (k + b < p.K) {
      int xq = int(clamp(roundEven(kiln_prologue(xrow + k + b) * inv), -127.0, 127.0));
      word |= (uint(xq) & 0xffu) << (8u * b);
    }
  }
  return word;
}
