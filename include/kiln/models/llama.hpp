// kiln/models/llama.hpp — a Llama-architecture decoder (Llama 2, TinyLlama, SmolLM, Llama
// 3 without rope scaling) built from kiln's ops, loading Hugging Face checkpoint
// directories: config.json and one or more *.safetensors files with the Hugging Face
// tensor names (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ...).
//
// Opt-in like kiln/io/safetensors.hpp: link kiln::io (nlohmann-json parses config.json).
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
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/io/safetensors.hpp"
#include "kiln/kiln.hpp"

namespace kiln::llama {

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
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw format_error("kiln::llama: " + where + ": not valid JSON: " + e.what());
    }
    if (!j.is_object()) throw format_error("kiln::llama: " + where + ": the top level is not a JSON object");
    const auto fail = [&](const std::string& why) { throw format_error("kiln::llama: " + where + ": " + why); };
    const auto integer = [&](const char* key, std::optional<index_t> fallback) -> index_t {
      if (!j.contains(key) || j[key].is_null()) {
        if (!fallback) fail(std::string("'") + key + "' is missing");
        return *fallback;
      }
      if (!j[key].is_number_integer()) fail(std::string("'") + key + "' is not an integer: " + j[key].dump());
      const auto v = j[key].get<std::int64_t>();
      if (v <= 0 || v > (std::int64_t(1) << 31)) fail(std::string("'") + key + "' = " + std::to_string(v) + " is out of range");
      return static_cast<index_t>(v);
    };
    const auto number = [&](const char* key, float fallback) -> float {
      if (!j.contains(key) || j[key].is_null()) return fallback;
      if (!j[key].is_number()) fail(std::string("'") + key + "' is not a number: " + j[key].dump());
      const double v = j[key].get<double>();
      if (!(v > 0.0) || !std::isfinite(v)) fail(std::string("'") + key + "' = " + j[key].dump() + " must be positive");
      return static_cast<float>(v);
    };
    config c;
    c.hidden_size = integer("hidden_size", std::nullopt);
    c.intermediate_size = integer("intermediate_size", std::nullopt);
    c.num_hidden_layers = integer("num_hidden_layers", std::nullopt);
    c.num_attention_heads = integer("num_attention_heads", std::nullopt);
    c.num_key_value_heads = integer("num_key_value_heads", c.num_attention_heads);
    c.vocab_size = integer("vocab_size", std::nullopt);
    c.max_position_embeddings = integer("max_position_embeddings", index_t(2048));
    if (c.hidden_size % c.num_attention_heads != 0 && !(j.contains("head_dim") && !j["head_dim"].is_null())) {
      fail("hidden_size " + std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads " +
           std::to_string(c.num_attention_heads) + " and there is no head_dim");
    }
    c.head_dim = integer("head_dim", c.hidden_size / c.num_attention_heads);
    c.rms_norm_eps = number("rms_norm_eps", 1e-6f);
    c.rope_theta = number("rope_theta", 10000.0f);
    if (j.contains("tie_word_embeddings") && !j["tie_word_embeddings"].is_null()) {
      if (!j["tie_word_embeddings"].is_boolean()) fail("'tie_word_embeddings' is not a boolean");
      c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
    }
    if (c.num_attention_heads % c.num_key_value_heads != 0) {
      fail("num_attention_heads " + std::to_string(c.num_attention_heads) + " is not a multiple of num_key_value_heads " +
           std::to_string(c.num_key_value_heads));
    }
    if (c.head_dim % 2 != 0) fail("head_dim " + std::to_string(c.head_dim) + " is odd; rotary embedding needs pairs");
    if (j.contains("hidden_act") && j["hidden_act"] != "silu") {
      fail("hidden_act " + j["hidden_act"].dump() + " is not supported (this decoder implements silu, SwiGLU)");
    }
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
      const auto& r = j["rope_scaling"];
      const std::string type = r.is_object() ? r.value("rope_type", r.value("type", std::string("?"))) : std::string("?");
      if (type != "default") fail("rope_scaling " + r.dump() + " is not supported (plain RoPE only)");
    }
    for (const char* key : {"attention_bias", "mlp_bias"}) {
      if (j.contains(key) && j[key].is_boolean() && j[key].get<bool>()) {
        fail(std::string("'") + key + "' = true is not supported (Llama has no projection biases)");
      }
    }
    return c;
  }

  /// Reads and parses the file at path.
  static config load(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw error("kiln::llama: cannot open " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return parse(ss.str(), path);
  }

  /// Weight elements (embedding, every layer, final norm, LM head unless tied).
  std::int64_t parameters() const noexcept {
    const std::int64_t H = hidden_size, I = intermediate_size, D = head_dim;
    const std::int64_t layer = H * D * (num_attention_heads + 2 * num_key_value_heads) + num_attention_heads * D * H +
                               3 * H * I + 2 * H;
    return vocab_size * H * (tie_word_embeddings ? 1 : 2) + num_hidden_layers * layer + H;
  }
};

