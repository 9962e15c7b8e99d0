// kiln/models/bitnet.hpp — a BitNet b1.58 decoder (Hugging Face BitNetForCausalLM,
// model_type "bitnet": microsoft/bitnet-b1.58-2B-4T and its -bf16 master weights) built
// from kiln's ops, loading Hugging Face checkpoint directories.
//
// Opt-in like kiln/io/safetensors.hpp: link kiln::io (nlohmann-json parses config.json).
//
//   kiln::context<kiln::cpu<>> ctx;
//   auto m = kiln::bitnet::model<kiln::cpu<>>::load(ctx, "bitnet-b1.58-2B-4T",
//                                                   {.lm_head = kiln::bitnet::table_dtype::int8});
//   auto ids = m.generate(prompt_ids, 32);
//
// Two checkpoint layouts, told apart per projection by the stored dtype of its weight:
//  - packed (U8): weight uint8 [out/4, in]; output row i*R + r (R = out/4) is in bits
//    2i..2i+1 of packed row r as code + 1 (code -1, 0, 1); weight_scale (one value) divides:
//    y = (x_q . w_q) / ((127 / max|x|) * weight_scale);
//  - master (F32 / F16 / BF16): quantized at load by kiln::quantize<ternary> (absmean per
//    tensor: gamma = mean|W|, w_q = clamp(round(W / gamma), -1, 1)), y = (x_q . w_q) *
//    gamma * max|x| / 127;
// in both, x_q = round(x * 127 / max|x|) per token (kiln::bitlinear's int8 activations).
// The projections of a layer are stacked ([Wq; Wk; Wv], [Wgate; Wup]) into one ternary
// qtensor with a scale per row (each part keeps its own), one W1.58A8 product each.
//
// One forward step over n new tokens, per layer (each line one kernel unless said):
//   x   = rms_norm(h, input_layernorm)
//   qkv = bitlinear(x, [Wq; Wk; Wv])
//   cache.append(rope(k), v); att = attention(rope(q), cache.k(), cache.v(), causal)
//   h   = h + bitlinear(rms_norm(att, attn_sub_norm), Wo)        the norm, then the product
//   x   = rms_norm(h, post_attention_layernorm)                   with the residual epilogue
//   gu  = bitlinear(x, [Wgate; Wup])
//   h   = h + bitlinear(rms_norm(relu(gate)^2 * up, ffn_sub_norm), Wdown)   relu2 fused into
//                                                                 the norm's prologue
// then rms_norm(h, model.norm) and the LM head: the embedding table (tied; or lm_head.weight
// when the config unties them), kept as bf16, f16 or int8 (load_options::lm_head; int8:
// absmax per row, the head's activations quantized per token, the embedding rows
// dequantized on lookup). Norm weights, activations, the KV cache and the logits are f32.
//
// Tensor parallelism (models/tensor_parallel.hpp; over MPI: kiln/dist/tensor_parallel.hpp)
// splits as kiln::llama does (heads, FFN columns, vocabulary; an all-reduce of h after
// o_proj and after down_proj), with two things of BitNet's own at each row-parallel
// product: the sub-norm (attn_sub_norm, ffn_sub_norm) spans the whole row, so its sum of
// squares is all-reduced ([n, 1]); and bitlinear quantizes each row by its max|x| over the
// whole row, so the ranks all-gather their rows' maxima ([1, n] each) and every rank
// appends the largest as one more column of x, against a weight column of code 0: each
// rank's kernel then quantizes with the whole row's max|x| and the extra column adds
// nothing. Master weights are quantized with the whole tensor's absmean (sum of |W| over
// the ranks' slices, all-reduced at load).
//
// Several devices in one process (models/pipeline.hpp) as kiln::llama: each stage's
// layers and KV cache on its context, the embedding on the first, the final norm and the
// (tied) LM head on the last (the table loaded there too when the two differ).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"
#include "kiln/models/architecture.hpp"
#include "kiln/models/checkpoint.hpp"
#include "kiln/models/decoder_state.hpp"
#include "kiln/models/hf_config.hpp"
#include "kiln/models/pipeline.hpp"
#include "kiln/models/tensor_parallel.hpp"
#include "kiln/models/weights.hpp"
#if defined(KILN_LLAMA_INSTANCES) && KILN_LLAMA_INSTANCES_VULKAN
#include "kiln/vulkan.hpp"  // the Vulkan decoder declared extern at the end of this file
#endif

namespace kiln::bitnet {

using models::argmax_row;
using models::checkpoint;

/// How the embedding table (and the tied LM head) is kept.
enum class table_dtype {
  bf16,  // as the checkpoint stores it (exact for bf16 checkpoints)
  f16,   // IEEE half (exact for bf16 values in f16's normal range)
  int8,  // kiln::quant::int8, a scale per row: half the bytes of bf16 per decoded token
};

/// Options of model::load.
struct load_options {
  /// Positions the KV cache holds; 0: the smaller of max_position_embeddings and 4096.
  index_t max_len = 0;
  /// Largest block a matrix is kept in (bytes); larger ones are split into row blocks
  /// (see kiln::models::load_options::max_block_bytes: a Vulkan binding limit).
  std::size_t max_block_bytes = std::size_t(1) << 27;
  /// The embedding and LM head's storage.
  table_dtype lm_head = table_dtype::bf16;
};

/// "bf16", "f16" or "int8" (for messages and command lines).
inline const char* to_string(table_dtype t) noexcept {
  return t == table_dtype::bf16 ? "bf16" : t == table_dtype::f16 ? "f16" : "int8";
}

/// The table_dtype named s ("bf16", "f16", "int8"); throws kiln::value_error otherwise.
inline table_dtype table_dtype_from(const std::string& s) {
  if (s == "bf16") return table_dtype::bf16;
  if (s == "f16") return table_dtype::f16;
  if (s == "int8") return table_dtype::int8;
  throw value_error("kiln::bitnet: LM head dtype '" + s + "' is not one of bf16, f16, int8");
}

/// The hyper-parameters of a BitNet checkpoint (Hugging Face's BitNetConfig keys).
struct config {
  index_t hidden_size = 0;
  index_t intermediate_size = 0;
  index_t num_hidden_layers = 0;
  index_t num_attention_heads = 0;
  index_t num_key_value_heads = 0;  // absent: num_attention_heads
  index_t head_dim = 0;             // absent: hidden_size / num_attention_heads
  index_t vocab_size = 0;
  index_t max_position_embeddings = 2048;
  float rms_norm_eps = 1e-6f;
  float rope_theta = 500000.0f;
  bool tie_word_embeddings = true;

