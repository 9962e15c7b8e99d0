// kiln/models/llama.hpp — a Llama-architecture decoder (Llama 2, TinyLlama, SmolLM, Llama
// 3 without rope scaling) built from kiln's ops, loading Hugging Face checkpoint
// directories: config.json and one or more *.safetensors files with the Hugging Face
// tensor names (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ...).
//
// Opt-in like kiln/io/safetensors.hpp: link kiln::io (nlohmann-json parses config.json).
//
// Over the parts every architecture shares (namespace kiln::models, each name also
// reachable as kiln::llama::<name>): hf_config.hpp reads config.json, checkpoint.hpp the
// safetensors files, weights.hpp holds the weight matrices (float or int8 / int4 row
// blocks), load_options and the projection, embedding and argmax helpers. This header
// adds the Llama config fields and the decoder.
//
//   kiln::context<kiln::cpu<>> ctx;
//   auto m = kiln::llama::model<float, kiln::cpu<>>::load(ctx, "TinyLlama-1.1B");
//   auto logits = m.forward(prompt_ids);        // [1, vocab]: the last position's logits
//   int next = kiln::llama::argmax_row(logits, 0);
//   logits = m.forward(std::span(&next, 1));    // one decode step on the KV cache
//
// One forward step over n new tokens at positions p .. p + n - 1, per layer (each line is
// one kernel unless said otherwise):
//   x   = rms_norm(h, input_layernorm)
//   qkv = linear(x, [Wq; Wk; Wv])                 q, k, v projections as one matmul
//   cache.append(rope(k), v)                      two kernels (rope and a copy), views of qkv
//   att = attention(rope(q), cache.k(), cache.v(), causal)  rope then attention, written
//                                                 straight into [n, Hq, D] order
//   h   = h + linear(att, Wo)                     residual fused as the epilogue
//   x   = rms_norm(h, post_attention_layernorm)
//   gu  = linear(x, [Wgate; Wup])                 gate and up as one matmul
//   h   = h + linear(silu(gate) * up, Wdown)      SwiGLU fused as the prologue, residual as
//                                                 the epilogue
// then rms_norm(h, model.norm) and the LM head (lm_head.weight, or the embedding when
// tie_word_embeddings). Weights are stored as W (float, kiln::half or kiln::bfloat16),
// converted once at load from whatever float dtype the file holds; activations, the KV
// cache and logits are float32, every product accumulates in float32.
// load_options::quant keeps the projections (q/k/v/o, gate/up/down and the LM head) as
// int8 (a scale per row) or int4 (a scale per 32 weights) instead: kiln::quantize at load,
// the products with activations quantized per row (ops/quant/qmatmul.hpp), the same
// prologue and epilogue fusion. The embedding and the norms stay W.
//
// Tensor parallelism (models/tensor_parallel.hpp; over MPI: kiln/dist/tensor_parallel.hpp):
// load(ctx, dir, opt, tp) keeps this rank's query and kv heads (their rows of Wq, Wk, Wv
// and columns of Wo), its FFN columns (rows of Wgate, Wup, columns of Wdown) and its
// vocabulary rows of the embedding and LM head, read from the mapped files; the KV cache
// holds its kv heads. forward() adds the all-reduce of h after o_proj and after down_proj
// (rank 0 adds the residual, the others only their partial products), embeds through an
// all-reduce and all-gathers the logits: every rank returns the same [n, vocab].
//
// Several devices in one process (models/pipeline.hpp): load(pipeline, dir) or
// load(ctx, dir, opt, tp, pipeline) puts each stage's layers (their weights and KV cache)
// on its context, the embedding on the first stage and the final norm and LM head on the
// last (a tied head: a copy of the embedding there when the two stages differ); forward()
// runs the layer loop stage by stage, the hidden state copied to the next stage's context
// between them, and returns the logits on the last stage's context.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"
#include "kiln/models/checkpoint.hpp"
#include "kiln/models/decoder_state.hpp"
#include "kiln/models/hf_config.hpp"
#include "kiln/models/pipeline.hpp"
#include "kiln/models/tensor_parallel.hpp"
#include "kiln/models/weights.hpp"
#if defined(KILN_LLAMA_INSTANCES) && KILN_LLAMA_INSTANCES_VULKAN
#include "kiln/vulkan.hpp"  // the Vulkan decoders declared extern at the end of this file
#endif

