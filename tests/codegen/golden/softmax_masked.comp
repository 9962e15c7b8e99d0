#version 450
// kiln generated kernel: softmax(add(mul(a, t0), b))
// rows, phase 0, 64 invocations, subgroup shuffles, line cache 4096
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#define KILN_OP_REDUCER 1
#define KILN_OP_ARG_EXTREME 2
#define KILN_OP_SOFTMAX 3
#define KILN_OP_LAYER_NORM 4
#define KILN_OP_RMS_NORM 5
#define KILN_OP 3
#define KILN_ROW_OP 1
#define KILN_LOG 0
#define KILN_LARGEST 0
#define KILN_PHASE 0
#define KILN_WG 64u
#define KILN_CACHE 4096
#define KILN_SUBGROUP 1
#define KILN_LANES 0
#define KILN_VEC4 0
#define KILN_PARAMS_VEC4 1
#define KILN_ACC float
#define KILN_ACC_FLOAT 1
#define KILN_RESULT float
#define KILN_WEIGHT 0
#define KILN_BIAS 0

layout(std430, set = 0, binding = 0) writeonly buffer kiln_buf0 { float kiln_b0[]; };
layout(std430, set = 0, binding = 1) readonly buffer kiln_buf1 { float kiln_b1[]; };
layout(std430, set = 0, binding = 2) readonly buffer kiln_buf2 { float kiln_b2[]; };

layout(push_constant) uniform kiln_params {
  uint rows;
  uint extent;
  uint inner;
  uint chunk;
  uint chunks;
  uint ioff1;
  uint ioff2;
  uint iext0;
  uint iext1;
  int ist2_0;
  int ist2_1;
  uint off0;
  uint off1;
  float t0;
} p;

float kiln_prologue_compute(float l0, float l1) {
  float v0 = (l0 * p.t0);
  float v1 = (v0 + l1);
  return v1;
}

float kiln_prologue(uint pos) {
  uint rest = pos;
  uint c1 = rest % p.iext1; rest /= p.iext1;
  uint c0 = rest;
  float l0 = kiln_b1[p.ioff1 + pos];
  float l1 = kiln_b2[uint(int(p.ioff2) + int(c0) * p.ist2_0 + int(c1) * p.ist2_1)];
  return kiln_prologue_compute(l0, l1);
}

float kiln_epilogue_compute(float l0) {
  return l0;
}

void kiln_epilogue(KILN_RESULT value, uint pos) {
  float r = kiln_epilogue_compute(value);
  kiln_b0[p.off0 + pos] = r;
}


// kernels/reduce/ops.comp — the running statistics of each structural op of the reduce
// and row families (a fragment: the host prepends the generated part, see below, and
// appends rows.comp or columns.comp).
// Generated before it (codegen/structural.hpp): #version, KILN_* defines, the buffers,
// the parameter block `p` (rows, extent, inner, chunk, chunks, eps, then the operands'
// offsets, extents and strides and the scalars), and the hooks
//   KILN_ACC kiln_prologue(uint pos)                  input expression at input position pos
//   void kiln_epilogue(KILN_RESULT value, uint pos)   output expression at output position pos
//   reducers: KILN_ACC kiln_identity(), kiln_combine(a, b), KILN_RESULT kiln_finalize(v, float count)
//   norms: float kiln_weight(uint j), float kiln_bias(uint j) (KILN_WEIGHT / KILN_BIAS)
// Each op defines kiln_stats and
//   stats_empty(), stats_add(inout s, x, i) (i: position along the axis, increasing per
//   invocation), stats_merge(a, b) (associative; argmax breaks ties by index, so merge
//   order does not matter), stats_pack / stats_unpack (vec4, the split pass's partials),
//   stats_shuffle_xor(s, mask) (subgroup butterflies), and either
//   stats_result(s, count) (reduce family) or stats_finish(s, count) + stats_apply(s, x, j)
//   (row family). KILN_OP names the op: KILN_OP_REDUCER, KILN_OP_ARG_EXTREME (argmax /
//   argmin, KILN_LARGEST), KILN_OP_SOFTMAX (KILN_LOG: log_softmax), KILN_OP_LAYER_NORM,
//   KILN_OP_RMS_NORM; the generated part defines them from structural_op's table
//   (codegen/structural.hpp), the only place their numbers are written.
// KILN_VEC4 (rows.comp's lanes mode, four elements a step): stats_add and stats_apply
//   also take a vec4 of the entries at positions i .. i + 3, and stats_add four such
//   steps 4 * KILN_WG positions apart (softmax: one rescaling for the sixteen).

