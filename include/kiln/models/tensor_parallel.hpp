// kiln/models/tensor_parallel.hpp — a decoder's share of a tensor-parallel group (the
// Megatron-LM split), without MPI: the group's rank and size and its two collectives as
// plain callables, and the slice of heads, FFN columns and vocabulary one rank holds.
// kiln/dist/tensor_parallel.hpp makes the callables from a kiln::dist::communicator (MPI);
// the decoders (llama.hpp, bitnet.hpp) only see this header, so kiln's core needs no MPI.
//
//   kiln::dist::environment env(argc, argv);
//   auto comm = kiln::dist::communicator::world();
//   auto m = kiln::llama::model<float, kiln::cpu<>>::load(ctx, dir, {}, kiln::dist::tensor_parallel(ctx, comm));
//   auto logits = m.forward(ids);   // [1, vocab] on every rank: the logits all-gathered
//
// The split, per layer: q/k/v and gate/up are column-parallel (rank r computes its heads'
// q, k, v and its FFN columns from the whole hidden state), o_proj and down_proj row-parallel
// (each rank's product is a partial sum of the hidden state), so a layer needs two
// all-reduces of [tokens, hidden]: after o_proj and after down_proj. The embedding and LM
// head are split by vocabulary (an all-reduce of the embedded rows once a step, an
// all-gather of the logits). A rank holds whole kv heads: Hkv / N of them when N divides
// num_key_value_heads, else (N a multiple of it) the one its query heads read, replicated
// on N / Hkv ranks as Megatron and vLLM do.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"

namespace kiln::models {

/// The group a tensor-parallel decoder runs in. Default: one rank, no collectives (the
/// decoder runs alone). all_reduce_sum sums a float tensor over the ranks in place (every
/// rank gets the same values); all_gather(in, out) concatenates every rank's `in` along
/// axis 0 into `out`, in rank order.
template <class B>
struct tensor_parallel {
  int rank = 0;
  int size = 1;
  std::function<void(const tensor<float, B>&)> all_reduce_sum;
  std::function<void(const tensor<float, B>&, const tensor<float, B>&)> all_gather;
};

/// The part of a decoder one rank of a tensor-parallel group of `ranks` holds.
struct tp_shard {
  int rank = 0, ranks = 1;
  index_t q0 = 0, q_heads = 0;    // first query head, query heads held
  index_t kv0 = 0, kv_heads = 0;  // first kv head, kv heads held
  index_t i0 = 0, ffn = 0;        // first FFN column, FFN columns held
  index_t v0 = 0, vocab = 0;      // first vocabulary row, rows held
  index_t vocab_pad = 0;          // rows of every rank's logits block (ceil(vocab / ranks))

  /// Rank `rank`'s share of a decoder with these heads, FFN width and vocabulary over
  /// `ranks` ranks. Throws kiln::shape_error naming `who`, the heads and the ranks when
  /// ranks does not divide num_attention_heads, or neither divides nor is a multiple of
  /// num_key_value_heads (a rank must hold whole heads).
  static tp_shard of(const std::string& who, index_t heads, index_t kv_heads, index_t ffn, index_t vocab, int rank,
                     int ranks) {
    const index_t n = ranks;
    if (n < 1 || rank < 0 || rank >= ranks) {
      throw shape_error(who + ": tensor parallelism: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
    }
    if (heads % n != 0 || (kv_heads % n != 0 && n % kv_heads != 0)) {
      throw shape_error(who + ": tensor parallelism over " + std::to_string(ranks) + " ranks: num_attention_heads " +
                        std::to_string(heads) + " and num_key_value_heads " + std::to_string(kv_heads) +
                        " do not split into whole heads per rank (the ranks must divide num_attention_heads, and "
                        "divide or be a multiple of num_key_value_heads)");
    }
    tp_shard s;
    s.rank = rank;
    s.ranks = ranks;
    s.q_heads = heads / n;
    s.q0 = rank * s.q_heads;
    s.kv_heads = kv_heads % n == 0 ? kv_heads / n : 1;
    s.kv0 = s.q0 * kv_heads / heads;
    s.i0 = ffn * rank / n;
    s.ffn = ffn * (rank + 1) / n - s.i0;
    s.vocab_pad = (vocab + n - 1) / n;
    s.v0 = std::min(vocab, rank * s.vocab_pad);
    s.vocab = std::min(vocab, s.v0 + s.vocab_pad) - s.v0;
    return s;
  }
  /// The whole decoder (one rank).
  static tp_shard whole(index_t heads, index_t kv_heads, index_t ffn, index_t vocab) {
    return of("kiln::models::tp_shard", heads, kv_heads, ffn, vocab, 0, 1);
  }
  bool split() const noexcept { return ranks > 1; }
};

/// h [n, H] = the embedding rows of ids over a table split by vocabulary: embed_local(h,
/// local_ids) gathers this rank's rows (ids outside its slice read its row 0), the rows of
/// other ranks' ids are zeroed, and the sum over the ranks (one all-reduce) completes h.
template <class B, class F>
void embed_split(const context<B>& ctx, tensor<float, B>& h, std::span<const std::int32_t> ids, const tp_shard& s,
                 const tensor_parallel<B>& tp, F&& embed_local) {
  const index_t n = static_cast<index_t>(ids.size());
  std::vector<std::int32_t> local(ids.size());
  std::vector<float> mine(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const bool in = ids[i] >= s.v0 && ids[i] < s.v0 + s.vocab;
    local[i] = in ? static_cast<std::int32_t>(ids[i] - s.v0) : 0;
    mine[i] = in ? 1.0f : 0.0f;
  }
  embed_local(h, std::span<const std::int32_t>(local));
  h = h * from_host(ctx, shape{n, 1}, std::span<const float>(mine));
  tp.all_reduce_sum(h);
}

/// The logits [rows, vocab] of an LM head split by vocabulary: project_local(out) writes
/// this rank's [rows, s.vocab] block, the blocks are all-gathered (padded to s.vocab_pad
/// columns each) and put side by side, the same on every rank.
template <class B, class F>
tensor<float, B> gather_logits(const context<B>& ctx, index_t rows, index_t vocab, const tp_shard& s,
                               const tensor_parallel<B>& tp, F&& project_local) {
  const index_t vp = s.vocab_pad, n = s.ranks;
  auto part = s.vocab < vp ? zeros<float>(ctx, {rows, vp}) : empty<float>(ctx, {rows, vp});
  auto mine = s.vocab < vp ? slice(part, 1, 0, s.vocab) : part;
  if (s.vocab > 0) project_local(mine);
  auto all = empty<float>(ctx, {n * rows, vp});
  tp.all_gather(part, all);
  auto logits = empty<float>(ctx, {rows, vocab});
  if (rows == 1) {
    logits = slice(reshape(all, {1, n * vp}), 1, 0, vocab);
  } else {  // [ranks, rows, vp] -> [rows, ranks, vp]
    auto t = empty<float>(ctx, {rows, n, vp});
    t = transpose(reshape(all, {n, rows, vp}), 0, 1);
    logits = slice(reshape(t, {rows, n * vp}), 1, 0, vocab);
  }
  return logits;
}

}  // namespace kiln::models
