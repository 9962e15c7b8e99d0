// kiln/text/tokenizer.hpp — text to token ids and back, from Hugging Face tokenizer.json.
// The main header of kiln/text (link kiln::text): a tokenizer is built from the format's
// components (normalizer, pre_tokenizer, BPE model, post_processor, decoder, added tokens)
// and tokenizer_config.json's special-token names; decode_stream turns ids into text
// piece by piece without ever cutting a UTF-8 character.
#pragma once

#include <algorithm>  // std::max
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/text/added_vocabulary.hpp"
#include "kiln/text/bpe.hpp"
#include "kiln/text/decoder.hpp"
#include "kiln/text/detail/json.hpp"
#include "kiln/text/detail/unicode.hpp"
#include "kiln/text/error.hpp"
#include "kiln/text/normalizer.hpp"
#include "kiln/text/post_processor.hpp"
#include "kiln/text/pre_tokenizer.hpp"

namespace kiln::text {

/// What tokenizer_config.json says beside tokenizer.json (every field optional).
struct tokenizer_config {
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;
  /// The chat template (the one named "default" where the file holds several); stored
  /// for a template renderer, never rendered here.
  std::optional<std::string> chat_template;
  /// Every named template where the file holds a list of {name, template}.
  std::map<std::string, std::string> chat_templates;
  /// transformers' post-decode clean-up (" ." -> "."); decode's default.
  bool clean_up_tokenization_spaces = false;
};

/// Options of tokenizer::decode.
struct decode_options {
  bool skip_special_tokens = false;
  /// Unset: the config's clean_up_tokenization_spaces.
  std::optional<bool> clean_up_tokenization_spaces;
};

class decode_stream;

/// A tokenizer loaded from tokenizer.json. encode and decode are const and may run on
/// several threads at once. Throws tokenizer_error on a file it cannot use (the message
/// names the file and the component) and vocabulary_error on an id it does not know.
///
///   auto tok = kiln::text::tokenizer::from_pretrained("models/llama-3");
///   std::vector<std::uint32_t> ids = tok.encode("Hello world");   // with <|begin_of_text|>
///   std::string text = tok.decode(ids);
class tokenizer {
 public:
  /// A model directory (tokenizer.json, and tokenizer_config.json where there is one) or a
  /// tokenizer.json file (its folder's tokenizer_config.json is read too, if present).
  static tokenizer from_pretrained(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    fs::path file = path;
    std::error_code ec;
    if (fs::is_directory(path, ec)) file = path / "tokenizer.json";
    tokenizer t = from_file(file);
    const fs::path config = file.parent_path() / "tokenizer_config.json";
    if (fs::is_regular_file(config, ec)) t.load_config(config);
    return t;
  }

  /// One tokenizer.json file.
  static tokenizer from_file(const std::filesystem::path& file) {
    return from_json(read_file(file), file.string());
  }

  /// tokenizer.json's text; name is what error messages call the file.
  static tokenizer from_json(std::string_view json_text, const std::string& name = "tokenizer.json") {
    tokenizer t;
    t.init(parse(json_text, name), name);
    return t;
  }

  /// Reads tokenizer_config.json (special-token names, add_bos/eos_token, chat template).
  void load_config(const std::filesystem::path& file) { load_config_json(read_file(file), file.string()); }
  void load_config_json(std::string_view json_text, const std::string& name = "tokenizer_config.json");

  /// Token ids of text (UTF-8), with the post-processor's special tokens unless
  /// add_special_tokens is false.
  std::vector<std::uint32_t> encode(std::string_view text, bool add_special_tokens = true) const;

  /// The text of ids; throws vocabulary_error for an id outside the vocabulary.
  std::string decode(std::span<const std::uint32_t> ids, const decode_options& options = {}) const;

  /// A streaming decoder over this tokenizer (which must outlive it).
  decode_stream stream(bool skip_special_tokens = false) const;

  /// Forgets the BPE model's cache of encoded words (encode fills it again).
  void clear_cache() const { model_->clear_cache(); }

