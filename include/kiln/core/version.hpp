// kiln/core/version.hpp — the library version (kept equal to project() in CMakeLists.txt;
// part of every persistent kernel-cache key, so a new kiln never reuses old binaries).
#pragma once

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0
#define KILN_VERSION_STRING "0.1.0"
