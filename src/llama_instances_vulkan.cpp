// The Llama decoders on the Vulkan backend (f32, f16 and bf16 weights), compiled once for
// kiln's own programs (CMake target kiln_llama_instances; kiln/models/llama.hpp declares
// them extern for its users). The three in one file, for the kernels they share.
#include "kiln/models/llama.hpp"

template class kiln::llama::model<float, kiln::vulkan>;
template class kiln::llama::model<kiln::half, kiln::vulkan>;
template class kiln::llama::model<kiln::bfloat16, kiln::vulkan>;
