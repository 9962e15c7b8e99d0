// kiln/kiln.hpp — the umbrella: core + expressions + ops + the CPU backend.
// Never includes Vulkan; for the GPU backend also include <kiln/vulkan.hpp>.
#pragma once

#include "kiln/fwd.hpp"

#include "kiln/core/backend.hpp"
#include "kiln/core/bfloat16.hpp"
#include "kiln/core/context.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/core/half.hpp"
#include "kiln/core/profile.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/core/views.hpp"

#include "kiln/expr/assign.hpp"
#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/variant.hpp"

#include "kiln/ops/elementwise.hpp"
#include "kiln/ops/reduce.hpp"
#include "kiln/ops/linalg.hpp"
#include "kiln/ops/attention.hpp"
#include "kiln/ops/position.hpp"
#include "kiln/ops/quant.hpp"

#include "kiln/cpu/backend.hpp"
#include "kiln/cpu/evaluate.hpp"
#include "kiln/cpu/structural.hpp"
#include "kiln/cpu/reduce/reduce.hpp"
#include "kiln/cpu/reduce/row.hpp"
#include "kiln/cpu/reduce/cumsum.hpp"
#include "kiln/cpu/gemm/driver.hpp"
#include "kiln/cpu/attention/flash.hpp"
#include "kiln/cpu/attention/paged.hpp"
#include "kiln/cpu/position/position.hpp"
#include "kiln/cpu/quant/quant.hpp"
