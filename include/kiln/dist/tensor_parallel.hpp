// kiln/dist/tensor_parallel.hpp — a tensor-parallel group over MPI for kiln's decoders: the
// kiln::models::tensor_parallel (models/tensor_parallel.hpp: rank, size, all-reduce and
// all-gather as callables) of a kiln::dist::communicator, which the decoders' load takes.
//
//   kiln::dist::environment env(argc, argv);
//   auto comm = kiln::dist::communicator::world();        // e.g. mpirun -np 2
//   kiln::context<kiln::cpu<>> ctx;
//   auto m = kiln::llama::model<float, kiln::cpu<>>::load(ctx, dir, {}, kiln::dist::tensor_parallel(ctx, comm));
//   auto ids = m.generate(prompt, 32);                     // the same ids on every rank
//
// Each rank keeps its heads, FFN columns and vocabulary rows (its slices of the mapped
// safetensors files); per layer two all-reduces of [tokens, hidden] after o_proj and
// down_proj, once a step an all-reduce of the embedded rows and an all-gather of the
// logits (BitNet adds small ones for its sub-norms). See kiln/models/tensor_parallel.hpp.
#pragma once

#include "kiln/dist/communicator.hpp"
#include "kiln/models/tensor_parallel.hpp"

namespace kiln::dist {

/// The group of comm's ranks, for a decoder on ctx's backend. comm must outlive the models
/// loaded with it (they call its collectives).
/// Example: `kiln::bitnet::model<B>::load(ctx, dir, {}, kiln::dist::tensor_parallel(ctx, comm))`
template <class B>
models::tensor_parallel<B> tensor_parallel(const context<B>&, communicator& comm) {
  models::tensor_parallel<B> tp;
  tp.rank = comm.rank();
  tp.size = comm.size();
  tp.all_reduce_sum = [&comm](const tensor<float, B>& t) { comm.all_reduce_sum(t); };
  tp.all_gather = [&comm](const tensor<float, B>& in, const tensor<float, B>& out) { comm.all_gather(in, out); };
  return tp;
}

}  // namespace kiln::dist