  /// Model vocabulary plus added tokens: one more than the largest id.
  std::size_t vocab_size() const noexcept { return vocab_size_; }
  std::optional<std::uint32_t> token_to_id(std::string_view token) const {
    if (auto it = added_by_content_.find(std::string(token)); it != added_by_content_.end()) return added_[it->second].id;
    return model_->token_to_id(token);
  }
  /// The token string of an id; throws vocabulary_error where there is none.
  const std::string& id_to_token(std::uint32_t id) const {
    if (auto it = added_by_id_.find(id); it != added_by_id_.end()) return added_[it->second].content;
    if (const std::string* t = model_->id_to_token(id)) return *t;
    throw vocabulary_error("kiln::text: " + name_ + ": id " + std::to_string(id) + " is outside the vocabulary (size " +
                           std::to_string(vocab_size_) + ")");
  }
  bool is_special(std::uint32_t id) const {
    auto it = added_by_id_.find(id);
    return it != added_by_id_.end() && added_[it->second].special;
  }
  const std::vector<added_token>& added_tokens() const noexcept { return added_; }
  const tokenizer_config& config() const noexcept { return config_; }

  /// Ids of the config's special tokens, where it names them and they exist.
  std::optional<std::uint32_t> bos_id() const { return config_id(config_.bos_token); }
  std::optional<std::uint32_t> eos_id() const { return config_id(config_.eos_token); }
  std::optional<std::uint32_t> pad_id() const { return config_id(config_.pad_token); }
  std::optional<std::uint32_t> unk_id() const { return config_id(config_.unk_token); }

 private:
  tokenizer() = default;

  static std::string read_file(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw tokenizer_error("kiln::text: " + file.string() + ": cannot open the file");
    std::ostringstream ss;
    ss << in.rdbuf();
    return std::move(ss).str();
  }
  static detail::json parse(std::string_view text, const std::string& name) {
    try {
      return detail::json::parse(text);
    } catch (const detail::json::parse_error& e) {
      throw tokenizer_error("kiln::text: " + name + ": bad JSON: " + e.what());
    }
  }
  std::optional<std::uint32_t> config_id(const std::optional<std::string>& t) const {
    return t ? token_to_id(*t) : std::nullopt;
  }

  void init(const detail::json& j, const std::string& name);
  void encode_text(std::string_view text, bool at_start, std::vector<std::uint32_t>& out) const;
  void encode_normalized(std::string text, bool at_start, std::vector<std::uint32_t>& out) const;

  std::string name_;
  std::unique_ptr<normalizer> normalizer_;
  std::unique_ptr<pre_tokenizer> pre_tokenizer_;
  std::unique_ptr<bpe_model> model_;
  std::unique_ptr<post_processor> post_processor_;
  std::unique_ptr<decoder> decoder_;
  std::vector<added_token> added_;
  std::unordered_map<std::uint32_t, std::size_t> added_by_id_;
  std::unordered_map<std::string, std::size_t> added_by_content_;
  detail::token_matcher raw_matcher_;         // tokens with normalized = false
  detail::token_matcher normalized_matcher_;  // tokens with normalized = true, normalized
  std::size_t vocab_size_ = 0;
  tokenizer_config config_;
};

/// Ids in, text out, one id at a time: step() returns the text that the ids so far add,
/// and holds back bytes that do not yet make a whole UTF-8 character (it returns ""
/// then). Decoding with the context of the previous token keeps the decoders' first-token
/// rules (Metaspace, Strip) from applying in the middle of the text.
///
///   auto s = tok.stream();
///   for (std::uint32_t id : generated) std::cout << s.step(id) << std::flush;
///   std::cout << s.finish();
class decode_stream {
 public:
  decode_stream(const tokenizer& t, bool skip_special_tokens) : tok_(&t), options_{skip_special_tokens, false} {}

