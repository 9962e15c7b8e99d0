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
layout(local_size_x = KILN_WG) in;

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

// A line's empty statistics (layer_norm shifts by the line's first element).
kiln_stats kiln_stats_begin(uint base) {
  kiln_stats s = stats_empty();
#if KILN_OP == 4
  if (p.extent > 0u) s.k = kiln_prologue(base);
#endif
  return s;
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

#if KILN_PHASE == 0 && KILN_OP == 3 && KILN_CACHE > 0
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

#if KILN_PHASE == 0 && KILN_OP == 4 && KILN_CACHE > 0
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