namespace kiln::llama {

// The shared parts under their kiln::llama names.
using models::argmax_row;
using models::checkpoint;
using models::load_options;
using models::matrix;
using models::weight_quant;

/// The hyper-parameters of a Llama checkpoint (Hugging Face's LlamaConfig keys).
struct config {
  index_t hidden_size = 0;
  index_t intermediate_size = 0;
  index_t num_hidden_layers = 0;
  index_t num_attention_heads = 0;
  index_t num_key_value_heads = 0;  // absent in the file: num_attention_heads (no GQA)
  index_t head_dim = 0;             // absent: hidden_size / num_attention_heads
  index_t vocab_size = 0;
  index_t max_position_embeddings = 2048;
  float rms_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
  bool tie_word_embeddings = false;

  /// Reads config.json text. `where` names the file in messages. Throws kiln::format_error
  /// for bad JSON, a missing or non-positive size, heads that do not divide, an odd
  /// head_dim, or a feature this decoder does not implement (rope scaling, attention or
  /// MLP biases, an activation other than silu).
  static config parse(const std::string& text, const std::string& where = "config.json") {
    return from(models::hf_config(text, where, "kiln::llama"));
  }

  /// Reads and parses the file at path.
  static config load(const std::string& path) { return from(models::hf_config::load(path, "kiln::llama")); }

  /// The fields of a parsed config.json (see parse for the errors).
  static config from(const models::hf_config& j) {
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
    c.rope_theta = j.positive("rope_theta", 10000.0f);
    c.tie_word_embeddings = j.boolean("tie_word_embeddings", false);
    if (c.num_attention_heads % c.num_key_value_heads != 0) {
      j.fail("num_attention_heads " + std::to_string(c.num_attention_heads) + " is not a multiple of num_key_value_heads " +
             std::to_string(c.num_key_value_heads));
    }
    if (c.head_dim % 2 != 0) j.fail("head_dim " + std::to_string(c.head_dim) + " is odd; rotary embedding needs pairs");
    if (j.contains("hidden_act") && j["hidden_act"] != "silu") {
      j.fail("hidden_act " + j["hidden_act"].dump() + " is not supported (this decoder implements silu, SwiGLU)");
    }
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
      const auto& r = j["rope_scaling"];
      const std::string type = r.is_object() ? r.value("rope_type", r.value("type", std::string("?"))) : std::string("?");
      if (type != "default") j.fail("rope_scaling " + r.dump() + " is not supported (plain RoPE only)");
    }
    for (const char* key : {"attention_bias", "mlp_bias"}) {
      if (j.contains(key) && j[key].is_boolean() && j[key].get<bool>()) {
        j.fail(std::string("'") + key + "' = true is not supported (Llama has no projection biases)");
      }
    }
    return c;
  }

  /// Weight elements (embedding, every layer, final norm, LM head unless tied).
  std::int64_t parameters() const noexcept {
    const std::int64_t H = hidden_size, I = intermediate_size, D = head_dim;
    const std::int64_t layer = H * D * (num_attention_heads + 2 * num_key_value_heads) + num_attention_heads * D * H +
                               3 * H * I + 2 * H;
    return vocab_size * H * (tie_word_embeddings ? 1 : 2) + num_hidden_layers * layer + H;
  }
};

/// A Llama decoder with weights of dtype W on backend B, and its KV cache (one sequence).
template <class W, class B>
class model : public models::decoder_state<model<W, B>, B> {
  using state = models::decoder_state<model, B>;
  using state::capacity_;
  using state::caches_;
  using state::pos_;

  static_assert(is_floating_v<W>, "kiln::llama::model: weights must be float, kiln::half or kiln::bfloat16");

 public:
  /// The decoder's name in messages (decoder_state's generate and rewind use it).
  static constexpr const char* name = "kiln::llama::model";
  using weight = matrix<W, B>;
  struct layer {
    tensor<W, B> attn_norm;  // [H]
    weight wqkv, wo;         // [Wq; Wk; Wv] stacked: [(Hq + 2 Hkv) D, H]; [H, Hq D]
    tensor<W, B> mlp_norm;   // [H]
    weight wgu, wdown;       // [Wgate; Wup] stacked: [2 I, H]; [H, I]
  };

