// The Llama decoder with half weights on the CPU backend, compiled once for kiln's own
// programs (CMake target kiln_llama_instances; kiln/models/llama.hpp declares it extern for
// its users). One file a decoder, so that they compile in parallel.
#include "kiln/models/llama.hpp"

template class kiln::llama::model<kiln::half, kiln::cpu<>>;
