// examples/model_choice.hpp — the checkpoint loading that examples/transformer and
// examples/serve share: config.json's architecture picks kiln::llama or kiln::bitnet, the
// --weights flag (Llama: f32, f16, bf16, int8, int4) or --lm-head flag (BitNet: bf16, f16,
// int8) the storage, and the program gets a loader of the chosen model type.
#pragma once

#include <kiln/models/architecture.hpp>
#include <kiln/models/bitnet.hpp>
#include <kiln/models/llama.hpp>
#include <kiln/models/pipeline.hpp>
#include <kiln/models/tensor_parallel.hpp>

#include <string>

namespace kiln_examples {

/// The storage flags as given (has_*: whether the flag was on the command line).
struct model_choice {
  std::string weights = "f32", lm_head = "bf16";
  bool has_weights = false, has_lm_head = false;
};

/// Why the flags do not fit the checkpoint's architecture, or "" when they do.
inline std::string model_choice_problem(kiln::models::architecture arch, const model_choice& c) {
  if (arch == kiln::models::architecture::bitnet && c.has_weights)
    return "--weights: a BitNet checkpoint's projections are ternary; --lm-head picks its table's dtype";
  if (arch == kiln::models::architecture::llama && c.has_lm_head)
    return "--lm-head: only for BitNet checkpoints (a Llama checkpoint's dtype is --weights)";
  return {};
}

/// Calls f(load, what) with load(max_len) returning the model of dir on ctx's backend (a
/// kiln::llama::model<W, B> or kiln::bitnet::model<B>; max_len 0: the config's context,
/// at most 4096) and what naming its weights ("Llama, f16 weights"); returns f's result.
/// tp: this process's tensor-parallel group (default: alone; see kiln/dist/tensor_parallel.hpp);
/// pp: the layers' contexts (default: all on ctx; see kiln/models/pipeline.hpp).
template <class B, class F>
auto with_model(const kiln::context<B>& ctx, const std::string& dir, kiln::models::architecture arch, const model_choice& c,
                F&& f, const kiln::models::tensor_parallel<B>& tp = {}, const kiln::models::pipeline<B>& pp = {}) {
  if (arch == kiln::models::architecture::bitnet) {
    const auto table = kiln::bitnet::table_dtype_from(c.lm_head);
    return f(
        [&, table](kiln::index_t max_len) {
          return kiln::bitnet::model<B>::load(ctx, dir, {.max_len = max_len, .lm_head = table}, tp, pp);
        },
        std::string("BitNet b1.58, ternary projections, ") + kiln::bitnet::to_string(table) + " LM head");
  }
  kiln::llama::load_options lo;
  if (c.weights == "int8") lo.quant = kiln::llama::weight_quant::int8;
  if (c.weights == "int4") lo.quant = kiln::llama::weight_quant::int4;
  const auto llama = [&]<class W>() {
    return f(
        [&, lo](kiln::index_t max_len) mutable {
          lo.max_len = max_len;
          return kiln::llama::model<W, B>::load(ctx, dir, lo, tp, pp);
        },
        "Llama, " + c.weights + " weights");
  };
  if (c.weights == "f16") return llama.template operator()<kiln::half>();
  if (c.weights == "bf16") return llama.template operator()<kiln::bfloat16>();
  return llama.template operator()<float>();  // f32, int8, int4
}

}  // namespace kiln_examples
