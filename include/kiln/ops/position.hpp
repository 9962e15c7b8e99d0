// kiln/ops/position.hpp — what a transformer needs around positions and tokens: rotary
// position embedding (kiln::rope) and token embedding (kiln::embedding).
#pragma once

#include "kiln/ops/position/embedding.hpp"
#include "kiln/ops/position/rope.hpp"
