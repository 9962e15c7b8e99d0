// kiln/vulkan/ops/copy.hpp — binds kernels/copy.comp, kernels/fill.comp and
// kernels/cast.comp: strided copy (materialises any view), fill, and f32 <-> f16 casts.
// The host merges dimensions that every operand walks the same way (expr/layout.hpp's
// collapse_dims, as for generated kernels), so contiguous work reaches the GPU as rank 1.
#pragma once

#if !defined(KILN_VULKAN_UMBRELLA)
#error "include <kiln/vulkan.hpp>, not the headers under kiln/vulkan/ directly"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>
#include <string>

#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/assign.hpp"  // broadcast_strides
#include "kiln/expr/layout.hpp"  // collapse_dims
#include "kiln/vulkan/codegen/plan.hpp"  // index_limit_message
#include "kiln/vulkan/context.hpp"
#include "kiln/vulkan/kernels_embedded.hpp"

namespace kiln::detail::vk {

/// Push constants of copy.comp and cast.comp (std430 layout: 28 uints).
struct copy_params {
  std::uint32_t rank = 0;
  std::uint32_t count = 0;
  std::uint32_t src_offset = 0;
  std::uint32_t dst_offset = 0;
  std::uint32_t extent[max_rank] = {};
  std::uint32_t src_stride[max_rank] = {};
  std::uint32_t dst_stride[max_rank] = {};
};
static_assert(sizeof(copy_params) == 112);

/// Push constants of fill.comp (20 uints).
struct fill_params {
  std::uint32_t rank = 0;
  std::uint32_t count = 0;
  std::uint32_t dst_offset = 0;
  std::uint32_t value = 0;
  std::uint32_t extent[max_rank] = {};
  std::uint32_t dst_stride[max_rank] = {};
};
static_assert(sizeof(fill_params) == 80);

/// The kernels index with 32-bit unsigned integers: every element offset must fit.
template <std::size_t L>
void check_32bit(const iteration_layout<L>& c, const index_t (&offset)[L + 1], index_t count, const char* op) {
  constexpr index_t lim = std::numeric_limits<std::uint32_t>::max();
  bool ok = count <= lim;
  for (std::size_t o = 0; o <= L; ++o) {
    index_t hi = offset[o];
    for (int d = 0; d < c.rank; ++d) hi += c.stride[o][d] * (c.extent[d] - 1);
    ok = ok && hi <= lim && offset[o] >= 0;
  }
  if (!ok) {
    throw device_error(index_limit_message(std::string("kiln::vulkan: ") + op + " of " + std::to_string(count) +
                                               " elements at their offsets",
                                           index_limit::value, "the Vulkan kernels", "the tensor"));
  }
}

/// Strides of the K operands over dst's dimensions, for collapse_dims.
template <std::size_t K>
void gather_strides(const shape& s, const strides* const (&st)[K], index_t (&out)[K][max_rank]) {
  for (std::size_t o = 0; o < K; ++o)
    for (int d = 0; d < s.rank(); ++d) out[o][d] = (*st[o])[d];
}

KILN_DECL const char* elem_bits(std::size_t bytes) noexcept;

template <class T>
void require_storage_width(const context_state& ctx) {
  if constexpr (sizeof(T) == 1) {
    if (!ctx.info().storage_8bit) {
      throw dtype_error("kiln::vulkan: " + ctx.info().label() + " lacks 8-bit storage (storageBuffer8BitAccess); " +
                        std::string(dtype_name_v<T>) + " tensors cannot be computed on it");
    }
  } else if constexpr (sizeof(T) == 2) {
    if (!ctx.info().storage_16bit) {
      throw dtype_error("kiln::vulkan: " + ctx.info().label() + " lacks 16-bit storage (storageBuffer16BitAccess); " +
                        std::string(dtype_name_v<T>) + " tensors cannot be computed on it");
    }
  }
}

template <class T, class B>
context_state& same_context(const tensor<T, B>& out, const storage& in, const char* op) {
  if (in.ctx != out.storage()->ctx) {
    throw device_error(std::string("kiln::vulkan: ") + op + ": the operands live on different Vulkan contexts (" +
                       out.describe() + " and a tensor of another context); copy through the host first");
  }
  return *out.storage()->ctx;
}

/// dst[view] = src[view] via copy.comp (same dtype) or cast.comp (f32 <-> f16).
/// `src` is read with strides broadcast to dst's shape.
template <class To, class From, class B>
void record_copy_kernel(const tensor<To, B>& dst, const tensor<From, B>& src) {
  static_assert(std::is_same_v<To, From> || (std::is_same_v<To, half> && std::is_same_v<From, float>) ||
                (std::is_same_v<To, float> && std::is_same_v<From, half>));
  constexpr bool is_cast = !std::is_same_v<To, From>;
  const char* op = is_cast ? "cast" : "copy";
  context_state& ctx = same_context(dst, *src.storage(), op);
  require_storage_width<To>(ctx);
  require_storage_width<From>(ctx);
  const strides sst = broadcast_strides(src, dst.shape());
  const strides* const st[2] = {&dst.strides(), &sst};
  const index_t off[2] = {dst.offset(), src.offset()};
  index_t all[2][max_rank] = {};
  gather_strides(dst.shape(), st, all);
  const auto c = collapse_dims<2>(dst.shape(), all);
  const index_t count = dst.numel();
  check_32bit(c, off, count, op);

  copy_params p;
  p.rank = static_cast<std::uint32_t>(c.rank);
  p.count = static_cast<std::uint32_t>(count);
  p.dst_offset = static_cast<std::uint32_t>(off[0]);
  p.src_offset = static_cast<std::uint32_t>(off[1]);
  for (int d = 0; d < c.rank; ++d) {
    p.extent[d] = static_cast<std::uint32_t>(c.extent[d]);
    p.dst_stride[d] = static_cast<std::uint32_t>(c.stride[0][d]);
    p.src_stride[d] = static_cast<std::uint32_t>(c.stride[1][d]);
  }
  static constexpr define copy_defs[3][1] = {{{"KILN_ELEM_BITS", "8"}}, {{"KILN_ELEM_BITS", "16"}}, {{"KILN_ELEM_BITS", "32"}}};
  static constexpr define cast_defs[2][1] = {{{"KILN_CAST_F32_TO_F16", "0"}}, {{"KILN_CAST_F32_TO_F16", "1"}}};
  kernel_spec k;
  if constexpr (is_cast) {
    k = kernel_spec{"cast", kernels::cast, cast_defs[std::is_same_v<To, half> ? 1 : 0], 2, sizeof(copy_params)};
  } else {
    k = kernel_spec{"copy", kernels::copy, copy_defs[sizeof(To) == 1 ? 0 : sizeof(To) == 2 ? 1 : 2], 2, sizeof(copy_params)};
  }
  const storage& s = *src.storage();
  const storage& d = *dst.storage();
  const context_state::binding b[2] = {{&s.alloc(), &s.access(), false}, {&d.alloc(), &d.access(), true}};
  ctx.dispatch(k, b, std::as_bytes(std::span(&p, 1)), ctx.groups_for(static_cast<std::uint64_t>(count)));
}

/// Every element of dst = value (already in T's storage form) via fill.comp.
template <class T, class B>
void record_fill_kernel(const tensor<T, B>& dst, T value) {
  context_state& ctx = *dst.storage()->ctx;
  require_storage_width<T>(ctx);
  const strides* const st[1] = {&dst.strides()};
  const index_t off[1] = {dst.offset()};
  index_t all[1][max_rank] = {};
  gather_strides(dst.shape(), st, all);
  const auto c = collapse_dims<1>(dst.shape(), all);
  const index_t count = dst.numel();
  check_32bit(c, off, count, "fill");

  fill_params p;
  p.rank = static_cast<std::uint32_t>(c.rank);
  p.count = static_cast<std::uint32_t>(count);
  p.dst_offset = static_cast<std::uint32_t>(off[0]);
  if constexpr (sizeof(T) == 1) {
    std::uint8_t bits;
    std::memcpy(&bits, &value, 1);
    p.value = bits;
  } else if constexpr (sizeof(T) == 2) {
    std::uint16_t bits;
    std::memcpy(&bits, &value, 2);
    p.value = bits;
  } else {
    std::memcpy(&p.value, &value, 4);
  }
  for (int d = 0; d < c.rank; ++d) {
    p.extent[d] = static_cast<std::uint32_t>(c.extent[d]);
    p.dst_stride[d] = static_cast<std::uint32_t>(c.stride[0][d]);
  }
  static constexpr define defs[3][1] = {{{"KILN_ELEM_BITS", "8"}}, {{"KILN_ELEM_BITS", "16"}}, {{"KILN_ELEM_BITS", "32"}}};
  const kernel_spec k{"fill", kernels::fill, defs[sizeof(T) == 1 ? 0 : sizeof(T) == 2 ? 1 : 2], 1, sizeof(fill_params)};
  const storage& d = *dst.storage();
  const context_state::binding b[1] = {{&d.alloc(), &d.access(), true}};
  ctx.dispatch(k, b, std::as_bytes(std::span(&p, 1)), ctx.groups_for(static_cast<std::uint64_t>(count)));
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/ops/impl/copy.ipp"
#endif
