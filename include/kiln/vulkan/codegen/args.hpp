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
#include "kiln/vulkan/codegen/params.hpp"
#include "kiln/vulkan/codegen/plan.hpp"

namespace kiln::detail::vk {

/// Everything but the source: the runtime values for one dispatch (make_params' words).
struct kernel_args {
  std::vector<std::uint32_t> push;  // the push-constant block, word by word
  std::uint64_t elements = 0;       // output elements
};

/// The parameter block of one dispatch of a kernel generated for (n, plan): the element
/// count `n`, each operand's offset `off<o>`, for strided plans the extents `ext<d>` and
/// each strided operand's strides `st<o>_<d>`, then the scalars `s<j>`. Throws
/// kiln::shape_error when a count, offset or stride does not fit the shader's 32 bits.
template <std::size_t L, class N>
param_block make_params(const iteration_layout<L>& lay, const index_t (&offsets)[L + 1], const kernel_plan& plan,
                        const N& n) {
  param_block p;
  index_t total = 1;
  for (int d = 0; d < lay.rank; ++d) total *= lay.extent[d];
  p.u32("n", total, "element count");
  for (std::size_t o = 0; o <= L; ++o) p.u32("off", offsets[o], "element offset", static_cast<int>(o));
  bool any_strided = false;
  for (const auto& op : plan.operands) any_strided = any_strided || op.how == access::strided;
  if (any_strided) {
    for (int d = 0; d < lay.rank; ++d) p.u32("ext", lay.extent[d], "extent", d);
    for (std::size_t o = 0; o <= L; ++o) {
      if (plan.operands[o].how != access::strided) continue;
      for (int d = 0; d < lay.rank; ++d) p.i32("st", lay.stride[o][d], "stride", static_cast<int>(o), d);
    }
  }
  int j = 0;
  for_each_scalar(n, [&](const auto& sc) { p.scalar("s", sc, j++); });
  return p;
}

}  // namespace kiln::detail::vk
