// kiln/text/added_vocabulary.hpp — tokenizer.json "added_tokens": split out of the text
// before normalisation (or after it, for tokens marked "normalized"), leftmost-longest,
// honouring single_word, lstrip and rstrip.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/text/detail/unicode.hpp"

namespace kiln::text {

/// One entry of "added_tokens".
struct added_token {
  std::string content;
  std::uint32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool single_word = false;
};

namespace detail {

/// A byte trie over a set of added tokens, matched leftmost-longest.
class token_matcher {
 public:
  /// A piece of the split: a token (index >= 0) or text (index -1), as a byte range.
  struct segment {
    std::size_t begin, end;
    int token;
  };

  void add(std::string_view pattern, int token) {
    if (pattern.empty()) return;
    first_[static_cast<unsigned char>(pattern[0])] = true;
    int node = 0;
    for (unsigned char c : pattern) {
      const std::uint64_t k = (static_cast<std::uint64_t>(node) << 8) | c;
      auto it = edges_.find(k);
      if (it == edges_.end()) {
        it = edges_.emplace(k, static_cast<int>(terminal_.size())).first;
        terminal_.push_back(-1);
      }
      node = it->second;
    }
    if (terminal_[node] < 0) terminal_[node] = token;
    empty_ = false;
  }
  bool empty() const noexcept { return empty_; }

  /// Splits s into text and token segments (text segments may be empty-free but are
  /// never dropped: the caller skips empty ones).
  std::vector<segment> split(std::string_view s, const std::vector<added_token>& tokens) const {
    std::vector<segment> out;
    std::size_t text_begin = 0;  // start of the pending text segment
    std::size_t i = 0;
    while (i < s.size()) {
      if (!first_[static_cast<unsigned char>(s[i])]) {
        ++i;
        continue;
      }
      int node = 0, best = -1;
      std::size_t best_end = 0;
      for (std::size_t j = i; j < s.size(); ++j) {
        auto it = edges_.find((static_cast<std::uint64_t>(node) << 8) | static_cast<unsigned char>(s[j]));
        if (it == edges_.end()) break;
        node = it->second;
        if (terminal_[node] >= 0) {
          best = terminal_[node];
          best_end = j + 1;
        }
      }
      if (best < 0) {
        ++i;
        continue;
      }
      const added_token& t = tokens[static_cast<std::size_t>(best)];
      std::size_t b = i, e = best_end;
      if (t.single_word) {
        bool word_before = false, word_after = false;
        if (b > 0) {
          std::size_t k = b;
          word_before = is_word_char(prev_cp(s, k));
        }
        if (e < s.size()) {
          std::size_t k = e;
          word_after = is_word_char(next_cp(s, k));
        }
        if (word_before || word_after) {
          i = e;  // the match is consumed without effect, as a leftmost-longest scan does
          continue;
        }
      }
      if (t.lstrip) {
        while (b > text_begin) {
          std::size_t k = b;
          if (!is_whitespace(prev_cp(s, k))) break;
          b = k;
        }
      }
      if (t.rstrip) {
        while (e < s.size()) {
          std::size_t k = e;
          if (!is_whitespace(next_cp(s, k))) break;
          e = k;
        }
      }
      if (b > text_begin) out.push_back({text_begin, b, -1});
      out.push_back({b, e, best});
      text_begin = i = e;
    }
    if (text_begin < s.size()) out.push_back({text_begin, s.size(), -1});
    return out;
  }

 private:
  std::unordered_map<std::uint64_t, int> edges_;
  std::vector<int> terminal_{-1};  // node 0 is the root
  std::array<bool, 256> first_{};
  bool empty_ = true;
};

}  // namespace detail
}  // namespace kiln::text