  /// Loads the checkpoint directory dir (config.json and *.safetensors). Throws
  /// kiln::format_error for a config or a tensor that is missing or has the wrong shape,
  /// naming the file and the tensor.
  /// With tp of more than one rank: this rank's slices only (see the top of this file);
  /// every rank of the group must load the same directory. Throws kiln::shape_error naming
  /// the heads and the ranks when the heads do not split into whole heads per rank.
  /// With pp of several contexts (ctx the first): each stage's layers on its context (see
  /// the top of this file); kiln::shape_error / value_error from models::placement::of
  /// for more stages than layers or bad stage starts.
  static model load(const context<B>& ctx, const std::string& dir, load_options opt = {},
                    models::tensor_parallel<B> tp = {}, models::pipeline<B> pp = {});
  /// The model of dir placed over pp's contexts (a pipeline split; kiln::value_error for
  /// a pipeline without contexts).
  static model load(const models::pipeline<B>& pp, const std::string& dir, load_options opt = {}) {
    if (pp.contexts.empty()) throw value_error(std::string(name) + "::load: a pipeline without contexts");
    return load(pp.contexts.front(), dir, opt, {}, pp);
  }

  /// A model from weights already on ctx's device (see layer for the stacked layouts; with
  /// tp, this rank's slices of them: models::tp_shard; with pp, each layer's on its
  /// stage's context, the embedding on ctx, the first stage's, norm and lm_head on the
  /// last's). Throws kiln::shape_error when a weight's shape disagrees with cfg,
  /// kiln::value_error when a weight is on another context than its stage's.
  model(const context<B>& ctx, const config& cfg, weight embed, std::vector<layer> layers, tensor<W, B> norm,
        weight lm_head, load_options opt = {}, models::tensor_parallel<B> tp = {}, models::pipeline<B> pp = {});

  /// Runs ids (new tokens) at the next positions, appending their keys and values to the
  /// cache. Returns float logits [n, vocab] for every new position when all_positions,
  /// else [1, vocab] for the last one. Throws kiln::index_error for an id outside the
  /// vocabulary and kiln::shape_error when the cache would overflow (nothing is changed
  /// then).
  tensor<float, B> forward(std::span<const std::int32_t> ids, bool all_positions = false);

  /// One step of many unrelated sequences over a paged KV cache (continuous batching):
  /// every entry's tokens run at its sequence's next positions, all rows as one batch
  /// through the projections, norms and MLP (rope at each row's own position); each
  /// sequence's keys and values go into its blocks (kiln::paged_write) and its queries
  /// attend to its own cache through its block table (kiln::paged_attention). Grows each
  /// sequence by its tokens. Returns float logits [m, vocab], one row for each entry with
  /// `logits` set, in batch order (the logits of its last token). The same kernels as
  /// forward(ids): a sequence's logits match its single-sequence run's to float rounding.
  /// The decoder's own KV cache and position are not touched. Throws before changing
  /// anything: see decoder_state::grow_batch (bad ids, context overflow, dead or repeated
  /// sequences, a cache of other dims, kiln::out_of_memory when the pool lacks blocks;
  /// kiln::value_error for a model split over several contexts).
  ///   auto s = cache.add();
  ///   auto logits = m.forward(cache, std::vector<kiln::models::batch_entry>{{s, prompt}});
  tensor<float, B> forward(paged_kv_cache<float, B>& cache, std::span<const models::batch_entry> batch);

  /// A paged KV cache for this decoder on ctx: its layers, kv heads and head dim, blocks
  /// of block_size positions, `blocks` of them or as many as fit in `bytes` (one context:
  /// kiln::value_error for a model split over several).
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
  /// The heads, FFN columns and vocabulary rows this rank holds (all of them alone).
  const models::tp_shard& shard() const noexcept { return shard_; }
  /// The contexts the layers run on (one stage unless loaded with a pipeline).
  const models::placement<B>& placement() const noexcept { return place_; }
  /// Bytes of weights this rank holds (the embedding's included).
  double weight_bytes() const noexcept { return weight_bytes_per_token() + embed_.bytes() * (embed_shared() ? 0 : 1); }
  /// Bytes of weights read per decode step (every matrix once; the embedding row aside).
  double weight_bytes_per_token() const noexcept {
    double n = head_.bytes() + double(norm_.numel()) * double(sizeof(W));
    for (const auto& L : layers_) {
      n += L.wqkv.bytes() + L.wo.bytes() + L.wgu.bytes() + L.wdown.bytes();
      n += double(L.attn_norm.numel() + L.mlp_norm.numel()) * double(sizeof(W));
    }
    return n;
  }

