// The Llama decoders on the CPU backend (f32, f16 and bf16 weights), compiled once for
// kiln's own programs (CMake target kiln_llama_instances; kiln/models/llama.hpp declares
// them extern for its users). The three in one file: they share most of their kernels
// (f32 activations, norms, attention, the quantized products), which one translation unit
// instantiates once (three files took 192 s of CPU, one about 100 s).
#include "kiln/models/llama.hpp"

template class kiln::llama::model<float, kiln::cpu<>>;
template class kiln::llama::model<kiln::half, kiln::cpu<>>;
template class kiln::llama::model<kiln::bfloat16, kiln::cpu<>>;
