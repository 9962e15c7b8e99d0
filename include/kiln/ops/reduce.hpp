// kiln/ops/reduce.hpp — the reductions and row ops: one include per op. To add one: a
// front end in ops/reduce/ or ops/norm/ (node + shape rules), its kernel in
// cpu/reduce/ and vulkan/ops/reduce/, an include here, a test and a benchmark. A custom
// reduction needs no backend code: a reducer struct (ops/reduce/reducer.hpp) and kiln::reduce<R>.
#pragma once

#include "kiln/ops/reduce/reducer.hpp"
#include "kiln/ops/reduce/sum.hpp"
#include "kiln/ops/reduce/mean.hpp"
#include "kiln/ops/reduce/amax.hpp"
#include "kiln/ops/reduce/amin.hpp"
#include "kiln/ops/reduce/argmax.hpp"
#include "kiln/ops/reduce/softmax.hpp"
#include "kiln/ops/reduce/log_softmax.hpp"
#include "kiln/ops/reduce/cumsum.hpp"
#include "kiln/ops/norm/layer_norm.hpp"
#include "kiln/ops/norm/rms_norm.hpp"