  /// Reads config.json text (`where` names it in messages). Throws kiln::format_error for
  /// bad JSON, a config of another architecture (kiln::models::architecture_of), a missing
  /// or non-positive size, heads that do not divide, an odd head_dim, or a feature this
  /// decoder does not implement (hidden_act other than relu2, rope scaling, biases).
  static config parse(const std::string& text, const std::string& where = "config.json") {
    return from(models::hf_config(text, where, "kiln::bitnet"));
  }
  /// Reads and parses the file at path.
  static config load(const std::string& path) { return from(models::hf_config::load(path, "kiln::bitnet")); }

  /// The fields of a parsed config.json (see parse for the errors).
  static config from(const models::hf_config& j) {
    if (models::architecture_of(j) != models::architecture::bitnet) {
      j.fail("not a BitNet config (model_type " + (j.has("model_type") ? j["model_type"].dump() : std::string("absent")) +
             "); load it with kiln::llama");
    }
    config c;
    c.hidden_size = j.size("hidden_size");
    c.intermediate_size = j.size("intermediate_size");
    c.num_hidden_layers = j.size("num_hidden_layers");
    c.num_attention_heads = j.size("num_attention_heads");
    c.num_key_value_heads = j.size("num_key_value_heads", c.num_attention_heads);
    c.vocab_size = j.size("vocab_size");
    c.max_position_embeddings = j.size("max_position_embeddings", index_t(2048));
    if (c.hidden_size % c.num_attention_heads != 0 && !j.has("head_dim")) {
      j.fail("hidden_size " + std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads " +
             std::to_string(c.num_attention_heads) + " and there is no head_dim");
    }
    c.head_dim = j.size("head_dim", c.hidden_size / c.num_attention_heads);
    c.rms_norm_eps = j.positive("rms_norm_eps", 1e-6f);
    c.rope_theta = j.positive("rope_theta", 500000.0f);
    c.tie_word_embeddings = j.boolean("tie_word_embeddings", true);
    if (c.num_attention_heads % c.num_key_value_heads != 0) {
      j.fail("num_attention_heads " + std::to_string(c.num_attention_heads) + " is not a multiple of num_key_value_heads " +
             std::to_string(c.num_key_value_heads));
    }
    if (c.head_dim % 2 != 0) j.fail("head_dim " + std::to_string(c.head_dim) + " is odd; rotary embedding needs pairs");
    if (j.has("hidden_act") && j["hidden_act"] != "relu2") {
      j.fail("hidden_act " + j["hidden_act"].dump() + " is not supported (BitNet b1.58 uses relu2, squared ReLU)");
    }
    if (j.has("rope_scaling")) {
      const auto& r = j["rope_scaling"];
      const std::string type = r.is_object() ? r.value("rope_type", r.value("type", std::string("?"))) : std::string("?");
      if (type != "default") j.fail("rope_scaling " + r.dump() + " is not supported (plain RoPE only)");
    }
    for (const char* key : {"attention_bias", "mlp_bias"}) {
      if (j.has(key) && j[key].is_boolean() && j[key].get<bool>()) {
        j.fail(std::string("'") + key + "' = true is not supported (BitNet has no projection biases)");
      }
    }
    return c;
  }
};

/// A ternary [rows, cols] matrix kept as row blocks of kiln::qtensor<quant::ternary>, one
/// scale per row (stacked projections keep their own scales).
template <class B>
struct ternary_matrix {
  std::vector<qtensor<quant::ternary, B>> blocks;
  index_t rows() const noexcept {
    index_t r = 0;
    for (const auto& b : blocks) r += b.rows();
    return r;
  }
  /// Bytes a product reads: the packed codes (kiln's 2-bit layout) and the scales.
  double bytes() const noexcept {
    double n = 0;
    for (const auto& b : blocks) n += double(b.bytes());
    return n;
  }
};

/// The embedding table or LM head [rows, cols]: bf16 or f16 row blocks, or int8 (the q8
/// blocks of t16b).
template <class B>
struct table {
  table_dtype dtype = table_dtype::bf16;
  models::matrix<bfloat16, B> t16b;  // bf16 blocks, or (int8) their quantized q8 blocks
  models::matrix<half, B> t16h;      // f16 blocks
  index_t rows() const noexcept { return dtype == table_dtype::f16 ? t16h.rows() : t16b.rows(); }
  double bytes() const noexcept { return t16b.bytes() + t16h.bytes(); }
};

/// A BitNet b1.58 decoder on backend B, and its KV cache (one sequence).
template <class B>
class model : public models::decoder_state<model<B>, B> {
  using state = models::decoder_state<model, B>;
  using state::capacity_;
  using state::caches_;
  using state::pos_;

 public:
  /// The decoder's name in messages (decoder_state's generate and rewind use it).
  static constexpr const char* name = "kiln::bitnet::model";
  struct layer {
    tensor<float, B> attn_norm, attn_sub_norm;  // [H], [Hq D]
    ternary_matrix<B> wqkv, wo;                 // [(Hq + 2 Hkv) D, H]; [H, Hq D]
    tensor<float, B> mlp_norm, ffn_sub_norm;    // [H], [I]
    ternary_matrix<B> wgu, wdown;               // [2 I, H]; [H, I]
  };

