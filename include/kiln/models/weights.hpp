// kiln/models/weights.hpp — the weights of a decoder and the helpers every decoder uses:
//  - matrix<W, B>: a [rows, cols] weight matrix kept as row blocks (so that no block passes
//    a Vulkan device's storage buffer limit), float (dtype W) or quantized at load to int8
//    or int4 (weight_quant); load_options says how a model keeps its projections;
//  - load_stacked: a matrix of checkpoint tensors stacked along the rows ([Wq; Wk; Wv],
//    [Wgate; Wup]), converted to W on the way;
//  - project: out (+)= x @ w^T over a matrix's row blocks, x an expression fused into
//    each matmul (a prologue), the residual as the epilogue;
//  - embed: the embedding rows of token ids from a row-blocked table;
//  - argmax_row: greedy decoding.
//
// Opt-in like kiln/io/safetensors.hpp: link kiln::io (the checkpoint reads safetensors).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"
#include "kiln/models/checkpoint.hpp"

namespace kiln::models {

/// How the projection weights are kept (load_options::quant).
enum class weight_quant {
  none,  // dtype W
  int8,  // kiln::quant::int8, a scale per row
  int4,  // kiln::quant::int4, a scale per 32 weights (every K must be a multiple of 32)
};

/// Options of a decoder's model::load (kiln::llama::model::load, ...).
struct load_options {
  /// Positions the KV cache holds (prompt plus generated tokens); 0: the smaller of
  /// max_position_embeddings and 4096.
  index_t max_len = 0;
  /// Largest block a weight matrix is kept in (bytes): larger ones (the embedding and LM
  /// head of most models) are split into row blocks, one matmul each, because a Vulkan
  /// device may bind no more than maxStorageBufferRange per buffer (2^27 bytes is all
  /// the specification guarantees, and lavapipe's limit).
  std::size_t max_block_bytes = std::size_t(1) << 27;
  /// Projection weights quantized at load (see weight_quant); none keeps them as W.
  weight_quant quant = weight_quant::none;
};

/// A [rows, cols] weight matrix kept as row blocks (consecutive row ranges; one block
/// unless the matrix is larger than load_options::max_block_bytes).
template <class W, class B>
struct matrix {
  std::vector<tensor<W, B>> blocks;
  // or, after quantize(): the same row blocks quantized (one of the two is used)
  std::vector<qtensor<quant::int8, B>> q8;
  std::vector<qtensor<quant::int4, B>> q4;

