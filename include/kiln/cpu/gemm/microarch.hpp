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

/// The core's traits the GEMM's choices follow.
/// convert_bound: a 256-bit conversion of 16-bit weights to f32 (vcvtph2ps, or bf16's
/// widening shift) takes about an FMA's issue slot, so that a kernel wants each converted
/// column vector to serve as many FMAs as its registers allow (AMD family 17h: Zen, Zen+,
/// Zen 2, and Hygon's family 18h). Measured on a Zen 2 core: 12 FMAs and 2 / 3 vcvtph2ps
/// a step ran at 83% / 76% of the 12 FMAs alone; one vcvtph2ps ymm from the L1 took 1.65
/// cycles. Elsewhere (Zen 4 with the AVX2 kernels) the dot path's 2-row groups measured
/// faster, so the other cores keep them.
struct microarch {
  bool convert_bound = false;
};

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
  m.convert_bound = (amd && family == 0x17) || (hygon && family == 0x18);
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