  /// Loads the checkpoint directory dir (config.json and *.safetensors), packed or master
  /// layout. Throws kiln::format_error for a config of another architecture, or a tensor
  /// that is missing, misshapen, of a dtype it cannot be, a packed weight without its
  /// weight_scale or holding the unused code 3, naming the tensor and its file.
  /// With tp of more than one rank: this rank's slices only (see the top of this file);
  /// kiln::shape_error naming the heads and ranks when they do not split into whole heads.
  /// With pp of several contexts (ctx the first): each stage's layers on its context
  /// (kiln::llama::model::load; models::placement::of's errors).
  static model load(const context<B>& ctx, const std::string& dir, load_options opt = {},
                    models::tensor_parallel<B> tp = {}, models::pipeline<B> pp = {});
  /// The model of dir placed over pp's contexts (a pipeline split; kiln::value_error for
  /// a pipeline without contexts).
  static model load(const models::pipeline<B>& pp, const std::string& dir, load_options opt = {}) {
    if (pp.contexts.empty()) throw value_error(std::string(name) + "::load: a pipeline without contexts");
    return load(pp.contexts.front(), dir, opt, {}, pp);
  }

  /// A model from weights already on ctx's device (with tp: this rank's slices, wo and
  /// wdown with their extra zero column; with pp: each layer's on its stage's context,
  /// norm and lm_head on the last's). Throws kiln::shape_error when a weight's shape
  /// disagrees with cfg, kiln::value_error when a weight is on another context than its stage's.
  model(const context<B>& ctx, const config& cfg, table<B> embed, std::vector<layer> layers, tensor<float, B> norm,
        table<B> lm_head, load_options opt = {}, models::tensor_parallel<B> tp = {}, models::pipeline<B> pp = {});

  /// Runs ids at the next positions (see kiln::llama::model::forward): float logits
  /// [n, vocab] for every new position when all_positions, else [1, vocab] for the last.
  /// Throws kiln::index_error for an id outside the vocabulary, kiln::shape_error when
  /// the cache would overflow (nothing is changed then).
  tensor<float, B> forward(std::span<const std::int32_t> ids, bool all_positions = false);

  /// One step of many unrelated sequences over a paged KV cache, all rows as one batch
  /// (see kiln::llama::model::forward(cache, batch), whose layout and checks it shares
  /// through decoder_state): logits [m, vocab] of the entries that want them, in batch order.
  /// kiln::value_error for a model split over several contexts.
  tensor<float, B> forward(paged_kv_cache<float, B>& cache, std::span<const models::batch_entry> batch);

  /// A paged KV cache for this decoder on ctx: blocks of block_size positions, `blocks` of
  /// them or as many as fit in `bytes`.
  paged_kv_cache<float, B> make_paged_cache(index_t block_size, index_t blocks, std::size_t bytes = 0) const {
    place_.require_one(name, "make_paged_cache");
    return paged_kv_cache<float, B>(place_.first(), {.layers = cfg_.num_hidden_layers,
                                            .kv_heads = shard_.kv_heads,
                                            .head_dim = cfg_.head_dim,
                                            .block_size = block_size,
                                            .blocks = blocks,
                                            .bytes = bytes});
  }

  const config& cfg() const noexcept { return cfg_; }
  const std::vector<layer>& layers() const noexcept { return layers_; }
  const table<B>& lm_head() const noexcept { return head_; }
  /// The heads, FFN columns and vocabulary rows this rank holds (all of them alone).
  const models::tp_shard& shard() const noexcept { return shard_; }
  /// The contexts the layers run on (one stage unless loaded with a pipeline).
  const models::placement<B>& placement() const noexcept { return place_; }
  /// Bytes of weights this rank holds (the embedding's included).
  double weight_bytes() const noexcept {
    const auto first = [](const table<B>& t) -> const void* {  // a table's first block's storage
      if (!t.t16h.blocks.empty()) return t.t16h.blocks[0].storage().get();
      if (!t.t16b.blocks.empty()) return t.t16b.blocks[0].storage().get();
      if (!t.t16b.q8.empty()) return t.t16b.q8[0].codes().storage().get();
      return nullptr;
    };
    const void* e = first(embed_);
    return weight_bytes_per_token() + (e != nullptr && e == first(head_) ? 0.0 : embed_.bytes());
  }
  /// Bytes of weights read per decode step: every ternary matrix (codes and scales), the
  /// LM head and the norms (the embedding row aside).
  double weight_bytes_per_token() const noexcept {
    double n = head_.bytes() + double(norm_.numel()) * 4.0;
    for (const auto& L : layers_) {
      n += L.wqkv.bytes() + L.wo.bytes() + L.wgu.bytes() + L.wdown.bytes();
      n += double(L.attn_norm.numel() + L.attn_sub_norm.numel() + L.mlp_norm.numel() + L.ffn_sub_norm.numel()) * 4.0;
    }
    return n;
  }

 private:
  /// After a row-parallel product: the sum of the ranks' partial h (rank 0's holds the residual).
  void reduce(const tensor<float, B>& h) const {
    if (shard_.split()) tp_.all_reduce_sum(h);
  }
  bool residual() const noexcept { return shard_.rank == 0; }
  void embed(tensor<float, B>& h, std::span<const std::int32_t> ids) const;
  tensor<float, B> logits_of(const tensor<float, B>& xf) const {
    const auto project = [&](tensor<float, B>& out) {
      if (head_.dtype == table_dtype::f16) models::project(out, xf, head_.t16h, false);
      else models::project(out, xf, head_.t16b, false);
    };
    const index_t rows = xf.shape()[0];
    if (!shard_.split()) {
      auto logits = empty<float>(place_.last(), {rows, cfg_.vocab_size});
      project(logits);
      return logits;
    }
    return models::gather_logits(place_.last(), rows, cfg_.vocab_size, shard_, tp_, project);
  }
  /// h (+)= bitlinear(rms_norm(x, norm), w), w a row-parallel projection: alone, the norm
  /// then the product; split, into xe [n, K + 1] the norm of the whole row (its sum of
  /// squares all-reduced), the row's max|.| over every rank appended (see the top of the
  /// file), then the product, whose partial sums the all-reduce of h adds up.
  template <class X>
  void sub_norm_project(tensor<float, B>& h, tensor<float, B>& xe, const X& x, const tensor<float, B>& norm,
                        const ternary_matrix<B>& w, index_t whole) const;

