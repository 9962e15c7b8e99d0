// kiln/ops/attention/paged_kv_cache.hpp — kiln::paged_kv_cache: the keys and values of
// many sequences in fixed-size blocks of one pool per context (vLLM's paged KV cache).
//
// The pool holds N blocks of `block_size` positions; per layer a k pool [N, Hkv, bs, D]
// and a v pool [N, Hkv, bs, Dv] (kiln::paged_attention's layout), allocated once. A
// block id is the same in every layer, so one block table per sequence (host memory,
// int32 block ids in position order) serves all layers. Sequences take blocks as they
// grow (append / try_append) and give them back when they end (release) or rewind
// (truncate); a full pool is reported, not waited on: try_append returns false changing
// nothing, append throws kiln::out_of_memory. So a scheduler admits a request only when
// its blocks are free and queues the rest.
//
// A decoding step: sequences grow by their new rows, batch() gives the step's block
// tables and positions as device tensors, write() puts each layer's new k and v rows in
// place, paged_attention reads them back through the tables:
//
//   kiln::paged_kv_cache<float, B> cache(ctx, {.layers = 16, .kv_heads = 8, .head_dim = 64,
//                                              .bytes = std::size_t(256) << 20});
//   auto s = cache.add();
//   if (!cache.try_append(s, 1)) { /* queue the request */ }
//   auto batch = cache.batch(std::span(&s, 1), 1);    // rows written this step: 1
//   cache.write(layer, k_new, v_new, batch);           // [B, Hkv, 1, D] each
//   y = kiln::paged_attention(q, cache.k(layer), cache.v(layer), batch.tables, batch.lens, {.causal = true});
//   cache.release(s);                                  // its blocks back to the pool
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/context.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/ops/attention/paged_write.hpp"

namespace kiln {

/// The shape and size of a paged KV cache. Give the pool's size as `blocks` or as `bytes`
/// (the blocks that fit; one of the two, not both).
struct paged_kv_options {
  index_t layers = 1;
  index_t kv_heads = 1;
  index_t head_dim = 0;
  index_t value_dim = -1;  // -1: head_dim
  index_t block_size = 16;
  index_t blocks = 0;
  std::size_t bytes = 0;
};

/// One step's view of some sequences of a paged_kv_cache, as device tensors: the block
/// tables [B, M] (M: the most blocks any of them holds; unused entries -1), the lengths
/// [B] (positions after this step's rows: what paged_attention reads) and the starts [B]
/// (the first position this step writes: what paged_write takes), and the rows each
/// sequence writes.
template <class B>
struct paged_batch {
  tensor<std::int32_t, B> tables, lens, starts;
  index_t rows = 0;
};

template <class T, class B>
class paged_kv_cache {
 public:
  /// A sequence's handle (reused after release).
  using sequence = std::uint32_t;

  /// Allocates the pools. Throws kiln::shape_error for a negative size, a block size
  /// below 1, or neither or both of blocks and bytes; kiln::out_of_memory as any
  /// allocation.
  paged_kv_cache(const context<B>& ctx, const paged_kv_options& o) : ctx_(&ctx), o_(o) {
    if (o_.value_dim < 0) o_.value_dim = o_.head_dim;
    const auto fail = [&](const std::string& why) {
      throw shape_error("kiln::paged_kv_cache: " + why + ": layers " + std::to_string(o.layers) + ", kv_heads " +
                        std::to_string(o.kv_heads) + ", head_dim " + std::to_string(o.head_dim) + ", value_dim " +
                        std::to_string(o.value_dim) + ", block_size " + std::to_string(o.block_size) + ", blocks " +
                        std::to_string(o.blocks) + ", bytes " + std::to_string(o.bytes) + " on " + ctx.device_name());
    };
    if (o.layers < 1 || o.kv_heads < 1 || o.head_dim < 1 || o.value_dim < -1 || o.value_dim == 0 || o.blocks < 0) {
      fail("sizes must be >= 1 (value_dim: -1 for head_dim)");
    }
    if (o.block_size < 1) fail("the block size must be at least 1");
    if ((o.blocks > 0) == (o.bytes > 0)) fail("give the pool's size as blocks or as bytes, one of the two");
    const std::size_t per = bytes_per_block();
    n_ = o.blocks > 0 ? o.blocks : static_cast<index_t>(o.bytes / per);
    if (n_ < 1) fail("the pool holds no block (one takes " + std::to_string(per) + " bytes)");
    if (n_ > index_t(INT32_MAX)) fail("more than 2^31 - 1 blocks");
    for (index_t l = 0; l < o_.layers; ++l) {
      k_.push_back(empty<T>(ctx, {n_, o_.kv_heads, o_.block_size, o_.head_dim}));
      v_.push_back(empty<T>(ctx, {n_, o_.kv_heads, o_.block_size, o_.value_dim}));
    }
    free_.reserve(static_cast<std::size_t>(n_));
    for (index_t b = n_; b-- > 0;) free_.push_back(static_cast<std::int32_t>(b));  // block 0 handed out first
  }