/// How the projection weights are kept (load_options::quant).
enum class weight_quant {
  none,  // dtype W
  int8,  // kiln::quant::int8, a scale per row
  int4,  // kiln::quant::int4, a scale per 32 weights (every K must be a multiple of 32)
};

/// Options of model::load.
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
          throw shape_error("kiln::llama: int4 weights need in_features to be a multiple of 32; " + what + " has " +
                            std::to_string(b.shape()[1]) + " (use int8)");
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

/// The tensors of a checkpoint, from one or several safetensors files of a directory.
class checkpoint {
 public:
  /// Opens every *.safetensors file of dir (sharded checkpoints too; each name must be in
  /// one file only). Throws kiln::format_error when there is none or a name repeats.
  explicit checkpoint(const std::string& dir) : dir_(dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw error("kiln::llama: " + dir + " is not a directory");
    std::vector<std::string> paths;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".safetensors") paths.push_back(e.path().string());
    }
    if (ec) throw error("kiln::llama: cannot list " + dir + ": " + ec.message());
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) throw format_error("kiln::llama: " + dir + " holds no *.safetensors file");
    for (const auto& p : paths) {
      files_.push_back(std::make_unique<safetensors::file>(safetensors::open(p)));
      for (const auto& n : files_.back()->names()) {
        const auto [it, fresh] = where_.emplace(n, files_.size() - 1);
        if (!fresh) throw format_error("kiln::llama: tensor '" + n + "' is in both " + files_[it->second]->path() + " and " + p);
      }
    }
  }

  bool contains(const std::string& name) const { return where_.count(name) != 0; }

  const safetensors::tensor_info& info(const std::string& name) const { return file_of(name).info(name); }

  /// Rows [r0, r1) of the tensor called name (whose shape must be want) as dtype W on
  /// ctx's device, converted from the stored float dtype (F32, F16, BF16) when it differs.
  /// A 1-D tensor's rows are its elements.
  template <element W, class B>
  tensor<W, B> load_rows(const context<B>& ctx, const std::string& name, const shape& want, index_t r0,
                         index_t r1) const {
    const auto& f = file_of(name);
    const auto& i = f.info(name);
    const shape got{std::span<const index_t>(i.shape.data(), i.shape.size())};
    if (got != want) {
      throw format_error("kiln::llama: " + f.path() + ": '" + name + "' is " + got.to_string() + ", the config needs " +
                         want.to_string());
    }
    if (want.rank() == 0) throw format_error("kiln::llama: " + f.path() + ": '" + name + "' must not be 0-d");
    const index_t cols = want.rank() > 1 ? want.numel() / std::max<index_t>(want[0], 1) : 1;
    std::vector<index_t> ext(want.begin(), want.end());
    ext[0] = r1 - r0;
    const shape out{std::span<const index_t>(ext)};
    const auto upload = [&](auto stored) {
      using S = decltype(stored);
      const std::byte* p = f.bytes(name).data() + static_cast<std::size_t>(r0 * cols) * sizeof(S);
      const auto n = static_cast<std::size_t>((r1 - r0) * cols);
      std::vector<S> copy;
      std::span<const S> src;
      if (reinterpret_cast<std::uintptr_t>(p) % alignof(S) == 0) {
        src = std::span<const S>(reinterpret_cast<const S*>(p), n);  // straight from the mapping
      } else {  // safetensors does not align data: copy to aligned memory first
        copy.resize(n);
        std::memcpy(copy.data(), p, n * sizeof(S));
        src = copy;
      }
      if constexpr (std::is_same_v<S, W>) {
        return from_host(ctx, out, src);
      } else {
        auto t = empty<W>(ctx, out);
        t = cast<W>(from_host(ctx, out, src));
        return t;
      }
    };
    if (i.dtype == "F32") return upload(float{});
    if (i.dtype == "F16") return upload(half{});
    if (i.dtype == "BF16") return upload(bfloat16{});
    throw format_error("kiln::llama: " + f.path() + ": '" + name + "' is stored as " + i.dtype +
                       "; weights must be F32, F16 or BF16");
  }

  /// The whole tensor (see load_rows).
  template <element W, class B>
  tensor<W, B> load(const context<B>& ctx, const std::string& name, const shape& want) const {
    return load_rows<W>(ctx, name, want, 0, want.rank() > 0 ? want[0] : 1);
  }

  const std::string& dir() const noexcept { return dir_; }

 private:
  const safetensors::file& file_of(const std::string& name) const {
    const auto it = where_.find(name);
    if (it == where_.end()) throw format_error("kiln::llama: no tensor '" + name + "' in " + dir_);
    return *files_[it->second];
  }

  std::string dir_;
  std::vector<std::unique_ptr<safetensors::file>> files_;
  std::map<std::string, std::size_t> where_;
};

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

