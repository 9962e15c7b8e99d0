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
