#version 450
// kiln generated kernel: mul(cast<f32>(embedding(a, w0)), s0)
// embedding, one invocation an element, 128 invocations
#extension GL_EXT_shader_16bit_storage : require
#define KILN_WG 128u
#define KILN_RESULT float
#define KILN_INTERLEAVED 0

layout(std430, set = 0, binding = 0) writeonly buffer kiln_buf0 { float kiln_b0[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_buf1 { uint16_t kiln_b1[]; };
layout(std430, set = 0, binding = 2) readonly buffer kiln_buf2 { int kiln_b2[]; };
layout(std430, set = 0, binding = 3) buffer kiln_check_buf { uint kiln_check[]; };

layout(push_constant) uniform kiln_params {
  uint rows;
  uint extent;
  uint seq;
  uint ioff1;
  uint poff0;
  int pst0;
  uint off0;
  uint off1;
  float s0;
} p;

uint kiln_to_bf16(float v) {
  uint x = floatBitsToUint(v);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}
float kiln_prologue_compute(float l0) {
  return l0;
}

float kiln_prologue(uint pos) {
  float l0 = uintBitsToFloat(uint(kiln_b1[p.ioff1 + pos]) << 16);
  return kiln_prologue_compute(l0);
}

float kiln_epilogue_compute(float l0) {
  float v0 = float(l0);
  float v1 = (v0 * p.s0);
  return v1;
}

void kiln_epilogue(KILN_RESULT value, uint pos) {
  float r = kiln_epilogue_compute(value);
  kiln_b0[p.off0 + pos] = r;
}

int kiln_id(uint k) { return kiln_b2[uint(int(p.poff0) + int(k) * p.pst0)]; }

// kernels/position/embedding.comp — kiln::embedding (gather family): one invocation per
// output element t = k * D + j: row k's id, clamped to [0, V) so that nothing is read out
// of bounds, then the table's expression at input position id * D + j. The ids are
// checked here, not by the host (which would wait for them): the invocation of column 0
// of a row whose id is outside [0, V) writes the id to kiln_check[1 + k] (one writer a
// row) and lowers kiln_check[0] to k (atomicMin: the first bad position wins); the host
// reads both at its next synchronisation (context_state::dispatch_checked) and throws
// kiln::index_error. No barrier and no atomic where every id is good. A table of no rows
// (V = 0) is never read: every id is bad, and the output gets zeros.
// Generated before it (codegen/position.hpp): the parameter block `p` (rows = number of
// ids, extent = D, seq = V, ...), the check buffer `uint kiln_check[]` (1 + rows words)
// and the hooks kiln_prologue, kiln_epilogue and int kiln_id(uint k).
layout(local_size_x = KILN_WG) in;

void main() {
  uint t = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * KILN_WG + gl_LocalInvocationIndex;
  if (t >= p.rows * p.extent) return;
  uint k = t / p.extent, j = t - k * p.extent;
  int raw = kiln_id(k);
  bool bad = raw < 0 || uint(raw) >= p.seq;
  if (bad && j == 0u) {
    kiln_check[1u + k] = uint(raw);
    atomicMin(kiln_check[0], k);
  }
  uint id = !bad ? uint(raw) : (raw < 0 ? 0u : p.seq - 1u);
  KILN_RESULT v = KILN_RESULT(0);
  if (p.seq != 0u) v = KILN_RESULT(kiln_prologue(id * p.extent + j));
  kiln_epilogue(v, t);
}