#if KILN_OP == KILN_OP_REDUCER
struct kiln_stats { KILN_ACC v; };
kiln_stats stats_empty() { return kiln_stats(kiln_identity()); }
void stats_add(inout kiln_stats s, KILN_ACC x, uint i) { s.v = kiln_combine(s.v, x); }
kiln_stats stats_merge(kiln_stats a, kiln_stats b) { return kiln_stats(kiln_combine(a.v, b.v)); }
#if KILN_ACC_FLOAT
vec4 stats_pack(kiln_stats s) { return vec4(s.v, 0.0, 0.0, 0.0); }
kiln_stats stats_unpack(vec4 v) { return kiln_stats(v.x); }
#else
vec4 stats_pack(kiln_stats s) { return vec4(intBitsToFloat(s.v), 0.0, 0.0, 0.0); }
kiln_stats stats_unpack(vec4 v) { return kiln_stats(floatBitsToInt(v.x)); }
#endif
#if KILN_SUBGROUP
kiln_stats stats_shuffle_xor(kiln_stats s, uint m) { return kiln_stats(subgroupShuffleXor(s.v, m)); }
#endif
KILN_RESULT stats_result(kiln_stats s, float count) { return kiln_finalize(s.v, count); }

#elif KILN_OP == KILN_OP_ARG_EXTREME
// The extreme value and its index (-1: none yet). A NaN is the extreme; first index on ties.
struct kiln_stats { KILN_ACC v; int i; };
kiln_stats stats_empty() { return kiln_stats(KILN_ACC(0), -1); }
bool stats_better(KILN_ACC x, KILN_ACC best) {
#if KILN_ACC_FLOAT
  if (isnan(best)) return false;
  if (isnan(x)) return true;
#endif
#if KILN_LARGEST
  return x > best;
#else
  return x < best;
#endif
}
void stats_add(inout kiln_stats s, KILN_ACC x, uint i) {
  if (s.i < 0 || stats_better(x, s.v)) { s.v = x; s.i = int(i); }
}
kiln_stats stats_merge(kiln_stats a, kiln_stats b) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  if (stats_better(b.v, a.v)) return b;
  if (stats_better(a.v, b.v)) return a;
  return b.i < a.i ? b : a;  // equal, or both NaN: the first
}
#if KILN_ACC_FLOAT
vec4 stats_pack(kiln_stats s) { return vec4(s.v, intBitsToFloat(s.i), 0.0, 0.0); }
kiln_stats stats_unpack(vec4 v) { return kiln_stats(v.x, floatBitsToInt(v.y)); }
#else
vec4 stats_pack(kiln_stats s) { return vec4(intBitsToFloat(s.v), intBitsToFloat(s.i), 0.0, 0.0); }
kiln_stats stats_unpack(vec4 v) { return kiln_stats(floatBitsToInt(v.x), floatBitsToInt(v.y)); }
#endif
#if KILN_SUBGROUP
kiln_stats stats_shuffle_xor(kiln_stats s, uint m) { return kiln_stats(subgroupShuffleXor(s.v, m), subgroupShuffleXor(s.i, m)); }
#endif
KILN_RESULT stats_result(kiln_stats s, float count) { return s.i; }

