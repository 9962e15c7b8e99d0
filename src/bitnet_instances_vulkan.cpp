// The BitNet b1.58 decoder on the Vulkan backend, compiled once for kiln's own programs
// (CMake target kiln_llama_instances; kiln/models/bitnet.hpp declares it extern for its users).
#include "kiln/models/bitnet.hpp"

template class kiln::bitnet::model<kiln::vulkan>;
