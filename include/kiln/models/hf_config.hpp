// kiln/models/hf_config.hpp — reading a Hugging Face config.json: the parsed JSON object
// behind typed getters (sizes, positive numbers, booleans) with defaults for absent keys,
// required keys, and errors naming the file and the key. Each architecture's config
// struct (kiln::llama::config, ...) parses its fields through one of these.
//
// Opt-in like kiln/io/safetensors.hpp: link kiln::io (nlohmann-json parses the file).
//
//   const auto r = kiln::models::hf_config::load(dir + "/config.json", "kiln::llama");
//   c.hidden_size = r.size("hidden_size");                 // required, positive
//   c.max_position_embeddings = r.size("max_position_embeddings", 2048);
//   c.rms_norm_eps = r.positive("rms_norm_eps", 1e-6f);
//   if (r.contains("hidden_act") && r["hidden_act"] != "silu") r.fail("...");
//
// A key holding null counts as absent for the getters (has(), size(), positive(),
// boolean()); contains() and operator[] see the raw JSON.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

namespace kiln::models {

/// A parsed config.json. Every error is a kiln::format_error "<who>: <where>: <why>":
/// who names the reader (the architecture, "kiln::llama"), where the file.
class hf_config {
 public:
  /// Parses config.json text. Throws kiln::format_error for bad JSON or a top level that
  /// is not an object.
  explicit hf_config(const std::string& text, std::string where = "config.json", std::string who = "kiln::models")
      : where_(std::move(where)), who_(std::move(who)) {
    try {
      j_ = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw format_error(who_ + ": " + where_ + ": not valid JSON: " + e.what());
    }
    if (!j_.is_object()) throw format_error(who_ + ": " + where_ + ": the top level is not a JSON object");
  }

  /// Reads and parses the file at path (named in messages). Throws kiln::error when it
  /// cannot be opened.
  static hf_config load(const std::string& path, const std::string& who = "kiln::models") {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw error(who + ": cannot open " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return hf_config(ss.str(), path, who);
  }

  /// Throws kiln::format_error "<who>: <where>: <why>".
  [[noreturn]] void fail(const std::string& why) const { throw format_error(who_ + ": " + where_ + ": " + why); }

  /// Whether key is present (null included).
  bool contains(const char* key) const { return j_.contains(key); }
  /// Whether key is present and not null.
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  /// The raw value of a present key (see contains).
  const nlohmann::json& operator[](const char* key) const { return j_.at(key); }
  /// The whole object.
  const nlohmann::json& json() const noexcept { return j_; }
  /// The file named in messages.
  const std::string& where() const noexcept { return where_; }

  /// A required positive integer (at most 2^31): fails when absent, not an integer or
  /// out of range.
  index_t size(const char* key) const { return size(key, std::nullopt); }
  /// A positive integer (at most 2^31), fallback when absent (or null).
  index_t size(const char* key, std::optional<index_t> fallback) const {
    if (!has(key)) {
      if (!fallback) fail(std::string("'") + key + "' is missing");
      return *fallback;
    }
    if (!j_[key].is_number_integer()) fail(std::string("'") + key + "' is not an integer: " + j_[key].dump());
    const auto v = j_[key].get<std::int64_t>();
    if (v <= 0 || v > (std::int64_t(1) << 31)) fail(std::string("'") + key + "' = " + std::to_string(v) + " is out of range");
    return static_cast<index_t>(v);
  }

  /// A positive finite number, fallback when absent (or null).
  float positive(const char* key, float fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_number()) fail(std::string("'") + key + "' is not a number: " + j_[key].dump());
    const double v = j_[key].get<double>();
    if (!(v > 0.0) || !std::isfinite(v)) fail(std::string("'") + key + "' = " + j_[key].dump() + " must be positive");
    return static_cast<float>(v);
  }

  /// A boolean, fallback when absent (or null).
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) fail(std::string("'") + key + "' is not a boolean");
    return j_[key].get<bool>();
  }

 private:
  nlohmann::json j_;
  std::string where_, who_;
};

}  // namespace kiln::models
