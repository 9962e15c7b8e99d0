// kiln/cpu/gemm/microarch.hpp — what the GEMM's shape choices need to know of the core
// beyond its instruction set (the ISA tag picks the kernels; this picks among them).
//
// Read once from cpuid (x86; elsewhere the defaults). Tests override it through tuning()
// to run every choice on any machine.
#pragma once

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#define KILN_GEMM_HAS_CPUID 1
#endif

#include <cstring>

namespace kiln::detail::cpu_gemm {

/// The choices the GEMM makes by the core, beyond its instruction set.
/// dot_groups_4x3: below AVX-512 the dot path's groups of rows (5 to dot_max_rows() rows,
/// every weight dtype; and 4 rows alone of 16-bit weights) take 4 rows x 3 columns, the
/// columns held in registers and the rows loaded one at a time (12 accumulators, 3
/// columns and a row: the 16 registers), f16 also 6 x 2 where the rows allow
/// (row_groups_6x2_4x3 in driver.hpp) and from 8 rows dot_shared() (4 x 3 groups, the
/// first converting the columns for the others), and dot_blocked() is not used; elsewhere 2 x 6
/// (4 x 4 for 4 rows) with dot_blocked() from 12 rows of 16-bit weights. Set on AMD family 17h (Zen,
/// Zen+, Zen 2; Hygon's 18h), where a 256-bit conversion of 16-bit weights takes about an
/// FMA's issue slot (one Zen 2 core: 12 FMAs and 2 / 3 vcvtph2ps a step at 83% / 76% of
/// the 12 FMAs alone), so that each converted vector must serve 4 FMAs, not 2 (2 x 6
/// held f16 at 8 rows near 45% of the FMA loop, with the weights in the L2 too). One Zen 2
/// core, x [M, 2048] @ w^T, process CPU time, GFLOP/s 2 x 6 (dot_blocked from 12) / 4 x 3:
/// f16 [11264, 2048] at 4 / 8 / 16 / 32 / 48 rows 53 / 46-48 / 61-63 / 62-65 / 68-70 ->
/// 64 / 65 / 67 / 68 / 68-69, bf16 51 / 49 / 62 / 64-65 / 73 -> 60-63 / 76 / 84 / 82-83
/// / 86-87, f32 at 8 / 16 / 32 rows 41-42 / 51-54 / 61 -> 45-46 / 57-58 / 66-67 (2
/// threads: 71-77 / 97-100 / 117-119 -> 83 / 111-113 / 128-132); f32 at 4 rows keeps 4 x
/// 4 (39-40 against 33-34, memory-bound at 2 threads: 60 against 55). The Zen 4 measured 2 x
/// 6 1.4-1.7x faster than 4 x 2 with the AVX2 kernels, so the other cores keep it.
/// dot_rows_f16, dot_rows_f16_wide: below AVX-512, the most rows of f16 weights the dot
/// path takes under and from dot_wide_columns output columns (0: dot_max_rows()'s 48).
/// On the dot_groups_4x3 cores 31 and 39: there the packed path, with a row block's panels
/// packed in the thread's own scratch, grows with the rows, while the dot path (dot_shared
/// from 8 rows) stays near one rate. 2 threads, process CPU time, GFLOP/s dot / packed, x
/// [M, K] @ w^T, f16: [2048, 2048] at M = 24 / 28 / 32 / 36 / 40 / 48 158-159 / 160 / 158-160
/// / 162 / 155 / 157 against 153-156 / 152 / 149 / 168 / 163 / 175; [3072, 2048] (q, k, v)
/// at 24 / 28 / 32 / 36 161 / 165 / 147 / 164 against 150 / 147 / 146 / 164; [2048, 5632]
/// at 24 / 28 / 32 / 40 / 48 140-142 / 145 / 140-142 / 140 / 142 against 147 / 145 / 144-145
/// / 159 / 170; [11264, 2048] (gate/up) at 24 / 32 / 40 / 48 160 / 154 / 149 / 153 against
/// 136 / 136 / 150 / 164. bf16 weights (converted with a shift, no dot_shared) keep the 48:
/// their 4 x 3 groups ran 164-175 GFLOP/s at 16 to 48 rows on the same shapes against the
/// packed path's 102-167 (at 48 rows [512, 2048] 156 against 160, the one shape behind).
/// transposed_rows_narrow: below AVX-512, the most rows of an f32 weight with at most
/// transposed_narrow_columns output columns (k and v under GQA) the transposed path takes
/// (0: transposed_max_rows()'s 128); past them the packed path, its row block's panels in
/// the thread's own scratch. On the dot_groups_4x3 cores 64. 2 threads of a Zen 2, process
/// CPU time, GFLOP/s transposed / packed, x [M, 2048] @ w^T: w [512, 2048] at M = 48 / 64 /
/// 72 / 80 / 88 / 96 / 112 / 128 179 / 179 / 156 / 173 / 156 / 168 / 164 / 169 -> 163 /
/// 164 / 171 / 165 / 169 / 175-176 / 174 / 173; w [1024, 2048] 183 / 180 / 159 / 174 / 158
/// / 173 / 170 / 170 -> 164 / 168 / 170 / 168 / 171 / 175 / 174 / 175 (the transposed
/// path's 16-row panels of x fit 80 and 96 rows, not 72 or 88). matmul_bench f32 kv at S =
/// 128: 84.0-84.6 -> 86.2-87.2 a core (78-79% -> 80-81% of the FMA loop); q/o [2048, 2048]
/// and wider keep the transposed path (the packed one 1-2% slower there).
struct microarch {
  bool dot_groups_4x3 = false;
  int dot_rows_f16 = 0, dot_rows_f16_wide = 0;
  int transposed_rows_narrow = 0;
};

/// The traits of AMD family 17h (Zen, Zen+, Zen 2) and Hygon's 18h, measured on a Zen 2.
inline constexpr microarch family_17h_traits() noexcept {
  microarch m;
  m.dot_groups_4x3 = true;
  m.dot_rows_f16 = 31;
  m.dot_rows_f16_wide = 39;
  m.transposed_rows_narrow = 64;
  return m;
}

/// The core this process runs on, as cpuid tells it.
inline microarch detect_microarch() noexcept {
  microarch m;
#if defined(KILN_GEMM_HAS_CPUID)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return m;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return m;
  const unsigned base = (a >> 8) & 0xf;
  const unsigned family = base == 0xf ? base + ((a >> 20) & 0xff) : base;
  const bool amd = std::strcmp(vendor, "AuthenticAMD") == 0, hygon = std::strcmp(vendor, "HygonGenuine") == 0;
  if ((amd && family == 0x17) || (hygon && family == 0x18)) m = family_17h_traits();
#endif
  return m;
}

/// The traits the GEMM follows: detect_microarch() on first use. Mutable for tests, which
/// set a field, run, and put the detected value back (never while products run).
inline microarch& tuning() noexcept {
  static microarch m = detect_microarch();
  return m;
}

}  // namespace kiln::detail::cpu_gemm