  /// Bytes one block takes over all layers, keys and values.
  std::size_t bytes_per_block() const noexcept {
    return static_cast<std::size_t>(o_.layers) * static_cast<std::size_t>(o_.kv_heads) *
           static_cast<std::size_t>(o_.block_size) * static_cast<std::size_t>(o_.head_dim + o_.value_dim) * sizeof(T);
  }
  /// The pools' bytes.
  std::size_t bytes() const noexcept { return bytes_per_block() * static_cast<std::size_t>(n_); }
  index_t num_blocks() const noexcept { return n_; }
  index_t free_blocks() const noexcept { return static_cast<index_t>(free_.size()); }
  index_t used_blocks() const noexcept { return n_ - free_blocks(); }
  index_t block_size() const noexcept { return o_.block_size; }
  index_t layers() const noexcept { return o_.layers; }
  /// Live sequences.
  index_t sequences() const noexcept { return live_; }

  /// A new, empty sequence (no block yet).
  sequence add() {
    ++live_;
    if (!idle_.empty()) {
      const sequence s = idle_.back();
      idle_.pop_back();
      seqs_[s] = {{}, 0, true};
      return s;
    }
    seqs_.push_back({{}, 0, true});
    return static_cast<sequence>(seqs_.size() - 1);
  }

  /// Blocks sequence s needs from the pool to grow by n positions.
  index_t blocks_needed(sequence s, index_t n) const {
    const seq& q = at(s, "blocks_needed");
    return blocks_for(q.len + std::max<index_t>(n, 0)) - static_cast<index_t>(q.blocks.size());
  }

  /// Grows sequence s by n positions, taking the blocks it needs; false, changing nothing,
  /// when the pool has too few free blocks.
  bool try_append(sequence s, index_t n) {
    seq& q = at(s, "try_append");
    check_count("try_append", n);
    check_count("try_append", q.len + n);
    const index_t need = blocks_for(q.len + n) - static_cast<index_t>(q.blocks.size());
    if (need > free_blocks()) return false;
    for (index_t i = 0; i < need; ++i) {
      q.blocks.push_back(free_.back());
      free_.pop_back();
    }
    q.len += n;
    return true;
  }

  /// try_append, throwing kiln::out_of_memory (naming the sequence, the blocks it needs
  /// and the pool's state) when the pool is full.
  void append(sequence s, index_t n) {
    if (try_append(s, n)) return;
    const seq& q = seqs_[s];
    const index_t need = blocks_for(q.len + n) - static_cast<index_t>(q.blocks.size());
    throw out_of_memory("kiln::paged_kv_cache::append: the pool is full: sequence " + std::to_string(s) + " of " +
                            std::to_string(q.len) + " positions needs " + std::to_string(need) + " more blocks of " +
                            std::to_string(o_.block_size) + " for " + std::to_string(n) + " positions, " +
                            std::to_string(free_blocks()) + " of " + std::to_string(n_) + " are free (" +
                            std::to_string(live_) + " sequences, " + pools_text() + ")",
                        static_cast<std::size_t>(need) * bytes_per_block(),
                        static_cast<std::size_t>(free_blocks()) * bytes_per_block());
  }

  /// Keeps sequence s's first n positions (n <= length), its blocks past them back to the pool.
  void truncate(sequence s, index_t n) {
    seq& q = at(s, "truncate");
    if (n < 0 || n > q.len) {
      throw shape_error("kiln::paged_kv_cache::truncate: " + std::to_string(n) + " is outside 0 .. " +
                        std::to_string(q.len) + " for sequence " + std::to_string(s));
    }
    const auto keep = static_cast<std::size_t>(blocks_for(n));
    while (q.blocks.size() > keep) {
      free_.push_back(q.blocks.back());
      q.blocks.pop_back();
    }
    q.len = n;
  }

  /// Ends sequence s: its blocks go back to the pool and its handle may be reused.
  void release(sequence s) {
    truncate(s, 0);
    seqs_[s].live = false;
    idle_.push_back(s);
    --live_;
  }

  index_t length(sequence s) const { return at(s, "length").len; }
  /// Sequence s's block ids in position order (position p in block_table(s)[p / block_size()]).
  const std::vector<std::int32_t>& block_table(sequence s) const { return at(s, "block_table").blocks; }