 private:
  bool embed_shared() const noexcept {
    return !embed_.blocks.empty() && !head_.blocks.empty() && embed_.blocks[0].storage() == head_.blocks[0].storage();
  }
  /// After a row-parallel product: the sum of the ranks' partial h (rank 0's holds the residual).
  void reduce(const tensor<float, B>& h) const {
    if (shard_.split()) tp_.all_reduce_sum(h);
  }
  bool residual() const noexcept { return shard_.rank == 0; }
  /// A layer after its attention (att_rows [n, heads * D]), for the contiguous and the
  /// paged forward alike: o_proj into the residual h, then the MLP (rms_norm into x,
  /// gate/up into gu, down of silu(gate) * up into h), each product followed by reduce().
  void finish_layer(tensor<float, B>& h, tensor<float, B>& x, tensor<float, B>& gu, const tensor<float, B>& att_rows,
                    const layer& L) const {
    const index_t I = gu.shape()[1] / 2;
    models::project(h, att_rows, L.wo, residual());
    reduce(h);
    x = rms_norm(h, L.mlp_norm, cfg_.rms_norm_eps);
    models::project(gu, x, L.wgu, false);
    models::project(h, silu(slice(gu, 1, 0, I)) * slice(gu, 1, I, 2 * I), L.wdown, residual());
    reduce(h);
  }
  /// h [n, H] = the embedding rows of ids (split: through an all-reduce).
  void embed(tensor<float, B>& h, std::span<const std::int32_t> ids) const {
    if (!shard_.split()) return models::embed(place_.first(), h, embed_, ids);
    models::embed_split(place_.first(), h, ids, shard_, tp_, [&](tensor<float, B>& out, std::span<const std::int32_t> local) {
      models::embed(place_.first(), out, embed_, local);
    });
  }
  /// The LM head's logits [rows, vocab] of the final hidden rows xf (split: all-gathered).
  tensor<float, B> logits_of(const tensor<float, B>& xf) const {
    const index_t rows = xf.shape()[0];
    if (!shard_.split()) {
      auto logits = empty<float>(place_.last(), {rows, cfg_.vocab_size});
      models::project(logits, xf, head_, false);
      return logits;
    }
    return models::gather_logits(place_.last(), rows, cfg_.vocab_size, shard_, tp_,
                                 [&](tensor<float, B>& out) { models::project(out, xf, head_, false); });
  }

  config cfg_;
  weight embed_;
  std::vector<layer> layers_;
  tensor<W, B> norm_;
  weight head_;
  models::tensor_parallel<B> tp_;
  models::tp_shard shard_;
  models::placement<B> place_;
};

// The decoder's large members, defined out of the class (not inline): a program that links
// kiln_llama_instances compiles them once there (see the end of this file).

template <class W, class B>
model<W, B> model<W, B>::load(const context<B>& ctx, const std::string& dir, load_options opt,
                              models::tensor_parallel<B> tp, models::pipeline<B> pp) {
  const config cfg = config::load((std::filesystem::path(dir) / "config.json").string());
  const index_t H = cfg.hidden_size, I = cfg.intermediate_size, D = cfg.head_dim, V = cfg.vocab_size;
  const index_t nq = cfg.num_attention_heads * D, nk = cfg.num_key_value_heads * D;
  const auto s = models::tp_shard::of(name, cfg.num_attention_heads, cfg.num_key_value_heads, I, V, tp.rank, tp.size);
  const auto place = models::placement<B>::of(name, ctx, pp, cfg.num_hidden_layers);
  const checkpoint ck(dir);
  // this rank's rows [r0, r1) of [A; B; ...] stacked along the rows, columns [c0, c1), in
  // row blocks, converted to W on the way (alone: every row and column), on context c
  const auto part = [](std::string n, index_t rows, index_t r0, index_t count) {
    return models::sliced_part{std::move(n), rows, r0, r0 + count};
  };
  const auto stack = [&](const context<B>& c, std::vector<models::sliced_part> parts, index_t cols, index_t c0,
                         index_t c1) { return models::load_sliced<W>(c, ck, parts, cols, c0, c1, opt.max_block_bytes); };
  const index_t q0 = s.q0 * D, nq_l = s.q_heads * D, k0 = s.kv0 * D, nk_l = s.kv_heads * D;
  std::vector<layer> layers;
  for (index_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const context<B>& lc = place.context_of(l);
    // braced initialisation runs left to right and constructs (tensor assignment would copy)
    layers.push_back(layer{ck.load<W>(lc, p + "input_layernorm.weight", {H}),
                           stack(lc,
                                 {part(p + "self_attn.q_proj.weight", nq, q0, nq_l),
                                  part(p + "self_attn.k_proj.weight", nk, k0, nk_l),
                                  part(p + "self_attn.v_proj.weight", nk, k0, nk_l)},
                                 H, 0, H),
                           stack(lc, {part(p + "self_attn.o_proj.weight", H, 0, H)}, nq, q0, q0 + nq_l),
                           ck.load<W>(lc, p + "post_attention_layernorm.weight", {H}),
                           stack(lc,
                                 {part(p + "mlp.gate_proj.weight", I, s.i0, s.ffn),
                                  part(p + "mlp.up_proj.weight", I, s.i0, s.ffn)},
                                 H, 0, H),
                           stack(lc, {part(p + "mlp.down_proj.weight", H, 0, H)}, I, s.i0, s.i0 + s.ffn)});
  }
  auto embed = stack(place.first(), {part("model.embed_tokens.weight", V, s.v0, s.vocab)}, H, 0, H);
  auto norm = ck.load<W>(place.last(), "model.norm.weight", {H});
  // Some tied checkpoints still carry lm_head.weight; an untied one must. Tied over a
  // pipeline whose last stage is on another context: the embedding rows loaded there too.
  const bool tied = cfg.tie_word_embeddings && !ck.contains("lm_head.weight");
  weight head = tied && place.first() == place.last()
                    ? embed  // shares the embedding's storage (quantized: a copy of its own)
                    : stack(place.last(), {part(tied ? "model.embed_tokens.weight" : "lm_head.weight", V, s.v0, s.vocab)},
                            H, 0, H);
  if (opt.quant != weight_quant::none) {
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const std::string p = "layer " + std::to_string(l) + " ";
      layers[l].wqkv.quantize(opt.quant, p + "q/k/v_proj");
      layers[l].wo.quantize(opt.quant, p + "o_proj");
      layers[l].wgu.quantize(opt.quant, p + "gate/up_proj");
      layers[l].wdown.quantize(opt.quant, p + "down_proj");
    }
    head.quantize(opt.quant, "lm_head");
  }
  return model(ctx, cfg, std::move(embed), std::move(layers), std::move(norm), std::move(head), opt, std::move(tp),
               std::move(pp));
}