/// A Llama decoder with weights of dtype W on backend B, and its KV cache (one sequence).
template <class W, class B>
class model {
  static_assert(is_floating_v<W>, "kiln::llama::model: weights must be float, kiln::half or kiln::bfloat16");

 public:
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
  static model load(const context<B>& ctx, const std::string& dir, load_options opt = {}) {
    const config cfg = config::load((std::filesystem::path(dir) / "config.json").string());
    const checkpoint ck(dir);
    const index_t H = cfg.hidden_size, I = cfg.intermediate_size, D = cfg.head_dim, V = cfg.vocab_size;
    const index_t nq = cfg.num_attention_heads * D, nk = cfg.num_key_value_heads * D;
    // [A; B; ...] stacked along the rows, in row blocks, converted to W on the way
    using part = std::pair<std::string, index_t>;  // name, rows
    const auto stack = [&](std::vector<part> parts, index_t cols) {
      index_t rows = 0;
      for (const auto& pr : parts) rows += pr.second;
      return weight::build(rows, cols, opt.max_block_bytes, [&](index_t b0, index_t b1) {
        if (parts.size() == 1) return ck.load_rows<W>(ctx, parts[0].first, {rows, cols}, b0, b1);
        auto blk = empty<W>(ctx, {b1 - b0, cols});
        index_t p0 = 0;
        for (const auto& [name, n] : parts) {
          const index_t o0 = std::max(b0, p0), o1 = std::min(b1, p0 + n);
          if (o0 < o1) {
            auto dst = slice(blk, 0, o0 - b0, o1 - b0);
            dst = ck.load_rows<W>(ctx, name, {n, cols}, o0 - p0, o1 - p0);
          }
          p0 += n;
        }
        return blk;
      });
    };
    std::vector<layer> layers;
    for (index_t l = 0; l < cfg.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      // braced initialisation runs left to right and constructs (tensor assignment would copy)
      layers.push_back(layer{ck.load<W>(ctx, p + "input_layernorm.weight", {H}),
                             stack({{p + "self_attn.q_proj.weight", nq}, {p + "self_attn.k_proj.weight", nk},
                                    {p + "self_attn.v_proj.weight", nk}},
                                   H),
                             stack({{p + "self_attn.o_proj.weight", H}}, nq),
                             ck.load<W>(ctx, p + "post_attention_layernorm.weight", {H}),
                             stack({{p + "mlp.gate_proj.weight", I}, {p + "mlp.up_proj.weight", I}}, H),
                             stack({{p + "mlp.down_proj.weight", H}}, I)});
    }
    auto embed = stack({{"model.embed_tokens.weight", V}}, H);
    auto norm = ck.load<W>(ctx, "model.norm.weight", {H});
    // Some tied checkpoints still carry lm_head.weight; an untied one must.
    weight head = cfg.tie_word_embeddings && !ck.contains("lm_head.weight")
                      ? embed  // shares the embedding's storage (quantized: a copy of its own)
                      : stack({{"lm_head.weight", V}}, H);
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
    return model(ctx, cfg, std::move(embed), std::move(layers), std::move(norm), std::move(head), opt);
  }

