// kiln/models/architecture.hpp — which decoder a Hugging Face checkpoint needs, from its
// config.json's model_type and architectures: the hook a loader dispatches on (kiln::llama
// or kiln::bitnet), with an error naming both keys for any other architecture.
//
// Opt-in like kiln/io/safetensors.hpp: link kiln::io.
//
//   switch (kiln::models::architecture_of_dir(dir)) {
//     case kiln::models::architecture::llama:  ... kiln::llama::model<W, B>::load(ctx, dir)
//     case kiln::models::architecture::bitnet: ... kiln::bitnet::model<B>::load(ctx, dir)
//   }
#pragma once

#include <filesystem>
#include <string>

#include "kiln/models/hf_config.hpp"

namespace kiln::models {

/// The decoders kiln implements.
enum class architecture {
  llama,   // model_type "llama", LlamaForCausalLM (also a config naming neither key)
  bitnet,  // model_type "bitnet", BitNetForCausalLM (BitNet b1.58)
};

/// The architecture config.json asks for. Throws kiln::format_error (naming the file,
/// model_type and architectures) when it is none of kiln's, or when the two keys disagree.
inline architecture architecture_of(const hf_config& j) {
  std::string type;
  if (j.has("model_type")) {
    if (!j["model_type"].is_string()) j.fail("'model_type' is not a string: " + j["model_type"].dump());
    type = j["model_type"].get<std::string>();
  }
  bool llama_arch = false, bitnet_arch = false, other_arch = false;
  if (j.has("architectures")) {
    const auto& a = j["architectures"];
    if (!a.is_array()) j.fail("'architectures' is not a list: " + a.dump());
    for (const auto& e : a) {
      const std::string s = e.is_string() ? e.get<std::string>() : e.dump();
      if (s == "LlamaForCausalLM") llama_arch = true;
      else if (s == "BitNetForCausalLM") bitnet_arch = true;
      else other_arch = true;
    }
  }
  const auto why = [&]() {
    return "model_type " + (j.has("model_type") ? j["model_type"].dump() : std::string("(absent)")) +
           ", architectures " + (j.has("architectures") ? j["architectures"].dump() : std::string("(absent)")) +
           " is not an architecture kiln loads (llama: LlamaForCausalLM; bitnet: BitNetForCausalLM)";
  };
  if (llama_arch && bitnet_arch) j.fail(why());
  if (type == "bitnet" || (type.empty() && bitnet_arch)) {
    if (llama_arch || other_arch) j.fail(why());
    return architecture::bitnet;
  }
  if (type == "llama" || type.empty()) {
    if (bitnet_arch || other_arch) j.fail(why());
    return architecture::llama;
  }
  j.fail(why());
}

/// The architecture of the checkpoint directory dir (its config.json).
inline architecture architecture_of_dir(const std::string& dir) {
  return architecture_of(hf_config::load((std::filesystem::path(dir) / "config.json").string(), "kiln::models"));
}

}  // namespace kiln::models