  /// The step's tables of sequences `seqs` (in batch order), each of which has grown by
  /// `rows` positions for this step (rows <= its length): see paged_batch. Throws
  /// kiln::shape_error for a sequence shorter than rows, kiln::index_error for one not live.
  paged_batch<B> batch(std::span<const sequence> seqs, index_t rows) const {
    const auto nb = static_cast<index_t>(seqs.size());
    index_t M = 1;
    for (sequence s : seqs) M = std::max(M, static_cast<index_t>(at(s, "batch").blocks.size()));
    std::vector<std::int32_t> tables(static_cast<std::size_t>(nb * M), -1), lens, starts;
    for (index_t b = 0; b < nb; ++b) {
      const seq& q = seqs_[seqs[static_cast<std::size_t>(b)]];
      if (rows < 0 || rows > q.len) {
        throw shape_error("kiln::paged_kv_cache::batch: sequence " + std::to_string(seqs[static_cast<std::size_t>(b)]) +
                          " holds " + std::to_string(q.len) + " positions, fewer than the step's " +
                          std::to_string(rows) + " rows");
      }
      std::copy(q.blocks.begin(), q.blocks.end(), tables.begin() + b * M);
      lens.push_back(static_cast<std::int32_t>(q.len));
      starts.push_back(static_cast<std::int32_t>(q.len - rows));
    }
    paged_batch<B> r;
    r.tables = from_host(*ctx_, {nb, M}, std::span<const std::int32_t>(tables));
    r.lens = from_host(*ctx_, {nb}, std::span<const std::int32_t>(lens));
    r.starts = from_host(*ctx_, {nb}, std::span<const std::int32_t>(starts));
    r.rows = rows;
    return r;
  }

  /// Writes layer `layer`'s new rows, k_new [B, Hkv, rows, D] and v_new [B, Hkv, rows, Dv]
  /// (expressions of T; B and rows as the batch's), at the batch's positions
  /// (kiln::paged_write, one kernel each).
  template <expression K, expression V>
  void write(index_t layer, K&& k_new, V&& v_new, const paged_batch<B>& b) {
    check_layer("write", layer);
    paged_write(k_[static_cast<std::size_t>(layer)], std::forward<K>(k_new), b.tables, b.starts);
    paged_write(v_[static_cast<std::size_t>(layer)], std::forward<V>(v_new), b.tables, b.starts);
  }

  /// Layer `layer`'s pools, [N, Hkv, block_size, D] and [N, Hkv, block_size, Dv].
  const tensor<T, B>& k(index_t layer) const {
    check_layer("k", layer);
    return k_[static_cast<std::size_t>(layer)];
  }
  const tensor<T, B>& v(index_t layer) const {
    check_layer("v", layer);
    return v_[static_cast<std::size_t>(layer)];
  }

 private:
  struct seq {
    std::vector<std::int32_t> blocks;
    index_t len = 0;
    bool live = false;
  };

  index_t blocks_for(index_t len) const noexcept { return (len + o_.block_size - 1) / o_.block_size; }

  std::string pools_text() const {
    return std::to_string(o_.layers) + " layers of k and v pools " + k_.front().describe();
  }

  const seq& at(sequence s, const char* fn) const {
    if (s >= seqs_.size() || !seqs_[s].live) {
      throw index_error("kiln::paged_kv_cache::" + std::string(fn) + ": sequence " + std::to_string(s) +
                        " is not live (" + std::to_string(live_) + " sequences live)");
    }
    return seqs_[s];
  }
  seq& at(sequence s, const char* fn) { return const_cast<seq&>(std::as_const(*this).at(s, fn)); }

  static void check_count(const char* fn, index_t n) {
    if (n < 0 || n > index_t(INT32_MAX)) {
      throw shape_error("kiln::paged_kv_cache::" + std::string(fn) + ": " + std::to_string(n) +
                        " positions is outside 0 .. 2^31 - 1");
    }
  }
  void check_layer(const char* fn, index_t layer) const {
    if (layer < 0 || layer >= o_.layers) {
      throw shape_error("kiln::paged_kv_cache::" + std::string(fn) + ": layer " + std::to_string(layer) +
                        " is outside 0 .. " + std::to_string(o_.layers - 1));
    }
  }

  const context<B>* ctx_;
  paged_kv_options o_;
  index_t n_ = 0;
  std::vector<tensor<T, B>> k_, v_;
  std::vector<std::int32_t> free_;  // block ids, the next one handed out last
  std::vector<seq> seqs_;
  std::vector<sequence> idle_;
  index_t live_ = 0;
};

}  // namespace kiln
