// kiln/text/detail/regex.hpp — the regular expressions of tokenizer.json through PCRE2.
// Patterns are compiled in UTF + UCP mode (\s, \w, \d, \p{..} are Unicode, as in the
// Oniguruma engine Hugging Face's tokenizers use) and JIT-compiled where the platform
// allows; subjects are checked for UTF-8 once, by the tokenizer, before they get here.
#pragma once

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/text/detail/unicode.hpp"
#include "kiln/text/error.hpp"

namespace kiln::text::detail {

/// One compiled pattern; const member functions may be called from several threads.
class regex {
 public:
  /// literal: the pattern is a plain string (a tokenizer.json {"String": ...} pattern).
  regex(std::string_view pattern, bool literal, const std::string& where) : source_(pattern) {
    int err = 0;
    PCRE2_SIZE off = 0;
    // PCRE2_LITERAL takes no UCP (nothing in a literal depends on it)
    const std::uint32_t opts = PCRE2_UTF | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), opts, &err, &off, nullptr);
    if (!code) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(err, buf, sizeof buf);
      throw tokenizer_error(where + ": regex '" + std::string(pattern) + "' does not compile at offset " +
                            std::to_string(off) + ": " + reinterpret_cast<const char*>(buf));
    }
    code_.reset(code);
    jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  }

  const std::string& source() const noexcept { return source_; }

  /// Every non-overlapping match of the pattern in s, as [begin, end) byte offsets, left
  /// to right; after an empty match the search goes on one character further.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view s) const {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for_each_match(s, [&](std::size_t b, std::size_t e) { out.emplace_back(b, e); });
    return out;
  }

  template <class F>
  void for_each_match(std::string_view s, F&& f) const {
    thread_state& ts = state();
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    std::size_t pos = 0;
    while (pos <= s.size()) {
      const int rc = jit_ ? pcre2_jit_match(code_.get(), subject, s.size(), pos, 0, ts.data, ts.context)
                          : pcre2_match(code_.get(), subject, s.size(), pos, PCRE2_NO_UTF_CHECK, ts.data, ts.context);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(rc, buf, sizeof buf);
        throw tokenizer_error("kiln::text: regex '" + source_ + "': match failed: " + reinterpret_cast<const char*>(buf));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ts.data);
      const std::size_t b = ov[0], e = ov[1];
      f(b, e);
      if (e > b) {
        pos = e;
      } else {
        if (e >= s.size()) break;
        pos = e + utf8_len(static_cast<unsigned char>(s[e]));
      }
    }
  }

 private:
  struct code_deleter {
    void operator()(pcre2_code* c) const noexcept { pcre2_code_free(c); }
  };
  // Match data and a JIT stack per thread: the default 32 KiB JIT stack is too small for
  // patterns such as \s+(?!\S) over long whitespace runs, and allocating them per call
  // would cost more than the match.
  struct thread_state {
    pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    thread_state() { pcre2_jit_stack_assign(context, nullptr, stack); }
    ~thread_state() {
      pcre2_jit_stack_free(stack);
      pcre2_match_context_free(context);
      pcre2_match_data_free(data);
    }
    thread_state(const thread_state&) = delete;
    thread_state& operator=(const thread_state&) = delete;
  };
  static thread_state& state() {
    thread_local thread_state ts;
    return ts;
  }

  std::string source_;
  std::unique_ptr<pcre2_code, code_deleter> code_;
  bool jit_ = false;
};

}  // namespace kiln::text::detail
