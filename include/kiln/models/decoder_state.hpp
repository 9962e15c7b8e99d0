// kiln/models/decoder_state.hpp — what every decoder keeps between calls, written once: the
// position, one KV cache per layer and their capacity, and greedy generation, reset and
// rewind over the decoder's own forward(); and what a batched step over a paged KV cache
// shares (forward(cache, batch): the checks, the rows' layout, each layer's rope, paged
// writes and paged attention, the final norm of the rows that want logits). A decoder
// (llama.hpp, bitnet.hpp) derives from decoder_state<itself, B>, names itself in `name`
// (for messages) and fills the caches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"
#include "kiln/models/batch_entry.hpp"
#include "kiln/models/weights.hpp"  // argmax_row

namespace kiln::models {

/// The layout of one batched step over a paged KV cache (decoder_state::plan_batch): the
/// entries' rows in groups of entries with the same token count (decoding entries, one
/// token each, first), since paged_attention and paged_write take [E, heads, c, D], one
/// call a group; each row's id and position; the rows whose logits are wanted.
template <class B>
struct paged_step {
  struct group {
    index_t first = 0, entries = 0, rows = 0;  // first row, entries, rows each
    paged_batch<B> tables;                      // the entries' block tables, lengths, starts
  };
  std::vector<group> groups;
  std::vector<std::int32_t> ids;  // every row's id, in row order
  std::vector<index_t> want;      // the last row of each entry that wants logits, in batch order
  tensor<std::int32_t, B> pos;    // [rows]: each row's position
  index_t rows = 0;

  /// Group g's rows of a [rows, heads, d] tensor as [E, heads, c, d] (a view).
  static tensor<float, B> rows_of(const tensor<float, B>& t, const group& g) {
    const index_t count = t.shape()[1], d = t.shape()[2];
    return transpose(reshape(slice(t, 0, g.first, g.first + g.entries * g.rows), {g.entries, g.rows, count, d}), 1, 2);
  }
};

template <class Derived, class B>
class decoder_state {
 public:
  using backend = B;

  /// Greedy generation: feeds prompt (one prefill step), then `steps` - 1 chosen tokens
  /// one at a time; returns the `steps` chosen ids. on_logits(i, logits [1, vocab]) sees
  /// the logits that chose token i. Throws kiln::shape_error before running anything when
  /// the prompt and the fed-back tokens would not fit in the cache.
  template <class F>
  std::vector<std::int32_t> generate(std::span<const std::int32_t> prompt, index_t steps, F&& on_logits) {
    std::vector<std::int32_t> out;
    if (steps <= 0) return out;
    const index_t need = static_cast<index_t>(prompt.size()) + steps - 1;
    if (need > capacity_ - pos_) {
      throw shape_error(std::string(Derived::name) + "::generate: " + std::to_string(prompt.size()) +
                        " prompt tokens and " + std::to_string(steps) + " steps need " + std::to_string(need) +
                        " cache positions after " + std::to_string(pos_) + "; the cache holds " +
                        std::to_string(capacity_) + " (load_options::max_len)");
    }
    auto& self = static_cast<Derived&>(*this);
    auto logits = self.forward(prompt);
    for (index_t i = 0;; ++i) {
      on_logits(i, logits);
      out.push_back(argmax_row(logits, 0));
      if (i + 1 == steps) break;
      auto next = self.forward(std::span<const std::int32_t>(&out.back(), 1));
      swap(logits, next);
    }
    return out;
  }

  std::vector<std::int32_t> generate(std::span<const std::int32_t> prompt, index_t steps) {
    return generate(prompt, steps, [](index_t, const tensor<float, B>&) {});
  }

  /// Forgets the sequence (the cache stays allocated).
  void reset() noexcept {
    pos_ = 0;
    for (auto& c : caches_) c.clear();
  }

  /// Keeps the first n positions of the sequence (0 <= n <= position()): the next
  /// forward() continues from position n, as after rejected draft tokens.
  void rewind(index_t n) {
    if (n < 0 || n > pos_) {
      throw shape_error(std::string(Derived::name) + "::rewind: " + std::to_string(n) + " is outside 0 .. " +
                        std::to_string(pos_));
    }
    for (auto& c : caches_) c.truncate(n);
    pos_ = n;
  }

  /// Tokens run so far (the next token's position).
  index_t position() const noexcept { return pos_; }
  /// Positions the KV cache holds (load_options::max_len).
  index_t capacity() const noexcept { return capacity_; }