#elif KILN_OP == KILN_OP_SOFTMAX
// Online softmax: the running max m and the sum s of exp(x - m). m is never NaN (a NaN
// fails every comparison and goes into s instead); -inf entries add nothing, and a line
// whose max is +inf or -inf gets s = NaN at the end (inf - inf, 0 / 0), as PyTorch.
struct kiln_stats { float m; float s; };
kiln_stats stats_empty() { return kiln_stats(uintBitsToFloat(0xff800000u), 0.0); }
void stats_add(inout kiln_stats st, float x, uint i) {
  if (x > st.m) {
    st.s = st.s * exp(st.m - x) + 1.0;
    st.m = x;
  } else if (!(isinf(x) && x < 0.0)) {
    st.s += exp(x - st.m);
  }
}
float stats_scale(float q, float m) { return q == m ? 1.0 : exp(q - m); }
kiln_stats stats_merge(kiln_stats a, kiln_stats b) {
  float m = max(a.m, b.m);
  return kiln_stats(m, a.s * stats_scale(a.m, m) + b.s * stats_scale(b.m, m));
}
vec4 stats_pack(kiln_stats s) { return vec4(s.m, s.s, 0.0, 0.0); }
kiln_stats stats_unpack(vec4 v) { return kiln_stats(v.x, v.y); }
#if KILN_SUBGROUP
kiln_stats stats_shuffle_xor(kiln_stats s, uint m) { return kiln_stats(subgroupShuffleXor(s.m, m), subgroupShuffleXor(s.s, m)); }
#endif
void stats_finish(inout kiln_stats st, float count) {
  if (isinf(st.m)) st.s = uintBitsToFloat(0x7fc00000u);
#if KILN_LOG
  st.s = log(st.s);
#else
  st.s = 1.0 / st.s;
#endif
}
float stats_apply(kiln_stats st, float x, uint j) {
#if KILN_LOG
  return (x - st.m) - st.s;
#else
  return exp(x - st.m) * st.s;
#endif
}
#if KILN_VEC4
// Four (or sixteen) entries a step (lanes mode): one rescaling for them all, against the
// step's max. The shift is the max, or -FLT_MAX while the max is -inf, so -inf entries
// add exp(-inf) = 0 and the old sum scales by exp(-inf) = 0 or exp(0) = 1, never NaN.
// A NaN entry makes s NaN through its own exp, whatever max() makes of it (GLSL leaves
// max with a NaN undefined), and NaN * anything stays NaN through rescaling and merging.
void stats_add(inout kiln_stats st, vec4 x, uint i) {
  float mn = max(st.m, max(max(x.x, x.y), max(x.z, x.w)));
  float sh = max(mn, -3.40282347e38);
  vec4 e = exp(x - sh);
  st.s = st.s * exp(st.m - sh) + ((e.x + e.y) + (e.z + e.w));
  st.m = mn;
}
void stats_add(inout kiln_stats st, vec4 a, vec4 b, vec4 c, vec4 d, uint i) {
  vec4 x = max(max(a, b), max(c, d));
  float mn = max(st.m, max(max(x.x, x.y), max(x.z, x.w)));
  float sh = max(mn, -3.40282347e38);
  vec4 e = (exp(a - sh) + exp(b - sh)) + (exp(c - sh) + exp(d - sh));
  st.s = st.s * exp(st.m - sh) + ((e.x + e.y) + (e.z + e.w));
  st.m = mn;
}
vec4 stats_apply(kiln_stats st, vec4 x, uint j) {
#if KILN_LOG
  return (x - st.m) - st.s;
#else
  return exp(x - st.m) * st.s;
#endif
}
#endif

