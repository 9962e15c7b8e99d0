// The Llama decoders on the Vulkan backend (f32, f16 and bf16 weights) and the BitNet b1.58
// decoder, compiled once for kiln's own programs (CMake target kiln_llama_instances;
// kiln/models/llama.hpp and bitnet.hpp declare them extern for their users). All in one
// file, for the kernels they share (BitNet alone took 52 s of CPU).
#include "kiln/models/bitnet.hpp"
#include "kiln/models/llama.hpp"

template class kiln::llama::model<float, kiln::vulkan>;
template class kiln::llama::model<kiln::half, kiln::vulkan>;
template class kiln::llama::model<kiln::bfloat16, kiln::vulkan>;
template class kiln::bitnet::model<kiln::vulkan>;