  std::string step(std::uint32_t id) {
    ids_.push_back(id);
    std::string text = tok_->decode(ids_, options_);
    if (text.size() <= prefix_.size() || text.ends_with("\xEF\xBF\xBD")) return {};
    if (text.compare(0, prefix_.size(), prefix_) != 0)
      throw tokenizer_error("kiln::text: decode_stream: the decoder rewrote text it had already given out");
    std::string fresh = text.substr(prefix_.size());
    const std::size_t next_prefix_index = ids_.size() - prefix_index_;
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_index_));
    prefix_ = tok_->decode(ids_, options_);
    prefix_index_ = next_prefix_index;
    return fresh;
  }

  /// What is still held back (an unfinished character decodes as U+FFFD); then empty.
  std::string finish() {
    std::string text = tok_->decode(ids_, options_);
    std::string rest = text.size() > prefix_.size() && text.compare(0, prefix_.size(), prefix_) == 0 ? text.substr(prefix_.size()) : std::string();
    ids_.clear();
    prefix_.clear();
    prefix_index_ = 0;
    return rest;
  }

 private:
  const tokenizer* tok_;
  decode_options options_;
  std::vector<std::uint32_t> ids_;
  std::string prefix_;
  std::size_t prefix_index_ = 0;
};

inline decode_stream tokenizer::stream(bool skip_special_tokens) const { return decode_stream(*this, skip_special_tokens); }

inline void tokenizer::init(const detail::json& j, const std::string& name) {
  using namespace detail;
  name_ = name;
  const std::string where = "kiln::text: " + name + ": ";
  if (!j.is_object()) fail(where + "tokenizer", "the file must hold a JSON object");
  if (const json* n = find(j, "normalizer")) normalizer_ = make_normalizer(*n, where + "normalizer");
  if (const json* p = find(j, "pre_tokenizer")) pre_tokenizer_ = make_pre_tokenizer(*p, where + "pre_tokenizer");
  const json* m = find(j, "model");
  if (!m) fail(where + "model", "no \"model\"");
  std::string model_type = m->is_object() ? get_string_or(*m, "type", "", where + "model") : "";
  // files older than the "type" field: a BPE is the one with merges
  if (model_type.empty() && m->is_object() && m->contains("merges")) model_type = "BPE";
  if (model_type == "BPE") {
    model_ = std::make_unique<bpe_model>(*m, where + "model");
  } else if (model_type == "WordPiece" || model_type == "Unigram" || model_type == "WordLevel") {
    fail(where + "model", "unsupported model type '" + model_type + "' (kiln::text reads BPE models)");
  } else {
    fail(where + "model", "unknown model type '" + model_type + "'");
  }
  if (const json* p = find(j, "post_processor")) post_processor_ = make_post_processor(*p, where + "post_processor");
  if (const json* d = find(j, "decoder")) decoder_ = make_decoder(*d, where + "decoder");

  vocab_size_ = model_->vocab_size();
  if (const json* a = find(j, "added_tokens")) {
    if (!a->is_array()) fail(where + "added_tokens", "must be an array");
    for (const auto& e : *a) {
      const std::string here = where + "added_tokens";
      added_token t;
      t.content = get_string(e, "content", here);
      const auto id = get_int_or(e, "id", -1, here);
      if (id < 0) fail(here, "token '" + t.content + "' needs a non-negative \"id\"");
      t.id = static_cast<std::uint32_t>(id);
      t.special = get_bool_or(e, "special", false, here);
      t.lstrip = get_bool_or(e, "lstrip", false, here);
      t.rstrip = get_bool_or(e, "rstrip", false, here);
      t.single_word = get_bool_or(e, "single_word", false, here);
      t.normalized = get_bool_or(e, "normalized", !t.special, here);
      if (t.content.empty()) fail(here, "a token with id " + std::to_string(id) + " has empty content");
      if (invalid_utf8_at(t.content) != std::string::npos) fail(here, "token " + std::to_string(id) + " is not UTF-8");
      added_by_id_[t.id] = added_.size();
      added_by_content_[t.content] = added_.size();
      vocab_size_ = std::max<std::size_t>(vocab_size_, std::size_t{t.id} + 1);
      added_.push_back(std::move(t));
    }
  }
  for (std::size_t k = 0; k < added_.size(); ++k) {
    const added_token& t = added_[k];
    if (!t.normalized || !normalizer_) raw_matcher_.add(t.content, static_cast<int>(k));
    else normalized_matcher_.add(normalizer_->normalize(t.content), static_cast<int>(k));
  }
}