  config cfg_;
  table<B> embed_;
  std::vector<layer> layers_;
  tensor<float, B> norm_;
  table<B> head_;
  models::tensor_parallel<B> tp_;
  models::tp_shard shard_;
  models::placement<B> place_;
};

namespace detail {

/// The single value of a weight_scale tensor (F32, F16 or BF16, one element), positive
/// and finite; kiln::format_error naming it and its file otherwise.
inline float read_scale(const checkpoint& ck, const std::string& name) {
  const auto& i = ck.info(name);
  const std::string where = "kiln::bitnet: " + ck.path_of(name) + ": '" + name + "'";
  if (i.numel() != 1) throw format_error(where + " must hold one value; it has " + std::to_string(i.numel()));
  const auto b = ck.bytes(name);
  float v = 0.0f;
  if (i.dtype == "F32") {
    std::memcpy(&v, b.data(), 4);
  } else if (i.dtype == "BF16" || i.dtype == "F16") {
    std::uint16_t u = 0;
    std::memcpy(&u, b.data(), 2);
    v = i.dtype == "BF16" ? float(bfloat16::from_bits(u)) : float(half::from_bits(u));
  } else {
    throw format_error(where + " is stored as " + i.dtype + "; a weight_scale must be F32, F16 or BF16");
  }
  if (!(v > 0.0f) || !std::isfinite(v)) throw format_error(where + " = " + std::to_string(v) + " must be positive and finite");
  return v;
}

/// One projection of a stacked ternary matrix, loaded: its codes in kiln's layout
/// (int32 [rows, words]) and the multiplier of its rows' products.
template <class B>
struct ternary_part {
  tensor<std::int32_t, B> codes;
  float scale = 0.0f;
};

/// Loads projection `name` (name.weight, [rows, cols] logically) in either layout: its rows
/// [r0, r1) and columns [c0, c1) (a tensor-parallel rank's slice; alone, all of them), and
/// `extra` more columns of code 0. Master weights of a slice are quantized with the whole
/// tensor's absmean (tp sums |W| over the ranks; a slice that `replicas` ranks hold counts
/// once).
template <class B>
ternary_part<B> load_ternary(const context<B>& ctx, const checkpoint& ck, const std::string& name, index_t rows,
                             index_t cols, index_t r0, index_t r1, index_t c0, index_t c1, index_t extra,
                             const models::tensor_parallel<B>& tp, index_t replicas) {
  const std::string wname = name + ".weight";
  const auto& i = ck.info(wname);  // format_error naming the directory when missing
  const std::string where = "kiln::bitnet: " + ck.path_of(wname) + ": '" + wname + "'";
  const index_t full_rows = rows, full_cols = cols;
  const index_t K = c1 - c0 + extra;  // the slice's in_features
  const index_t chunks = kiln::detail::chunks_for<quant::ternary>(K), words = chunks * 8;
  if (i.dtype == "U8") {
    if (rows % 4 != 0) {
      throw format_error(where + ": a packed weight needs out_features divisible by 4; the config gives " +
                         std::to_string(rows));
    }
    const index_t R = rows / 4;
    const shape got{std::span<const index_t>(i.shape.data(), i.shape.size())};
    if (got != shape{R, cols}) {
      throw format_error(where + " is U8" + got.to_string() + "; packed, the config needs U8[" + std::to_string(R) + ", " +
                         std::to_string(cols) + "] (out_features / 4, in_features)");
    }
    const std::string sname = name + ".weight_scale";
    if (!ck.contains(sname)) {
      throw format_error(where + " is packed (U8) but '" + sname + "' is missing from " + ck.dir() +
                         "; a packed weight needs its weight_scale");
    }
    const float ws = read_scale(ck, sname);
    // Output row i*R + r: bits 2i..2i+1 of packed row r (code + 1), to kiln's layout: byte
    // j of chunk c holds weights 128c + 32s + j in bits 2s..2s+1, also as code + 1.
    const auto* src = reinterpret_cast<const std::uint8_t*>(ck.bytes(wname).data());
    std::vector<std::int32_t> host(static_cast<std::size_t>((r1 - r0) * words), 0);
    auto* dst = reinterpret_cast<std::uint8_t*>(host.data());
    for (index_t n = r0; n < r1; ++n) {
      const index_t r = n % R, shift = 2 * (n / R);
      const std::uint8_t* in = src + r * cols + c0;
      std::uint8_t* out = dst + (n - r0) * words * 4;
      for (index_t c = 0; c < chunks; ++c) {
        for (int j = 0; j < 32; ++j) {
          unsigned byte = 0;
          for (int s = 0; s < 4; ++s) {
            const index_t k = c * 128 + 32 * s + j;
            unsigned v = 1;  // padding (and the extra columns): code 0
            if (k < c1 - c0) {
              v = (in[k] >> shift) & 3u;
              if (v == 3) {
                throw format_error(where + " holds the unused code 3 at packed row " + std::to_string(r) + ", column " +
                                   std::to_string(c0 + k) + " (bits " + std::to_string(shift) + ".." +
                                   std::to_string(shift + 1) + "); a packed code is -1, 0 or 1 plus 1");
              }
            }
            byte |= v << (2 * s);
          }
          out[c * 32 + j] = static_cast<std::uint8_t>(byte);
        }
      }
    }
    return {from_host(ctx, shape{r1 - r0, words}, std::span<const std::int32_t>(host)), 1.0f / ws};
  }
  if (i.dtype == "F32" || i.dtype == "F16" || i.dtype == "BF16") {
    // master weights: absmean per tensor (BitNet divides by max(gamma, 1e-5); kiln's eps
    // is added, so 0 here gives 1 / gamma, the same for any real weight)
    if (tp.size <= 1 && extra == 0 && r1 - r0 == full_rows && c1 - c0 == full_cols) {
      const auto w = ck.load<float>(ctx, wname, {rows, cols});
      const auto q = kiln::quantize<quant::ternary>(w, {.eps = 0.0f});
      return {q.codes(), q.scales().to_host()[0]};
    }
    // a slice: the whole tensor's gamma from the ranks' sums of |W| (f32, each slice's
    // own sum first), then the slice's codes at that gamma (quantize's packing kernel)
    const auto w = ck.load_block<float>(ctx, wname, {rows, cols}, r0, r1, c0, c1);
    auto total = empty<float>(ctx, {});
    total = sum(abs(w));
    const auto stat = reshape(total, {1});
    if (tp.size > 1) tp.all_reduce_sum(stat);
    const float gamma = stat.to_host()[0] / float(replicas) / float(double(full_rows) * double(full_cols));
    const tensor<float, B> wk = extra > 0 ? zeros<float>(ctx, {r1 - r0, K}) : w;
    if (extra > 0) {
      auto dst = slice(wk, 1, 0, c1 - c0);
      dst = w;
    }
    const auto l = kiln::detail::quant_layout_for<quant::ternary>(r1 - r0, K, {.eps = 0.0f}, wk.describe());
    const std::vector<float> inv{gamma > 0.0f ? 1.0f / gamma : 0.0f};
    const auto inv_t = from_host(ctx, shape{1, 1}, std::span<const float>(inv));
    auto codes = empty<std::int32_t>(ctx, {r1 - r0, l.words});
    auto node = kiln::detail::make_structural(kiln::detail::quant_pack_op<quant::ternary>{.layout = l}, wk, {.axis = 0}, inv_t);
    node.shape_ = {r1 - r0, l.words};
    kiln::detail::assign(codes, node);
    return {codes, gamma};
  }
  throw format_error(where + " is stored as " + i.dtype +
                     "; a BitNet projection is U8 (packed, with weight_scale) or F32, F16, BF16 master weights");
}

/// Projections `parts` (their rows [r0, r1)) stacked along the rows as ternary row blocks
/// of at most max_block_bytes of codes, each row keeping its projection's scale; columns
/// [c0, c1) and `extra` columns of code 0 (see load_ternary).
template <class B>
ternary_matrix<B> load_ternary_stacked(const context<B>& ctx, const checkpoint& ck,
                                       const std::vector<models::sliced_part>& sliced, index_t full_cols, index_t c0,
                                       index_t c1, index_t extra, const models::tensor_parallel<B>& tp,
                                       std::size_t max_block_bytes) {
  const index_t cols = c1 - c0 + extra;
  const index_t chunks = kiln::detail::chunks_for<quant::ternary>(cols), words = chunks * 8;
  std::vector<ternary_part<B>> loaded;
  std::vector<models::stacked_part> parts;
  index_t rows = 0;
  for (const auto& pr : sliced) {
    loaded.push_back(load_ternary(ctx, ck, pr.name, pr.rows, full_cols, pr.r0, pr.r1, c0, c1, extra, tp, pr.replicas));
    parts.emplace_back(pr.name, pr.r1 - pr.r0);
    rows += pr.r1 - pr.r0;
  }
  const index_t step = std::max<index_t>(1, static_cast<index_t>(max_block_bytes / std::size_t(words * 4)));
  ternary_matrix<B> m;
  for (index_t b0 = 0; b0 < rows; b0 += step) {
    const index_t b1 = std::min(rows, b0 + step);
    const bool whole = parts.size() == 1 && b0 == 0 && b1 == rows;  // the part's codes, no copy
    tensor<std::int32_t, B> codes = whole ? loaded[0].codes : empty<std::int32_t>(ctx, {b1 - b0, words});
    std::vector<float> scales;
    scales.reserve(static_cast<std::size_t>(b1 - b0));
    index_t p0 = 0;
    for (std::size_t p = 0; p < parts.size(); ++p) {
      const index_t n = parts[p].second, o0 = std::max(b0, p0), o1 = std::min(b1, p0 + n);
      if (o0 < o1) {
        if (!whole) {
          auto dst = slice(codes, 0, o0 - b0, o1 - b0);
          dst = slice(loaded[p].codes, 0, o0 - p0, o1 - p0);
        }
        scales.insert(scales.end(), static_cast<std::size_t>(o1 - o0), loaded[p].scale);
      }
      p0 += n;
    }
    kiln::detail::quant_layout l;
    l.N = b1 - b0;
    l.K = cols;
    l.group = cols;
    l.groups = 1;
    l.per_tensor = false;
    l.chunks = chunks;
    l.words = words;
    m.blocks.emplace_back(std::move(codes), from_host(ctx, shape{b1 - b0, 1}, std::span<const float>(scales)), l);
  }
  return m;
}

/// out[:, r0:r1] (+)= bitlinear(x, block) for each row block of w.
template <class X, class B>
void project(tensor<float, B>& out, const X& x, const ternary_matrix<B>& w, bool residual) {
  index_t r0 = 0;
  for (const auto& b : w.blocks) {
    const index_t r1 = r0 + b.rows();
    auto o = w.blocks.size() == 1 ? out : slice(out, 1, r0, r1);
    if (residual) {
      o = o + bitlinear(x, b);
    } else {
      o = bitlinear(x, b);
    }
    r0 = r1;
  }
}

/// Rows [r0, r1) of the table checkpoint tensor `name` [rows, cols] as dtype t.
template <class B>
table<B> load_table(const context<B>& ctx, const checkpoint& ck, const std::string& name, index_t rows, index_t cols,
                    index_t r0, index_t r1, table_dtype t, std::size_t max_block_bytes) {
  table<B> r;
  r.dtype = t;
  const std::vector<models::sliced_part> part{{name, rows, r0, r1}};
  if (t == table_dtype::f16) {
    r.t16h = models::load_sliced<half>(ctx, ck, part, cols, 0, cols, max_block_bytes);
  } else {
    r.t16b = models::load_sliced<bfloat16>(ctx, ck, part, cols, 0, cols, max_block_bytes);
    if (t == table_dtype::int8) r.t16b.quantize(models::weight_quant::int8, name);
  }
  return r;
}

/// h [n, H] = the rows of ids from the table: a gather for bf16 / f16, and for int8 one
/// dequantization per token of its row's codes and scale (views of the table).
template <class B>
void embed(const context<B>& ctx, tensor<float, B>& h, const table<B>& t, std::span<const std::int32_t> ids) {
  if (t.dtype == table_dtype::bf16) return models::embed(ctx, h, t.t16b, ids);
  if (t.dtype == table_dtype::f16) return models::embed(ctx, h, t.t16h, ids);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    index_t base = 0;
    for (const auto& b : t.t16b.q8) {
      const index_t r = ids[i] - base;
      if (r >= 0 && r < b.rows()) {
        kiln::detail::quant_layout l = b.layout();
        l.N = 1;
        const qtensor<quant::int8, B> row(slice(b.codes(), 0, r, r + 1), slice(b.scales(), 0, r, r + 1), l);
        auto dst = slice(h, 0, index_t(i), index_t(i) + 1);
        dst = dequantize(row);
        break;
      }
      base += b.rows();
    }
  }
}

}  // namespace detail

