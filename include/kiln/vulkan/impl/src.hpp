// kiln/vulkan/impl/src.hpp — the Vulkan side of kiln's runtime, compiled once (see
// kiln/detail/config.hpp). Include it in exactly one .cpp of a program that defines
// KILN_SEPARATE_COMPILATION everywhere (beside kiln/impl/src.hpp, which it needs); the
// CMake target kiln::vulkan_runtime is that file.
#pragma once

#if !defined(KILN_SEPARATE_COMPILATION)
#error "kiln/vulkan/impl/src.hpp compiles kiln's runtime separately: define KILN_SEPARATE_COMPILATION for every file of the program"
#endif

#define KILN_RUNTIME_SOURCE_VULKAN 1
#include "kiln/kiln.hpp"
#include "kiln/vulkan.hpp"
