// kiln/text/decoder.hpp — tokenizer.json "decoder" components.
// ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, WordPiece, BPEDecoder and
// Sequence, each a step over the list of token strings (Hugging Face's decode_chain);
// the tokenizer joins what the last step leaves.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/text/detail/json.hpp"
#include "kiln/text/detail/unicode.hpp"
#include "kiln/text/pre_tokenizer.hpp"  // detail::byte_level_table, prepend_scheme

namespace kiln::text {

/// One decoding step over token strings.
class decoder {
 public:
  virtual ~decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

namespace detail {

/// Clean-up of English tokenisation artefacts (" ." -> ".", " n't" -> "n't", ...), as
/// transformers' clean_up_tokenization does it.
inline std::string clean_up_tokenization(std::string s) {
  static const std::pair<const char*, const char*> rules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : rules) s = replace_all(s, from, to);
  return s;
}

class byte_level_decoder final : public decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    const auto& table = byte_level_table::get();
    std::string bytes;
    for (const auto& t : tokens) {
      const std::size_t mark = bytes.size();
      bool ok = true;
      std::size_t i = 0;
      while (i < t.size()) {
        const char32_t c = next_cp(t, i);
        const int b = c < table.to_byte.size() ? table.to_byte[c] : -1;
        if (b < 0) {
          ok = false;
          break;
        }
        bytes += static_cast<char>(b);
      }
      if (!ok) {  // a token outside the byte alphabet (an added token) stands for itself
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class replace_decoder final : public decoder {
 public:
  replace_decoder(pattern p, std::string content) : pattern_(std::move(p)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) t = replace_all(t, pattern_, content_);
  }

 private:
  pattern pattern_;
  std::string content_;
};

/// <0xAB> tokens become their bytes; a run of them that is not UTF-8 gives one U+FFFD per
/// byte (Hugging Face's rule).
class byte_fallback_decoder final : public decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    std::size_t run_tokens = 0;
    auto flush = [&] {
      if (run_tokens == 0) return;
      if (invalid_utf8_at(run) == std::string::npos) {
        out.push_back(run);
      } else {
        for (std::size_t k = 0; k < run_tokens; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_tokens = 0;
    };
    for (auto& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
        const int hi = hex(t[3]), lo = hex(t[4]);
        if (hi >= 0 && lo >= 0) byte = hi * 16 + lo;
      }
      if (byte >= 0) {
        run += static_cast<char>(byte);
        ++run_tokens;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class fuse_decoder final : public decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

/// Strip: removes up to `start` leading and `stop` trailing occurrences of one character.
class strip_decoder final : public decoder {
 public:
  strip_decoder(std::string content, std::size_t start, std::size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::size_t b = 0, e = t.size();
      for (std::size_t k = 0; k < start_ && t.compare(b, content_.size(), content_) == 0 && b < e; ++k) b += content_.size();
      for (std::size_t k = 0; k < stop_ && e >= b + content_.size() && t.compare(e - content_.size(), content_.size(), content_) == 0; ++k)
        e -= content_.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  std::size_t start_, stop_;
};

/// Metaspace: the replacement character becomes a space, except in the first token, where
/// it is dropped unless the prepend scheme is "never" (Hugging Face's rule).
class metaspace_decoder final : public decoder {
 public:
  metaspace_decoder(std::string replacement, prepend_scheme scheme) : replacement_(std::move(replacement)), scheme_(scheme) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const std::string_view with = i == 0 && scheme_ != prepend_scheme::never ? "" : " ";
      tokens[i] = replace_all(tokens[i], replacement_, with);
    }
  }

 private:
  std::string replacement_;
  prepend_scheme scheme_;
};

class word_piece_decoder final : public decoder {
 public:
  word_piece_decoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix_.size(), prefix_) == 0) t.erase(0, prefix_.size());
        else t.insert(0, " ");
      }
      if (cleanup_) t = clean_up_tokenization(std::move(t));
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class bpe_decoder final : public decoder {
 public:
  explicit bpe_decoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const std::string_view with = i + 1 == tokens.size() ? "" : " ";
      tokens[i] = replace_all(tokens[i], suffix_, with);
    }
  }

 private:
  std::string suffix_;
};

class sequence_decoder final : public decoder {
 public:
  explicit sequence_decoder(std::vector<std::unique_ptr<decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& s : steps_) s->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<decoder>> steps_;
};

/// Builds a decoder from its JSON; where is "kiln::text: <file>: decoder".
inline std::unique_ptr<decoder> make_decoder(const json& j, const std::string& where) {
  const std::string type = type_of(j, where);
  const std::string here = where + " '" + type + "'";
  if (type == "ByteLevel") return std::make_unique<byte_level_decoder>();
  if (type == "Replace") return std::make_unique<replace_decoder>(get_pattern(j, "pattern", here), get_string(j, "content", here));
  if (type == "ByteFallback") return std::make_unique<byte_fallback_decoder>();
  if (type == "Fuse") return std::make_unique<fuse_decoder>();
  if (type == "Strip") {
    const std::string content = get_string(j, "content", here);
    std::size_t cp = 0, n = 0;
    while (cp < content.size()) {
      cp += utf8_len(static_cast<unsigned char>(content[cp]));
      ++n;
    }
    if (n != 1) fail(here, "\"content\" must be one character");
    const auto start = get_int_or(j, "start", 0, here), stop = get_int_or(j, "stop", 0, here);
    if (start < 0 || stop < 0) fail(here, "\"start\" and \"stop\" must not be negative");
    return std::make_unique<strip_decoder>(content, static_cast<std::size_t>(start), static_cast<std::size_t>(stop));
  }
  if (type == "Metaspace") {
    std::string rep = get_string_or(j, "replacement", "\xE2\x96\x81", here);
    if (rep.empty()) fail(here, "empty replacement");
    return std::make_unique<metaspace_decoder>(std::move(rep), metaspace_scheme(j, here));
  }
  if (type == "WordPiece")
    return std::make_unique<word_piece_decoder>(get_string_or(j, "prefix", "##", here), get_bool_or(j, "cleanup", true, here));
  if (type == "BPEDecoder") return std::make_unique<bpe_decoder>(get_string_or(j, "suffix", "</w>", here));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<decoder>> steps;
    std::size_t k = 0;
    for (const auto& e : get_array(j, "decoders", here)) steps.push_back(make_decoder(e, where + "s[" + std::to_string(k++) + "]"));
    return std::make_unique<sequence_decoder>(std::move(steps));
  }
  if (type == "CTC") fail(where, "unsupported decoder type '" + type + "'");
  fail(where, "unknown decoder type '" + type + "'");
}

}  // namespace detail
}  // namespace kiln::text