// The tensor-parallel helpers (after detail: they call its embed and project).

template <class B>
void model<B>::embed(tensor<float, B>& h, std::span<const std::int32_t> ids) const {
  if (!shard_.split()) return detail::embed(place_.first(), h, embed_, ids);
  models::embed_split(place_.first(), h, ids, shard_, tp_, [&](tensor<float, B>& out, std::span<const std::int32_t> local) {
    detail::embed(place_.first(), out, embed_, local);
  });
}

template <class B>
template <class X>
void model<B>::sub_norm_project(tensor<float, B>& h, tensor<float, B>& xe, const X& x, const tensor<float, B>& norm,
                                const ternary_matrix<B>& w, index_t whole) const {
  const float eps = cfg_.rms_norm_eps;
  if (!shard_.split()) {
    xe = rms_norm(x, norm, eps);
    detail::project(h, xe, w, true);
    return;
  }
  const auto ctx = xe.context();  // the layer's stage's
  const index_t n = xe.shape()[0], K = xe.shape()[1] - 1;
  auto ss = empty<float>(ctx, {n, 1});
  ss = sum(square(x), -1, true);
  tp_.all_reduce_sum(ss);
  auto body = slice(xe, 1, 0, K);
  body = x * rsqrt(ss * (1.0f / float(whole)) + eps) * norm;
  auto m = empty<float>(ctx, {n});
  m = amax(abs(body), -1);
  auto all = empty<float>(ctx, {index_t(shard_.ranks), n});
  tp_.all_gather(reshape(m, {1, n}), all);
  auto mx = empty<float>(ctx, {1, n});
  mx = amax(all, 0, true);
  auto last = slice(xe, 1, K, K + 1);
  last = transpose(mx, 0, 1);
  detail::project(h, xe, w, residual());
  reduce(h);
}

