// kiln/text/detail/unicode.hpp — UTF-8 walking and Unicode properties for the tokenizers.
// Character classes, case mapping and NFC/NFD/NFKC/NFKD come from utf8proc (its tables,
// not hand-written ones); this file only walks bytes and applies the rules on top.
#pragma once

#include <utf8proc.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>  // std::free (utf8proc_map's buffer)
#include <string>
#include <string_view>

namespace kiln::text::detail {

/// Length of the UTF-8 sequence that starts with byte b (1 for a stray continuation byte).
inline std::size_t utf8_len(unsigned char b) noexcept {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return 2;
  if ((b & 0xF0) == 0xE0) return 3;
  if ((b & 0xF8) == 0xF0) return 4;
  return 1;
}

/// Decodes the code point at s[i] (s must be valid UTF-8) and advances i past it.
inline char32_t next_cp(std::string_view s, std::size_t& i) noexcept {
  const auto b = static_cast<unsigned char>(s[i]);
  const std::size_t n = utf8_len(b);
  char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (std::size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return c;
}

/// Decodes the code point that ends at s[i - 1] and moves i back to its first byte.
inline char32_t prev_cp(std::string_view s, std::size_t& i) noexcept {
  std::size_t j = i - 1;
  while (j > 0 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) --j;
  std::size_t k = j;
  const char32_t c = next_cp(s, k);
  i = j;
  return c;
}

inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

/// Length of the well-formed UTF-8 sequence at s[i], or 0 where none starts there
/// (Unicode's table 3-7: no overlongs, no surrogates, nothing above U+10FFFF).
inline std::size_t valid_seq_len(std::string_view s, std::size_t i) noexcept {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const std::size_t n = s.size();
  const unsigned char b = at(i);
  if (b < 0x80) return 1;
  auto cont = [&](std::size_t k, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return k < n && at(k) >= lo && at(k) <= hi;
  };
  if (b >= 0xC2 && b <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    const unsigned char lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    return cont(i + 1, lo, hi) && cont(i + 2) ? 3 : 0;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    const unsigned char lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    return cont(i + 1, lo, hi) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

/// Offset of the first byte that is not well-formed UTF-8, or npos.
inline std::size_t invalid_utf8_at(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = valid_seq_len(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

/// Bytes to text, each maximal ill-formed subpart replaced by U+FFFD (what Rust's
/// from_utf8_lossy and the WHATWG decoder both do).
inline std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  while (i < s.size()) {
    const std::size_t n = valid_seq_len(s, i);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    // the maximal subpart: the lead byte plus the continuation bytes that still fit it
    const unsigned char b = at(i);
    std::size_t len = 1;
    std::size_t need = (b >= 0xC2 && b <= 0xDF) ? 1 : (b >= 0xE0 && b <= 0xEF) ? 2 : (b >= 0xF0 && b <= 0xF4) ? 3 : 0;
    for (std::size_t k = 1; k <= need && i + k < s.size(); ++k) {
      unsigned char lo = 0x80, hi = 0xBF;
      if (k == 1) {
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
      }
      if (at(i + k) < lo || at(i + k) > hi) break;
      len = k + 1;
    }
    out += "\xEF\xBF\xBD";
    i += len;
  }
  return out;
}

inline bool is_whitespace(char32_t c) noexcept {  // Unicode White_Space
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

inline utf8proc_category_t category(char32_t c) noexcept {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

inline bool is_numeric(char32_t c) noexcept {  // Rust's char::is_numeric: Nd, Nl, No
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

inline bool is_alphabetic_like(char32_t c) noexcept {
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
         k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
}

/// Regex \w in Unicode mode: letters, marks, decimal digits, connector punctuation.
inline bool is_word_char(char32_t c) noexcept {
  const auto k = category(c);
  return is_alphabetic_like(c) || k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC ||
         k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_PC ||
         c == 0x200C || c == 0x200D;
}

inline bool is_punctuation(char32_t c) noexcept {  // ASCII punctuation or Unicode P*
  if (c < 0x80) return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
  const auto k = category(c);
  return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

/// Unicode normalisation form through utf8proc (input must be valid UTF-8).
inline std::string normalize(std::string_view s, int options) {
  if (s.empty()) return {};
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                              static_cast<utf8proc_ssize_t>(s.size()), &out,
                              static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  if (n < 0) return std::string(s);  // unreachable for valid UTF-8
  std::string r(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
  std::free(out);
  return r;
}

/// Full lower-casing as Rust's str::to_lowercase does it: utf8proc's simple mapping, plus
/// the two context rules of SpecialCasing.txt that apply without a language: U+0130 gives
/// "i̇", and a capital sigma that ends a word (after a cased letter, before none) gives ς.
inline std::string to_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t start = i;
    const char32_t c = next_cp(s, i);
    if (c < 0x80) {
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    } else if (c == 0x130) {
      out += "i\xCC\x87";
    } else if (c == 0x3A3) {
      // final sigma: preceded by a cased letter (skipping case-ignorable ones), and not
      // followed by one
      auto cased = [](char32_t d) {
        const auto k = category(d);
        return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
      };
      auto ignorable = [](char32_t d) {
        const auto k = category(d);
        return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
               k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK || d == '\'' || d == 0x2019 || d == 0xB7;
      };
      bool before = false;
      for (std::size_t j = start; j > 0;) {
        const char32_t d = prev_cp(s, j);
        if (ignorable(d)) continue;
        before = cased(d);
        break;
      }
      bool after = false;
      for (std::size_t j = i; j < s.size();) {
        const char32_t d = next_cp(s, j);
        if (ignorable(d)) continue;
        after = cased(d);
        break;
      }
      append_utf8(out, before && !after ? 0x3C2 : 0x3C3);
    } else {
      append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}

}  // namespace kiln::text::detail