#else  // KILN_OP_LAYER_NORM, KILN_OP_RMS_NORM
// Sums of the line shifted by its first element k (layer_norm): x - k is exact for data
// near k (Sterbenz) and of the spread's size, so a line around 1e4 with a spread of 0.1
// keeps its digits in the variance, and the output (x - k - mean of (x - k)) never rounds
// the mean to a float near 1e4. rms_norm: the plain sum of squares (k = 0).
// After stats_finish: s1 = the mean of x - k, s2 = 1 / sqrt(var + eps).
struct kiln_stats { float k; float n; float s1; float s2; };
kiln_stats stats_empty() { return kiln_stats(0.0, 0.0, 0.0, 0.0); }
void stats_add(inout kiln_stats st, float x, uint i) {
  float d = x - st.k;
  st.n += 1.0;
  st.s1 += d;
  st.s2 += d * d;
}
kiln_stats stats_merge(kiln_stats a, kiln_stats b) { return kiln_stats(a.k, a.n + b.n, a.s1 + b.s1, a.s2 + b.s2); }
vec4 stats_pack(kiln_stats s) { return vec4(s.k, s.n, s.s1, s.s2); }
kiln_stats stats_unpack(vec4 v) { return kiln_stats(v.x, v.y, v.z, v.w); }
#if KILN_SUBGROUP
kiln_stats stats_shuffle_xor(kiln_stats s, uint m) {
  return kiln_stats(s.k, subgroupShuffleXor(s.n, m), subgroupShuffleXor(s.s1, m), subgroupShuffleXor(s.s2, m));
}
#endif
void stats_finish(inout kiln_stats st, float count) {
#if KILN_OP == KILN_OP_LAYER_NORM
  float dm = st.s1 / count;
  float var = st.s2 / count - dm * dm;  // biased, as PyTorch's layer_norm
  if (var < 0.0) var = 0.0;            // rounding; a NaN stays NaN
  st.s1 = dm;
#else
  float var = st.s2 / count;
  st.s1 = 0.0;
#endif
  st.s2 = 1.0 / sqrt(var + p.eps);
}
float stats_apply(kiln_stats st, float x, uint j) {
  float y = ((x - st.k) - st.s1) * st.s2;
#if KILN_WEIGHT
  y *= kiln_weight(j);
#endif
#if KILN_BIAS
  y += kiln_bias(j);
#endif
  return y;
}
#endif

#if KILN_VEC4 && KILN_OP != KILN_OP_SOFTMAX
// Four entries a step (lanes mode), at positions i .. i + 3; four steps (a .. d, each
// 4 * KILN_WG positions after the last) in order.
void stats_add(inout kiln_stats s, vec4 x, uint i) {
  stats_add(s, x.x, i);
  stats_add(s, x.y, i + 1u);
  stats_add(s, x.z, i + 2u);
  stats_add(s, x.w, i + 3u);
}
void stats_add(inout kiln_stats s, vec4 a, vec4 b, vec4 c, vec4 d, uint i) {
  stats_add(s, a, i);
  stats_add(s, b, i + 4u * KILN_WG);
  stats_add(s, c, i + 8u * KILN_WG);
  stats_add(s, d, i + 12u * KILN_WG);
}
#if KILN_ROW_OP && KILN_PARAMS_VEC4
// (norms) the weight and bias four at a time: kiln_weight4 / kiln_bias4
vec4 stats_apply(kiln_stats st, vec4 x, uint j) {
  vec4 y = ((x - st.k) - st.s1) * st.s2;
#if KILN_WEIGHT
  y *= kiln_weight4(j);
#endif
#if KILN_BIAS
  y += kiln_bias4(j);
#endif
  return y;
}
#elif KILN_ROW_OP
vec4 stats_apply(kiln_stats s, vec4 x, uint j) {
  return vec4(stats_apply(s, x.x, j), stats_apply(s, x.y, j + 1u), stats_apply(s, x.z, j + 2u), stats_apply(s, x.w, j + 3u));
}
#endif
#endif
// kernels/reduce/rows.comp — row mode of the reduce and row families (a fragment after
// ops.comp): each line along the axis (a row: inner == 1, or a row op walked with its
// axis innermost) is split into p.chunks chunks of p.chunk positions; one workgroup per
// (row, chunk) task, numbered gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x
// (tasks past the last are skipped: the grid may be 2-D beyond maxComputeWorkGroupCount[0]).
// Workgroup: local_size_x = KILN_WG (a power of two, a multiple of the subgroup size).
// Positions: input position of row r, element i = r * p.extent + i (the input layout's
// walk order); output position: r (reduce family) or r * p.extent + i (row family).
// Invocations stride through a chunk (neighbouring invocations, neighbouring elements),
// combine their statistics through subgroup shuffles (KILN_SUBGROUP) and shared memory,
// or a shared-memory tree.
// KILN_PHASE 0: one dispatch (p.chunks == 1); row ops cache the line in shared memory when
//   KILN_CACHE > 0 (the host picks it only for lines of at most KILN_CACHE), so the input
//   expression is read once, else twice.
// KILN_PHASE 1: the split pass's first dispatch: each task's statistics to kiln_partial[task].
// KILN_PHASE 2: the second: a task merges its row's p.chunks partials, then writes its
//   chunk (row ops; rows * chunks tasks) or the row's result (reduce family; rows tasks).
// KILN_LANES (CPU devices: lavapipe runs a workgroup's subgroups one after another, a
//   barrier is a coroutine switch of every subgroup, and a storage or shared access goes
//   lane by lane): phase 0 only, one subgroup a line (KILN_WG == gl_SubgroupSize), its
//   lanes on neighbouring elements (or vec4 steps, KILN_VEC4: kiln_prologue4 /
//   kiln_epilogue4 on 4-aligned positions, inputs through texel fetches where the host
//   bound texel views), statistics merged by shuffles alone; no barrier, no shared memory:
//   a row op reads its line again (from the cache of the CPU) instead of keeping it.
layout(local_size_x = KILN_WG) in;