// The decoder's large members, out of the class: kiln's own programs compile them once in
// kiln_llama_instances (src/llama_instances_{cpu,vulkan}.cpp; see the end of this file).

template <class B>
model<B> model<B>::load(const context<B>& ctx, const std::string& dir, load_options opt, models::tensor_parallel<B> tp,
                        models::pipeline<B> pp) {
  const config cfg = config::load((std::filesystem::path(dir) / "config.json").string());
  const auto place = models::placement<B>::of(name, ctx, pp, cfg.num_hidden_layers);
  const index_t H = cfg.hidden_size, I = cfg.intermediate_size, D = cfg.head_dim, V = cfg.vocab_size;
  const index_t nq = cfg.num_attention_heads * D, nk = cfg.num_key_value_heads * D;
  const auto s = models::tp_shard::of(name, cfg.num_attention_heads, cfg.num_key_value_heads, I, V, tp.rank, tp.size);
  const checkpoint ck(dir);
  const index_t extra = s.split() ? 1 : 0;  // the row-parallel products' max|x| column
  const auto part = [](std::string n, index_t rows, index_t r0, index_t count, index_t replicas = 1) {
    return models::sliced_part{std::move(n), rows, r0, r0 + count, replicas};
  };
  // kv heads fewer than the ranks: each kv slice is on ranks / num_key_value_heads ranks
  const index_t kv_replicas = s.kv_heads * s.ranks / cfg.num_key_value_heads;
  const auto stack = [&](const context<B>& c, std::vector<models::sliced_part> parts, index_t cols, index_t c0, index_t c1,
                         index_t ext) {
    return detail::load_ternary_stacked(c, ck, parts, cols, c0, c1, ext, tp, opt.max_block_bytes);
  };
  const auto vec = [&](const context<B>& c, const std::string& n, index_t size, index_t first, index_t count) {
    return ck.load_rows<float>(c, n, {size}, first, first + count);
  };
  const index_t q0 = s.q0 * D, nq_l = s.q_heads * D, k0 = s.kv0 * D, nk_l = s.kv_heads * D;
  std::vector<layer> layers;
  for (index_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const context<B>& lc = place.context_of(l);
    // braced initialisation runs left to right
    layers.push_back(layer{ck.load<float>(lc, p + "input_layernorm.weight", {H}),
                           vec(lc, p + "self_attn.attn_sub_norm.weight", nq, q0, nq_l),
                           stack(lc,
                                 {part(p + "self_attn.q_proj", nq, q0, nq_l),
                                  part(p + "self_attn.k_proj", nk, k0, nk_l, kv_replicas),
                                  part(p + "self_attn.v_proj", nk, k0, nk_l, kv_replicas)},
                                 H, 0, H, 0),
                           stack(lc, {part(p + "self_attn.o_proj", H, 0, H)}, nq, q0, q0 + nq_l, extra),
                           ck.load<float>(lc, p + "post_attention_layernorm.weight", {H}),
                           vec(lc, p + "mlp.ffn_sub_norm.weight", I, s.i0, s.ffn),
                           stack(lc, {part(p + "mlp.gate_proj", I, s.i0, s.ffn), part(p + "mlp.up_proj", I, s.i0, s.ffn)},
                                 H, 0, H, 0),
                           stack(lc, {part(p + "mlp.down_proj", H, 0, H)}, I, s.i0, s.i0 + s.ffn, extra)});
  }
  auto embed = detail::load_table(place.first(), ck, "model.embed_tokens.weight", V, H, s.v0, s.v0 + s.vocab,
                                  opt.lm_head, opt.max_block_bytes);
  auto norm = ck.load<float>(place.last(), "model.norm.weight", {H});
  // Some tied checkpoints still carry lm_head.weight; an untied one must. Tied over a
  // pipeline whose last stage is on another context: the table loaded there too.
  const bool tied = cfg.tie_word_embeddings && !ck.contains("lm_head.weight");
  table<B> head = tied && place.first() == place.last()
                      ? embed  // shares the embedding's storage
                      : detail::load_table(place.last(), ck, tied ? "model.embed_tokens.weight" : "lm_head.weight", V, H,
                                           s.v0, s.v0 + s.vocab, opt.lm_head, opt.max_block_bytes);
  return model(ctx, cfg, std::move(embed), std::move(layers), std::move(norm), std::move(head), opt, std::move(tp),
               std::move(pp));
}

