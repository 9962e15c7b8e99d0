// kiln/text/stop_strings.hpp — kiln::text::stop_strings: ends generation at the first of
// some strings in the decoded text (llama.cpp's --stop, transformers' stop_strings),
// fed the pieces a decode_stream gives out.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/text/error.hpp"

namespace kiln::text {

/// Matches stop strings across the pieces of streamed text: push() returns the text that
/// is safe to show, holding back a tail that could begin a stop string; once one is found
/// stopped() is true and the text shown ends just before it (the stop string itself is
/// never shown). A match may span any number of pieces. Throws tokenizer_error for an
/// empty stop string.
///
///   kiln::text::stop_strings stop({"\nUser:"});
///   for (id : ...) { std::cout << stop.push(stream.step(id)); if (stop.stopped()) break; }
///   std::cout << stop.finish();
class stop_strings {
 public:
  explicit stop_strings(std::vector<std::string> stops = {}) : stops_(std::move(stops)) {
    for (const std::string& s : stops_)
      if (s.empty()) throw tokenizer_error("kiln::text::stop_strings: a stop string is empty");
  }

  /// The text of `piece` (with what was held back) that can be shown now.
  std::string push(std::string_view piece) {
    if (stopped_) return {};
    held_ += piece;
    std::size_t first = std::string::npos;
    for (const std::string& s : stops_) {
      const std::size_t at = held_.find(s);
      if (at < first) {
        first = at;
        matched_ = s;
      }
    }
    if (first != std::string::npos) {
      stopped_ = true;
      std::string out = held_.substr(0, first);
      held_.clear();
      return out;
    }
    // hold back the longest tail that is a proper prefix of a stop string
    std::size_t keep = 0;
    for (const std::string& s : stops_) {
      for (std::size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
        if (std::string_view(held_).substr(held_.size() - n) == std::string_view(s).substr(0, n)) {
          keep = n;
          break;
        }
      }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }

  /// The end of the text: what was held back (nothing after a stop).
  std::string finish() {
    std::string out = stopped_ ? std::string() : held_;
    held_.clear();
    return out;
  }

  bool stopped() const noexcept { return stopped_; }
  /// The stop string found (empty before one is).
  const std::string& matched() const noexcept { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_, matched_;
  bool stopped_ = false;
};

}  // namespace kiln::text