// A line's empty statistics (layer_norm shifts by the line's first element).
kiln_stats kiln_stats_begin(uint base) {
  kiln_stats s = stats_empty();
#if KILN_OP == KILN_OP_LAYER_NORM
  if (p.extent > 0u) s.k = kiln_prologue(base);
#endif
  return s;
}

#if KILN_LANES
#if KILN_VEC4
#define KILN_STEPS (p.extent >> 2)
#define KILN_STEP_T vec4
#define KILN_LOAD(q) kiln_prologue4(base + 4u * (q))
#define KILN_STORE(v, q) kiln_epilogue4(v, base + 4u * (q))
#define KILN_AT(q) (4u * (q))
float kiln_step_sum(vec4 v) { return (v.x + v.y) + (v.z + v.w); }
#else
#define KILN_STEPS p.extent
#define KILN_STEP_T KILN_ACC
#define KILN_LOAD(q) kiln_prologue(base + (q))
#define KILN_STORE(v, q) kiln_epilogue(v, base + (q))
#define KILN_AT(q) (q)
float kiln_step_sum(float v) { return v; }
#endif

kiln_stats kiln_lanes_merge(kiln_stats s) {
  for (uint m = KILN_WG >> 1; m > 0u; m >>= 1) s = stats_merge(s, stats_shuffle_xor(s, m));
  return s;
}

float kiln_lanes_sum(float v) {
  for (uint m = KILN_WG >> 1; m > 0u; m >>= 1) v += subgroupShuffleXor(v, m);
  return v;
}

