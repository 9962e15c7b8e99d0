// kiln/ops/position/rope.hpp — kiln::rope: rotary position embedding (RoPE) over the last
// axis of x [..., S, D], a row-family structural op (one row: the D elements of one
// (position, head) vector).
//
// Pairs (i, i + D/2) by default (the Llama / GPT-NeoX "half-split" convention, Hugging
// Face's rotate_half), or (2i, 2i + 1) with interleaved = true (GPT-J, the original
// paper). Pair i of the row at sequence index s turns by the angle positions[s] *
// inv_freq[i], with inv_freq[i] = 1 / theta^(2i / D) computed on the host in float as
// Hugging Face does (the exponent 2i / D rounded to float, then powf, then 1 / in float)
// and handed to the kernels as a [D/2] float parameter, so every backend uses the same
// frequencies. The context keeps that tensor per (theta, D) (detail/constant_cache.hpp):
// a decode loop uploads it once, not on every call. The angle is float(position) *
// inv_freq[i] rounded to float (as Hugging Face's float32 matmul of the two), so a
// position past the trained length still gives that model's angle, and its cos and sin
// are taken to float accuracy (both backends reduce the angle exactly up to 2^17 * pi/2,
// about 205887 radians; past that the CPU computes them in double and the Vulkan kernel
// reduces the angle by Payne-Hanek (kernels/position/rope.comp), for every finite angle):
//   out[i]       = x[i] * cos - x[i + D/2] * sin
//   out[i + D/2] = x[i + D/2] * cos + x[i] * sin          (interleaved: 2i, 2i + 1)
// The input expression and elementwise ops on the result fuse into one kernel:
// `kiln::rope(q * 2.0f, pos) * s` is one dispatch.
#pragma once

#include <bit>  // std::bit_cast (theta's bits in the cache key)
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"
#include "kiln/expr/structural.hpp"

namespace kiln {

/// kiln::rope's options: the frequency base (Llama 2: 10000, Llama 3: 500000) and the
/// pairing convention.
struct rope_options {
  float theta = 10000.0f;
  bool interleaved = false;  // false: pairs (i, i + D/2) (Llama, NeoX); true: (2i, 2i + 1) (GPT-J)
};

namespace detail {

/// The structural op descriptor of kiln::rope (row family, last axis). Its parameters:
/// the int32 positions [S] and the float inv_freq [D/2].
struct rope_op {
  static constexpr std::string_view name = "rope";
  static constexpr structural_family family = structural_family::row;
  template <class In>
  using result_type = In;
  bool interleaved = false;
  index_t seq = 1;  // S: the row at walk position r has sequence index r % S
};

/// 1 / theta^(2i / dim) for i in [0, dim / 2), in float, as Hugging Face's
/// `1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))`.
KILN_DECL std::vector<float> rope_inv_freq(float theta, index_t dim);

/// rope_inv_freq(theta, dim) as a [dim / 2] float tensor on `state`'s context, uploaded
/// once per context and (theta, dim): the context's constant cache keeps it. The cached
/// tensor is made through a handle that does not own the state (which owns the cache;
/// an owning one would be a cycle that nothing frees); the tensor returned holds the
/// cached storage together with an owning handle on the state, so an expression that
/// keeps it keeps its context alive like every other operand.
template <class B>
tensor<float, B> rope_frequencies(const std::shared_ptr<typename backend_traits<B>::context_state>& state, float theta,
                                  index_t dim) {
  using state_type = typename backend_traits<B>::context_state;
  using storage_type = typename backend_traits<B>::storage;
  const kiln::shape fs{dim / 2};
  auto upload = [&](const context<B>& on) {
    const std::vector<float> f = rope_inv_freq(theta, dim);
    return from_host(on, fs, std::span<const float>(f)).storage();
  };
  if constexpr (!requires { state->constants; }) {  // a backend without a constant cache
    return tensor<float, B>(upload(context<B>(state)), fs, contiguous_strides(fs), 0);
  } else {
    const std::string key = "rope_inv_freq " + std::to_string(std::bit_cast<std::uint32_t>(theta)) + " " + std::to_string(dim);
    std::shared_ptr<storage_type> cached = std::static_pointer_cast<storage_type>(state->constants.get(key, [&] {
      const context<B> unowned(std::shared_ptr<state_type>(std::shared_ptr<state_type>(), state.get()));
      return std::shared_ptr<void>(upload(unowned));
    }));
    struct pinned {
      std::shared_ptr<state_type> state;   // destroyed last: the storage's free reports to it
      std::shared_ptr<storage_type> storage;
    };
    auto pin = std::make_shared<pinned>(pinned{state, std::move(cached)});
    storage_type* st = pin->storage.get();
    return tensor<float, B>(std::shared_ptr<storage_type>(std::move(pin), st), fs, contiguous_strides(fs), 0);
  }
}

}  // namespace detail

/// Rotary position embedding of x [..., S, D] (any floating dtype; D even) at int32
/// positions [S] (any values, negative and past the trained length included); see the
/// top of this file. Broadcasts over every axis before S. Throws kiln::shape_error for a
/// rank below 2, an odd D, positions of another length than S, or theta <= 0.
/// Example: `q = kiln::rope(q, pos, {.theta = 500000.0f});`
template <expression X, class P>
  requires detail::is_tensor<std::remove_cvref_t<P>>::value
auto rope(X&& x, P&& positions, rope_options opt = {}) {
  using In = typename detail::node_t<X>::value_type;
  using Pos = typename std::remove_cvref_t<P>::value_type;
  static_assert(is_floating_v<In>, "kiln: rope needs a floating-point dtype; convert with kiln::cast<float>(x)");
  static_assert(std::is_same_v<Pos, std::int32_t>,
                "kiln: rope's positions must be an int32 tensor; convert with kiln::cast<std::int32_t>(p)");
  const auto xn = detail::to_node<void>(x);  // for the checks (x itself is forwarded below)
  if (!detail::leaf_defined(xn)) throw shape_error("kiln::rope: the input is an empty tensor (default-constructed or moved from)");
  if (!positions.storage()) throw shape_error("kiln::rope: the positions are an empty tensor (default-constructed or moved from)");
  const kiln::shape xs = xn.shape();
  if (xs.rank() < 2 || xs[xs.rank() - 1] % 2 != 0) {
    throw shape_error("kiln::rope: x must be [..., S, D] with D even; got " + xn.describe());
  }
  const index_t S = xs[xs.rank() - 2], D = xs[xs.rank() - 1];
  if (positions.rank() != 1 || positions.shape()[0] != S) {
    throw shape_error("kiln::rope: positions must be [S] = [" + std::to_string(S) + "] for x " +
                      xn.describe() + "; got " + positions.describe());
  }
  if (!(opt.theta > 0.0f) || !std::isfinite(opt.theta)) {
    throw shape_error("kiln::rope: theta " + std::to_string(opt.theta) + " must be a positive finite number");
  }
  auto inv = detail::rope_frequencies<typename std::remove_cvref_t<P>::backend_type>(positions.context().state(), opt.theta, D);
  auto n = detail::make_structural(detail::rope_op{.interleaved = opt.interleaved, .seq = S}, std::forward<X>(x), {},
                                    std::forward<P>(positions), std::move(inv));
  return n;
}

}  // namespace kiln

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/ops/position/impl/rope.ipp"
#endif
