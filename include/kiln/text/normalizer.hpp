// kiln/text/normalizer.hpp — tokenizer.json "normalizer" components.
// NFC, NFD, NFKC, NFKD (utf8proc), Lowercase, Strip, StripAccents, Prepend, Replace
// (String or Regex pattern) and Sequence; the text is valid UTF-8 in and out.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/text/detail/json.hpp"
#include "kiln/text/detail/unicode.hpp"

namespace kiln::text {

/// One normalisation step.
class normalizer {
 public:
  virtual ~normalizer() = default;
  virtual std::string normalize(std::string s) const = 0;
};

namespace detail {

class unicode_normalizer final : public normalizer {
 public:
  explicit unicode_normalizer(int options) : options_(options) {}
  std::string normalize(std::string s) const override {
    // ASCII is invariant under every form: skip utf8proc's copy for it
    for (unsigned char c : s)
      if (c >= 0x80) return detail::normalize(s, options_);
    return s;
  }

 private:
  int options_;
};

class lowercase_normalizer final : public normalizer {
 public:
  std::string normalize(std::string s) const override { return to_lower(s); }
};

class strip_normalizer final : public normalizer {
 public:
  strip_normalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string s) const override {
    std::size_t b = 0, e = s.size();
    if (left_) {
      while (b < e) {
        std::size_t i = b;
        if (!is_whitespace(next_cp(s, i))) break;
        b = i;
      }
    }
    if (right_) {
      while (e > b) {
        std::size_t i = e;
        if (!is_whitespace(prev_cp(s, i))) break;
        e = i;
      }
    }
    return s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class strip_accents_normalizer final : public normalizer {
 public:
  std::string normalize(std::string s) const override {
    std::string out;
    out.reserve(s.size());
    std::size_t i = 0;
    while (i < s.size()) {
      const std::size_t b = i;
      const char32_t c = next_cp(s, i);
      const auto k = category(c);
      if (k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME) continue;
      out.append(s, b, i - b);
    }
    return out;
  }
};

class prepend_normalizer final : public normalizer {
 public:
  explicit prepend_normalizer(std::string p) : prefix_(std::move(p)) {}
  std::string normalize(std::string s) const override { return s.empty() ? s : prefix_ + s; }

 private:
  std::string prefix_;
};

class replace_normalizer final : public normalizer {
 public:
  replace_normalizer(pattern p, std::string content) : pattern_(std::move(p)), content_(std::move(content)) {}
  std::string normalize(std::string s) const override { return replace_all(s, pattern_, content_); }

 private:
  pattern pattern_;
  std::string content_;
};

class sequence_normalizer final : public normalizer {
 public:
  explicit sequence_normalizer(std::vector<std::unique_ptr<normalizer>> steps) : steps_(std::move(steps)) {}
  std::string normalize(std::string s) const override {
    for (const auto& n : steps_) s = n->normalize(std::move(s));
    return s;
  }

 private:
  std::vector<std::unique_ptr<normalizer>> steps_;
};

/// Builds a normalizer from its JSON; where is "kiln::text: <file>: normalizer".
inline std::unique_ptr<normalizer> make_normalizer(const json& j, const std::string& where) {
  const std::string type = type_of(j, where);
  const std::string here = where + " '" + type + "'";
  if (type == "NFC") return std::make_unique<unicode_normalizer>(UTF8PROC_COMPOSE);
  if (type == "NFD") return std::make_unique<unicode_normalizer>(UTF8PROC_DECOMPOSE);
  if (type == "NFKC") return std::make_unique<unicode_normalizer>(UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKD") return std::make_unique<unicode_normalizer>(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  if (type == "Lowercase") return std::make_unique<lowercase_normalizer>();
  if (type == "StripAccents") return std::make_unique<strip_accents_normalizer>();
  if (type == "Strip")
    return std::make_unique<strip_normalizer>(get_bool_or(j, "strip_left", false, here), get_bool_or(j, "strip_right", false, here));
  if (type == "Prepend") return std::make_unique<prepend_normalizer>(get_string(j, "prepend", here));
  if (type == "Replace") return std::make_unique<replace_normalizer>(get_pattern(j, "pattern", here), get_string(j, "content", here));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<normalizer>> steps;
    std::size_t k = 0;
    for (const auto& e : get_array(j, "normalizers", here)) steps.push_back(make_normalizer(e, where + "s[" + std::to_string(k++) + "]"));
    return std::make_unique<sequence_normalizer>(std::move(steps));
  }
  if (type == "BertNormalizer" || type == "Precompiled" || type == "ByteLevel" || type == "Nmt")
    fail(where, "unsupported normalizer type '" + type + "'");
  fail(where, "unknown normalizer type '" + type + "'");
}

}  // namespace detail
}  // namespace kiln::text