  /// A model from weights already on ctx's device (see layer for the stacked layouts).
  /// Throws kiln::shape_error when a weight's shape disagrees with cfg.
  model(const context<B>& ctx, const config& cfg, weight embed, std::vector<layer> layers, tensor<W, B> norm,
        weight lm_head, load_options opt = {})
      : ctx_(&ctx), cfg_(cfg), embed_(std::move(embed)), layers_(std::move(layers)), norm_(std::move(norm)),
        head_(std::move(lm_head)) {
    if (static_cast<index_t>(layers_.size()) != cfg_.num_hidden_layers) {
      throw shape_error("kiln::llama::model: " + std::to_string(layers_.size()) + " layers for a config of " +
                        std::to_string(cfg_.num_hidden_layers));
    }
    const index_t H = cfg_.hidden_size, I = cfg_.intermediate_size, D = cfg_.head_dim;
    const index_t nq = cfg_.num_attention_heads * D, nk = cfg_.num_key_value_heads * D;
    const auto check = [&](const weight& w, index_t rows, index_t cols, const char* what) {
      bool ok = w.rows() == rows && rows > 0;
      w.for_each_block([&](const auto& b) { ok = ok && b.shape().rank() == 2 && b.shape()[1] == cols; });
      if (!ok) {
        throw shape_error("kiln::llama::model: " + std::string(what) + " must be [" + std::to_string(rows) + ", " +
                          std::to_string(cols) + "] in row blocks");
      }
    };
    check(embed_, cfg_.vocab_size, H, "the embedding");
    if (embed_.blocks.empty()) throw shape_error("kiln::llama::model: the embedding must be kept as float row blocks");
    check(head_, cfg_.vocab_size, H, "the LM head");
    for (const auto& L : layers_) {
      check(L.wqkv, nq + 2 * nk, H, "wqkv");
      check(L.wo, H, nq, "wo");
      check(L.wgu, 2 * I, H, "wgu");
      check(L.wdown, H, I, "wdown");
    }
    capacity_ = opt.max_len > 0 ? opt.max_len : std::min<index_t>(cfg_.max_position_embeddings, 4096);
    caches_.reserve(layers_.size());
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      caches_.emplace_back(ctx, 1, cfg_.num_key_value_heads, capacity_, cfg_.head_dim);
    }
  }

  /// Runs ids (new tokens) at the next positions, appending their keys and values to the
  /// cache. Returns float logits [n, vocab] for every new position when all_positions,
  /// else [1, vocab] for the last one. Throws kiln::index_error for an id outside the
  /// vocabulary and kiln::shape_error when the cache would overflow (nothing is changed
  /// then).
  tensor<float, B> forward(std::span<const std::int32_t> ids, bool all_positions = false) {
    const index_t n = static_cast<index_t>(ids.size());
    if (n == 0) throw shape_error("kiln::llama::model::forward: no tokens");
    if (n > capacity() - pos_) {
      throw shape_error("kiln::llama::model::forward: " + std::to_string(n) + " tokens after " + std::to_string(pos_) +
                        " overflow the KV cache of " + std::to_string(capacity()) + " positions (load_options::max_len)");
    }
    for (const auto id : ids) {
      if (id < 0 || id >= cfg_.vocab_size) {
        throw index_error("kiln::llama::model::forward: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                          std::to_string(cfg_.vocab_size) + ")");
      }
    }
    const auto& ctx = *ctx_;
    const index_t H = cfg_.hidden_size, I = cfg_.intermediate_size, D = cfg_.head_dim;
    const index_t Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
    const index_t nq = Hq * D, nk = Hkv * D;
    const float eps = cfg_.rms_norm_eps;
    std::vector<std::int32_t> p(static_cast<std::size_t>(n));
    std::iota(p.begin(), p.end(), static_cast<std::int32_t>(pos_));
    const auto pos = from_host(ctx, shape{n}, std::span<const std::int32_t>(p));
    const rope_options rope_opt{.theta = cfg_.rope_theta};
    attention_options att_opt;
    att_opt.causal = true;

    auto h = empty<float>(ctx, {n, H});
    embed(h, ids);
    auto x = empty<float>(ctx, {n, H});
    auto qkv = empty<float>(ctx, {n, nq + 2 * nk});
    auto att = empty<float>(ctx, {1, n, Hq, D});
    auto gu = empty<float>(ctx, {n, 2 * I});
    // [1, heads, n, D] views of the projections (no copies)
    const auto heads = [&](index_t first, index_t count) {
      return transpose(reshape(slice(qkv, 1, first, first + count * D), {1, n, count, D}), 1, 2);
    };
    auto att_heads = transpose(att, 1, 2);
    const auto att_rows = reshape(att, {n, nq});
    const auto gate = slice(gu, 1, 0, I), up = slice(gu, 1, I, 2 * I);
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const layer& L = layers_[l];
      auto& cache = caches_[l];
      x = rms_norm(h, L.attn_norm, eps);
      project(qkv, x, L.wqkv, false);
      cache.append(rope(heads(nq, Hkv), pos, rope_opt), heads(nq + nk, Hkv));
      att_heads = attention(rope(heads(0, Hq), pos, rope_opt), cache.k(), cache.v(), att_opt);
      project(h, att_rows, L.wo, true);
      x = rms_norm(h, L.mlp_norm, eps);
      project(gu, x, L.wgu, false);
      project(h, silu(gate) * up, L.wdown, true);
    }
    pos_ += n;
    const auto rows = all_positions ? h : slice(h, 0, n - 1, n);
    auto xf = empty<float>(ctx, rows.shape());
    xf = rms_norm(rows, norm_, eps);
    auto logits = empty<float>(ctx, {rows.shape()[0], cfg_.vocab_size});
    project(logits, xf, head_, false);
    return logits;
  }

  /// Greedy generation: feeds prompt (one prefill step), then `steps` - 1 chosen tokens
  /// one at a time; returns the `steps` chosen ids. on_logits(i, logits [1, vocab]) sees
  /// the logits that chose token i. Throws kiln::shape_error before running anything when
  /// the prompt and the fed-back tokens would not fit in the cache.
  template <class F>
  std::vector<std::int32_t> generate(std::span<const std::int32_t> prompt, index_t steps, F&& on_logits) {
    std::vector<std::int32_t> out;
    if (steps <= 0) return out;
    const index_t need = static_cast<index_t>(prompt.size()) + steps - 1;
    if (need > capacity() - pos_) {
      throw shape_error("kiln::llama::model::generate: " + std::to_string(prompt.size()) + " prompt tokens and " +
                        std::to_string(steps) + " steps need " + std::to_string(need) + " cache positions after " +
                        std::to_string(pos_) + "; the cache holds " + std::to_string(capacity()) +
                        " (load_options::max_len)");
    }
    auto logits = forward(prompt);
    for (index_t i = 0;; ++i) {
      on_logits(i, logits);
      out.push_back(argmax_row(logits, 0));
      if (i + 1 == steps) break;
      auto next = forward(std::span<const std::int32_t>(&out.back(), 1));
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
      throw shape_error("kiln::llama::model::rewind: " + std::to_string(n) + " is outside 0 .. " + std::to_string(pos_));
    }
    for (auto& c : caches_) c.truncate(n);
    pos_ = n;
  }

  /// Tokens run so far (the next token's position).
  index_t position() const noexcept { return pos_; }
  /// Positions the KV cache holds (load_options::max_len).
  index_t capacity() const noexcept { return capacity_; }
  const config& cfg() const noexcept { return cfg_; }
  const std::vector<layer>& layers() const noexcept { return layers_; }
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
  /// out[:, r0:r1] = x @ block^T for each row block of w (+ out[:, r0:r1] when residual):
  /// one matmul per block, x (an expression: the SwiGLU product) fused into each.
  template <class X>
  static void project(tensor<float, B>& out, const X& x, const weight& w, bool residual) {
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

  /// h [n, H] = the embedding rows of ids: one gather per row block holding any of them
  /// (each block after the first overwrites only its own tokens' rows).
  void embed(tensor<float, B>& h, std::span<const std::int32_t> ids) const {
    const auto& ctx = *ctx_;
    const index_t n = static_cast<index_t>(ids.size());
    if (embed_.blocks.size() == 1) {
      h = cast<float>(embedding(embed_.blocks[0], from_host(ctx, shape{n}, ids)));
      return;
    }
    bool first = true;
    index_t base = 0;
    for (const auto& b : embed_.blocks) {
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

 private:
  const context<B>* ctx_;
  config cfg_;
  weight embed_;
  std::vector<layer> layers_;
  tensor<W, B> norm_;
  weight head_;
  std::vector<kv_cache<float, B>> caches_;
  index_t capacity_ = 0;
  index_t pos_ = 0;
};

}  // namespace kiln::llama