 protected:
  /// What forward() checks before it changes anything: at least one token, room in the
  /// cache (kiln::shape_error), every id in [0, vocab) (kiln::index_error).
  void check_tokens(std::span<const std::int32_t> ids, index_t vocab) const {
    const index_t n = static_cast<index_t>(ids.size());
    const std::string op = std::string(Derived::name) + "::forward: ";
    if (n == 0) throw shape_error(op + "no tokens");
    if (n > capacity_ - pos_) {
      throw shape_error(op + std::to_string(n) + " tokens after " + std::to_string(pos_) + " overflow the KV cache of " +
                        std::to_string(capacity_) + " positions (load_options::max_len)");
    }
    for (const auto id : ids) {
      if (id < 0 || id >= vocab) {
        throw index_error(op + "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                          std::to_string(vocab) + ")");
      }
    }
  }

  /// What forward(cache, batch) checks before it changes anything, then grows each
  /// sequence by its tokens: a batch of at least one entry, each with at least one token
  /// and a live sequence of its own (kiln::index_error for a dead or repeated one), room
  /// in the context (kiln::shape_error), ids in [0, vocab) (kiln::index_error), a cache
  /// of the decoder's layers, kv heads and head dim (kiln::shape_error) and the blocks
  /// for every new token free in the pool (kiln::out_of_memory).
  void grow_batch(paged_kv_cache<float, B>& cache, std::span<const batch_entry> batch, index_t vocab, index_t layers,
                  index_t kv_heads, index_t head_dim) const {
    const std::string op = std::string(Derived::name) + "::forward (batched): ";
    if (batch.empty()) throw shape_error(op + "an empty batch");
    const shape& ks = cache.k(0).shape();
    if (cache.layers() != layers || ks[1] != kv_heads || ks[3] != head_dim) {
      throw shape_error(op + "the paged cache has " + std::to_string(cache.layers()) + " layers of pools " +
                        ks.to_string() + "; the decoder needs " + std::to_string(layers) + " layers of [blocks, " +
                        std::to_string(kv_heads) + ", block size, " + std::to_string(head_dim) + "]");
    }
    std::vector<typename paged_kv_cache<float, B>::sequence> seen;
    index_t need = 0;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const batch_entry& e = batch[i];
      const std::string at = op + "entry " + std::to_string(i) + " (sequence " + std::to_string(e.sequence) + "): ";
      index_t len = 0;
      try {
        len = cache.length(e.sequence);
      } catch (const index_error& x) {
        throw index_error(at + x.what());
      }
      if (std::find(seen.begin(), seen.end(), e.sequence) != seen.end()) {
        throw index_error(at + "the sequence appears twice in the batch");
      }
      seen.push_back(e.sequence);
      const index_t n = static_cast<index_t>(e.ids.size());
      if (n == 0) throw shape_error(at + "no tokens");
      if (n > capacity_ - len) {
        throw shape_error(at + std::to_string(n) + " tokens after " + std::to_string(len) +
                          " overflow the context of " + std::to_string(capacity_) + " positions (load_options::max_len)");
      }
      for (std::size_t j = 0; j < e.ids.size(); ++j) {
        if (e.ids[j] < 0 || e.ids[j] >= vocab) {
          throw index_error(at + "token id " + std::to_string(e.ids[j]) + " at ids[" + std::to_string(j) +
                            "] is outside the vocabulary [0, " + std::to_string(vocab) + ")");
        }
      }
      need += cache.blocks_needed(e.sequence, n);
    }
    if (need > cache.free_blocks()) {
      throw out_of_memory(op + "the step needs " + std::to_string(need) + " blocks of the paged cache, " +
                              std::to_string(cache.free_blocks()) + " of " + std::to_string(cache.num_blocks()) +
                              " are free",
                          static_cast<std::size_t>(need) * cache.bytes_per_block(),
                          static_cast<std::size_t>(cache.free_blocks()) * cache.bytes_per_block());
    }
    for (const batch_entry& e : batch) cache.append(e.sequence, static_cast<index_t>(e.ids.size()));
  }

