// kiln/text/chat_template.hpp — tokenizer_config.json's chat_template rendered for a list of
// messages: a small Jinja engine of the subset Hugging Face chat templates use, lexed the way
// transformers renders them (trim_blocks and lstrip_blocks on, one trailing newline dropped),
// matching @huggingface/jinja on real templates. Anything outside the subset throws
// chat_template_error naming the construct and its line.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>  // std::to_chars (shortest float text)
#include <cmath>
#include <climits>  // INT64_MIN
#include <cstdint>
#include <ctime>  // strftime_now
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <utf8proc.h>  // upper/lower/title case per code point

#include "kiln/text/error.hpp"
#include "kiln/text/tokenizer.hpp"

namespace kiln::text {

/// A chat template that cannot be parsed, uses a construct outside kiln's Jinja subset, fails
/// while rendering (an undefined value used where Jinja errors, a type error), or calls
/// raise_exception. The message names the template line:
/// `kiln::text: chat template line 3: unsupported statement 'include'`.
class chat_template_error : public tokenizer_error {
 public:
  chat_template_error(int line, const std::string& what)
      : tokenizer_error("kiln::text: chat template line " + std::to_string(line) + ": " + what), line_(line) {}
  /// An error about no line (no template, bad variables).
  explicit chat_template_error(const std::string& what) : tokenizer_error("kiln::text: chat template: " + what), line_(0) {}
  /// The template line (1-based) the error is about; 0 for none.
  int line() const noexcept { return line_; }

 private:
  int line_;
};

/// One turn of a conversation: role ("system", "user", "assistant", or what the template takes)
/// and its text.
struct chat_message {
  std::string role;
  std::string content;
};

namespace detail::jinja {

using json = nlohmann::ordered_json;  // objects keep their order (tojson, dict iteration)

// ---------------------------------------------------------------------------------------
// values

struct value;
using list_t = std::vector<value>;
using dict_t = std::vector<std::pair<std::string, value>>;  // insertion order, like Python dicts
using kwargs_t = std::vector<std::pair<std::string, value>>;
struct callable;

struct value {
  enum class kind : std::uint8_t { undefined, none, boolean, integer, number, string, list, dict, ns, function };
  kind k = kind::undefined;
  bool b = false;
  std::int64_t i = 0;
  double d = 0;
  std::string s;  // a string's text; an undefined value's description (for its error)
  std::shared_ptr<list_t> l;  // shared: namespaces are assigned through (ns.x = ...)
  std::shared_ptr<dict_t> m;
  std::shared_ptr<callable> f;
  bool tuple = false;  // a list that Python would hold as a tuple (items, dictsort, literals): printed (a, b)

  static value undefined(std::string what = {}) { value v; v.s = std::move(what); return v; }
  static value none() { value v; v.k = kind::none; return v; }
  static value boolean(bool x) { value v; v.k = kind::boolean; v.b = x; return v; }
  static value integer(std::int64_t x) { value v; v.k = kind::integer; v.i = x; return v; }
  static value number(double x) { value v; v.k = kind::number; v.d = x; return v; }
  static value string(std::string x) { value v; v.k = kind::string; v.s = std::move(x); return v; }
  static value list(list_t x = {}) { value v; v.k = kind::list; v.l = std::make_shared<list_t>(std::move(x)); return v; }
  static value pair(value a, value b) { value v = list({std::move(a), std::move(b)}); v.tuple = true; return v; }
  static value dict(dict_t x = {}) { value v; v.k = kind::dict; v.m = std::make_shared<dict_t>(std::move(x)); return v; }

