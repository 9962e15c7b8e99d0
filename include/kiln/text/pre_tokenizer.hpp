// kiln/text/pre_tokenizer.hpp — tokenizer.json "pre_tokenizer" components.
// Split (PCRE2 regex or string; Removed / Isolated / MergedWithPrevious / MergedWithNext /
// Contiguous; invert), ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit,
// Punctuation and Sequence. Each turns a list of pieces into a finer list of pieces.
#pragma once

#include <algorithm>  // std::reverse
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/text/detail/json.hpp"
#include "kiln/text/detail/regex.hpp"
#include "kiln/text/detail/unicode.hpp"

namespace kiln::text {

/// A piece of pre-tokenized text. at_start: it begins where the input text began (what
/// Metaspace's prepend_scheme "first" asks).
struct piece {
  std::string text;
  bool at_start = false;
};

/// One pre-tokenization step.
class pre_tokenizer {
 public:
  virtual ~pre_tokenizer() = default;
  virtual void pre_tokenize(std::vector<piece>& pieces) const = 0;
};

/// How a Split keeps the parts its pattern matched.
enum class split_behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

namespace detail {

/// GPT-2's byte-to-character table: printable Latin-1 bytes stand for themselves, the
/// others for U+0100 onwards, so that every byte string is a string of visible characters.
struct byte_level_table {
  std::array<std::string, 256> to_text;  // byte -> its character, UTF-8
  std::array<int, 0x200> to_byte{};      // character -> byte, or -1
  byte_level_table() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(to_text[b], c);
      to_byte[c] = b;
    }
  }
  static const byte_level_table& get() {
    static const byte_level_table t;
    return t;
  }
};

/// Cuts one piece at the given matches according to the behaviour (Hugging Face's
/// SplitDelimiterBehavior), appending the non-empty results to out.
inline void split_piece(const piece& p, const std::vector<std::pair<std::size_t, std::size_t>>& matches,
                        split_behavior behavior, bool invert, std::vector<piece>& out) {
  struct part {
    std::size_t b, e;
    bool is_match;
  };
  std::vector<part> parts;
  parts.reserve(matches.size() * 2 + 1);
  std::size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev != b) parts.push_back({prev, b, false});
    parts.push_back({b, e, true});
    prev = e;
  }
  if (prev != p.text.size()) parts.push_back({prev, p.text.size(), false});
  if (invert)
    for (auto& q : parts) q.is_match = !q.is_match;

  std::vector<std::pair<std::size_t, std::size_t>> spans;
  spans.reserve(parts.size());
  switch (behavior) {
    case split_behavior::removed:
      for (const auto& q : parts)
        if (!q.is_match) spans.emplace_back(q.b, q.e);
      break;
    case split_behavior::isolated:
      for (const auto& q : parts) spans.emplace_back(q.b, q.e);
      break;
    case split_behavior::merged_with_previous: {
      bool previous_match = false;
      for (const auto& q : parts) {
        if (q.is_match && !previous_match && !spans.empty()) spans.back().second = q.e;
        else spans.emplace_back(q.b, q.e);
        previous_match = q.is_match;
      }
      break;
    }
    case split_behavior::merged_with_next: {
      bool previous_match = false;  // walking right to left: "previous" is the one to the right
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !previous_match && !spans.empty()) spans.back().first = it->b;
        else spans.emplace_back(it->b, it->e);
        previous_match = it->is_match;
      }
      std::reverse(spans.begin(), spans.end());
      break;
    }
    case split_behavior::contiguous: {
      bool previous_match = false;
      for (const auto& q : parts) {
        if (q.is_match == previous_match && !spans.empty()) spans.back().second = q.e;
        else spans.emplace_back(q.b, q.e);
        previous_match = q.is_match;
      }
      break;
    }
  }
  for (const auto& [b, e] : spans)
    if (e > b) out.push_back({p.text.substr(b, e - b), p.at_start && b == 0});
}

/// Applies a per-piece function that returns the matches of that piece.
template <class MatchFn>
void split_all(std::vector<piece>& pieces, split_behavior behavior, bool invert, MatchFn&& match) {
  std::vector<piece> out;
  out.reserve(pieces.size() * 2);
  for (const auto& p : pieces) split_piece(p, match(p.text), behavior, invert, out);
  pieces = std::move(out);
}