template <class B>
model<B>::model(const context<B>& ctx, const config& cfg, table<B> embed, std::vector<layer> layers,
                tensor<float, B> norm, table<B> lm_head, load_options opt, models::tensor_parallel<B> tp,
                models::pipeline<B> pp)
    : cfg_(cfg), embed_(std::move(embed)), layers_(std::move(layers)), norm_(std::move(norm)),
      head_(std::move(lm_head)), tp_(std::move(tp)),
      shard_(models::tp_shard::of(name, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size,
                                  cfg.vocab_size, tp_.rank, tp_.size)),
      place_(models::placement<B>::of(name, ctx, pp, cfg.num_hidden_layers)) {
  if (static_cast<index_t>(layers_.size()) != cfg_.num_hidden_layers) {
    throw shape_error("kiln::bitnet::model: " + std::to_string(layers_.size()) + " layers for a config of " +
                      std::to_string(cfg_.num_hidden_layers));
  }
  if (shard_.split() && (!tp_.all_reduce_sum || !tp_.all_gather)) {
    throw value_error("kiln::bitnet::model: tensor parallelism over " + std::to_string(shard_.ranks) +
                      " ranks without its all_reduce_sum and all_gather");
  }
  // this rank's shares (alone: the whole model); split, wo and wdown have one more column
  const index_t H = cfg_.hidden_size, I = shard_.ffn, D = cfg_.head_dim, extra = shard_.split() ? 1 : 0;
  const index_t nq = shard_.q_heads * D, nk = shard_.kv_heads * D;
  const auto fail = [](const std::string& what, index_t rows, index_t cols) {
    throw shape_error("kiln::bitnet::model: " + what + " must be [" + std::to_string(rows) + ", " + std::to_string(cols) +
                      "] in row blocks");
  };
  const auto check = [&](const ternary_matrix<B>& w, index_t rows, index_t cols, const char* what) {
    bool ok = w.rows() == rows && rows > 0;
    for (const auto& b : w.blocks) ok = ok && b.cols() == cols;
    if (!ok) fail(what, rows, cols);
  };
  const auto check_table = [&](const table<B>& t, const char* what) {
    bool ok = t.rows() == shard_.vocab;
    t.t16b.for_each_block([&](const auto& b) { ok = ok && b.shape()[1] == H; });
    t.t16h.for_each_block([&](const auto& b) { ok = ok && b.shape()[1] == H; });
    if (!ok) fail(what, shard_.vocab, H);
  };
  const auto check_vec = [&](const tensor<float, B>& v, index_t n, const char* what) {
    if (!v.defined() || v.shape() != shape{n}) {
      throw shape_error("kiln::bitnet::model: " + std::string(what) + " must be [" + std::to_string(n) + "]");
    }
  };
  check_table(embed_, "the embedding");
  check_table(head_, "the LM head");
  check_vec(norm_, H, "the final norm");
  for (const auto& L : layers_) {
    check(L.wqkv, nq + 2 * nk, H, "wqkv");
    check(L.wo, H, nq + extra, "wo");
    check(L.wgu, 2 * I, H, "wgu");
    check(L.wdown, H, I + extra, "wdown");
    check_vec(L.attn_norm, H, "input_layernorm");
    check_vec(L.attn_sub_norm, nq, "attn_sub_norm");
    check_vec(L.mlp_norm, H, "post_attention_layernorm");
    check_vec(L.ffn_sub_norm, I, "ffn_sub_norm");
  }
  place_.require_on(name, "the final norm", norm_, place_.last());
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    place_.require_on(name, "layer " + std::to_string(l) + "'s input_layernorm", layers_[l].attn_norm,
                      place_.context_of(static_cast<index_t>(l)));
  }
  capacity_ = opt.max_len > 0 ? opt.max_len : std::min<index_t>(cfg_.max_position_embeddings, 4096);
  caches_.reserve(layers_.size());
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    caches_.emplace_back(place_.context_of(static_cast<index_t>(l)), 1, shard_.kv_heads, capacity_, cfg_.head_dim);
  }
}

