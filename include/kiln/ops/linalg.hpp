// kiln/ops/linalg.hpp — matrix products: one include per op. Kernels: cpu/gemm/,
// vulkan/ops/gemm.hpp.
#pragma once

#include "kiln/ops/linalg/matmul.hpp"
#include "kiln/ops/linalg/linear.hpp"