template <class W, class B>
model<W, B>::model(const context<B>& ctx, const config& cfg, weight embed, std::vector<layer> layers, tensor<W, B> norm,
                   weight lm_head, load_options opt, models::tensor_parallel<B> tp, models::pipeline<B> pp)
    : cfg_(cfg), embed_(std::move(embed)), layers_(std::move(layers)), norm_(std::move(norm)),
      head_(std::move(lm_head)), tp_(std::move(tp)),
      shard_(models::tp_shard::of(name, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size,
                                  cfg.vocab_size, tp_.rank, tp_.size)),
      place_(models::placement<B>::of(name, ctx, pp, cfg.num_hidden_layers)) {
  if (static_cast<index_t>(layers_.size()) != cfg_.num_hidden_layers) {
    throw shape_error("kiln::llama::model: " + std::to_string(layers_.size()) + " layers for a config of " +
                      std::to_string(cfg_.num_hidden_layers));
  }
  if (shard_.split() && (!tp_.all_reduce_sum || !tp_.all_gather)) {
    throw value_error("kiln::llama::model: tensor parallelism over " + std::to_string(shard_.ranks) +
                      " ranks without its all_reduce_sum and all_gather");
  }
  // this rank's shares (alone: the whole model)
  const index_t H = cfg_.hidden_size, I = shard_.ffn, D = cfg_.head_dim;
  const index_t nq = shard_.q_heads * D, nk = shard_.kv_heads * D;
  const auto check = [&](const weight& w, index_t rows, index_t cols, const char* what) {
    bool ok = w.rows() == rows && rows > 0;
    w.for_each_block([&](const auto& b) { ok = ok && b.shape().rank() == 2 && b.shape()[1] == cols; });
    if (!ok) {
      throw shape_error("kiln::llama::model: " + std::string(what) + " must be [" + std::to_string(rows) + ", " +
                        std::to_string(cols) + "] in row blocks");
    }
  };
  check(embed_, shard_.vocab, H, "the embedding");
  if (embed_.blocks.empty()) throw shape_error("kiln::llama::model: the embedding must be kept as float row blocks");
  check(head_, shard_.vocab, H, "the LM head");
  for (const auto& L : layers_) {
    check(L.wqkv, nq + 2 * nk, H, "wqkv");
    check(L.wo, H, nq, "wo");
    check(L.wgu, 2 * I, H, "wgu");
    check(L.wdown, H, I, "wdown");
  }
  place_.require_on(name, "the embedding", embed_.blocks[0], place_.first());
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

template <class W, class B>
tensor<float, B> model<W, B>::forward(std::span<const std::int32_t> ids, bool all_positions) {
  const index_t n = static_cast<index_t>(ids.size());
  this->check_tokens(ids, cfg_.vocab_size);
  const index_t H = cfg_.hidden_size, I = shard_.ffn, D = cfg_.head_dim;
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
    auto qkv = empty<float>(ctx, {n, nq + 2 * nk});
    auto att = empty<float>(ctx, {1, n, Hq, D});
    auto gu = empty<float>(ctx, {n, 2 * I});
    // [1, heads, n, D] views of the projections (no copies)
    const auto heads = [&](index_t first_head, index_t count) {
      return transpose(reshape(slice(qkv, 1, first_head, first_head + count * D), {1, n, count, D}), 1, 2);
    };
    auto att_heads = transpose(att, 1, 2);
    const auto att_rows = reshape(att, {n, nq});
    for (index_t l = first; l < end; ++l) {
      const layer& L = layers_[static_cast<std::size_t>(l)];
      auto& cache = caches_[static_cast<std::size_t>(l)];
      x = rms_norm(h, L.attn_norm, eps);
      models::project(qkv, x, L.wqkv, false);
      cache.append(rope(heads(nq, Hkv), pos, rope_opt), heads(nq + nk, Hkv));
      att_heads = attention(rope(heads(0, Hq), pos, rope_opt), cache.k(), cache.v(), att_opt);
      finish_layer(h, x, gu, att_rows, L);
    }
  });
  pos_ += n;
  const auto rows = all_positions ? h : slice(h, 0, n - 1, n);
  auto xf = empty<float>(place_.last(), rows.shape());
  xf = rms_norm(rows, norm_, eps);
  return logits_of(xf);
}

