// kiln/text/eos.hpp — kiln::text::eos_token_ids: the ids that end generation, as a model
// directory states them (generation_config.json's eos_token_id, else config.json's; an
// int or a list of ints, as Hugging Face writes both).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/text/error.hpp"

namespace kiln::text {

/// The end-of-sequence ids of the model in `dir`: generation_config.json's "eos_token_id"
/// where the file has one, else config.json's; empty where neither says. Throws
/// tokenizer_error naming the file for JSON that does not parse or an eos_token_id that is
/// not an id or a list of ids.
///
///   std::vector<std::int32_t> stop = kiln::text::eos_token_ids("models/llama-3");  // {128001, 128009}
inline std::vector<std::int32_t> eos_token_ids(const std::filesystem::path& dir) {
  for (const char* name : {"generation_config.json", "config.json"}) {
    const std::filesystem::path file = dir / name;
    std::ifstream in(file, std::ios::binary);
    if (!in) continue;
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string where = "kiln::text: " + file.string();
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(ss.str());
    } catch (const nlohmann::json::exception& e) {
      throw tokenizer_error(where + ": not JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw tokenizer_error(where + ": expected an object");
    const auto it = j.find("eos_token_id");
    if (it == j.end() || it->is_null()) continue;
    const auto id = [&](const nlohmann::json& v) {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > INT32_MAX) {
        throw tokenizer_error(where + ": eos_token_id: expected a token id (an integer in [0, 2^31)), got " + v.dump());
      }
      return static_cast<std::int32_t>(v.get<std::int64_t>());
    };
    std::vector<std::int32_t> ids;
    if (it->is_array()) {
      for (const auto& v : *it) ids.push_back(id(v));
    } else {
      ids.push_back(id(*it));
    }
    return ids;
  }
  return {};
}

}  // namespace kiln::text
