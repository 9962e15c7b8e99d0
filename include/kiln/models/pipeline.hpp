// kiln/models/pipeline.hpp — a decoder's layers placed over several contexts of one process
// (a pipeline split): layers [0, a) on the first context, [a, b) on the second, ...; the
// embedding on the first stage, the final norm and the LM head on the last, each layer's
// weights and KV cache on its stage's context. Between stages the hidden state [n, H] is
// copied from one context to the next (kiln::copy_to: device to device through memory the
// two Vulkan contexts share where their devices allow it, else staged through the host),
// once per stage boundary per forward step. The decoders (llama.hpp, bitnet.hpp) take a
// pipeline<B> as they take a tensor_parallel<B>, and run their one layer loop stage by
// stage through placement<B>::run.
//
//   kiln::context<kiln::vulkan> a{kiln::vulkan::device_index{0}}, b{kiln::vulkan::device_index{1}};
//   auto m = kiln::llama::model<float, kiln::vulkan>::load(kiln::models::pipeline<kiln::vulkan>{{a, b}}, dir);
//   auto logits = m.forward(ids);   // [1, vocab], on b
//
// Two contexts on one device (device_index{0} twice) are two stages too: separate pools
// and queues, the same copies; that is how the split is tested on one lavapipe device.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"

namespace kiln::models {

/// Where a decoder's layers run. Default: every layer on the context the model is loaded
/// on (one stage). contexts: each stage's context, in layer order (a context may repeat:
/// two stages on one context copy nothing between them); starts: each stage's first
/// layer (0 first, increasing), or empty for an even split (the earlier stages take one
/// layer more when the stages do not divide the layers).
template <class B>
struct pipeline {
  std::vector<context<B>> contexts;
  std::vector<index_t> starts;
};

/// A pipeline resolved against a decoder's layers: each stage's context and layer range,
/// checked. Built by placement::of in the decoder's constructor and load().
template <class B>
class placement {
 public:
  struct stage {
    context<B> ctx;
    index_t first = 0, end = 0;  // layers [first, end)
  };

  /// The stages of `layers` layers placed by p on top of ctx (the model's context, which
  /// must be the first stage's when p names contexts). Throws kiln::value_error naming
  /// `who` for starts without contexts, starts and contexts of different counts or a
  /// first stage on another context than ctx, and kiln::shape_error for more stages than
  /// layers or starts that are not 0 first and increasing below `layers`.
  static placement of(const std::string& who, const context<B>& ctx, const pipeline<B>& p, index_t layers) {
    placement r;
    if (p.contexts.empty()) {
      if (!p.starts.empty()) {
        throw value_error(who + ": a pipeline with " + std::to_string(p.starts.size()) +
                          " stage starts but no contexts (pipeline::contexts names each stage's context)");
      }
      r.stages_.push_back({ctx, 0, layers});
      return r;
    }
    const auto n = static_cast<index_t>(p.contexts.size());
    const std::string what = who + ": a pipeline of " + std::to_string(n) + " stages over " + std::to_string(layers) + " layers";
    if (!(p.contexts[0] == ctx)) {
      throw value_error(what + ": the first stage runs on " + p.contexts[0].device_name() +
                        ", another context than the one the model is loaded on (" + ctx.device_name() +
                        "); load it on the first stage's context");
    }
    if (n > layers) throw shape_error(what + ": every stage needs at least one layer");
    std::vector<index_t> starts = p.starts;
    if (starts.empty()) {
      for (index_t s = 0, at = 0; s < n; ++s) {
        starts.push_back(at);
        at += layers / n + (s < layers % n ? 1 : 0);
      }
    } else if (static_cast<index_t>(starts.size()) != n) {
      throw value_error(what + ": " + std::to_string(starts.size()) + " stage starts for " + std::to_string(n) +
                        " contexts (one start per stage, or none for an even split)");
    }
    for (index_t s = 0; s < n; ++s) {
      const index_t a = starts[static_cast<std::size_t>(s)];
      const index_t b = s + 1 < n ? starts[static_cast<std::size_t>(s + 1)] : layers;
      if ((s == 0 && a != 0) || !(a < b) || b > layers) {
        std::string list;
        for (const auto v : starts) list += (list.empty() ? "" : ", ") + std::to_string(v);
        throw shape_error(what + ": stage starts [" + list + "] must be 0 first, increasing and below " +
                          std::to_string(layers) + " (every stage at least one layer)");
      }
      r.stages_.push_back({p.contexts[static_cast<std::size_t>(s)], a, b});
    }
    return r;
  }

  const std::vector<stage>& stages() const noexcept { return stages_; }
  bool split() const noexcept { return stages_.size() > 1; }
  /// The context of layer l's weights and KV cache.
  const context<B>& context_of(index_t l) const {
    for (const auto& s : stages_) {
      if (l >= s.first && l < s.end) return s.ctx;
    }
    return stages_.back().ctx;
  }
  /// The first stage's context (the embedding's) and the last's (the final norm's and LM head's).
  const context<B>& first() const noexcept { return stages_.front().ctx; }
  const context<B>& last() const noexcept { return stages_.back().ctx; }

  /// Runs body(ctx, first, end) for each stage in order, h [n, H] (the hidden state)
  /// moved onto the stage's context before it (kiln::copy_to where the context changes:
  /// device to device or host-staged); afterwards h is on the last stage's context.
  template <class F>
  void run(tensor<float, B>& h, F&& body) const {
    for (const auto& s : stages_) {
      if (!(h.context() == s.ctx)) {
        auto moved = copy_to(s.ctx, h);
        swap(h, moved);
      }
      body(s.ctx, s.first, s.end);
    }
  }

  /// Throws kiln::value_error naming `who` and `what` when t is not on ctx (a weight
  /// given to a decoder's constructor on another context than its stage's).
  template <class T>
  void require_on(const std::string& who, const std::string& what, const tensor<T, B>& t, const context<B>& ctx) const {
    if (t.defined() && !(t.context() == ctx)) {
      throw value_error(who + ": " + what + " (" + t.describe() + ") is on another context than its stage's (" +
                        ctx.device_name() + "; the stages: " + describe() + ")");
    }
  }

  /// Throws kiln::value_error naming `who` and `op` when the layers are split over
  /// several stages (an operation that runs on one context).
  void require_one(const std::string& who, const std::string& op) const {
    if (split()) {
      throw value_error(who + "::" + op + ": the model is split over " + std::to_string(stages_.size()) +
                        " contexts (" + describe() + "); this runs on one context");
    }
  }

  /// "layers 0-13 on vulkan:0, layers 14-27 on vulkan:1" (for messages and logs).
  std::string describe() const {
    std::string out;
    for (const auto& s : stages_) {
      if (!out.empty()) out += ", ";
      out += (s.end - s.first == 1 ? "layer " + std::to_string(s.first)
                                   : "layers " + std::to_string(s.first) + "-" + std::to_string(s.end - 1)) +
             " on " + s.ctx.device_name();
    }
    return out;
  }

 private:
  std::vector<stage> stages_;
};

}  // namespace kiln::models