  /// grow_batch, then the step's layout: rows grouped by token count, positions and block
  /// tables uploaded once for every layer.
  paged_step<B> plan_batch(paged_kv_cache<float, B>& cache, std::span<const batch_entry> batch, index_t vocab,
                           index_t layers, index_t kv_heads, index_t head_dim) const {
    grow_batch(cache, batch, vocab, layers, kv_heads, head_dim);
    paged_step<B> st;
    std::vector<std::size_t> order(batch.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return batch[a].ids.size() < batch[b].ids.size(); });
    std::vector<index_t> row_of(batch.size());  // each entry's first row
    std::vector<std::int32_t> p;
    std::vector<typename paged_kv_cache<float, B>::sequence> seqs;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const batch_entry& e = batch[order[k]];
      const index_t c = static_cast<index_t>(e.ids.size());
      row_of[order[k]] = static_cast<index_t>(st.ids.size());
      st.ids.insert(st.ids.end(), e.ids.begin(), e.ids.end());
      const index_t start = cache.length(e.sequence) - c;  // grow_batch appended the rows
      for (index_t i = 0; i < c; ++i) p.push_back(static_cast<std::int32_t>(start + i));
      seqs.push_back(e.sequence);
      if (k + 1 == order.size() || batch[order[k + 1]].ids.size() != e.ids.size()) {
        const auto E = static_cast<index_t>(seqs.size());
        st.groups.push_back({static_cast<index_t>(st.ids.size()) - E * c, E, c, cache.batch(seqs, c)});
        seqs.clear();
      }
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].logits) st.want.push_back(row_of[i] + static_cast<index_t>(batch[i].ids.size()) - 1);
    }
    st.rows = static_cast<index_t>(st.ids.size());
    st.pos = from_host(cache.k(0).context(), shape{st.rows}, std::span<const std::int32_t>(p));
    return st;
  }

  /// One layer's attention in a batched step: rope of the q and k of qkv [rows, (Hq + 2
  /// Hkv) D] (stacked) at each row's position into qr [rows, Hq, D] and kr [rows, Hkv, D];
  /// each group's k and v rows written into the cache; its queries' attention through its
  /// block tables into att [rows, Hq, D].
  static void paged_layer_attention(paged_kv_cache<float, B>& cache, index_t layer, const paged_step<B>& st,
                                    const tensor<float, B>& qkv, tensor<float, B>& qr, tensor<float, B>& kr,
                                    tensor<float, B>& att, index_t Hq, index_t Hkv, index_t D, const rope_options& ro) {
    const index_t n = st.rows, nq = Hq * D, nk = Hkv * D;
    // [1, heads, n, D] views (no copies)
    const auto heads = [&](index_t first, index_t count) {
      return transpose(reshape(slice(qkv, 1, first, first + count * D), {1, n, count, D}), 1, 2);
    };
    auto qr_heads = transpose(reshape(qr, {1, n, Hq, D}), 1, 2);
    auto kr_heads = transpose(reshape(kr, {1, n, Hkv, D}), 1, 2);
    qr_heads = rope(heads(0, Hq), st.pos, ro);
    kr_heads = rope(heads(nq, Hkv), st.pos, ro);
    const auto v_rows = reshape(slice(qkv, 1, nq + nk, nq + 2 * nk), {n, Hkv, D});
    attention_options att_opt;
    att_opt.causal = true;
    for (const auto& g : st.groups) {
      cache.write(layer, paged_step<B>::rows_of(kr, g), paged_step<B>::rows_of(v_rows, g), g.tables);
      auto out = paged_step<B>::rows_of(att, g);
      out = paged_attention(paged_step<B>::rows_of(qr, g), cache.k(layer), cache.v(layer), g.tables.tables,
                            g.tables.lens, att_opt);
    }
  }

  /// The final norm of the rows whose logits are wanted, [want, H] in batch order; runs of
  /// consecutive rows one statement each (decoding entries are one run).
  template <class N>
  static tensor<float, B> wanted_rows(const paged_step<B>& st, const tensor<float, B>& h, const N& norm, float eps) {
    const index_t m = static_cast<index_t>(st.want.size());
    auto xf = empty<float>(h.context(), {m, h.shape()[1]});
    for (index_t i = 0; i < m;) {
      index_t j = i + 1;
      while (j < m && st.want[static_cast<std::size_t>(j)] == st.want[static_cast<std::size_t>(j - 1)] + 1) ++j;
      const index_t r = st.want[static_cast<std::size_t>(i)];
      auto dst = slice(xf, 0, i, j);
      dst = rms_norm(slice(h, 0, r, r + (j - i)), norm, eps);
      i = j;
    }
    return xf;
  }

  std::vector<kv_cache<float, B>> caches_;  // one a layer
  index_t capacity_ = 0;
  index_t pos_ = 0;
};

}  // namespace kiln::models