inline split_behavior parse_behavior(const std::string& s, const std::string& where) {
  if (s == "Removed") return split_behavior::removed;
  if (s == "Isolated") return split_behavior::isolated;
  if (s == "MergedWithPrevious") return split_behavior::merged_with_previous;
  if (s == "MergedWithNext") return split_behavior::merged_with_next;
  if (s == "Contiguous") return split_behavior::contiguous;
  fail(where, "unknown split behavior '" + s + "'");
}

class split_pre_tokenizer final : public pre_tokenizer {
 public:
  split_pre_tokenizer(pattern p, split_behavior b, bool invert) : pattern_(std::move(p)), behavior_(b), invert_(invert) {}
  void pre_tokenize(std::vector<piece>& pieces) const override {
    split_all(pieces, behavior_, invert_, [&](const std::string& s) { return pattern_.re->find_all(s); });
  }

 private:
  pattern pattern_;
  split_behavior behavior_;
  bool invert_;
};

/// Cuts at characters for which pred holds: each one a match of its own, or runs of them.
template <class Pred>
std::vector<std::pair<std::size_t, std::size_t>> char_matches(std::string_view s, bool runs, Pred&& pred) {
  std::vector<std::pair<std::size_t, std::size_t>> m;
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t b = i;
    const char32_t c = next_cp(s, i);
    if (!pred(c)) continue;
    if (runs && !m.empty() && m.back().second == b) m.back().second = i;
    else m.emplace_back(b, i);
  }
  return m;
}

class digits_pre_tokenizer final : public pre_tokenizer {
 public:
  explicit digits_pre_tokenizer(bool individual) : individual_(individual) {}
  void pre_tokenize(std::vector<piece>& pieces) const override {
    split_all(pieces, individual_ ? split_behavior::isolated : split_behavior::contiguous, false,
              [](const std::string& s) { return char_matches(s, false, is_numeric); });
  }

 private:
  bool individual_;
};

class punctuation_pre_tokenizer final : public pre_tokenizer {
 public:
  explicit punctuation_pre_tokenizer(split_behavior b) : behavior_(b) {}
  void pre_tokenize(std::vector<piece>& pieces) const override {
    split_all(pieces, behavior_, false, [](const std::string& s) { return char_matches(s, false, is_punctuation); });
  }

 private:
  split_behavior behavior_;
};

class whitespace_split_pre_tokenizer final : public pre_tokenizer {
 public:
  void pre_tokenize(std::vector<piece>& pieces) const override {
    split_all(pieces, split_behavior::removed, false, [](const std::string& s) { return char_matches(s, true, is_whitespace); });
  }
};

/// Whitespace: the runs of \w+ and of [^\w\s]+ are the pieces; the rest goes.
class whitespace_pre_tokenizer final : public pre_tokenizer {
 public:
  whitespace_pre_tokenizer() : re_(R"(\w+|[^\w\s]+)", false, "kiln::text: Whitespace pre_tokenizer") {}
  void pre_tokenize(std::vector<piece>& pieces) const override {
    split_all(pieces, split_behavior::removed, true, [&](const std::string& s) { return re_.find_all(s); });
  }

 private:
  regex re_;
};

class byte_level_pre_tokenizer final : public pre_tokenizer {
 public:
  byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space),
        re_(use_regex ? std::make_unique<regex>(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
                                                 false, "kiln::text: ByteLevel pre_tokenizer")
                      : nullptr) {}
  void pre_tokenize(std::vector<piece>& pieces) const override {
    if (add_prefix_space_)
      for (auto& p : pieces)
        if (p.text.empty() || p.text[0] != ' ') p.text.insert(p.text.begin(), ' ');
    if (re_) split_all(pieces, split_behavior::isolated, false, [&](const std::string& s) { return re_->find_all(s); });
    const auto& table = byte_level_table::get();
    for (auto& p : pieces) {
      // every byte maps to one or two UTF-8 bytes: size once, then write
      std::size_t n = 0;
      for (unsigned char b : p.text) n += table.to_text[b].size();
      std::string mapped(n, '\0');
      char* w = mapped.data();
      for (unsigned char b : p.text) {
        const std::string& t = table.to_text[b];
        *w++ = t[0];
        if (t.size() == 2) *w++ = t[1];
      }
      p.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<regex> re_;
};

enum class prepend_scheme { always, first, never };

class metaspace_pre_tokenizer final : public pre_tokenizer {
 public:
  metaspace_pre_tokenizer(std::string replacement, prepend_scheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void pre_tokenize(std::vector<piece>& pieces) const override {
    std::vector<piece> out;
    out.reserve(pieces.size());
    for (auto& p : pieces) {
      std::string s;
      s.reserve(p.text.size() + replacement_.size());
      for (char c : p.text) {
        if (c == ' ') s += replacement_;
        else s += c;
      }
      const bool starts = s.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == prepend_scheme::always || (scheme_ == prepend_scheme::first && p.at_start)))
        s.insert(0, replacement_);
      piece q{std::move(s), p.at_start};
      if (!split_) {
        out.push_back(std::move(q));
        continue;
      }
      std::vector<std::pair<std::size_t, std::size_t>> m;
      for (std::size_t k = q.text.find(replacement_); k != std::string::npos; k = q.text.find(replacement_, k + replacement_.size()))
        m.emplace_back(k, k + replacement_.size());
      split_piece(q, m, split_behavior::merged_with_next, false, out);
    }
    pieces = std::move(out);
  }

 private:
  std::string replacement_;
  prepend_scheme scheme_;
  bool split_;
};

