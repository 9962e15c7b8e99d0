// kiln/vulkan/codegen/args.hpp — the runtime values of one dispatch of a generated kernel:
// element count, offsets, extents and strides, scalar values (push constants, or the
// parameter buffer: the same words).
#pragma once

#include <bit>  // std::bit_cast
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/expr/layout.hpp"
#include "kiln/expr/traverse.hpp"
#include "kiln/vulkan/codegen/plan.hpp"

namespace kiln::detail::vk {

/// Everything but the source: the runtime values for one dispatch.
struct kernel_args {
  std::vector<std::uint32_t> push;  // the push-constant block, word by word
  std::uint64_t elements = 0;       // output elements
};

/// The push-constant words for one dispatch of a kernel generated for (n, plan).
/// Throws kiln::shape_error when a count or offset does not fit the shader's 32 bits.
template <std::size_t L, class N>
kernel_args make_args(const iteration_layout<L>& lay, const index_t (&offsets)[L + 1], const kernel_plan& plan,
                      const N& n) {
  kernel_args a;
  index_t total = 1;
  for (int d = 0; d < lay.rank; ++d) total *= lay.extent[d];
  a.elements = static_cast<std::uint64_t>(total);
  auto word = [&](index_t v, const char* what) {
    if (v < INT32_MIN || v > index_t(UINT32_MAX)) {
      throw_index_limit(std::string("kiln::vulkan: ") + what + " " + std::to_string(v), index_limit::value,
                        "generated kernels");
    }
    a.push.push_back(static_cast<std::uint32_t>(v));
  };
  word(total, "element count");
  for (std::size_t o = 0; o <= L; ++o) word(offsets[o], "element offset");
  bool any_strided = false;
  for (const auto& op : plan.operands) any_strided = any_strided || op.how == access::strided;
  if (any_strided) {
    for (int d = 0; d < lay.rank; ++d) word(lay.extent[d], "extent");
    for (std::size_t o = 0; o <= L; ++o) {
      if (plan.operands[o].how != access::strided) continue;
      for (int d = 0; d < lay.rank; ++d) {
        if (lay.stride[o][d] < INT32_MIN || lay.stride[o][d] > INT32_MAX) word(index_t(UINT32_MAX) + 1, "stride");
        a.push.push_back(static_cast<std::uint32_t>(static_cast<std::int32_t>(lay.stride[o][d])));
      }
    }
  }
  for_each_scalar(n, [&](const auto& sc) {
    using C = std::remove_cvref_t<decltype(sc.value)>;
    if constexpr (std::is_same_v<C, float>) a.push.push_back(std::bit_cast<std::uint32_t>(sc.value));
    else a.push.push_back(static_cast<std::uint32_t>(static_cast<std::int32_t>(sc.value)));
  });
  return a;
}

}  // namespace kiln::detail::vk