  bool is(kind x) const { return k == x; }
  bool numeric() const { return k == kind::integer || k == kind::number || k == kind::boolean; }
  double as_double() const { return k == kind::number ? d : k == kind::boolean ? (b ? 1 : 0) : static_cast<double>(i); }
  const value* find(std::string_view key) const {
    if (!m) return nullptr;
    for (const auto& [name, v] : *m)
      if (name == key) return &v;
    return nullptr;
  }
};

struct callable {
  std::string name;
  std::function<value(list_t&, kwargs_t&, int line)> fn;
};

[[noreturn]] inline void fail(int line, const std::string& what) { throw chat_template_error(line, what); }

template <class Json>
value from_json(const Json& j) {
  using json_t = typename Json::value_t;
  switch (j.type()) {
    case json_t::null: return value::none();
    case json_t::boolean: return value::boolean(j.template get<bool>());
    case json_t::number_integer: return value::integer(j.template get<std::int64_t>());
    case json_t::number_unsigned: return value::integer(static_cast<std::int64_t>(j.template get<std::uint64_t>()));
    case json_t::number_float: return value::number(j.template get<double>());
    case json_t::string: return value::string(j.template get<std::string>());
    case json_t::array: {
      list_t l;
      for (const auto& e : j) l.push_back(from_json(e));
      return value::list(std::move(l));
    }
    case json_t::object: {
      dict_t m;
      for (const auto& [k, e] : j.items()) m.emplace_back(k, from_json(e));
      return value::dict(std::move(m));
    }
    default: return value::undefined();
  }
}

inline const char* kind_name(const value& v) {
  switch (v.k) {
    case value::kind::undefined: return "undefined";
    case value::kind::none: return "none";
    case value::kind::boolean: return "boolean";
    case value::kind::integer: return "integer";
    case value::kind::number: return "float";
    case value::kind::string: return "string";
    case value::kind::list: return "list";
    case value::kind::dict: return "dict";
    case value::kind::ns: return "namespace";
    case value::kind::function: return "function";
  }
  return "?";
}

inline bool truthy(const value& v) {
  switch (v.k) {
    case value::kind::undefined:
    case value::kind::none: return false;
    case value::kind::boolean: return v.b;
    case value::kind::integer: return v.i != 0;
    case value::kind::number: return v.d != 0;
    case value::kind::string: return !v.s.empty();
    case value::kind::list: return !v.l->empty();
    case value::kind::dict: return !v.m->empty();
    default: return true;
  }
}

// --- UTF-8 helpers (strings are indexed, sliced and counted by code point, as in Python)

inline std::vector<std::string_view> code_points(std::string_view s) {
  std::vector<std::string_view> out;
  for (std::size_t p = 0; p < s.size();) {
    const auto c = static_cast<unsigned char>(s[p]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    n = std::min(n, s.size() - p);
    out.push_back(s.substr(p, n));
    p += n;
  }
  return out;
}

inline std::int32_t decode_at(std::string_view s, std::size_t p, std::size_t& n) {
  utf8proc_int32_t cp = 0;
  const auto r = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + p),
                                  static_cast<utf8proc_ssize_t>(s.size() - p), &cp);
  n = r > 0 ? static_cast<std::size_t>(r) : 1;
  return r > 0 ? cp : static_cast<unsigned char>(s[p]);
}

inline void append_utf8(std::string& out, std::int32_t cp) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(cp, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
}

// Python's whitespace (str.isspace, and the \s of Jinja's lexer): what trim, strip, split and
// whitespace control remove (@huggingface/jinja uses JavaScript's \s, which differs on
// U+001C..U+001F and U+0085, not white there, and U+FEFF, white there)
inline bool py_space(std::int32_t c) {
  return c == 0x20 || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

inline std::size_t space_prefix(std::string_view s) {
  std::size_t p = 0, n = 0;
  while (p < s.size() && py_space(decode_at(s, p, n))) p += n;
  return p;
}
inline std::size_t space_suffix_start(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
    std::size_t n = 0;
    if (!py_space(decode_at(s, start, n))) break;
    end = start;
  }
  return end;
}

// strip with no argument: whitespace; with one: any of its characters (Python)
inline std::string strip(std::string_view s, bool left, bool right, const std::optional<std::string>& chars) {
  if (!chars) {
    std::size_t b = left ? space_prefix(s) : 0;
    std::size_t e = right ? space_suffix_start(s) : s.size();
    return e > b ? std::string(s.substr(b, e - b)) : std::string();
  }
  auto cps = code_points(s);
  auto set = code_points(*chars);
  auto in = [&](std::string_view c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  std::size_t b = 0, e = cps.size();
  if (left) while (b < e && in(cps[b])) ++b;
  if (right) while (e > b && in(cps[e - 1])) --e;
  std::string out;
  for (std::size_t k = b; k < e; ++k) out += cps[k];
  return out;
}

inline std::string map_case(std::string_view s, int mode /*0 lower, 1 upper, 2 title, 3 capitalize*/) {
  std::string out;
  bool prev_cased = false;
  bool first = true;
  for (std::size_t p = 0; p < s.size();) {
    std::size_t n = 0;
    const std::int32_t c = decode_at(s, p, n);
    std::int32_t r = c;
    if (mode == 0) r = utf8proc_tolower(c);
    else if (mode == 1) r = utf8proc_toupper(c);
    else if (mode == 2) r = prev_cased ? utf8proc_tolower(c) : utf8proc_totitle(c);
    else r = first ? utf8proc_totitle(c) : utf8proc_tolower(c);
    const auto cat = utf8proc_category(c);
    prev_cased = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
    first = false;
    append_utf8(out, r);
    p += n;
  }
  return out;
}

inline std::string replace_all(std::string s, std::string_view from, std::string_view to, std::int64_t count) {
  std::string out;
  if (from.empty()) {  // Python: to between every character and at both ends
    auto cps = code_points(s);
    std::int64_t done = 0;
    for (auto c : cps) {
      if (count < 0 || done < count) { out += to; ++done; }
      out += c;
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  std::size_t p = 0;
  std::int64_t done = 0;
  while (count < 0 || done < count) {
    const auto q = s.find(from, p);
    if (q == std::string::npos) break;
    out.append(s, p, q - p);
    out += to;
    p = q + from.size();
    ++done;
  }
  out.append(s, p, std::string::npos);
  return out;
}

// --- text forms

// Python's repr(float): the shortest digits that read back, fixed notation for exponents
// -4..15, else d.ddde+XX
inline std::string float_text(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);
  const auto e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string mant = sci.substr(0, e);
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      const auto int_len = static_cast<std::size_t>(exp) + 1;
      if (digits.size() < int_len) digits.append(int_len - digits.size(), '0');
      out += digits.substr(0, int_len) + "." + (digits.size() > int_len ? digits.substr(int_len) : "0");
    } else {
      out += "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  const int a = exp < 0 ? -exp : exp;
  out += std::string("e") + (exp < 0 ? "-" : "+") + (a < 10 ? "0" : "") + std::to_string(a);
  return out;
}

inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// Python's json.dumps(ensure_ascii=False), as transformers' tojson calls it: ", " and ": "
// without indent, "," and ": " with it
inline void to_json(std::string& out, const value& v, int indent, int depth, int line) {
  if (depth > 100) fail(line, "tojson: nested too deeply (a value that contains itself?)");
  switch (v.k) {
    case value::kind::undefined:
    case value::kind::none: out += "null"; return;
    case value::kind::boolean: out += v.b ? "true" : "false"; return;
    case value::kind::integer: out += std::to_string(v.i); return;
    case value::kind::number: out += float_text(v.d); return;
    case value::kind::string: out += json_string(v.s); return;
    case value::kind::list:
    case value::kind::dict:
    case value::kind::ns: {
      const bool is_list = v.k == value::kind::list;
      const std::size_t n = is_list ? v.l->size() : v.m->size();
      out += is_list ? '[' : '{';
      if (n == 0) { out += is_list ? ']' : '}'; return; }
      const std::string pad = indent > 0 ? "\n" + std::string(static_cast<std::size_t>(indent * (depth + 1)), ' ') : "";
      for (std::size_t k = 0; k < n; ++k) {
        if (k) out += indent > 0 ? "," : ", ";
        out += pad;
        if (is_list) {
          to_json(out, (*v.l)[k], indent, depth + 1, line);
        } else {
          out += json_string((*v.m)[k].first);
          out += ": ";
          to_json(out, (*v.m)[k].second, indent, depth + 1, line);
        }
      }
      if (indent > 0) out += "\n" + std::string(static_cast<std::size_t>(indent * depth), ' ');
      out += is_list ? ']' : '}';
      return;
    }
    case value::kind::function: fail(line, "tojson: a function is not JSON");
  }
}

inline std::string repr(const value& v, int depth = 0);

// str(v) as Jinja prints it (Python's str: None, True, 1.0, ['a', 1], {'k': 'v'})
inline std::string to_text(const value& v) {
  switch (v.k) {
    case value::kind::undefined: return {};
    case value::kind::none: return "None";
    case value::kind::boolean: return v.b ? "True" : "False";
    case value::kind::integer: return std::to_string(v.i);
    case value::kind::number: return float_text(v.d);
    case value::kind::string: return v.s;
    case value::kind::function: return "<function " + v.f->name + ">";
    default: return repr(v);
  }
}

inline std::string repr(const value& v, int depth) {
  if (depth > 100) return "...";  // a value that contains itself
  switch (v.k) {
    case value::kind::string: {
      const char q = v.s.find('\'') != std::string::npos && v.s.find('"') == std::string::npos ? '"' : '\'';
      std::string out(1, q);
      for (char c : v.s) {
        if (c == q || c == '\\') { out += '\\'; out += c; }
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else out += c;
      }
      return out + q;
    }
    case value::kind::list: {
      std::string out = v.tuple ? "(" : "[";
      for (std::size_t k = 0; k < v.l->size(); ++k) out += (k ? ", " : "") + repr((*v.l)[k], depth + 1);
      if (v.tuple && v.l->size() == 1) out += ",";
      return out + (v.tuple ? ")" : "]");
    }
    case value::kind::dict:
    case value::kind::ns: {
      std::string out = v.k == value::kind::ns ? "<Namespace {" : "{";
      for (std::size_t k = 0; k < v.m->size(); ++k)
        out += (k ? ", " : "") + repr(value::string((*v.m)[k].first)) + ": " + repr((*v.m)[k].second, depth + 1);
      return out + (v.k == value::kind::ns ? "}>" : "}");
    }
    case value::kind::undefined: return "Undefined";
    default: return to_text(v);
  }
}

inline bool equal(const value& a, const value& b, int depth = 0) {
  if (depth > 100) return false;  // values that contain themselves
  if (a.numeric() && b.numeric()) {
    if (a.k != value::kind::number && b.k != value::kind::number) {
      const std::int64_t x = a.k == value::kind::boolean ? a.b : a.i, y = b.k == value::kind::boolean ? b.b : b.i;
      return x == y;
    }
    return a.as_double() == b.as_double();
  }
  if (a.k != b.k) return false;
  switch (a.k) {
    case value::kind::undefined:
    case value::kind::none: return true;
    case value::kind::string: return a.s == b.s;
    case value::kind::list:
      if (a.l->size() != b.l->size()) return false;
      for (std::size_t k = 0; k < a.l->size(); ++k)
        if (!equal((*a.l)[k], (*b.l)[k], depth + 1)) return false;
      return true;
    case value::kind::dict:
    case value::kind::ns:
      if (a.m->size() != b.m->size()) return false;
      for (const auto& [key, x] : *a.m) {
        const value* y = b.find(key);
        if (!y || !equal(x, *y, depth + 1)) return false;
      }
      return true;
    case value::kind::function: return a.f == b.f;
    default: return false;
  }
}

// <0, 0, >0; numbers with numbers, strings with strings (code point order = UTF-8 byte order),
// lists element by element
inline int compare(const value& a, const value& b, int line, const char* op) {
  if (a.numeric() && b.numeric()) {
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is(value::kind::string) && b.is(value::kind::string)) return a.s.compare(b.s) < 0 ? -1 : a.s == b.s ? 0 : 1;
  if (a.is(value::kind::list) && b.is(value::kind::list)) {
    for (std::size_t k = 0; k < a.l->size() && k < b.l->size(); ++k)
      if (int c = compare((*a.l)[k], (*b.l)[k], line, op)) return c;
    return a.l->size() < b.l->size() ? -1 : a.l->size() > b.l->size() ? 1 : 0;
  }
  fail(line, std::string("'") + op + "' not supported between " + kind_name(a) + " and " + kind_name(b));
}

// ---------------------------------------------------------------------------------------
// lexer: @huggingface/jinja's preprocessing and tokens, each character keeping its source line

struct token {
  enum class type : std::uint8_t { text, open_stmt, close_stmt, open_expr, close_expr, name, string, integer, number, punct, end };
  type t;
  std::string v;
  int line;
};

struct lined_text {
  std::string s;
  std::vector<int> line;  // per byte
  void push(char c, int l) { s += c; line.push_back(l); }
};

inline lined_text preprocess(std::string_view source) {
  lined_text src;
  int l = 1;
  for (char c : source) {
    src.push(c, l);
    if (c == '\n') ++l;
  }
  // one trailing newline is dropped
  if (!src.s.empty() && src.s.back() == '\n') { src.s.pop_back(); src.line.pop_back(); }
  // lstrip_blocks: spaces and tabs from a line's start to a {% / {# (the reference's regex,
  // /^[ \t]*({[#%-])/gm, also takes "{-")
  {
    lined_text out;
    const std::string& s = src.s;
    std::size_t p = 0;
    while (p < s.size()) {
      const bool line_start = p == 0 || s[p - 1] == '\n' || s[p - 1] == '\r';
      if (line_start) {
        std::size_t q = p;
        while (q < s.size() && (s[q] == ' ' || s[q] == '\t')) ++q;
        if (q > p && q + 1 < s.size() && s[q] == '{' && (s[q + 1] == '#' || s[q + 1] == '%' || s[q + 1] == '-')) p = q;
      }
      out.push(s[p], src.line[p]);
      ++p;
    }
    src = std::move(out);
  }
  // trim_blocks: the newline right after "%}", "#}" (and "-}", the reference's regex)
  {
    lined_text out;
    const std::string& s = src.s;
    for (std::size_t p = 0; p < s.size(); ++p) {
      if (s[p] == '\n' && p >= 2 && s[p - 1] == '}' && (s[p - 2] == '#' || s[p - 2] == '%' || s[p - 2] == '-')) continue;
      out.push(s[p], src.line[p]);
    }
    src = std::move(out);
  }
  // transformers' {% generation %} / {% endgeneration %} markers are removed (with the
  // whitespace before or after them where the tag has "-")
  {
    lined_text out;
    const std::string& s = src.s;
    auto ws = [&](std::size_t p) { std::size_t n = 0; return p < s.size() && py_space(decode_at(s, p, n)); };
    auto ws_len = [&](std::size_t p) { std::size_t n = 0; decode_at(s, p, n); return n; };
    std::size_t p = 0;
    while (p < s.size()) {
      if (s.compare(p, 2, "{%") == 0) {
        std::size_t q = p + 2;
        const bool lstrip = q < s.size() && s[q] == '-';
        if (lstrip) ++q;
        while (ws(q)) q += ws_len(q);
        if (s.compare(q, 3, "end") == 0 && s.compare(q + 3, 10, "generation") == 0) q += 3;
        if (s.compare(q, 10, "generation") == 0) {
          q += 10;
          while (ws(q)) q += ws_len(q);
          const bool rstrip = q < s.size() && s[q] == '-';
          if (rstrip) ++q;
          if (s.compare(q, 2, "%}") == 0) {
            q += 2;
            if (lstrip) {
              std::size_t keep = space_suffix_start(out.s);
              out.s.resize(keep);
              out.line.resize(keep);
            }
            if (rstrip) while (ws(q)) q += ws_len(q);
            p = q;
            continue;
          }
        }
      }
      out.push(s[p], src.line[p]);
      ++p;
    }
    src = std::move(out);
  }
  return src;
}

inline bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

inline std::vector<token> tokenize(const lined_text& src) {
  const std::string& s = src.s;
  auto line_at = [&](std::size_t p) { return src.line.empty() ? 1 : src.line[std::min(p, src.line.size() - 1)]; };
  std::vector<token> toks;
  std::size_t p = 0;
  int depth = 0;
  auto strip_previous_text = [&] {
    if (!toks.empty() && toks.back().t == token::type::text) {
      toks.back().v.resize(space_suffix_start(toks.back().v));
      if (toks.back().v.empty()) toks.pop_back();
    }
  };
  auto skip_space = [&] {
    std::size_t n = 0;
    while (p < s.size() && py_space(decode_at(s, p, n))) p += n;
  };
  auto starts = [&](std::string_view what) { return s.compare(p, what.size(), what) == 0; };
  while (p < s.size()) {
    const auto last = toks.empty() ? token::type::end : toks.back().t;
    if (toks.empty() || last == token::type::close_stmt || last == token::type::close_expr) {
      const std::size_t begin = p;
      while (p < s.size() && !(s[p] == '{' && p + 1 < s.size() && (s[p + 1] == '%' || s[p + 1] == '{' || s[p + 1] == '#'))) ++p;
      if (p > begin) {
        toks.push_back({token::type::text, s.substr(begin, p - begin), line_at(begin)});
        continue;
      }
    }
    if (starts("{#")) {
      const int line = line_at(p);
      p += 2;
      const bool strip_before = p < s.size() && s[p] == '-';
      const auto close = s.find("#}", p);
      if (close == std::string::npos) fail(line, "comment not closed (no '#}')");
      const bool strip_after = close > p && s[close - 1] == '-';
      if (strip_before) strip_previous_text();
      p = close + 2;
      if (strip_after) skip_space();
      // the text after a comment is lexed as text (the reference keeps a Comment token there)
      toks.push_back({token::type::close_stmt, "#}", line});
      toks.back().v = "comment";
      continue;
    }
    if (starts("{%-") || starts("{{-")) {
      strip_previous_text();
      toks.push_back({s[p + 1] == '%' ? token::type::open_stmt : token::type::open_expr, s.substr(p, 2), line_at(p)});
      depth = 0;
      p += 3;
      continue;
    }
    skip_space();
    if (p >= s.size()) break;
    const int line = line_at(p);
    if (starts("-%}") || starts("-}}")) {
      toks.push_back({s[p + 1] == '%' ? token::type::close_stmt : token::type::close_expr, s.substr(p + 1, 2), line});
      p += 3;
      skip_space();
      continue;
    }
    if (starts("{%")) { toks.push_back({token::type::open_stmt, "{%", line}); p += 2; depth = 0; continue; }
    if (starts("{{")) { toks.push_back({token::type::open_expr, "{{", line}); p += 2; depth = 0; continue; }
    if (starts("%}")) { toks.push_back({token::type::close_stmt, "%}", line}); p += 2; continue; }
    if (depth == 0 && starts("}}")) { toks.push_back({token::type::close_expr, "}}", line}); p += 2; continue; }
    const char c = s[p];
    if (c == '\'' || c == '"') {
      std::string str;
      ++p;
      while (true) {
        if (p >= s.size()) fail(line, "string literal not closed");
        if (s[p] == c) { ++p; break; }
        if (s[p] == '\\') {
          if (++p >= s.size()) fail(line, "string literal not closed");
          const char e = s[p++];
          switch (e) {
            case 'n': str += '\n'; break;
            case 't': str += '\t'; break;
            case 'r': str += '\r'; break;
            case 'b': str += '\b'; break;
            case 'f': str += '\f'; break;
            case 'v': str += '\v'; break;
            case '\'': case '"': case '\\': str += e; break;
            case 'x':
            case 'u': {
              const std::size_t len = e == 'x' ? 2 : 4;
              if (p + len > s.size()) fail(line, "bad escape in string literal");
              std::int32_t cp = 0;
              for (std::size_t k = 0; k < len; ++k) {
                const char h = s[p + k];
                if (!std::isxdigit(static_cast<unsigned char>(h))) fail(line, "bad escape in string literal");
                cp = cp * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
              }
              p += len;
              append_utf8(str, cp);
              break;
            }
            default: fail(line, std::string("unsupported escape '\\") + e + "' in string literal");
          }
          continue;
        }
        str += s[p++];
      }
      toks.push_back({token::type::string, std::move(str), line});
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      const std::size_t begin = p;
      while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
      const bool after_dot = !toks.empty() && toks.back().t == token::type::punct && toks.back().v == ".";
      bool is_float = false;
      if (!after_dot && p + 1 < s.size() && s[p] == '.' && std::isdigit(static_cast<unsigned char>(s[p + 1]))) {
        ++p;
        while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
        is_float = true;
      }
      if (!after_dot && p < s.size() && (s[p] == 'e' || s[p] == 'E')) {  // 1e3, 2.5e-2
        std::size_t q = p + 1;
        if (q < s.size() && (s[q] == '+' || s[q] == '-')) ++q;
        if (q < s.size() && std::isdigit(static_cast<unsigned char>(s[q]))) {
          while (q < s.size() && std::isdigit(static_cast<unsigned char>(s[q]))) ++q;
          p = q;
          is_float = true;
        }
      }
      if (is_float) {
        toks.push_back({token::type::number, s.substr(begin, p - begin), line});
      } else {
        toks.push_back({token::type::integer, s.substr(begin, p - begin), line});
      }
      continue;
    }
    if (word_char(c)) {
      const std::size_t begin = p;
      while (p < s.size() && word_char(s[p])) ++p;
      toks.push_back({token::type::name, s.substr(begin, p - begin), line});
      continue;
    }
    static constexpr std::string_view ops[] = {"**", "//", "==", "!=", "<=", ">=", "(", ")", "{", "}", "[", "]", ",", ".",
                                               ":", "|", "<", ">", "+", "-", "~", "*", "/", "%", "="};
    bool matched = false;
    for (auto op : ops) {
      if (starts(op)) {
        toks.push_back({token::type::punct, std::string(op), line});
        if (op == "{") ++depth;
        if (op == "}") --depth;
        p += op.size();
        matched = true;
        break;
      }
    }
    if (!matched) fail(line, std::string("unexpected character '") + c + "'");
  }
  toks.push_back({token::type::end, "", src.line.empty() ? 1 : src.line.back()});
  return toks;
}

// ---------------------------------------------------------------------------------------
// syntax tree

struct expr;
using expr_ptr = std::unique_ptr<expr>;
struct expr {
  enum class op : std::uint8_t {
    literal, name, attr, item, slice, call, filter, test, not_, neg, pos, binary, and_, or_, ternary, list, tuple, dict
  };
  op o;
  int line = 0;
  value lit;
  std::string name;  // identifier, attribute, filter, test, binary operator
  bool negate = false;  // "is not", "not in"
  std::vector<expr_ptr> a;  // children (operand first); a null child is an absent slice bound
  std::vector<std::pair<std::string, expr_ptr>> kw;
};

struct stmt;
using body_t = std::vector<stmt>;
struct stmt {
  enum class op : std::uint8_t { text, output, if_, for_, set, set_block, macro, filter_block, break_, continue_, call_block };
  op o;
  int line = 0;
  std::string text;
  expr_ptr e;     // output, if condition, for iterable, set value, filter (with a null operand), call
  expr_ptr cond;  // for's "if" filter
  std::vector<std::string> targets;  // for / set names; set "ns.x": targets {ns}, attr x
  std::string attr;
  std::vector<std::pair<std::string, expr_ptr>> params;  // macro parameters with defaults
  body_t body, orelse;
};

// ---------------------------------------------------------------------------------------
// parser

class parser {
 public:
  explicit parser(std::vector<token> toks) : t_(std::move(toks)) {}

  body_t parse_all() {
    std::string end;
    body_t b = parse_body({}, end);
    return b;
  }

 private:
  std::vector<token> t_;
  std::size_t p_ = 0;
  int loops_ = 0;  // for loops around the statement being parsed (in this macro)
  int depth_ = 0;  // expressions and statements being parsed, one inside another

  // a template is data: nesting deeper than this would only overflow the stack
  struct depth_guard {
    int& d;
    depth_guard(int& x, int line) : d(x) {
      if (++d > 200) fail(line, "nested too deeply");
    }
    ~depth_guard() { --d; }
    depth_guard(const depth_guard&) = delete;
    depth_guard& operator=(const depth_guard&) = delete;
  };

  const token& cur() const { return t_[p_]; }
  const token& peek(std::size_t k = 1) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  bool is_punct(std::string_view v) const { return cur().t == token::type::punct && cur().v == v; }
  bool is_name(std::string_view v) const { return cur().t == token::type::name && cur().v == v; }
  [[noreturn]] void unexpected(const std::string& wanted) const {
    const token& k = cur();
    std::string got = k.t == token::type::end ? "the end of the template" : "'" + k.v + "'";
    fail(k.line, "expected " + wanted + ", got " + got);
  }
  void expect_punct(std::string_view v) {
    if (!is_punct(v)) unexpected("'" + std::string(v) + "'");
    ++p_;
  }
  std::string expect_name() {
    if (cur().t != token::type::name) unexpected("a name");
    return t_[p_++].v;
  }
  void expect_close_stmt() {
    if (cur().t != token::type::close_stmt) unexpected("'%}'");
    ++p_;
  }

  // statements up to one of `ends` (an {% end... %} / {% else %} tag); its name goes to `found`
  body_t parse_body(const std::vector<std::string_view>& ends, std::string& found) {
    body_t out;
    while (true) {
      const token& k = cur();
      if (k.t == token::type::end) {
        if (!ends.empty()) fail(k.line, "missing '{% " + std::string(ends.back()) + " %}'");
        return out;
      }
      if (k.t == token::type::text) {
        stmt s;
    s.o = stmt::op::text;
        s.line = k.line;
        s.text = k.v;
        out.push_back(std::move(s));
        ++p_;
        continue;
      }
      if (k.t == token::type::close_stmt && k.v == "comment") { ++p_; continue; }
      if (k.t == token::type::open_expr) {
        ++p_;
        stmt s;
    s.o = stmt::op::output;
        s.line = k.line;
        s.e = parse_expression();
        if (cur().t != token::type::close_expr) unexpected("'}}'");
        ++p_;
        out.push_back(std::move(s));
        continue;
      }
      if (k.t != token::type::open_stmt) unexpected("text, '{{' or '{%'");
      const std::string& word = peek().v;
      if (peek().t == token::type::name && std::find(ends.begin(), ends.end(), word) != ends.end()) {
        found = word;
        p_ += 2;
        return out;
      }
      ++p_;
      out.push_back(parse_statement());
    }
  }

  stmt parse_statement() {
    const int line = cur().line;
    depth_guard g(depth_, line);
    return parse_statement_inner(line);
  }

  stmt parse_statement_inner(int line) {
    if (cur().t != token::type::name) unexpected("a statement name");
    const std::string word = t_[p_++].v;
    stmt s;
    s.o = stmt::op::text;
    s.line = line;
    std::string found;
    if (word == "if") return parse_if(line);
    if (word == "for") {
      s.o = stmt::op::for_;
      s.targets.push_back(expect_name());
      while (is_punct(",")) { ++p_; s.targets.push_back(expect_name()); }
      if (!is_name("in")) unexpected("'in'");
      ++p_;
      s.e = parse_ternary_free();
      if (is_name("if")) { ++p_; s.cond = parse_ternary_free(); }
      if (is_name("recursive")) fail(cur().line, "unsupported: recursive for loops");
      expect_close_stmt();
      ++loops_;
      s.body = parse_body({"else", "endfor"}, found);
      --loops_;
      expect_close_stmt();
      if (found == "else") {
        s.orelse = parse_body({"endfor"}, found);
        expect_close_stmt();
      }
      return s;
    }
    if (word == "set") {
      s.targets.push_back(expect_name());
      if (is_punct(".")) {
        ++p_;
        s.attr = expect_name();
      } else {
        while (is_punct(",")) { ++p_; s.targets.push_back(expect_name()); }
      }
      if (is_punct("=")) {
        ++p_;
        s.o = stmt::op::set;
        s.e = parse_expression();
        expect_close_stmt();
        return s;
      }
      if (!s.attr.empty() || s.targets.size() != 1) unexpected("'='");
      s.o = stmt::op::set_block;
      if (is_punct("|")) {
        ++p_;
        s.e = parse_filter_call(nullptr);
      }
      expect_close_stmt();
      s.body = parse_body({"endset"}, found);
      expect_close_stmt();
      return s;
    }
    if (word == "macro") {
      s.o = stmt::op::macro;
      s.text = expect_name();
      expect_punct("(");
      while (!is_punct(")")) {
        std::string name = expect_name();
        expr_ptr def;
        if (is_punct("=")) { ++p_; def = parse_expression(); }
        s.params.emplace_back(std::move(name), std::move(def));
        if (!is_punct(")")) expect_punct(",");
      }
      ++p_;
      expect_close_stmt();
      const int outer_loops = std::exchange(loops_, 0);
      s.body = parse_body({"endmacro"}, found);
      loops_ = outer_loops;
      expect_close_stmt();
      return s;
    }
    if (word == "call") {
      s.o = stmt::op::call_block;
      if (is_punct("(")) fail(line, "unsupported: call blocks with arguments");
      s.e = parse_expression();
      if (s.e->o != expr::op::call) fail(line, "expected a macro call after 'call'");
      expect_close_stmt();
      s.body = parse_body({"endcall"}, found);
      expect_close_stmt();
      return s;
    }
    if (word == "filter") {
      s.o = stmt::op::filter_block;
      s.e = parse_filter_call(nullptr);
      while (is_punct("|")) { ++p_; s.e = parse_filter_call(std::move(s.e)); }
      expect_close_stmt();
      s.body = parse_body({"endfilter"}, found);
      expect_close_stmt();
      return s;
    }
    if (word == "break" || word == "continue") {
      if (loops_ == 0) fail(line, "'" + word + "' outside a for loop");
      s.o = word == "break" ? stmt::op::break_ : stmt::op::continue_;
      expect_close_stmt();
      return s;
    }
    fail(line, "unsupported statement '" + word + "'");
  }

  // after "if" or "elif": an elif is an if inside the else branch, and one endif closes both
  stmt parse_if(int line) {
    stmt s;
    s.o = stmt::op::if_;
    s.line = line;
    s.e = parse_expression();
    expect_close_stmt();
    std::string found;
    s.body = parse_body({"elif", "else", "endif"}, found);
    if (found == "elif") {
      s.orelse.push_back(parse_if(t_[p_ - 1].line));
    } else if (found == "else") {
      expect_close_stmt();
      s.orelse = parse_body({"endif"}, found);
      expect_close_stmt();
    } else {
      expect_close_stmt();
    }
    return s;
  }

  // a filter application: name or name(args); operand is the expression before "|"
  expr_ptr parse_filter_call(expr_ptr operand) {
    auto f = std::make_unique<expr>();
    f->o = expr::op::filter;
    f->line = cur().line;
    f->name = expect_name();
    f->a.push_back(std::move(operand));
    if (is_punct("(")) parse_args(*f);
    return f;
  }

  void parse_args(expr& call) {
    expect_punct("(");
    while (!is_punct(")")) {
      if (cur().t == token::type::name && peek().t == token::type::punct && peek().v == "=") {
        std::string key = t_[p_].v;
        p_ += 2;
        call.kw.emplace_back(std::move(key), parse_expression());
      } else {
        if (!call.kw.empty()) fail(cur().line, "positional argument after keyword argument");
        call.a.push_back(parse_expression());
      }
      if (!is_punct(")")) expect_punct(",");
    }
    ++p_;
  }

  expr_ptr make(expr::op o, int line) {
    auto e = std::make_unique<expr>();
    e->o = o;
    e->line = line;
    return e;
  }

 public:
  expr_ptr parse_expression() {
    // nesting depth: a template is data, and deep recursion would overflow the stack
    depth_guard g(depth_, cur().line);
    expr_ptr e = parse_or();
    if (is_name("if")) {
      const int line = cur().line;
      ++p_;
      auto t = make(expr::op::ternary, line);
      expr_ptr c = parse_or();
      expr_ptr other;
      if (is_name("else")) { ++p_; other = parse_expression(); }
      t->a.push_back(std::move(c));
      t->a.push_back(std::move(e));
      t->a.push_back(std::move(other));
      return t;
    }
    return e;
  }

 private:
  // for-loop iterables and their filters: no ternary (the "if" there filters the loop)
  expr_ptr parse_ternary_free() { return parse_or(); }

  expr_ptr parse_or() {
    expr_ptr l = parse_and();
    while (is_name("or")) {
      auto e = make(expr::op::or_, cur().line);
      ++p_;
      e->a.push_back(std::move(l));
      e->a.push_back(parse_and());
      l = std::move(e);
    }
    return l;
  }
  expr_ptr parse_and() {
    expr_ptr l = parse_not();
    while (is_name("and")) {
      auto e = make(expr::op::and_, cur().line);
      ++p_;
      e->a.push_back(std::move(l));
      e->a.push_back(parse_not());
      l = std::move(e);
    }
    return l;
  }
  expr_ptr parse_not() {
    depth_guard g(depth_, cur().line);
    if (is_name("not")) {
      auto e = make(expr::op::not_, cur().line);
      ++p_;
      e->a.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  expr_ptr parse_compare() {
    expr_ptr l = parse_math1();
    while (true) {
      std::string op;
      bool negate = false;
      const int line = cur().line;
      if (cur().t == token::type::punct &&
          (cur().v == "==" || cur().v == "!=" || cur().v == "<" || cur().v == ">" || cur().v == "<=" || cur().v == ">=")) {
        op = cur().v;
        ++p_;
      } else if (is_name("in")) {
        op = "in";
        ++p_;
      } else if (is_name("not") && peek().t == token::type::name && peek().v == "in") {
        op = "in";
        negate = true;
        p_ += 2;
      } else {
        return l;
      }
      auto e = make(expr::op::binary, line);
      e->name = op;
      e->negate = negate;
      e->a.push_back(std::move(l));
      e->a.push_back(parse_math1());
      l = std::move(e);
    }
  }
  expr_ptr binary(std::string op, expr_ptr l, expr_ptr r, int line) {
    auto e = make(expr::op::binary, line);
    e->name = std::move(op);
    e->a.push_back(std::move(l));
    e->a.push_back(std::move(r));
    return e;
  }
  expr_ptr parse_math1() {
    expr_ptr l = parse_concat();
    while (is_punct("+") || is_punct("-")) {
      const token k = t_[p_++];
      l = binary(k.v, std::move(l), parse_concat(), k.line);
    }
    return l;
  }
  expr_ptr parse_concat() {
    expr_ptr l = parse_math2();
    while (is_punct("~")) {
      const token k = t_[p_++];
      l = binary(k.v, std::move(l), parse_math2(), k.line);
    }
    return l;
  }
  expr_ptr parse_math2() {
    expr_ptr l = parse_pow();
    while (is_punct("*") || is_punct("/") || is_punct("//") || is_punct("%")) {
      const token k = t_[p_++];
      l = binary(k.v, std::move(l), parse_pow(), k.line);
    }
    return l;
  }
  expr_ptr parse_pow() {
    expr_ptr l = parse_unary(true);
    while (is_punct("**")) {
      const token k = t_[p_++];
      l = binary(k.v, std::move(l), parse_unary(true), k.line);
    }
    return l;
  }
  expr_ptr parse_unary(bool with_filter) {
    depth_guard g(depth_, cur().line);
    expr_ptr e;
    if (is_punct("-") || is_punct("+")) {
      e = make(cur().v == "-" ? expr::op::neg : expr::op::pos, cur().line);
      ++p_;
      e->a.push_back(parse_unary(false));
    } else {
      e = parse_postfix(parse_primary());
    }
    if (with_filter) e = parse_filters(std::move(e));
    return e;
  }
  expr_ptr parse_filters(expr_ptr e) {
    while (true) {
      if (is_punct("|")) {
        ++p_;
        e = parse_filter_call(std::move(e));
      } else if (is_name("is")) {
        auto t = make(expr::op::test, cur().line);
        ++p_;
        if (is_name("not")) { t->negate = true; ++p_; }
        if (cur().t != token::type::name) unexpected("a test name");
        t->name = t_[p_++].v;
        t->a.push_back(std::move(e));
        if (is_punct("(")) {
          parse_args(*t);
        } else if (cur().t == token::type::string || cur().t == token::type::integer || cur().t == token::type::number ||
                   (cur().t == token::type::name && cur().v != "and" && cur().v != "or" && cur().v != "if" &&
                    cur().v != "else" && cur().v != "is" && cur().v != "in" && cur().v != "not")) {
          t->a.push_back(parse_postfix(parse_primary()));  // "is divisibleby 3", "is sameas x"
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  expr_ptr parse_postfix(expr_ptr e) {
    while (true) {
      if (is_punct(".")) {
        auto a = make(expr::op::attr, cur().line);
        ++p_;
        if (cur().t == token::type::integer) {  // foo.0 is foo[0]
          a->o = expr::op::item;
          a->a.push_back(std::move(e));
          auto i = make(expr::op::literal, cur().line);
          std::int64_t x = 0;
          const std::string& digits = t_[p_++].v;
          if (std::from_chars(digits.data(), digits.data() + digits.size(), x).ec != std::errc())
            fail(i->line, "index " + digits + " is out of range");
          i->lit = value::integer(x);
          a->a.push_back(std::move(i));
        } else {
          a->name = expect_name();
          a->a.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (is_punct("[")) {
        const int line = cur().line;
        ++p_;
        expr_ptr parts[3];
        int colons = 0;
        if (!is_punct(":")) parts[0] = parse_expression();
        while (is_punct(":") && colons < 2) {
          ++p_;
          ++colons;
          if (!is_punct(":") && !is_punct("]")) parts[colons] = parse_expression();
        }
        expect_punct("]");
        auto s = make(colons ? expr::op::slice : expr::op::item, line);
        s->a.push_back(std::move(e));
        if (colons) {
          for (auto& x : parts) s->a.push_back(std::move(x));
        } else {
          if (!parts[0]) fail(line, "empty subscript");
          s->a.push_back(std::move(parts[0]));
        }
        e = std::move(s);
      } else if (is_punct("(")) {
        auto c = make(expr::op::call, cur().line);
        c->a.push_back(std::move(e));
        parse_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  expr_ptr parse_primary() {
    const token k = cur();
    switch (k.t) {
      case token::type::string: {
        auto e = make(expr::op::literal, k.line);
        std::string s;
        while (cur().t == token::type::string) s += t_[p_++].v;  // "a" "b" is "ab"
        e->lit = value::string(std::move(s));
        return e;
      }
      case token::type::integer: {
        ++p_;
        auto e = make(expr::op::literal, k.line);
        std::int64_t x = 0;
        const auto r = std::from_chars(k.v.data(), k.v.data() + k.v.size(), x);
        if (r.ec == std::errc()) e->lit = value::integer(x);
        else fail(k.line, "integer literal " + k.v + " is out of range");
        return e;
      }
      case token::type::number: {
        ++p_;
        auto e = make(expr::op::literal, k.line);
        e->lit = value::number(std::strtod(k.v.c_str(), nullptr));  // 1e999 is inf, as in Python
        return e;
      }
      case token::type::name: {
        ++p_;
        auto e = make(expr::op::literal, k.line);
        if (k.v == "true" || k.v == "True") e->lit = value::boolean(true);
        else if (k.v == "false" || k.v == "False") e->lit = value::boolean(false);
        else if (k.v == "none" || k.v == "None") e->lit = value::none();
        else { e->o = expr::op::name; e->name = k.v; }
        return e;
      }
      case token::type::punct:
        if (k.v == "(") {
          ++p_;
          if (is_punct(")")) { ++p_; return make(expr::op::tuple, k.line); }
          expr_ptr first = parse_expression();
          if (is_punct(",")) {
            auto t = make(expr::op::tuple, k.line);
            t->a.push_back(std::move(first));
            while (is_punct(",")) {
              ++p_;
              if (is_punct(")")) break;
              t->a.push_back(parse_expression());
            }
            expect_punct(")");
            return t;
          }
          expect_punct(")");
          return first;
        }
        if (k.v == "[") {
          ++p_;
          auto l = make(expr::op::list, k.line);
          while (!is_punct("]")) {
            l->a.push_back(parse_expression());
            if (!is_punct("]")) expect_punct(",");
          }
          ++p_;
          return l;
        }
        if (k.v == "{") {
          ++p_;
          auto d = make(expr::op::dict, k.line);
          while (!is_punct("}")) {
            d->a.push_back(parse_expression());
            expect_punct(":");
            d->a.push_back(parse_expression());
            if (!is_punct("}")) expect_punct(",");
          }
          ++p_;
          return d;
        }
        break;
      default: break;
    }
    unexpected("an expression");
  }
};

// ---------------------------------------------------------------------------------------
// interpreter

struct scope {
  std::map<std::string, value, std::less<>> vars;
  const scope* parent = nullptr;
  const value* lookup(std::string_view name) const {
    for (const scope* s = this; s; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

enum class flow : std::uint8_t { normal, break_, continue_ };

struct macro_def;

class interpreter {
 public:
  explicit interpreter(const scope& globals) : root_{{}, &globals} {}

  std::string run(const body_t& body) {
    std::string out;
    exec(body, root_, out);
    return out;
  }

 private:
  scope root_;
  int macro_depth_ = 0;

  // --- statements
  flow exec(const body_t& body, scope& sc, std::string& out) {
    for (const stmt& s : body) {
      const flow f = exec(s, sc, out);
      if (f != flow::normal) return f;
    }
    return flow::normal;
  }

  flow exec(const stmt& s, scope& sc, std::string& out) {
    switch (s.o) {
      case stmt::op::text: out += s.text; return flow::normal;
      case stmt::op::output: out += to_text(eval(*s.e, sc)); return flow::normal;
      case stmt::op::if_: return exec(truthy(eval(*s.e, sc)) ? s.body : s.orelse, sc, out);
      case stmt::op::for_: return exec_for(s, sc, out);
      case stmt::op::set: {
        value v = eval(*s.e, sc);
        if (!s.attr.empty()) {
          const value* target = sc.lookup(s.targets[0]);
          if (!target || !target->is(value::kind::ns))
            fail(s.line, "cannot assign attribute '" + s.attr + "' of '" + s.targets[0] + "': not a namespace");
          // namespaces are the only values assigned into: refusing cycles keeps them freed
          if (holds(v, target->m.get(), 0))
            fail(s.line, "cannot assign '" + s.targets[0] + "." + s.attr + "': the value holds the namespace itself");
          set_key(*target->m, s.attr, std::move(v));
        } else if (s.targets.size() == 1) {
          sc.vars[s.targets[0]] = std::move(v);
        } else {
          list_t items = iterate(v, s.line);
          if (items.size() != s.targets.size())
            fail(s.line, "cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(s.targets.size()));
          for (std::size_t k = 0; k < items.size(); ++k) sc.vars[s.targets[k]] = std::move(items[k]);
        }
        return flow::normal;
      }
      case stmt::op::set_block: {
        std::string text;
        exec(s.body, sc, text);
        value v = value::string(std::move(text));
        if (s.e) v = apply_filter(*s.e, std::move(v), sc);
        sc.vars[s.targets[0]] = std::move(v);
        return flow::normal;
      }
      case stmt::op::macro: {
        sc.vars[s.text] = make_macro(s, sc);
        return flow::normal;
      }
      case stmt::op::call_block: {
        // caller() renders the block's body in the scope of the call
        auto caller = std::make_shared<callable>();
        caller->name = "caller";
        const body_t* body = &s.body;
        scope* where = &sc;
        caller->fn = [this, body, where](list_t&, kwargs_t&, int) {
          std::string text;
          scope inner{{}, where};
          exec(*body, inner, text);
          return value::string(std::move(text));
        };
        value cv;
        cv.k = value::kind::function;
        cv.f = caller;
        // the macro gets caller as a keyword argument, as in Jinja
        value f = eval(*s.e->a[0], sc);
        list_t args;
        kwargs_t kwargs;
        eval_args(*s.e, 1, sc, args, kwargs);
        kwargs.emplace_back("caller", std::move(cv));
        if (!f.is(value::kind::function)) fail(s.line, "call: not a macro");
        out += to_text(f.f->fn(args, kwargs, s.line));
        return flow::normal;
      }
      case stmt::op::filter_block: {
        std::string text;
        exec(s.body, sc, text);
        out += to_text(apply_filter(*s.e, value::string(std::move(text)), sc));
        return flow::normal;
      }
      case stmt::op::break_: return flow::break_;
      case stmt::op::continue_: return flow::continue_;
    }
    return flow::normal;
  }

  static bool holds(const value& v, const dict_t* m, int depth) {
    if (depth > 100) return true;
    if (v.m) {
      if (v.m.get() == m) return true;
      for (const auto& [k, x] : *v.m)
        if (holds(x, m, depth + 1)) return true;
    }
    if (v.l)
      for (const auto& x : *v.l)
        if (holds(x, m, depth + 1)) return true;
    return false;
  }

  static void set_key(dict_t& m, const std::string& key, value v) {
    for (auto& [k, x] : m)
      if (k == key) { x = std::move(v); return; }
    m.emplace_back(key, std::move(v));
  }

  list_t iterate(const value& v, int line) {
    switch (v.k) {
      case value::kind::undefined: return {};  // Jinja's Undefined iterates as empty
      case value::kind::list: return *v.l;
      case value::kind::dict: {
        list_t keys;
        for (const auto& [k, x] : *v.m) keys.push_back(value::string(k));
        return keys;
      }
      case value::kind::string: {
        list_t chars;
        for (auto c : code_points(v.s)) chars.push_back(value::string(std::string(c)));
        return chars;
      }
      default: fail(line, std::string("cannot iterate over a ") + kind_name(v));
    }
  }

  flow exec_for(const stmt& s, scope& sc, std::string& out) {
    list_t all = iterate(eval(*s.e, sc), s.line);
    auto bind = [&](scope& inner, const value& item) {
      if (s.targets.size() == 1) {
        inner.vars[s.targets[0]] = item;
        return;
      }
      list_t parts = iterate(item, s.line);
      if (parts.size() != s.targets.size())
        fail(s.line, "cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(s.targets.size()));
      for (std::size_t k = 0; k < parts.size(); ++k) inner.vars[s.targets[k]] = parts[k];
    };
    list_t items;
    if (s.cond) {
      for (auto& item : all) {
        scope probe{{}, &sc};
        bind(probe, item);
        if (truthy(eval(*s.cond, probe))) items.push_back(std::move(item));
      }
    } else {
      items = std::move(all);
    }
    if (items.empty()) {
      return exec(s.orelse, sc, out);
    }
    const auto n = static_cast<std::int64_t>(items.size());
    for (std::int64_t k = 0; k < n; ++k) {
      scope inner{{}, &sc};
      bind(inner, items[static_cast<std::size_t>(k)]);
      dict_t loop{{"index", value::integer(k + 1)},
                  {"index0", value::integer(k)},
                  {"revindex", value::integer(n - k)},
                  {"revindex0", value::integer(n - k - 1)},
                  {"first", value::boolean(k == 0)},
                  {"last", value::boolean(k == n - 1)},
                  {"length", value::integer(n)},
                  {"previtem", k > 0 ? items[static_cast<std::size_t>(k - 1)] : value::undefined("'loop.previtem'")},
                  {"nextitem", k + 1 < n ? items[static_cast<std::size_t>(k + 1)] : value::undefined("'loop.nextitem'")}};
      inner.vars["loop"] = value::dict(std::move(loop));
      const flow f = exec(s.body, inner, out);
      if (f == flow::break_) break;
    }
    return flow::normal;
  }

  value make_macro(const stmt& s, scope& sc) {
    auto c = std::make_shared<callable>();
    c->name = s.text;
    const stmt* def = &s;
    // a macro defined at the top sees the template's variables as they are at the call; one
    // defined inside a loop or macro keeps a copy of what it saw (that scope ends before it may)
    std::shared_ptr<scope> captured;
    if (&sc != &root_) {
      captured = std::make_shared<scope>();
      captured->parent = &root_;
      for (const scope* x = &sc; x && x != &root_; x = x->parent)
        for (const auto& [k, v] : x->vars) captured->vars.emplace(k, v);
    }
    c->fn = [this, def, captured](list_t& args, kwargs_t& kwargs, int line) {
      const scope* where = captured ? captured.get() : &root_;
      if (args.size() > def->params.size())
        fail(line, "macro '" + def->text + "' takes " + std::to_string(def->params.size()) + " arguments, got " +
                       std::to_string(args.size()));
      if (++macro_depth_ > 100) fail(line, "macro '" + def->text + "': recursion too deep");
      scope inner{{}, where};
      for (std::size_t k = 0; k < def->params.size(); ++k) {
        const auto& [name, dflt] = def->params[k];
        if (k < args.size()) {
          inner.vars[name] = args[k];
          continue;
        }
        auto it = std::find_if(kwargs.begin(), kwargs.end(), [&](auto& kv) { return kv.first == name; });
        if (it != kwargs.end()) inner.vars[name] = it->second;
        else if (dflt) inner.vars[name] = eval(*dflt, inner);
        else inner.vars[name] = value::undefined("'" + name + "'");
      }
      for (const auto& [k, v] : kwargs) {
        if (k == "caller") {
          inner.vars["caller"] = v;
          continue;
        }
        if (std::none_of(def->params.begin(), def->params.end(), [&](auto& p) { return p.first == k; }))
          fail(line, "macro '" + def->text + "' has no parameter '" + k + "'");
      }
      std::string text;
      exec(def->body, inner, text);
      --macro_depth_;
      return value::string(std::move(text));
    };
    value v;
    v.k = value::kind::function;
    v.f = std::move(c);
    return v;
  }

  // --- expressions
  [[noreturn]] static void undefined_error(const value& v, int line) {
    fail(line, (v.s.empty() ? std::string("value") : v.s) + " is undefined");
  }

  value eval(const expr& e, scope& sc) {
    switch (e.o) {
      case expr::op::literal: return e.lit;
      case expr::op::name: {
        if (const value* v = sc.lookup(e.name)) return *v;
        return value::undefined("'" + e.name + "'");
      }
      case expr::op::attr: return get_attr(eval(*e.a[0], sc), e.name, e.line);
      case expr::op::item: return get_item(eval(*e.a[0], sc), eval(*e.a[1], sc), e.line);
      case expr::op::slice: return slice(e, sc);
      case expr::op::call: return call(e, sc);
      case expr::op::filter: return apply_filter(e, eval(*e.a[0], sc), sc);
      case expr::op::test: {
        const bool r = test(e, sc);
        return value::boolean(e.negate ? !r : r);
      }
      case expr::op::not_: return value::boolean(!truthy(eval(*e.a[0], sc)));
      case expr::op::neg:
      case expr::op::pos: {
        value v = eval(*e.a[0], sc);
        if (v.is(value::kind::integer)) {
          if (e.o == expr::op::pos) return v;
          if (v.i == INT64_MIN) fail(e.line, "integer overflow (kiln's integers are 64-bit)");
          return value::integer(-v.i);
        }
        if (v.is(value::kind::number)) return e.o == expr::op::neg ? value::number(-v.d) : v;
        if (v.is(value::kind::boolean)) return value::integer(e.o == expr::op::neg ? -int(v.b) : int(v.b));
        if (v.is(value::kind::undefined)) undefined_error(v, e.line);
        fail(e.line, std::string("bad operand type for unary ") + (e.o == expr::op::neg ? "-" : "+") + ": " + kind_name(v));
      }
      case expr::op::and_: {
        value l = eval(*e.a[0], sc);
        return truthy(l) ? eval(*e.a[1], sc) : l;
      }
      case expr::op::or_: {
        value l = eval(*e.a[0], sc);
        return truthy(l) ? l : eval(*e.a[1], sc);
      }
      case expr::op::ternary:
        if (truthy(eval(*e.a[0], sc))) return eval(*e.a[1], sc);
        return e.a[2] ? eval(*e.a[2], sc) : value::undefined("the ternary's else");
      case expr::op::list:
      case expr::op::tuple: {
        list_t l;
        for (const auto& x : e.a) l.push_back(eval(*x, sc));
        value v = value::list(std::move(l));
        v.tuple = e.o == expr::op::tuple;
        return v;
      }
      case expr::op::dict: {
        dict_t m;
        for (std::size_t k = 0; k + 1 < e.a.size(); k += 2) {
          value key = eval(*e.a[k], sc);
          if (!key.is(value::kind::string)) fail(e.line, std::string("dict keys must be strings, got a ") + kind_name(key));
          set_key(m, key.s, eval(*e.a[k + 1], sc));
        }
        return value::dict(std::move(m));
      }
      case expr::op::binary: return binary(e, sc);
    }
    fail(e.line, "bad expression");
  }

  value binary(const expr& e, scope& sc) {
    value l = eval(*e.a[0], sc);
    value r = eval(*e.a[1], sc);
    const std::string& op = e.name;
    if (op == "==") return value::boolean(equal(l, r));
    if (op == "!=") return value::boolean(!equal(l, r));
    if (op == "in") {
      bool found = false;
      if (r.is(value::kind::string)) {
        if (!l.is(value::kind::string)) fail(e.line, std::string("'in <string>' needs a string on the left, got a ") + kind_name(l));
        found = r.s.find(l.s) != std::string::npos;
      } else if (r.is(value::kind::list)) {
        found = std::any_of(r.l->begin(), r.l->end(), [&](const value& x) { return equal(x, l); });
      } else if (r.is(value::kind::dict) || r.is(value::kind::ns)) {
        found = l.is(value::kind::string) && r.find(l.s);
      } else if (!r.is(value::kind::undefined)) {
        fail(e.line, std::string("'in' needs a string, list or dict on the right, got a ") + kind_name(r));
      }
      return value::boolean(e.negate ? !found : found);
    }
    if (op == "<") return value::boolean(compare(l, r, e.line, "<") < 0);
    if (op == ">") return value::boolean(compare(l, r, e.line, ">") > 0);
    if (op == "<=") return value::boolean(compare(l, r, e.line, "<=") <= 0);
    if (op == ">=") return value::boolean(compare(l, r, e.line, ">=") >= 0);
    if (op == "~") return value::string(to_text(l) + to_text(r));
    if (l.is(value::kind::undefined)) undefined_error(l, e.line);
    if (r.is(value::kind::undefined)) undefined_error(r, e.line);
    if (op == "+") {
      if (l.is(value::kind::string) && r.is(value::kind::string)) return value::string(l.s + r.s);
      if (l.is(value::kind::list) && r.is(value::kind::list)) {
        list_t c = *l.l;
        c.insert(c.end(), r.l->begin(), r.l->end());
        return value::list(std::move(c));
      }
    }
    if (op == "*") {
      const value* str = l.is(value::kind::string) || l.is(value::kind::list) ? &l : r.is(value::kind::string) || r.is(value::kind::list) ? &r : nullptr;
      const value* n = str == &l ? &r : &l;
      if (str && (n->is(value::kind::integer) || n->is(value::kind::boolean))) {
        const std::int64_t times = n->is(value::kind::boolean) ? n->b : n->i;
        if (str->is(value::kind::string)) {
          std::string out;
          if (times > 0 && str->s.size() * static_cast<std::uint64_t>(times) > (std::uint64_t{1} << 28))
            fail(e.line, "string repetition longer than 256 MiB");
          for (std::int64_t k = 0; k < times; ++k) out += str->s;
          return value::string(std::move(out));
        }
        list_t out;
        if (times > 0 && str->l->size() * static_cast<std::uint64_t>(times) > (std::uint64_t{1} << 24))
          fail(e.line, "list repetition longer than 16M items");
        for (std::int64_t k = 0; k < times; ++k) out.insert(out.end(), str->l->begin(), str->l->end());
        return value::list(std::move(out));
      }
    }
    if (!l.numeric() || !r.numeric())
      fail(e.line, "unsupported operand types for " + op + ": " + kind_name(l) + " and " + kind_name(r));
    const bool ints = !l.is(value::kind::number) && !r.is(value::kind::number);
    const std::int64_t a = l.is(value::kind::boolean) ? l.b : l.i, b = r.is(value::kind::boolean) ? r.b : r.i;
    const double x = l.as_double(), y = r.as_double();
    std::int64_t res = 0;
    auto overflow = [&] { fail(e.line, "integer overflow in '" + op + "' (kiln's integers are 64-bit)"); };
    if (op == "+") {
      if (ints && __builtin_add_overflow(a, b, &res)) overflow();
      return ints ? value::integer(res) : value::number(x + y);
    }
    if (op == "-") {
      if (ints && __builtin_sub_overflow(a, b, &res)) overflow();
      return ints ? value::integer(res) : value::number(x - y);
    }
    if (op == "*") {
      if (ints && __builtin_mul_overflow(a, b, &res)) overflow();
      return ints ? value::integer(res) : value::number(x * y);
    }
    if (op == "/") {
      if (y == 0) fail(e.line, "division by zero");
      return value::number(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail(e.line, "division by zero");
      if (ints) {
        if (a == INT64_MIN && b == -1) overflow();
        std::int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) { --q; m += b; }
        return op == "//" ? value::integer(q) : value::integer(m);
      }
      const double q = std::floor(x / y);
      return op == "//" ? value::number(q) : value::number(x - q * y);
    }
    if (op == "**") {
      if (ints && b >= 0) {
        std::int64_t p = 1;
        if (a == 0 || a == 1) return value::integer(b == 0 ? 1 : a);
        if (a == -1) return value::integer(b % 2 ? -1 : 1);
        for (std::int64_t k = 0; k < b; ++k)  // |a| >= 2: overflows within 63 steps
          if (__builtin_mul_overflow(p, a, &p)) overflow();
        return value::integer(p);
      }
      return value::number(std::pow(x, y));
    }
    fail(e.line, "unsupported operator '" + op + "'");
  }

  value get_attr(const value& obj, const std::string& name, int line) {
    if (obj.is(value::kind::undefined)) undefined_error(obj, line);
    if (obj.is(value::kind::dict) || obj.is(value::kind::ns)) {
      if (const value* v = obj.find(name)) return *v;
    }
    if (value m = method(obj, name, line); !m.is(value::kind::undefined)) return m;
    return value::undefined("attribute '" + name + "' of a " + kind_name(obj));
  }

  value get_item(const value& obj, const value& key, int line) {
    if (obj.is(value::kind::undefined)) undefined_error(obj, line);
    if (key.is(value::kind::string)) return get_attr_item(obj, key.s, line);
    if (key.is(value::kind::integer) || key.is(value::kind::boolean)) {
      std::int64_t i = key.is(value::kind::boolean) ? key.b : key.i;
      if (obj.is(value::kind::list)) {
        const auto n = static_cast<std::int64_t>(obj.l->size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return value::undefined("list index " + std::to_string(key.i) + " (out of range):");
        return (*obj.l)[static_cast<std::size_t>(i)];
      }
      if (obj.is(value::kind::string)) {
        auto cps = code_points(obj.s);
        const auto n = static_cast<std::int64_t>(cps.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return value::undefined("string index " + std::to_string(key.i) + " (out of range):");
        return value::string(std::string(cps[static_cast<std::size_t>(i)]));
      }
    }
    return value::undefined("item " + repr(key) + " of a " + kind_name(obj) + ":");
  }

  value get_attr_item(const value& obj, const std::string& key, int line) {
    if (obj.is(value::kind::dict) || obj.is(value::kind::ns)) {
      if (const value* v = obj.find(key)) return *v;
      if (value m = method(obj, key, line); !m.is(value::kind::undefined)) return m;
      return value::undefined("attribute '" + key + "' of a " + kind_name(obj));
    }
    return get_attr(obj, key, line);
  }

  value slice(const expr& e, scope& sc) {
    value obj = eval(*e.a[0], sc);
    if (obj.is(value::kind::undefined)) undefined_error(obj, e.line);
    std::optional<std::int64_t> b[3];
    for (int k = 0; k < 3; ++k) {
      if (!e.a[static_cast<std::size_t>(k + 1)]) continue;
      value v = eval(*e.a[static_cast<std::size_t>(k + 1)], sc);
      if (v.is(value::kind::none)) continue;
      if (!v.is(value::kind::integer)) fail(e.line, std::string("slice bounds must be integers, got a ") + kind_name(v));
      b[k] = v.i;
    }
    const std::int64_t step = b[2].value_or(1);
    if (step == 0) fail(e.line, "slice step cannot be zero");
    std::vector<std::string_view> cps;
    std::int64_t n = 0;
    if (obj.is(value::kind::list)) n = static_cast<std::int64_t>(obj.l->size());
    else if (obj.is(value::kind::string)) { cps = code_points(obj.s); n = static_cast<std::int64_t>(cps.size()); }
    else fail(e.line, std::string("cannot slice a ") + kind_name(obj));
    auto clamp = [&](std::optional<std::int64_t> x, std::int64_t dflt, std::int64_t lo, std::int64_t hi) {
      if (!x) return dflt;
      std::int64_t v = *x < 0 ? *x + n : *x;
      return std::clamp(v, lo, hi);
    };
    std::int64_t start, stop;
    if (step > 0) { start = clamp(b[0], 0, 0, n); stop = clamp(b[1], n, 0, n); }
    else { start = clamp(b[0], n - 1, -1, n - 1); stop = clamp(b[1], -1, -1, n - 1); }
    list_t out_list;
    std::string out_str;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (obj.is(value::kind::list)) out_list.push_back((*obj.l)[static_cast<std::size_t>(i)]);
      else out_str += cps[static_cast<std::size_t>(i)];
    }
    return obj.is(value::kind::list) ? value::list(std::move(out_list)) : value::string(std::move(out_str));
  }

  void eval_args(const expr& e, std::size_t first, scope& sc, list_t& args, kwargs_t& kwargs) {
    for (std::size_t k = first; k < e.a.size(); ++k) args.push_back(eval(*e.a[k], sc));
    for (const auto& [name, x] : e.kw) kwargs.emplace_back(name, eval(*x, sc));
  }

  value call(const expr& e, scope& sc) {
    value f = eval(*e.a[0], sc);
    list_t args;
    kwargs_t kwargs;
    eval_args(e, 1, sc, args, kwargs);
    if (f.is(value::kind::undefined)) undefined_error(f, e.line);
    if (!f.is(value::kind::function)) fail(e.line, std::string("a ") + kind_name(f) + " is not callable");
    return f.f->fn(args, kwargs, e.line);
  }

  static value make_fn(std::string name, std::function<value(list_t&, kwargs_t&, int)> fn) {
    value v;
    v.k = value::kind::function;
    v.f = std::make_shared<callable>(callable{std::move(name), std::move(fn)});
    return v;
  }

  static const value* arg(list_t& args, kwargs_t& kwargs, std::size_t pos, std::string_view name) {
    if (pos < args.size()) return &args[pos];
    for (auto& [k, v] : kwargs)
      if (k == name) return &v;
    return nullptr;
  }
  static std::string string_arg(list_t& args, kwargs_t& kwargs, std::size_t pos, std::string_view name, int line,
                                const std::string& what) {
    const value* v = arg(args, kwargs, pos, name);
    if (!v || !v->is(value::kind::string)) fail(line, what + ": argument '" + std::string(name) + "' must be a string");
    return v->s;
  }
  static std::optional<std::string> opt_string_arg(list_t& args, kwargs_t& kwargs, std::size_t pos, std::string_view name,
                                                   int line, const std::string& what) {
    const value* v = arg(args, kwargs, pos, name);
    if (!v || v->is(value::kind::none)) return std::nullopt;
    if (!v->is(value::kind::string)) fail(line, what + ": argument '" + std::string(name) + "' must be a string");
    return v->s;
  }

  // methods of strings, dicts and lists (a bound function, or undefined when there is none)
  value method(const value& obj, const std::string& name, int line) {
    (void)line;
    if (obj.is(value::kind::string)) {
      const std::string s = obj.s;
      if (name == "strip" || name == "lstrip" || name == "rstrip") {
        const bool left = name != "rstrip", right = name != "lstrip";
        return make_fn(name, [s, left, right, name](list_t& a, kwargs_t& k, int l) {
          return value::string(strip(s, left, right, opt_string_arg(a, k, 0, "chars", l, name)));
        });
      }
      if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
        const int mode = name == "lower" ? 0 : name == "upper" ? 1 : name == "title" ? 2 : 3;
        return make_fn(name, [s, mode](list_t&, kwargs_t&, int) { return value::string(map_case(s, mode)); });
      }
      if (name == "startswith" || name == "endswith") {
        const bool start = name == "startswith";
        return make_fn(name, [s, start, name](list_t& a, kwargs_t& k, int l) {
          const value* p = arg(a, k, 0, "prefix");
          if (!p) fail(l, name + "() takes one argument");
          auto one = [&](const value& x) {
            if (!x.is(value::kind::string)) fail(l, name + "(): the argument must be a string or a list of strings");
            return start ? s.compare(0, x.s.size(), x.s) == 0 && s.size() >= x.s.size()
                         : s.size() >= x.s.size() && s.compare(s.size() - x.s.size(), x.s.size(), x.s) == 0;
          };
          if (p->is(value::kind::list)) return value::boolean(std::any_of(p->l->begin(), p->l->end(), one));
          return value::boolean(one(*p));
        });
      }
      if (name == "split" || name == "rsplit") {
        return make_fn(name, [s, name](list_t& a, kwargs_t& k, int l) {
          const auto sep = opt_string_arg(a, k, 0, "sep", l, name);
          const value* mx = arg(a, k, 1, "maxsplit");
          std::int64_t maxsplit = mx && mx->is(value::kind::integer) ? mx->i : -1;
          list_t out;
          if (!sep) {
            std::size_t p = space_prefix(s);
            while (p < s.size()) {
              if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) >= maxsplit) {
                out.push_back(value::string(s.substr(p)));
                break;
              }
              std::size_t q = p, n = 0;
              while (q < s.size() && !py_space(decode_at(s, q, n))) q += n;
              out.push_back(value::string(s.substr(p, q - p)));
              p = q + space_prefix(std::string_view(s).substr(q));
            }
            return value::list(std::move(out));
          }
          if (sep->empty()) fail(l, name + "(): empty separator");
          if (name == "rsplit" && maxsplit >= 0) {
            std::vector<std::string> parts;
            std::size_t end = s.size();
            while (static_cast<std::int64_t>(parts.size()) < maxsplit) {
              if (end < sep->size()) break;
              const auto q = s.rfind(*sep, end - sep->size());
              if (q == std::string::npos) break;
              parts.push_back(s.substr(q + sep->size(), end - q - sep->size()));
              end = q;
            }
            parts.push_back(s.substr(0, end));
            for (auto it = parts.rbegin(); it != parts.rend(); ++it) out.push_back(value::string(*it));
            return value::list(std::move(out));
          }
          std::size_t p = 0;
          while (true) {
            const auto q = (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) >= maxsplit) ? std::string::npos : s.find(*sep, p);
            if (q == std::string::npos) { out.push_back(value::string(s.substr(p))); break; }
            out.push_back(value::string(s.substr(p, q - p)));
            p = q + sep->size();
          }
          return value::list(std::move(out));
        });
      }
      if (name == "replace") {
        return make_fn(name, [s](list_t& a, kwargs_t& k, int l) {
          const std::string from = string_arg(a, k, 0, "old", l, "replace()"), to = string_arg(a, k, 1, "new", l, "replace()");
          const value* c = arg(a, k, 2, "count");
          return value::string(replace_all(s, from, to, c && c->is(value::kind::integer) ? c->i : -1));
        });
      }
      if (name == "find" || name == "count") {
        return make_fn(name, [s, name](list_t& a, kwargs_t& k, int l) {
          const std::string sub = string_arg(a, k, 0, "sub", l, name + "()");
          if (name == "find") {
            const auto q = s.find(sub);
            return value::integer(q == std::string::npos ? -1 : static_cast<std::int64_t>(code_points(std::string_view(s).substr(0, q)).size()));
          }
          std::int64_t n = 0;
          if (sub.empty()) return value::integer(static_cast<std::int64_t>(code_points(s).size()) + 1);
          for (std::size_t q = s.find(sub); q != std::string::npos; q = s.find(sub, q + sub.size())) ++n;
          return value::integer(n);
        });
      }
      if (name == "join") {
        return make_fn(name, [s](list_t& a, kwargs_t& k, int l) {
          const value* items = arg(a, k, 0, "iterable");
          if (!items || !items->is(value::kind::list)) fail(l, "join(): the argument must be a list");
          std::string out;
          for (std::size_t i = 0; i < items->l->size(); ++i) out += (i ? s : "") + to_text((*items->l)[i]);
          return value::string(std::move(out));
        });
      }
      return value::undefined();
    }
    if (obj.is(value::kind::dict)) {
      auto m = obj.m;
      if (name == "items" || name == "keys" || name == "values") {
        return make_fn(name, [m, name](list_t&, kwargs_t&, int) {
          list_t out;
          for (const auto& [k, v] : *m) {
            if (name == "items") out.push_back(value::pair(value::string(k), v));
            else if (name == "keys") out.push_back(value::string(k));
            else out.push_back(v);
          }
          return value::list(std::move(out));
        });
      }
      if (name == "get") {
        return make_fn(name, [m](list_t& a, kwargs_t& k, int l) {
          const value* key = arg(a, k, 0, "key");
          if (!key) fail(l, "get() takes a key");
          if (key->is(value::kind::string))
            for (const auto& [n, v] : *m)
              if (n == key->s) return v;
          const value* d = arg(a, k, 1, "default");
          return d ? *d : value::none();
        });
      }
    }
    return value::undefined();
  }

  // --- tests
  bool test(const expr& e, scope& sc) {
    const std::string& name = e.name;
    value v = eval(*e.a[0], sc);
    list_t args;
    kwargs_t kwargs;
    eval_args(e, 1, sc, args, kwargs);
    auto need = [&](std::size_t n) {
      if (args.size() < n) fail(e.line, "test '" + name + "' takes " + std::to_string(n) + " argument(s)");
    };
    using K = value::kind;
    if (name == "defined") return !v.is(K::undefined);
    if (name == "undefined") return v.is(K::undefined);
    if (name == "none") return v.is(K::none);
    if (name == "string") return v.is(K::string);
    if (name == "number") return v.is(K::integer) || v.is(K::number) || v.is(K::boolean);  // Python: bool is an int
    if (name == "integer") return v.is(K::integer);
    if (name == "float") return v.is(K::number);
    if (name == "boolean") return v.is(K::boolean);
    if (name == "true") return v.is(K::boolean) && v.b;
    if (name == "false") return v.is(K::boolean) && !v.b;
    if (name == "mapping") return v.is(K::dict);
    if (name == "iterable") return v.is(K::list) || v.is(K::dict) || v.is(K::string) || v.is(K::undefined);
    if (name == "sequence") return v.is(K::list) || v.is(K::dict) || v.is(K::string);
    if (name == "callable") return v.is(K::function);
    if (name == "odd" || name == "even") {
      if (!v.is(K::integer)) fail(e.line, "test '" + name + "' needs an integer, got a " + kind_name(v));
      return (((v.i % 2) + 2) % 2 == 1) == (name == "odd");
    }
    if (name == "divisibleby") {
      need(1);
      if (!v.is(K::integer) || !args[0].is(K::integer) || args[0].i == 0) fail(e.line, "test 'divisibleby' needs integers");
      return v.i % args[0].i == 0;
    }
    if (name == "equalto" || name == "eq" || name == "sameas") { need(1); return equal(v, args[0]); }
    if (name == "ne") { need(1); return !equal(v, args[0]); }
    if (name == "lt" || name == "lessthan") { need(1); return compare(v, args[0], e.line, "<") < 0; }
    if (name == "gt" || name == "greaterthan") { need(1); return compare(v, args[0], e.line, ">") > 0; }
    if (name == "le") { need(1); return compare(v, args[0], e.line, "<=") <= 0; }
    if (name == "ge") { need(1); return compare(v, args[0], e.line, ">=") >= 0; }
    if (name == "in") {
      need(1);
      const value& c = args[0];
      if (c.is(K::list)) return std::any_of(c.l->begin(), c.l->end(), [&](const value& x) { return equal(x, v); });
      if (c.is(K::string)) return v.is(K::string) && c.s.find(v.s) != std::string::npos;
      if (c.is(K::dict)) return v.is(K::string) && c.find(v.s);
      return false;
    }
    if (name == "lower" || name == "upper") return v.is(K::string) && map_case(v.s, name == "lower" ? 0 : 1) == v.s;
    fail(e.line, "unsupported test '" + name + "'");
  }

  bool run_test(const std::string& name, const value& v, list_t args, int line) {
    expr e;
    e.o = expr::op::test;
    e.line = line;
    e.name = name;
    auto lit = std::make_unique<expr>();
    lit->o = expr::op::literal;
    lit->lit = v;
    e.a.push_back(std::move(lit));
    for (auto& x : args) {
      auto a = std::make_unique<expr>();
      a->o = expr::op::literal;
      a->lit = std::move(x);
      e.a.push_back(std::move(a));
    }
    scope none{{}, nullptr};
    return test(e, none);
  }

  // --- filters
  value apply_filter(const expr& f, value v, scope& sc) {
    list_t args;
    kwargs_t kwargs;
    eval_args(f, 1, sc, args, kwargs);
    return filter(f.name, std::move(v), args, kwargs, f.line, sc);
  }

  value filter(const std::string& name, value v, list_t& args, kwargs_t& kwargs, int line, scope& sc) {
    using K = value::kind;
    auto need_string = [&](const value& x) -> std::string {
      if (x.is(K::string)) return x.s;
      if (x.is(K::undefined)) return {};
      fail(line, "filter '" + name + "' needs a string, got a " + kind_name(x));
    };
    auto need_list = [&](const value& x) -> list_t {
      if (x.is(K::list)) return *x.l;
      if (x.is(K::undefined)) undefined_error(x, line);
      return iterate(x, line);
    };
    if (name == "safe") return v;
    if (name == "string") return value::string(to_text(v));
    if (name == "trim") return value::string(strip(to_text(v), true, true, opt_string_arg(args, kwargs, 0, "chars", line, "trim")));
    if (name == "upper") return value::string(map_case(need_string(v), 1));
    if (name == "lower") return value::string(map_case(need_string(v), 0));
    if (name == "title") {
      // Jinja's title filter (not str.title): words start after runs of -, whitespace, ( { [ <
      const std::string t = need_string(v);
      std::string out;
      bool start = true;
      for (std::size_t p = 0; p < t.size();) {
        std::size_t n = 0;
        const std::int32_t c = decode_at(t, p, n);
        const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_space(c);
        append_utf8(out, sep ? c : start ? utf8proc_toupper(c) : utf8proc_tolower(c));
        start = sep;
        p += n;
      }
      return value::string(std::move(out));
    }
    if (name == "capitalize") return value::string(map_case(need_string(v), 3));
    if (name == "replace") {
      const std::string from = string_arg(args, kwargs, 0, "old", line, "replace"), to = string_arg(args, kwargs, 1, "new", line, "replace");
      const value* c = arg(args, kwargs, 2, "count");
      return value::string(replace_all(to_text(v), from, to, c && c->is(K::integer) ? c->i : -1));
    }
    if (name == "length" || name == "count") {
      switch (v.k) {
        case K::string: return value::integer(static_cast<std::int64_t>(code_points(v.s).size()));
        case K::list: return value::integer(static_cast<std::int64_t>(v.l->size()));
        case K::dict:
        case K::ns: return value::integer(static_cast<std::int64_t>(v.m->size()));
        case K::undefined: return value::integer(0);
        default: fail(line, std::string("filter 'length': a ") + kind_name(v) + " has no length");
      }
    }
    if (name == "default" || name == "d") {
      const value* dflt = arg(args, kwargs, 0, "default_value");
      const value* boolean = arg(args, kwargs, 1, "boolean");
      const bool use = v.is(K::undefined) || (boolean && truthy(*boolean) && !truthy(v));
      return use ? (dflt ? *dflt : value::string("")) : v;
    }
    if (name == "first" || name == "last") {
      if (v.is(K::string)) {
        auto cps = code_points(v.s);
        if (cps.empty()) return value::undefined("the first item of an empty string:");
        return value::string(std::string(name == "first" ? cps.front() : cps.back()));
      }
      list_t l = need_list(v);
      if (l.empty()) return value::undefined("the " + name + " item of an empty list:");
      return name == "first" ? l.front() : l.back();
    }
    if (name == "join") {
      const value* sep = arg(args, kwargs, 0, "d");
      const value* attribute = arg(args, kwargs, 1, "attribute");
      std::string out;
      list_t l = need_list(v);
      for (std::size_t k = 0; k < l.size(); ++k) {
        if (k) out += sep ? to_text(*sep) : "";
        out += to_text(attribute ? get_attr_item(l[k], to_text(*attribute), line) : l[k]);
      }
      return value::string(std::move(out));
    }
    if (name == "list") return value::list(need_list(v));
    if (name == "items") {
      if (v.is(K::undefined)) return value::list();
      if (!v.is(K::dict)) fail(line, std::string("filter 'items' needs a dict, got a ") + kind_name(v));
      list_t out;
      for (const auto& [k, x] : *v.m) out.push_back(value::pair(value::string(k), x));
      return value::list(std::move(out));
    }
    if (name == "int") {
      const value* dflt = arg(args, kwargs, 0, "default");
      if (v.is(K::integer)) return v;
      if (v.is(K::boolean)) return value::integer(v.b);
      if (v.is(K::number)) return value::integer(static_cast<std::int64_t>(v.d));
      if (v.is(K::string)) {
        std::int64_t x = 0;
        std::string t = strip(v.s, true, true, std::nullopt);
        auto r = std::from_chars(t.data(), t.data() + t.size(), x);
        if (r.ec == std::errc() && r.ptr == t.data() + t.size()) return value::integer(x);
        char* end = nullptr;
        const double d = std::strtod(t.c_str(), &end);
        if (!t.empty() && end == t.c_str() + t.size()) return value::integer(static_cast<std::int64_t>(d));
      }
      return dflt ? *dflt : value::integer(0);
    }
    if (name == "float") {
      if (v.numeric()) return value::number(v.as_double());
      if (v.is(K::string)) {
        char* end = nullptr;
        const double d = std::strtod(v.s.c_str(), &end);
        if (!v.s.empty() && end == v.s.c_str() + v.s.size()) return value::number(d);
      }
      const value* dflt = arg(args, kwargs, 0, "default");
      return dflt ? *dflt : value::number(0);
    }
    if (name == "abs") {
      if (v.is(K::integer)) {
        if (v.i == INT64_MIN) fail(line, "integer overflow in abs");
        return value::integer(v.i < 0 ? -v.i : v.i);
      }
      if (v.is(K::number)) return value::number(std::fabs(v.d));
      fail(line, std::string("filter 'abs' needs a number, got a ") + kind_name(v));
    }
    if (name == "tojson") {
      const value* indent = arg(args, kwargs, 0, "indent");
      if (indent && indent->is(K::integer) && (indent->i < 0 || indent->i > 64)) fail(line, "filter 'tojson': indent outside 0..64");
      std::string out;
      to_json(out, v, indent && indent->is(K::integer) ? static_cast<int>(indent->i) : 0, 0, line);
      return value::string(std::move(out));
    }
    if (name == "reverse") {
      if (v.is(K::string)) {
        auto cps = code_points(v.s);
        std::string out;
        for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
        return value::string(std::move(out));
      }
      list_t l = need_list(v);
      std::reverse(l.begin(), l.end());
      return value::list(std::move(l));
    }
    if (name == "unique") {
      list_t out;
      for (auto& x : need_list(v))
        if (std::none_of(out.begin(), out.end(), [&](const value& y) { return equal(x, y); })) out.push_back(x);
      return value::list(std::move(out));
    }
    if (name == "sort") {
      list_t l = need_list(v);
      const value* rev = arg(args, kwargs, 0, "reverse");
      const value* attribute = arg(args, kwargs, 2, "attribute");
      auto key = [&](const value& x) { return attribute ? get_attr_item(x, to_text(*attribute), line) : x; };
      std::stable_sort(l.begin(), l.end(), [&](const value& a, const value& b) { return compare(key(a), key(b), line, "<") < 0; });
      if (rev && truthy(*rev)) std::reverse(l.begin(), l.end());
      return value::list(std::move(l));
    }
    if (name == "indent") {
      const value* width = arg(args, kwargs, 0, "width");
      const value* first = arg(args, kwargs, 1, "first");
      const value* blank = arg(args, kwargs, 2, "blank");
      if (width && width->is(K::integer) && (width->i < 0 || width->i > 4096)) fail(line, "filter 'indent': width outside 0..4096");
      const std::string pad = width && width->is(K::string) ? width->s : std::string(width && width->is(K::integer) ? static_cast<std::size_t>(width->i) : 4, ' ');
      const std::string s = to_text(v);
      std::string out;
      std::size_t p = 0;
      bool first_line = true;
      while (true) {
        const auto q = s.find('\n', p);
        const std::string ln = s.substr(p, q == std::string::npos ? std::string::npos : q - p);
        if ((first_line ? (first && truthy(*first)) : true) && (!ln.empty() || (blank && truthy(*blank)))) out += pad;
        out += ln;
        if (q == std::string::npos) break;
        out += '\n';
        p = q + 1;
        first_line = false;
      }
      return value::string(std::move(out));
    }
    if (name == "dictsort") {
      if (!v.is(K::dict)) fail(line, "filter 'dictsort' needs a dict");
      dict_t m = *v.m;
      std::stable_sort(m.begin(), m.end(), [](auto& a, auto& b) { return a.first < b.first; });
      list_t out;
      for (auto& [k, x] : m) out.push_back(value::pair(value::string(k), x));
      return value::list(std::move(out));
    }
    if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
      const bool by_attr = name.ends_with("attr");
      const bool keep = name.starts_with("select");
      std::size_t pos = 0;
      std::string attribute;
      if (by_attr) {
        if (args.empty() || !args[0].is(K::string)) fail(line, "filter '" + name + "' needs an attribute name");
        attribute = args[0].s;
        pos = 1;
      }
      std::string test_name;
      list_t test_args;
      if (pos < args.size()) {
        if (!args[pos].is(K::string)) fail(line, "filter '" + name + "': the test name must be a string");
        test_name = args[pos].s;
        test_args.assign(args.begin() + static_cast<std::ptrdiff_t>(pos + 1), args.end());
      }
      list_t out;
      for (auto& x : need_list(v)) {
        value probe = by_attr ? (x.is(K::dict) ? get_attr_item(x, attribute, line) : value::undefined()) : x;
        const bool ok = test_name.empty() ? truthy(probe) : run_test(test_name, probe, test_args, line);
        if (ok == keep) out.push_back(x);
      }
      return value::list(std::move(out));
    }
    if (name == "map") {
      list_t out;
      const value* attribute = nullptr;
      for (auto& [k, x] : kwargs)
        if (k == "attribute") attribute = &x;
      if (attribute) {
        const value* dflt = nullptr;
        for (auto& [k, x] : kwargs)
          if (k == "default") dflt = &x;
        for (auto& x : need_list(v)) {
          value r = get_attr_item(x, to_text(*attribute), line);
          out.push_back(r.is(K::undefined) && dflt ? *dflt : r);
        }
        return value::list(std::move(out));
      }
      if (args.empty() || !args[0].is(K::string)) fail(line, "filter 'map' needs a filter name or attribute=");
      const std::string inner = args[0].s;
      list_t rest(args.begin() + 1, args.end());
      for (auto& x : need_list(v)) {
        list_t a = rest;
        kwargs_t none;
        out.push_back(filter(inner, x, a, none, line, sc));
      }
      return value::list(std::move(out));
    }
    fail(line, "unsupported filter '" + name + "'");
  }
};

inline value make_global(std::string name, std::function<value(list_t&, kwargs_t&, int)> fn) {
  value v;
  v.k = value::kind::function;
  v.f = std::make_shared<callable>(callable{std::move(name), std::move(fn)});
  return v;
}

// range, namespace, raise_exception, strftime_now: the functions templates call
inline void add_globals(scope& g) {
  g.vars["range"] = make_global("range", [](list_t& a, kwargs_t&, int line) {
    std::int64_t lo = 0, hi = 0, step = 1;
    for (auto& x : a)
      if (!x.is(value::kind::integer)) fail(line, "range() takes integers");
    if (a.size() == 1) hi = a[0].i;
    else if (a.size() >= 2) { lo = a[0].i; hi = a[1].i; if (a.size() > 2) step = a[2].i; }
    else fail(line, "range() takes 1 to 3 arguments");
    if (step == 0) fail(line, "range() step must not be zero");
    list_t out;
    for (std::int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) {
      out.push_back(value::integer(i));
      if (out.size() > 1000000) fail(line, "range() too long");
    }
    return value::list(std::move(out));
  });
  g.vars["namespace"] = make_global("namespace", [](list_t& a, kwargs_t& k, int line) {
    value ns = value::dict();
    ns.k = value::kind::ns;
    for (auto& x : a) {
      if (!x.is(value::kind::dict)) fail(line, "namespace() takes a dict or keyword arguments");
      for (auto& kv : *x.m) ns.m->push_back(kv);
    }
    for (auto& kv : k) {
      auto it = std::find_if(ns.m->begin(), ns.m->end(), [&](auto& e) { return e.first == kv.first; });
      if (it != ns.m->end()) it->second = kv.second;
      else ns.m->push_back(kv);
    }
    return ns;
  });
  g.vars["dict"] = make_global("dict", [](list_t& a, kwargs_t& k, int line) {
    value d = value::dict();
    for (auto& x : a) {
      if (!x.is(value::kind::dict)) fail(line, "dict() takes a dict or keyword arguments");
      for (auto& kv : *x.m) d.m->push_back(kv);
    }
    for (auto& kv : k) d.m->push_back(kv);
    return d;
  });
  g.vars["raise_exception"] = make_global("raise_exception", [](list_t& a, kwargs_t&, int line) -> value {
    fail(line, "raise_exception: " + (a.empty() ? std::string() : to_text(a[0])));
  });
  g.vars["strftime_now"] = make_global("strftime_now", [](list_t& a, kwargs_t&, int line) {
    if (a.empty() || !a[0].is(value::kind::string)) fail(line, "strftime_now() takes a format string");
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    const std::size_t n = std::strftime(buf, sizeof buf, a[0].s.c_str(), &tm);
    return value::string(std::string(buf, n));
  });
}

}  // namespace detail::jinja

/// A parsed chat template (the Jinja text of tokenizer_config.json's chat_template).
/// Rendering is const and thread-safe. Throws chat_template_error (parse errors at
/// construction, others at render).
///   kiln::text::chat_template t(tok.config().chat_template.value());
///   std::string prompt = t.render({{"messages", msgs}, {"add_generation_prompt", true}});
class chat_template {
 public:
  explicit chat_template(std::string_view source) : source_(source) {
    auto toks = detail::jinja::tokenize(detail::jinja::preprocess(source));
    detail::jinja::parser p(std::move(toks));
    body_ = std::make_shared<const detail::jinja::body_t>(p.parse_all());
  }

  /// The template text.
  const std::string& source() const noexcept { return source_; }

  /// Renders with the top-level keys of `variables` (a JSON object) as template variables,
  /// beside the functions range, namespace, dict, raise_exception and strftime_now.
  template <class Json = nlohmann::ordered_json>
  std::string render(const Json& variables) const {
    detail::jinja::scope globals;
    detail::jinja::add_globals(globals);
    if (!variables.is_null()) {
      if (!variables.is_object()) throw chat_template_error("render: the variables must be a JSON object");
      for (const auto& [k, v] : variables.items()) globals.vars[k] = detail::jinja::from_json(v);
    }
    detail::jinja::interpreter in(globals);
    return in.run(*body_);
  }

  /// Renders a conversation: `messages` as a list of {role, content}, add_generation_prompt,
  /// `special_tokens` (bos_token, eos_token, ...; see chat_template_variables) and `extra`
  /// (e.g. {"enable_thinking": false} or {"tools": [...]}; it overrides the others). Variables
  /// not given (tools, documents, ...) are undefined, as in transformers.
  std::string apply(std::span<const chat_message> messages, bool add_generation_prompt,
                    const nlohmann::ordered_json& special_tokens = nlohmann::ordered_json::object(),
                    const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const {
    nlohmann::ordered_json vars = special_tokens.is_object() ? special_tokens : nlohmann::ordered_json::object();
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
    vars["messages"] = std::move(list);
    vars["add_generation_prompt"] = add_generation_prompt;
    if (extra.is_object())
      for (const auto& [k, v] : extra.items()) vars[k] = v;
    return render(vars);
  }

 private:
  std::string source_;
  std::shared_ptr<const detail::jinja::body_t> body_;
};

/// The special-token variables a template sees, from a parsed tokenizer_config.json: every
/// top-level field named "*_token" that is a string or {"content": ...} (bos_token,
/// eos_token, pad_token, unk_token, boi_token, ...), and additional_special_tokens.
template <class Json>
  requires(!std::is_same_v<Json, tokenizer_config>)
nlohmann::ordered_json chat_template_variables(const Json& tokenizer_config_json) {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  if (!tokenizer_config_json.is_object()) return vars;
  for (const auto& [k, v] : tokenizer_config_json.items()) {
    if (k.size() > 6 && k.ends_with("_token")) {
      if (v.is_string()) vars[k] = v;
      else if (v.is_object() && v.contains("content") && v["content"].is_string()) vars[k] = v["content"];
    }
  }
  if (auto it = tokenizer_config_json.find("additional_special_tokens"); it != tokenizer_config_json.end() && it->is_array())
    vars["additional_special_tokens"] = *it;
  return vars;
}

/// The special-token variables from a tokenizer's tokenizer_config.json (bos, eos, pad, unk).
inline nlohmann::ordered_json chat_template_variables(const tokenizer_config& config) {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  if (config.bos_token) vars["bos_token"] = *config.bos_token;
  if (config.eos_token) vars["eos_token"] = *config.eos_token;
  if (config.pad_token) vars["pad_token"] = *config.pad_token;
  if (config.unk_token) vars["unk_token"] = *config.unk_token;
  return vars;
}

/// The tokenizer's chat template (tokenizer_config.json's chat_template) rendered for
/// `messages`; throws chat_template_error if the tokenizer has none or it fails.
///   auto tok = kiln::text::tokenizer::from_pretrained(dir);
///   std::string prompt = kiln::text::apply_chat_template(tok, {{"user", "Hi"}}, true);
inline std::string apply_chat_template(const tokenizer& tok, std::span<const chat_message> messages,
                                       bool add_generation_prompt, const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) {
  if (!tok.config().chat_template) throw chat_template_error("the tokenizer has no chat_template (tokenizer_config.json)");
  return chat_template(*tok.config().chat_template)
      .apply(messages, add_generation_prompt, chat_template_variables(tok.config()), extra);
}

inline std::string apply_chat_template(const tokenizer& tok, std::initializer_list<chat_message> messages,
                                       bool add_generation_prompt, const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) {
  return apply_chat_template(tok, std::span<const chat_message>(messages.begin(), messages.size()), add_generation_prompt, extra);
}

}  // namespace kiln::text