class sequence_pre_tokenizer final : public pre_tokenizer {
 public:
  explicit sequence_pre_tokenizer(std::vector<std::unique_ptr<pre_tokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<piece>& pieces) const override {
    for (const auto& s : steps_) s->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<pre_tokenizer>> steps_;
};

inline prepend_scheme metaspace_scheme(const json& j, const std::string& where) {
  if (const json* v = find(j, "prepend_scheme")) {
    if (!v->is_string()) fail(where, "field \"prepend_scheme\" must be a string");
    const auto s = v->get<std::string>();
    if (s == "always") return prepend_scheme::always;
    if (s == "first") return prepend_scheme::first;
    if (s == "never") return prepend_scheme::never;
    fail(where, "unknown prepend_scheme '" + s + "'");
  }
  // files written before prepend_scheme existed say add_prefix_space
  return get_bool_or(j, "add_prefix_space", true, where) ? prepend_scheme::always : prepend_scheme::never;
}

/// Builds a pre-tokenizer from its JSON; where is "kiln::text: <file>: pre_tokenizer".
inline std::unique_ptr<pre_tokenizer> make_pre_tokenizer(const json& j, const std::string& where) {
  const std::string type = type_of(j, where);
  const std::string here = where + " '" + type + "'";
  if (type == "Split") {
    return std::make_unique<split_pre_tokenizer>(get_pattern(j, "pattern", here),
                                                 parse_behavior(get_string(j, "behavior", here), here),
                                                 get_bool_or(j, "invert", false, here));
  }
  if (type == "ByteLevel")
    return std::make_unique<byte_level_pre_tokenizer>(get_bool_or(j, "add_prefix_space", true, here), get_bool_or(j, "use_regex", true, here));
  if (type == "Metaspace") {
    std::string rep = get_string_or(j, "replacement", "\xE2\x96\x81", here);
    if (rep.empty()) fail(here, "empty replacement");
    return std::make_unique<metaspace_pre_tokenizer>(std::move(rep), metaspace_scheme(j, here), get_bool_or(j, "split", true, here));
  }
  if (type == "Digits") return std::make_unique<digits_pre_tokenizer>(get_bool_or(j, "individual_digits", false, here));
  if (type == "Whitespace") return std::make_unique<whitespace_pre_tokenizer>();
  if (type == "WhitespaceSplit") return std::make_unique<whitespace_split_pre_tokenizer>();
  if (type == "Punctuation")
    return std::make_unique<punctuation_pre_tokenizer>(parse_behavior(get_string_or(j, "behavior", "Isolated", here), here));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<pre_tokenizer>> steps;
    std::size_t k = 0;
    for (const auto& e : get_array(j, "pretokenizers", here))
      steps.push_back(make_pre_tokenizer(e, where + "s[" + std::to_string(k++) + "]"));
    return std::make_unique<sequence_pre_tokenizer>(std::move(steps));
  }
  if (type == "BertPreTokenizer" || type == "CharDelimiterSplit" || type == "UnicodeScripts" || type == "FixedLength")
    fail(where, "unsupported pre_tokenizer type '" + type + "'");
  fail(where, "unknown pre_tokenizer type '" + type + "'");
}

}  // namespace detail
}  // namespace kiln::text
