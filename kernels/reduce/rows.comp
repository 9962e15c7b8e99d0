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
