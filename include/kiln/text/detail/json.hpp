// kiln/text/detail/json.hpp — typed reads from tokenizer.json with errors that say where.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/text/detail/regex.hpp"
#include "kiln/text/error.hpp"

namespace kiln::text::detail {

using json = nlohmann::json;

[[noreturn]] inline void fail(const std::string& where, const std::string& what) {
  throw tokenizer_error(where + ": " + what);
}

/// The component's "type" field (where names the file and the component).
inline std::string type_of(const json& j, const std::string& where) {
  if (!j.is_object()) fail(where, "expected an object, got " + std::string(j.type_name()));
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) fail(where, "no \"type\" field");
  return it->get<std::string>();
}

inline const json* find(const json& j, std::string_view key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

inline std::string get_string(const json& j, std::string_view key, const std::string& where) {
  const json* v = find(j, key);
  if (!v || !v->is_string()) fail(where, "field \"" + std::string(key) + "\" must be a string");
  return v->get<std::string>();
}

inline std::string get_string_or(const json& j, std::string_view key, std::string fallback, const std::string& where) {
  const json* v = find(j, key);
  if (!v) return fallback;
  if (!v->is_string()) fail(where, "field \"" + std::string(key) + "\" must be a string");
  return v->get<std::string>();
}

inline bool get_bool_or(const json& j, std::string_view key, bool fallback, const std::string& where) {
  const json* v = find(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(where, "field \"" + std::string(key) + "\" must be true or false");
  return v->get<bool>();
}

inline std::int64_t get_int_or(const json& j, std::string_view key, std::int64_t fallback, const std::string& where) {
  const json* v = find(j, key);
  if (!v) return fallback;
  if (!v->is_number_integer()) fail(where, "field \"" + std::string(key) + "\" must be an integer");
  return v->get<std::int64_t>();
}

inline const json& get_array(const json& j, std::string_view key, const std::string& where) {
  const json* v = find(j, key);
  if (!v || !v->is_array()) fail(where, "field \"" + std::string(key) + "\" must be an array");
  return *v;
}

/// A {"String": s} or {"Regex": r} pattern; literal strings are kept as text too, so that
/// callers can take a plain find/replace path for them.
struct pattern {
  std::string text;
  bool literal = true;
  std::shared_ptr<const regex> re;
};

inline pattern get_pattern(const json& j, std::string_view key, const std::string& where) {
  const json* v = find(j, key);
  if (!v || !v->is_object()) fail(where, "field \"" + std::string(key) + "\" must be {\"String\": ...} or {\"Regex\": ...}");
  pattern p;
  if (auto s = v->find("String"); s != v->end() && s->is_string()) {
    p.text = s->get<std::string>();
    p.literal = true;
  } else if (auto r = v->find("Regex"); r != v->end() && r->is_string()) {
    p.text = r->get<std::string>();
    p.literal = false;
  } else {
    fail(where, "field \"" + std::string(key) + "\" must be {\"String\": ...} or {\"Regex\": ...}");
  }
  p.re = std::make_shared<regex>(p.text, p.literal, where);
  return p;
}

/// Replaces every occurrence of `from` in s with `to` (s itself when from is empty).
inline std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(s);
  std::string out;
  std::size_t pos = 0;
  for (std::size_t k = s.find(from); k != std::string_view::npos; k = s.find(from, pos)) {
    out.append(s.substr(pos, k - pos));
    out.append(to);
    pos = k + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

/// Replaces every match of p in s with content (taken literally).
inline std::string replace_all(std::string_view s, const pattern& p, std::string_view content) {
  if (p.literal) return replace_all(s, std::string_view(p.text), content);
  std::string out;
  std::size_t pos = 0;
  p.re->for_each_match(s, [&](std::size_t b, std::size_t e) {
    out.append(s.substr(pos, b - pos));
    out.append(content);
    pos = e;
  });
  out.append(s.substr(pos));
  return out;
}

}  // namespace kiln::text::detail