  index_t rows() const noexcept {
    index_t r = 0;
    for_each_block([&](const auto& b) { r += b.shape()[0]; });
    return r;
  }
  /// f(block) for each row block, whichever form it is kept in (a tensor or a qtensor).
  template <class F>
  void for_each_block(F&& f) const {
    for (const auto& b : blocks) f(b);
    for (const auto& b : q8) f(b);
    for (const auto& b : q4) f(b);
  }
  /// Bytes the matrix holds.
  double bytes() const noexcept {
    double n = 0;
    for (const auto& b : blocks) n += double(b.numel()) * double(sizeof(W));
    for (const auto& b : q8) n += double(b.bytes());
    for (const auto& b : q4) n += double(b.bytes());
    return n;
  }
  /// The float blocks replaced by their quantized form (`what` names the matrix in
  /// errors: int4 needs the columns to be a multiple of 32).
  void quantize(weight_quant q, const std::string& what) {
    if (q == weight_quant::none) return;
    for (const auto& b : blocks) {
      if (q == weight_quant::int8) {
        q8.push_back(kiln::quantize<quant::int8>(b));
      } else {
        if (b.shape()[1] % 32 != 0) {
          throw shape_error("kiln::models::matrix: int4 weights need in_features to be a multiple of 32; " + what +
                            " has " + std::to_string(b.shape()[1]) + " (use int8)");
        }
        q4.push_back(kiln::quantize<quant::int4>(b, {.group = 32}));
      }
    }
    blocks.clear();
  }
  /// Rows per block for cols columns under max_bytes (at least one).
  static index_t block_rows(index_t cols, std::size_t max_bytes) noexcept {
    return std::max<index_t>(1, static_cast<index_t>(max_bytes / (std::max<index_t>(cols, 1) * sizeof(W))));
  }
  /// A matrix of row blocks made by make(r0, r1) -> tensor [r1 - r0, cols].
  template <class F>
  static matrix build(index_t rows, index_t cols, std::size_t max_bytes, F&& make) {
    matrix m;
    const index_t step = block_rows(cols, max_bytes);
    for (index_t r0 = 0; r0 < rows; r0 += step) m.blocks.push_back(make(r0, std::min(rows, r0 + step)));
    return m;
  }
};

/// One part of a stacked matrix: a checkpoint tensor's name and its rows.
using stacked_part = std::pair<std::string, index_t>;

/// One part of a tensor-parallel rank's stacked matrix: rows [r0, r1) of the checkpoint
/// tensor `name`, which has `rows` rows.
struct sliced_part {
  std::string name;
  index_t rows = 0, r0 = 0, r1 = 0;
  index_t replicas = 1;  // ranks that hold this same slice (kv heads replicated over the ranks)
};

/// Rows [r0, r1) of each of the checkpoint tensors parts ([A; B; ...], each [rows, cols]),
/// columns [c0, c1), stacked along the rows in row blocks of at most max_block_bytes,
/// converted to W on the way: a tensor-parallel rank's slice, read from the mapped files
/// (the rest of each tensor is never copied). Throws kiln::format_error (see
/// checkpoint::load_rows) for a tensor that is missing or has another shape.
template <class W, class B>
matrix<W, B> load_sliced(const context<B>& ctx, const checkpoint& ck, const std::vector<sliced_part>& parts, index_t cols,
                         index_t c0, index_t c1, std::size_t max_block_bytes) {
  index_t rows = 0;
  for (const auto& pr : parts) rows += pr.r1 - pr.r0;
  const auto part = [&](const sliced_part& pr, index_t a, index_t b) {  // rows a..b of the part's slice
    return ck.load_block<W>(ctx, pr.name, {pr.rows, cols}, pr.r0 + a, pr.r0 + b, c0, c1);
  };
  return matrix<W, B>::build(rows, c1 - c0, max_block_bytes, [&](index_t b0, index_t b1) {
    if (parts.size() == 1) return part(parts[0], b0, b1);
    auto blk = empty<W>(ctx, {b1 - b0, c1 - c0});
    index_t p0 = 0;
    for (const auto& pr : parts) {
      const index_t n = pr.r1 - pr.r0, o0 = std::max(b0, p0), o1 = std::min(b1, p0 + n);
      if (o0 < o1) {
        auto dst = slice(blk, 0, o0 - b0, o1 - b0);
        dst = part(pr, o0 - p0, o1 - p0);
      }
      p0 += n;
    }
    return blk;
  });
}

/// The checkpoint tensors parts ([A; B; ...], each [rows, cols]) stacked along the rows,
/// in row blocks of at most max_block_bytes, converted to W on the way. Throws
/// kiln::format_error (see checkpoint::load_rows) for a tensor that is missing or has
/// another shape.
template <class W, class B>
matrix<W, B> load_stacked(const context<B>& ctx, const checkpoint& ck, const std::vector<stacked_part>& parts,
                          index_t cols, std::size_t max_block_bytes) {
  std::vector<sliced_part> whole;
  for (const auto& [name, n] : parts) whole.push_back({name, n, 0, n});
  return load_sliced<W>(ctx, ck, whole, cols, 0, cols, max_block_bytes);
}

/// out[:, r0:r1] = x @ block^T for each row block of w (+ out[:, r0:r1] when residual):
/// one matmul per block, x (an expression: the SwiGLU product) fused into each.
template <class X, class W, class B>
void project(tensor<float, B>& out, const X& x, const matrix<W, B>& w, bool residual) {
  index_t r0 = 0;
  const std::size_t count = w.blocks.size() + w.q8.size() + w.q4.size();
  w.for_each_block([&](const auto& b) {
    const index_t r1 = r0 + b.shape()[0];
    auto o = count == 1 ? out : slice(out, 1, r0, r1);
    if (residual) {
      o = o + linear(x, b);
    } else {
      o = linear(x, b);
    }
    r0 = r1;
  });
}

/// h [n, H] = the embedding rows of ids from table [vocab, H] (kept as float row blocks):
/// one gather per row block holding any of them (each block after the first overwrites
/// only its own tokens' rows).
template <class W, class B>
void embed(const context<B>& ctx, tensor<float, B>& h, const matrix<W, B>& table, std::span<const std::int32_t> ids) {
  const index_t n = static_cast<index_t>(ids.size());
  if (table.blocks.size() == 1) {
    h = cast<float>(embedding(table.blocks[0], from_host(ctx, shape{n}, ids)));
    return;
  }
  bool first = true;
  index_t base = 0;
  for (const auto& b : table.blocks) {
    const index_t rows = b.shape()[0];
    std::vector<std::int32_t> local(ids.size()), mine(ids.size());
    bool any = false;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const bool in = ids[i] >= base && ids[i] < base + rows;
      any = any || in;
      mine[i] = in ? 1 : 0;
      local[i] = in ? static_cast<std::int32_t>(ids[i] - base) : 0;
    }
    if (any) {
      const auto li = from_host(ctx, shape{n}, std::span<const std::int32_t>(local));
      if (first) {
        h = cast<float>(embedding(b, li));
      } else {
        const auto m = from_host(ctx, shape{n, 1}, std::span<const std::int32_t>(mine));
        h = where(m, cast<float>(embedding(b, li)), h);
      }
      first = false;
    }
    base += rows;
  }
}

/// The row-th row's largest element's index (the first on ties; NaN never wins) of a
/// [rows, vocab] float tensor: greedy decoding.
template <class B>
std::int32_t argmax_row(const tensor<float, B>& logits, index_t row) {
  const auto h = slice(logits, 0, row, row + 1).to_host();
  std::size_t best = 0;
  for (std::size_t i = 1; i < h.size(); ++i) {
    if (h[i] > h[best] || (std::isnan(h[best]) && !std::isnan(h[i]))) best = i;
  }
  return static_cast<std::int32_t>(best);
}

}  // namespace kiln::models