inline void tokenizer::load_config_json(std::string_view json_text, const std::string& name) {
  using namespace detail;
  const json j = parse(json_text, name);
  const std::string where = "kiln::text: " + name;
  if (!j.is_object()) fail(where, "the file must hold a JSON object");
  tokenizer_config c;
  auto token_name = [&](const char* key) -> std::optional<std::string> {
    const json* v = find(j, key);
    if (!v) return std::nullopt;
    if (v->is_string()) return v->get<std::string>();
    if (v->is_object()) return get_string(*v, "content", where + ": " + key);
    fail(where + ": " + key, "must be a string or {\"content\": ...}");
  };
  c.bos_token = token_name("bos_token");
  c.eos_token = token_name("eos_token");
  c.pad_token = token_name("pad_token");
  c.unk_token = token_name("unk_token");
  if (find(j, "add_bos_token")) c.add_bos_token = get_bool_or(j, "add_bos_token", false, where);
  if (find(j, "add_eos_token")) c.add_eos_token = get_bool_or(j, "add_eos_token", false, where);
  c.clean_up_tokenization_spaces = get_bool_or(j, "clean_up_tokenization_spaces", false, where);
  if (const json* t = find(j, "chat_template")) {
    if (t->is_string()) {
      c.chat_template = t->get<std::string>();
    } else if (t->is_array()) {
      for (const auto& e : *t) c.chat_templates[get_string(e, "name", where + ": chat_template")] = get_string(e, "template", where + ": chat_template");
      if (auto it = c.chat_templates.find("default"); it != c.chat_templates.end()) c.chat_template = it->second;
    } else {
      fail(where + ": chat_template", "must be a string or a list of {name, template}");
    }
  }
  config_ = std::move(c);
}

inline void tokenizer::encode_normalized(std::string text, bool at_start, std::vector<std::uint32_t>& out) const {
  std::vector<piece> pieces;
  pieces.push_back({std::move(text), at_start});
  if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces);
  for (const auto& p : pieces) model_->encode(p.text, out);
}

inline void tokenizer::encode_text(std::string_view text, bool at_start, std::vector<std::uint32_t>& out) const {
  std::string norm = normalizer_ ? normalizer_->normalize(std::string(text)) : std::string(text);
  if (norm.empty()) return;
  if (normalized_matcher_.empty()) {
    encode_normalized(std::move(norm), at_start, out);
    return;
  }
  for (const auto& seg : normalized_matcher_.split(norm, added_)) {
    if (seg.token >= 0) out.push_back(added_[static_cast<std::size_t>(seg.token)].id);
    else if (seg.end > seg.begin) encode_normalized(norm.substr(seg.begin, seg.end - seg.begin), at_start && seg.begin == 0, out);
  }
}

inline std::vector<std::uint32_t> tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const auto bad = detail::invalid_utf8_at(text); bad != std::string_view::npos)
    throw tokenizer_error("kiln::text: " + name_ + ": encode: the text is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  std::vector<std::uint32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (raw_matcher_.empty()) {
    encode_text(text, true, ids);
  } else {
    for (const auto& seg : raw_matcher_.split(text, added_)) {
      if (seg.token >= 0) ids.push_back(added_[static_cast<std::size_t>(seg.token)].id);
      else if (seg.end > seg.begin) encode_text(text.substr(seg.begin, seg.end - seg.begin), seg.begin == 0, ids);
    }
  }
  if (post_processor_) post_processor_->process(ids, add_special_tokens);
  return ids;
}

inline std::string tokenizer::decode(std::span<const std::uint32_t> ids, const decode_options& options) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::uint32_t id : ids) {
    if (auto it = added_by_id_.find(id); it != added_by_id_.end()) {
      if (options.skip_special_tokens && added_[it->second].special) continue;
      tokens.push_back(added_[it->second].content);
    } else {
      tokens.push_back(id_to_token(id));
    }
  }
  std::string text;
  if (decoder_) {
    decoder_->decode_chain(tokens);
    for (const auto& t : tokens) text += t;
  } else {
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      if (k) text += ' ';
      text += tokens[k];
    }
  }
  if (options.clean_up_tokenization_spaces.value_or(config_.clean_up_tokenization_spaces))
    text = detail::clean_up_tokenization(std::move(text));
  return text;
}

}  // namespace kiln::text
