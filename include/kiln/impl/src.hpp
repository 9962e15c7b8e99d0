// kiln/impl/src.hpp — the CPU side of kiln's runtime, compiled once (see
// kiln/detail/config.hpp). Include it in exactly one .cpp of a program that defines
// KILN_SEPARATE_COMPILATION everywhere; the CMake target kiln::runtime is that file.
#pragma once

#if !defined(KILN_SEPARATE_COMPILATION)
#error "kiln/impl/src.hpp compiles kiln's runtime separately: define KILN_SEPARATE_COMPILATION for every file of the program"
#endif

#define KILN_RUNTIME_SOURCE_CPU 1
#include "kiln/kiln.hpp"
// CPU-side runtime that only the Vulkan backend reaches (compiled here all the same, so
// that kiln::vulkan_runtime holds nothing of the CPU side's)
#include "kiln/detail/disk_cache.hpp"
