// kiln/ops/quant.hpp — quantized weights: kiln::qtensor, kiln::quantize / dequantize,
// kiln::quantization_error, and products with them (matmul, linear, bitlinear). The
// format and the formulas: ops/quant/scheme.hpp. Kernels: cpu/quant/, vulkan/ops/quant.hpp.
#pragma once

#include "kiln/ops/quant/scheme.hpp"
#include "kiln/ops/quant/qtensor.hpp"
#include "kiln/ops/quant/quantize.hpp"
#include "kiln/ops/quant/qmatmul.hpp"