void main() {
  kiln_copy_params();  // p: a private copy, which the compiler keeps in registers across stores
  uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (row >= p.rows) return;  // whole workgroups: uniform
  uint lid = gl_LocalInvocationIndex;
  uint base = row * p.extent;
  kiln_row_begin(base);
  uint n = KILN_STEPS;
#if KILN_OP == KILN_OP_LAYER_NORM
  // layer_norm: the mean of x - k (k the line's first element), then the squared
  // deviations from it, then the output: three reads of the line, as the cached form.
  float k = p.extent > 0u ? kiln_prologue(base) : 0.0;
  KILN_STEP_T a1 = KILN_STEP_T(0.0);
  for (uint q = lid; q < n; q += KILN_WG) a1 += KILN_LOAD(q) - k;
  float dm = kiln_lanes_sum(kiln_step_sum(a1)) / float(p.extent);
  KILN_STEP_T a2 = KILN_STEP_T(0.0);
  for (uint q = lid; q < n; q += KILN_WG) {
    KILN_STEP_T d = (KILN_LOAD(q) - k) - dm;
    a2 += d * d;
  }
  float var = kiln_lanes_sum(kiln_step_sum(a2)) / float(p.extent);  // biased, as PyTorch
  kiln_stats s = kiln_stats(k, 0.0, dm, 1.0 / sqrt(var + p.eps));
  for (uint q = lid; q < n; q += KILN_WG) KILN_STORE(stats_apply(s, KILN_LOAD(q), KILN_AT(q)), q);
#else
  kiln_stats s = kiln_stats_begin(base);
  uint q = lid;
#if KILN_VEC4
  for (; q + 3u * KILN_WG < n; q += 4u * KILN_WG)
    stats_add(s, KILN_LOAD(q), KILN_LOAD(q + KILN_WG), KILN_LOAD(q + 2u * KILN_WG), KILN_LOAD(q + 3u * KILN_WG), KILN_AT(q));
#endif
  for (; q < n; q += KILN_WG) stats_add(s, KILN_LOAD(q), KILN_AT(q));
  s = kiln_lanes_merge(s);
#if KILN_ROW_OP
  stats_finish(s, float(p.extent));
  for (uint q = lid; q < n; q += KILN_WG) KILN_STORE(stats_apply(s, KILN_LOAD(q), KILN_AT(q)), q);
#else
  if (lid == 0u) kiln_epilogue(stats_result(s, float(p.extent)), row);
#endif
#endif
}

#else  // !KILN_LANES

shared kiln_stats kiln_red[KILN_WG];
#if KILN_CACHE > 0
shared KILN_ACC kiln_cache[KILN_CACHE];
#endif

// Every invocation's s merged; all invocations get the result (uniform control flow).
kiln_stats kiln_workgroup_merge(kiln_stats s) {
  uint lid = gl_LocalInvocationIndex;
#if KILN_SUBGROUP
  for (uint m = gl_SubgroupSize >> 1; m > 0u; m >>= 1) s = stats_merge(s, stats_shuffle_xor(s, m));
  if (subgroupElect()) kiln_red[gl_SubgroupID] = s;
  barrier();
  if (lid == 0u) {
    kiln_stats t = kiln_red[0];
    for (uint k = 1u; k < gl_NumSubgroups; ++k) t = stats_merge(t, kiln_red[k]);
    kiln_red[0] = t;
  }
  barrier();
#else
  kiln_red[lid] = s;
  barrier();
  for (uint w = KILN_WG / 2; w > 0u; w >>= 1) {
    if (lid < w) kiln_red[lid] = stats_merge(kiln_red[lid], kiln_red[lid + w]);
    barrier();
  }
#endif
  kiln_stats r = kiln_red[0];
  barrier();  // kiln_red is reused
  return r;
}

