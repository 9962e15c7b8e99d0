// The Llama decoders on the CPU backend (f32, f16 and bf16 weights) and the BitNet b1.58
// decoder, compiled once for kiln's own programs (CMake target kiln_llama_instances;
// kiln/models/llama.hpp and bitnet.hpp declare them extern for their users). All in one
// file: they share most of their kernels (f32 activations, norms, attention, the quantized
// products), which one translation unit instantiates once (three files took 192 s of CPU,
// one about 100 s; BitNet alone took 75 s, beside the Llama decoders 1 s more).
#include "kiln/models/bitnet.hpp"
#include "kiln/models/llama.hpp"

template class kiln::llama::model<float, kiln::cpu<>>;
template class kiln::llama::model<kiln::half, kiln::cpu<>>;
template class kiln::llama::model<kiln::bfloat16, kiln::cpu<>>;
template class kiln::bitnet::model<kiln::cpu<>>;
