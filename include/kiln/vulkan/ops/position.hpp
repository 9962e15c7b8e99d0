// kiln/vulkan/ops/position.hpp — a statement holding kiln::rope or kiln::embedding as ONE
// dispatch of kernels/position/{rope,embedding}.comp with the statement's prologue and
// epilogue spliced in (codegen/position.hpp). embedding reads its ids back first and
// checks every one against the table's rows (kiln::index_error before anything is
// recorded); ids that are not contiguous go to the kernel as a contiguous copy.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <algorithm>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "kiln/core/factories.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/vulkan/codegen/position.hpp"
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"
#include "kiln/vulkan/ops/reduce.hpp"

namespace kiln::detail::vk {

/// out = n for a planned tree whose structural node is a rope or an embedding.
template <class T, class B, class N>
void record_position_kernel(const tensor<T, B>& out, const N& n) {
  context_state& ctx = *out.storage()->ctx;
  require_storage_width<T>(ctx);
  const auto& s = find_structural(n);
  using S = std::remove_cvref_t<decltype(s)>;
  constexpr bool rope = std::is_same_v<typename S::op_type, rope_op>;
  std::vector<const storage*> stores;  // in binding order: output, epilogue, prologue, parameters
  auto add = [&](const storage* st) {
    if (std::find(stores.begin(), stores.end(), st) == stores.end()) stores.push_back(st);
  };
  add(out.storage().get());
  auto tensor_operand = [&](const auto& t) {
    same_context(out, *t.storage(), rope ? "rope" : "embedding");
    require_storage_width<typename std::remove_cvref_t<decltype(t)>::value_type>(ctx);
    add(t.storage().get());
  };
  for_each_leaf(n, [&](const auto& op) {
    if constexpr (is_tensor<std::remove_cvref_t<decltype(op)>>::value) tensor_operand(op);
  });
  for_each_leaf(s.arg, tensor_operand);

  std::vector<position_param> params;
  tensor<std::int32_t, B> ids_copy;  // embedding: contiguous ids, when the given ones are not
  if constexpr (rope) {
    const auto& pos = std::get<0>(s.params).t;
    const auto& inv = std::get<1>(s.params).t;
    tensor_operand(pos);
    tensor_operand(inv);
    params.push_back({dtype::i32, pos.storage().get(), pos.offset(), pos.strides()[0]});
    params.push_back({dtype::f32, inv.storage().get(), inv.offset(), 1});
  } else {
    const auto& ids = std::get<0>(s.params).t;
    same_context(out, *ids.storage(), "embedding");
    const std::vector<std::int32_t> host = ids.to_host();  // waits for the ids' producers
    check_ids(S::op_type::name, host, ids.shape(), s.input_shape[0], "table " + s.arg.describe() + ", ids " + ids.describe());
    const tensor<std::int32_t, B>* use = &ids;
    if (!ids.is_contiguous()) {
      ids_copy = from_host(out.context(), ids.shape(), std::span<const std::int32_t>(host));
      use = &ids_copy;
    }
    tensor_operand(*use);
    params.push_back({dtype::i32, use->storage().get(), use->offset(), 1});
  }
  const structural_kernel kn = make_position_kernel(out, n, structural_options_for(ctx), params,
                                                    rope ? kernels::position_rope : kernels::position_embedding);
  if (kn.empty) return;
  KILN_ASSERT(stores.size() == kn.first->plan.bindings);
  record_structural(ctx, kn, *out.storage(), stores);
}

}  // namespace kiln::detail::vk