void main() {
  uint task = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
#if KILN_PHASE == 2 && !KILN_ROW_OP
  uint row = task, c = 0u;
#else
  uint row = task / p.chunks, c = task % p.chunks;
#endif
  if (row >= p.rows) return;  // whole workgroups: uniform
  uint lid = gl_LocalInvocationIndex;
  uint base = row * p.extent;
  uint b = c * p.chunk, e = min(p.extent, b + p.chunk);

#if KILN_PHASE == 0 && KILN_OP == KILN_OP_SOFTMAX && KILN_CACHE > 0
  // A cached softmax line: its max (a NaN counted as +inf: the line is NaN either way),
  // then exp(x - max) once per element, kept in the cache for the output, with its sum:
  // no divergent rescaling, one exp an element instead of the online form's two or three.
  float mx = uintBitsToFloat(0xff800000u);
  for (uint i = b + lid; i < e; i += KILN_WG) {
    float x = kiln_prologue(base + i);
    kiln_cache[i - b] = x;
    mx = isnan(x) ? uintBitsToFloat(0x7f800000u) : max(mx, x);
  }
  mx = kiln_workgroup_merge(kiln_stats(mx, 0.0)).m;
  float sum = 0.0;
  for (uint i = b + lid; i < e; i += KILN_WG) {
    float ex = exp(kiln_cache[i - b] - mx);
#if !KILN_LOG
    kiln_cache[i - b] = ex;
#endif
    sum += ex;
  }
  sum = kiln_workgroup_merge(kiln_stats(0.0, sum)).s;
  if (isinf(mx)) sum = uintBitsToFloat(0x7fc00000u);  // +inf or NaN in the line, or all -inf
#if KILN_LOG
  float ls = log(sum);
  for (uint i = b + lid; i < e; i += KILN_WG) kiln_epilogue((kiln_cache[i - b] - mx) - ls, base + i);
#else
  float inv = 1.0 / sum;
  for (uint i = b + lid; i < e; i += KILN_WG) kiln_epilogue(kiln_cache[i - b] * inv, base + i);
#endif
  return;
#endif

#if KILN_PHASE == 0 && KILN_OP == KILN_OP_LAYER_NORM && KILN_CACHE > 0
  // A cached layer_norm line, two passes over the cache as on the CPU: the mean of x - k
  // (k the line's first element), then the squared deviations from it. The one-pass
  // sums below lose the variance when k is far from the mean (an outlier first element);
  // these do not.
  {
  kiln_stats s = kiln_stats_begin(base);
  float k = s.k;
  float s1 = 0.0;
  for (uint i = b + lid; i < e; i += KILN_WG) {
    float x = kiln_prologue(base + i);
    kiln_cache[i - b] = x;
    s1 += x - k;
  }
  float dm = kiln_workgroup_merge(kiln_stats(k, 0.0, s1, 0.0)).s1 / float(p.extent);
  float s2 = 0.0;
  for (uint i = b + lid; i < e; i += KILN_WG) {
    float d = (kiln_cache[i - b] - k) - dm;
    s2 += d * d;
  }
  s2 = kiln_workgroup_merge(kiln_stats(k, 0.0, 0.0, s2)).s2;
  s.s1 = dm;
  s.s2 = 1.0 / sqrt(s2 / float(p.extent) + p.eps);  // biased variance, as PyTorch
  for (uint i = b + lid; i < e; i += KILN_WG) kiln_epilogue(stats_apply(s, kiln_cache[i - b], i), base + i);
  return;
  }
#endif

#if KILN_PHASE == 2
  kiln_stats s = kiln_stats_begin(base);
  for (uint k = lid; k < p.chunks; k += KILN_WG) s = stats_merge(s, stats_unpack(kiln_partial[row * p.chunks + k]));
  s = kiln_workgroup_merge(s);
#else
  kiln_stats s = kiln_stats_begin(base);
  for (uint i = b + lid; i < e; i += KILN_WG) {
    KILN_ACC x = kiln_prologue(base + i);
#if KILN_CACHE > 0
    kiln_cache[i - b] = x;
#endif
    stats_add(s, x, i);
  }
  s = kiln_workgroup_merge(s);
#endif

#if KILN_PHASE == 1
  if (lid == 0u) kiln_partial[task] = stats_pack(s);
#elif KILN_ROW_OP
  stats_finish(s, float(p.extent));
  for (uint i = b + lid; i < e; i += KILN_WG) {
#if KILN_CACHE > 0
    KILN_ACC x = kiln_cache[i - b];
#else
    KILN_ACC x = kiln_prologue(base + i);
#endif
    kiln_epilogue(stats_apply(s, x, i), base + i);
  }
#else
  if (lid == 0u) kiln_epilogue(stats_result(s, float(p.extent)), row);
#endif
}

#endif  // KILN_LANES