template <class W, class B>
tensor<float, B> model<W, B>::forward(paged_kv_cache<float, B>& cache, std::span<const models::batch_entry> batch) {
  place_.require_one(name, "forward (batched)");
  const auto st = this->plan_batch(cache, batch, cfg_.vocab_size, cfg_.num_hidden_layers, shard_.kv_heads,
                                   cfg_.head_dim);
  const auto& ctx = place_.first();
  const index_t n = st.rows, H = cfg_.hidden_size, I = shard_.ffn, D = cfg_.head_dim;
  const index_t Hq = shard_.q_heads, Hkv = shard_.kv_heads;  // this rank's (alone: all)
  const index_t nq = Hq * D, nk = Hkv * D;
  const float eps = cfg_.rms_norm_eps;
  const rope_options rope_opt{.theta = cfg_.rope_theta};

  auto h = empty<float>(ctx, {n, H});
  embed(h, st.ids);
  auto x = empty<float>(ctx, {n, H});
  auto qkv = empty<float>(ctx, {n, nq + 2 * nk});
  auto qr = empty<float>(ctx, {n, Hq, D});   // rope(q)
  auto kr = empty<float>(ctx, {n, Hkv, D});  // rope(k)
  auto att = empty<float>(ctx, {n, Hq, D});
  auto gu = empty<float>(ctx, {n, 2 * I});
  const auto att_rows = reshape(att, {n, nq});
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const layer& L = layers_[l];
    x = rms_norm(h, L.attn_norm, eps);
    models::project(qkv, x, L.wqkv, false);
    this->paged_layer_attention(cache, static_cast<index_t>(l), st, qkv, qr, kr, att, Hq, Hkv, D, rope_opt);
    finish_layer(h, x, gu, att_rows, L);
  }
  if (st.want.empty()) return empty<float>(ctx, {0, cfg_.vocab_size});
  return logits_of(this->wanted_rows(st, h, norm_, eps));
}

// kiln's own programs (tests, benchmarks, examples) link kiln_llama_instances, which
// compiles the decoders they use once (src/llama_instances_{cpu,vulkan}.cpp) and defines
// KILN_LLAMA_INSTANCES for them: their translation units then skip the decoder's
// instantiation (it was most of their compile time). Other programs instantiate as usual.
#if defined(KILN_LLAMA_INSTANCES)
extern template class model<float, cpu<>>;
extern template class model<half, cpu<>>;
extern template class model<bfloat16, cpu<>>;
#if KILN_LLAMA_INSTANCES_VULKAN
extern template class model<float, vulkan>;
extern template class model<half, vulkan>;
extern template class model<bfloat16, vulkan>;
#endif
#endif

}  // namespace kiln::llama
