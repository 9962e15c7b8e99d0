// kiln/detail/config.hpp — the two compilation modes (Asio's model).
//
// Header-only (the default, nothing to build): every function of kiln's runtime is
// `inline` and defined in the headers, through the implementation files (`impl/*.ipp`)
// that each header includes at its end.
//
// Separate compilation (`-DKILN_SEPARATE_COMPILATION`, what the CMake targets kiln::kiln
// and kiln::vulkan use unless KILN_HEADER_ONLY=ON): the headers only declare the
// non-template runtime (devices, memory, command recording, the shader and disk caches,
// the profiler, the thread pool, GLSL generation); it is compiled once, in
// `<kiln/impl/src.hpp>` (the CPU side: the kiln::runtime library) and
// `<kiln/vulkan/impl/src.hpp>` (the Vulkan side: kiln::vulkan_runtime). A program built
// without CMake compiles each of those in one file of its own. Every translation unit
// of a program uses the same mode.
//
// Each function lives in one place: its .ipp, written once with KILN_DECL in front of
// every definition (`inline` in the header-only mode, nothing when compiled separately).
// Templates, and code that depends on the instruction set a translation unit is
// compiled for (SIMD kernels, xsimd arch choices), stay in the headers in both modes.
#pragma once

#if defined(KILN_SEPARATE_COMPILATION)
#define KILN_DECL
#else
#define KILN_DECL inline
#endif

// Whether a header includes its implementation file: always in the header-only mode;
// when compiled separately, only inside the runtime's own source for that side.
#if !defined(KILN_SEPARATE_COMPILATION) || defined(KILN_RUNTIME_SOURCE_CPU)
#define KILN_DEFINE_CPU_RUNTIME 1
#else
#define KILN_DEFINE_CPU_RUNTIME 0
#endif
#if !defined(KILN_SEPARATE_COMPILATION) || defined(KILN_RUNTIME_SOURCE_VULKAN)
#define KILN_DEFINE_VULKAN_RUNTIME 1
#else
#define KILN_DEFINE_VULKAN_RUNTIME 0
#endif
