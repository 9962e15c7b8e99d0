// kiln/text/post_processor.hpp — tokenizer.json "post_processor" components.
// TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel (offsets only: the ids
// pass unchanged) and Sequence, for single sequences.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/text/detail/json.hpp"

namespace kiln::text {

/// Adds the special tokens around an encoded sequence.
class post_processor {
 public:
  virtual ~post_processor() = default;
  virtual void process(std::vector<std::uint32_t>& ids, bool add_special_tokens) const = 0;
};

namespace detail {

/// TemplateProcessing's "single" template (and Bert/Roberta's cls A sep) as a list of
/// pieces: the sequence itself, or fixed ids.
class template_post_processor final : public post_processor {
 public:
  struct item {
    bool sequence;
    std::vector<std::uint32_t> ids;
  };
  explicit template_post_processor(std::vector<item> items) : items_(std::move(items)) {}
  void process(std::vector<std::uint32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    std::vector<std::uint32_t> out;
    out.reserve(ids.size() + 4);
    for (const auto& it : items_) {
      if (it.sequence) out.insert(out.end(), ids.begin(), ids.end());
      else out.insert(out.end(), it.ids.begin(), it.ids.end());
    }
    ids = std::move(out);
  }

 private:
  std::vector<item> items_;
};

class identity_post_processor final : public post_processor {
 public:
  void process(std::vector<std::uint32_t>&, bool) const override {}
};

class sequence_post_processor final : public post_processor {
 public:
  explicit sequence_post_processor(std::vector<std::unique_ptr<post_processor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<std::uint32_t>& ids, bool add_special_tokens) const override {
    for (const auto& s : steps_) s->process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<post_processor>> steps_;
};

inline std::vector<std::uint32_t> id_list(const json& v, const std::string& where) {
  std::vector<std::uint32_t> ids;
  if (!v.is_array()) fail(where, "\"ids\" must be an array of ids");
  for (const auto& e : v) {
    if (!e.is_number_integer() || e.get<std::int64_t>() < 0) fail(where, "\"ids\" must be an array of ids");
    ids.push_back(static_cast<std::uint32_t>(e.get<std::int64_t>()));
  }
  return ids;
}

/// Builds a post-processor from its JSON; where is "kiln::text: <file>: post_processor".
inline std::unique_ptr<post_processor> make_post_processor(const json& j, const std::string& where) {
  const std::string type = type_of(j, where);
  const std::string here = where + " '" + type + "'";
  using item = template_post_processor::item;
  if (type == "TemplateProcessing") {
    const json* specials = find(j, "special_tokens");
    std::vector<item> items;
    for (const auto& e : get_array(j, "single", here)) {
      if (const json* s = find(e, "Sequence")) {
        const std::string id = get_string(*s, "id", here);
        if (id != "A") fail(here, "the single template names sequence '" + id + "' (only A exists)");
        items.push_back({true, {}});
      } else if (const json* t = find(e, "SpecialToken")) {
        const std::string id = get_string(*t, "id", here);
        const json* st = specials ? find(*specials, id) : nullptr;
        if (!st) fail(here, "special token '" + id + "' is not in \"special_tokens\"");
        const json* ids = find(*st, "ids");
        if (!ids) fail(here, "special token '" + id + "' has no \"ids\"");
        items.push_back({false, id_list(*ids, here)});
      } else {
        fail(here, "a template item must be {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      }
    }
    return std::make_unique<template_post_processor>(std::move(items));
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto pair_id = [&](const char* key) {
      const json& v = get_array(j, key, here);
      if (v.size() != 2 || !v[1].is_number_integer() || v[1].get<std::int64_t>() < 0)
        fail(here, std::string("\"") + key + "\" must be [token, id]");
      return static_cast<std::uint32_t>(v[1].get<std::int64_t>());
    };
    std::vector<item> items{{false, {pair_id("cls")}}, {true, {}}, {false, {pair_id("sep")}}};
    return std::make_unique<template_post_processor>(std::move(items));
  }
  if (type == "ByteLevel") return std::make_unique<identity_post_processor>();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<post_processor>> steps;
    std::size_t k = 0;
    for (const auto& e : get_array(j, "processors", here))
      steps.push_back(make_post_processor(e, where + ".processors[" + std::to_string(k++) + "]"));
    return std::make_unique<sequence_post_processor>(std::move(steps));
  }
  fail(where, "unknown post_processor type '" + type + "'");
}

}  // namespace detail
}  // namespace kiln::text