template <class B>
tensor<float, B> model<B>::forward(std::span<const std::int32_t> ids, bool all_positions) {
  const index_t n = static_cast<index_t>(ids.size());
  this->check_tokens(ids, cfg_.vocab_size);
  const index_t H = cfg_.hidden_size, I = shard_.ffn, D = cfg_.head_dim, extra = shard_.split() ? 1 : 0;
  const index_t Hq = shard_.q_heads, Hkv = shard_.kv_heads;  // this rank's (alone: all)
  const index_t nq = Hq * D, nk = Hkv * D;
  const float eps = cfg_.rms_norm_eps;
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), static_cast<std::int32_t>(pos_));
  const rope_options rope_opt{.theta = cfg_.rope_theta};
  attention_options att_opt;
  att_opt.causal = true;

  auto h = empty<float>(place_.first(), {n, H});
  embed(h, ids);
  // each stage's layers on its context (one stage unless loaded with a pipeline)
  place_.run(h, [&](const context<B>& ctx, index_t first, index_t end) {
    const auto pos = from_host(ctx, shape{n}, std::span<const std::int32_t>(p));
    auto x = empty<float>(ctx, {n, H});
    auto xa = empty<float>(ctx, {n, nq + extra});
    auto xm = empty<float>(ctx, {n, I + extra});
    auto qkv = empty<float>(ctx, {n, nq + 2 * nk});
    auto att = empty<float>(ctx, {1, n, Hq, D});
    auto gu = empty<float>(ctx, {n, 2 * I});
    const auto heads = [&](index_t first_head, index_t count) {
      return transpose(reshape(slice(qkv, 1, first_head, first_head + count * D), {1, n, count, D}), 1, 2);
    };
    auto att_heads = transpose(att, 1, 2);
    const auto att_rows = reshape(att, {n, nq});
    const auto gate = slice(gu, 1, 0, I), up = slice(gu, 1, I, 2 * I);
    for (index_t l = first; l < end; ++l) {
      const layer& L = layers_[static_cast<std::size_t>(l)];
      auto& cache = caches_[static_cast<std::size_t>(l)];
      x = rms_norm(h, L.attn_norm, eps);
      detail::project(qkv, x, L.wqkv, false);
      cache.append(rope(heads(nq, Hkv), pos, rope_opt), heads(nq + nk, Hkv));
      att_heads = attention(rope(heads(0, Hq), pos, rope_opt), cache.k(), cache.v(), att_opt);
      sub_norm_project(h, xa, att_rows, L.attn_sub_norm, L.wo, cfg_.num_attention_heads * D);
      x = rms_norm(h, L.mlp_norm, eps);
      detail::project(gu, x, L.wgu, false);
      sub_norm_project(h, xm, square(relu(gate)) * up, L.ffn_sub_norm, L.wdown, cfg_.intermediate_size);
    }
  });
  pos_ += n;
  const auto rows = all_positions ? h : slice(h, 0, n - 1, n);
  auto xf = empty<float>(place_.last(), rows.shape());
  xf = rms_norm(rows, norm_, eps);
  return logits_of(xf);
}

template <class B>
tensor<float, B> model<B>::forward(paged_kv_cache<float, B>& cache, std::span<const models::batch_entry> batch) {
  place_.require_one(name, "forward (batched)");
  const auto st = this->plan_batch(cache, batch, cfg_.vocab_size, cfg_.num_hidden_layers, shard_.kv_heads,
                                   cfg_.head_dim);
  const auto& ctx = place_.first();
  const index_t n = st.rows, H = cfg_.hidden_size, I = shard_.ffn, D = cfg_.head_dim, extra = shard_.split() ? 1 : 0;
  const index_t Hq = shard_.q_heads, Hkv = shard_.kv_heads;  // this rank's (alone: all)
  const index_t nq = Hq * D, nk = Hkv * D;
  const float eps = cfg_.rms_norm_eps;
  const rope_options rope_opt{.theta = cfg_.rope_theta};

  auto h = empty<float>(ctx, {n, H});
  embed(h, st.ids);
  auto x = empty<float>(ctx, {n, H});
  auto xa = empty<float>(ctx, {n, nq + extra});
  auto xm = empty<float>(ctx, {n, I + extra});
  auto qkv = empty<float>(ctx, {n, nq + 2 * nk});
  auto qr = empty<float>(ctx, {n, Hq, D});
  auto kr = empty<float>(ctx, {n, Hkv, D});
  auto att = empty<float>(ctx, {n, Hq, D});
  auto gu = empty<float>(ctx, {n, 2 * I});
  const auto att_rows = reshape(att, {n, nq});
  const auto gate = slice(gu, 1, 0, I), up = slice(gu, 1, I, 2 * I);
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const layer& L = layers_[l];
    x = rms_norm(h, L.attn_norm, eps);
    detail::project(qkv, x, L.wqkv, false);
    this->paged_layer_attention(cache, static_cast<index_t>(l), st, qkv, qr, kr, att, Hq, Hkv, D, rope_opt);
    sub_norm_project(h, xa, att_rows, L.attn_sub_norm, L.wo, cfg_.num_attention_heads * D);
    x = rms_norm(h, L.mlp_norm, eps);
    detail::project(gu, x, L.wgu, false);
    sub_norm_project(h, xm, square(relu(gate)) * up, L.ffn_sub_norm, L.wdown, cfg_.intermediate_size);
  }
  if (st.want.empty()) return empty<float>(ctx, {0, cfg_.vocab_size});
  return logits_of(this->wanted_rows(st, h, norm_, eps));
}

// kiln's own programs link kiln_llama_instances, which compiles this decoder once
// (src/llama_instances_{cpu,vulkan}.cpp) beside the Llama ones and defines
// KILN_LLAMA_INSTANCES for them; other programs instantiate as usual.
#if defined(KILN_LLAMA_INSTANCES)
extern template class model<cpu<>>;
#if KILN_LLAMA_INSTANCES_VULKAN
extern template class model<vulkan>;
#endif
#endif

}  // namespace kiln::bitnet
