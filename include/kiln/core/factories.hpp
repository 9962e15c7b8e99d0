// kiln/core/factories.hpp — making tensors: empty, zeros, full, from_host, random.
// Free functions, context first, so generic code never needs `ctx.template`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>  // std::ranges::contiguous_range, range_value_t, size, data
#include <new>       // std::bad_alloc
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/context.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/detail/config.hpp"

namespace kiln {

namespace detail {
/// The draws behind kiln::random, compiled once (core/impl/factories.ipp): n values of a
/// 64-bit Mersenne Twister seeded with seed, uniform in [low, high) as floats, or in
/// [low, high] as ints.
KILN_DECL void random_uniform_floats(float* out, std::size_t n, float low, float high, std::uint64_t seed);
KILN_DECL void random_uniform_ints(int* out, std::size_t n, int low, int high, std::uint64_t seed);
}  // namespace detail

/// An uninitialised contiguous tensor. Example: `auto t = kiln::empty<float>(ctx, {3, 4});`
template <element T, class B>
tensor<T, B> empty(const context<B>& ctx, const shape& s) {
  auto storage = backend_traits<B>::allocate(ctx.state(), static_cast<std::size_t>(s.numel()) * sizeof(T));
  return tensor<T, B>(std::move(storage), s, contiguous_strides(s), 0);
}

/// A tensor of the same shape, dtype and context as t (uninitialised, contiguous).
template <class T, class B>
tensor<T, B> empty_like(const tensor<T, B>& t) {
  return empty<T>(t.context(), t.shape());
}

/// A tensor with every element set to value. Example: `kiln::full(ctx, {8}, 0.5f)`
template <element T, class B>
tensor<T, B> full(const context<B>& ctx, const shape& s, T value) {
  auto t = empty<T>(ctx, s);
  if (t.numel()) t = compute_t<T>(value);
  return t;
}

/// A tensor of zeros. Example: `kiln::zeros<float>(ctx, {3, 4})`
template <element T, class B>
tensor<T, B> zeros(const context<B>& ctx, const shape& s) {
  return full<T>(ctx, s, T(0.0f));
}

/// A tensor of shape s holding a copy of host (row-major; host.size() must equal
/// s.numel(), else kiln::shape_error). Example: `kiln::from_host(ctx, {2, 2}, std::span(v))`
template <class B, std::ranges::contiguous_range R>
  requires element<std::ranges::range_value_t<R>>
auto from_host(const context<B>& ctx, const shape& s, R&& host) {
  using T = std::ranges::range_value_t<R>;
  const auto n = static_cast<index_t>(std::ranges::size(host));
  if (n != s.numel()) {
    throw shape_error("kiln::from_host: " + std::to_string(n) + " host elements do not fill shape " +
                      s.to_string() + " (" + std::to_string(s.numel()) + " elements)");
  }
  auto t = empty<T>(ctx, s);
  if (n) backend_traits<B>::upload(*t.storage(), 0, std::ranges::data(host), static_cast<std::size_t>(n) * sizeof(T));
  return t;
}

/// A 1-D tensor holding a copy of host.
template <class B, std::ranges::contiguous_range R>
  requires element<std::ranges::range_value_t<R>>
auto from_host(const context<B>& ctx, R&& host) {
  return from_host(ctx, shape{static_cast<index_t>(std::ranges::size(host))}, std::forward<R>(host));
}

/// A contiguous copy of t on ctx: another context of t's backend (a second device, or a
/// second context on the same one) or of another backend. Between two contexts of a
/// backend that can copy device to device (Vulkan contexts whose devices share memory:
/// VK_KHR_external_memory_fd on both, the same deviceUUID and driverUUID; see
/// kiln::vulkan::peer_refusal), the copy goes through memory the two share and returns
/// once it is submitted on ctx, whose later work is ordered after it. Otherwise it is
/// staged through the host: waits for the work t depends on, reads its elements and writes
/// them to a new tensor on ctx (on unified-memory devices both are copies from and to
/// mapped memory). Throws kiln::shape_error for an empty t, kiln::device_error for a
/// moved-from ctx or a failed device copy (naming t's dtype and shape and both devices).
/// Example: `auto h1 = kiln::copy_to(gpu1, h0);   // h0 on gpu0`
template <class B, class T, class A>
tensor<T, B> copy_to(const context<B>& ctx, const tensor<T, A>& t) {
  if (!t.defined()) {
    throw shape_error("kiln::copy_to: the tensor to copy to " + ctx.device_name() +
                      " is empty (default-constructed or moved from)");
  }
  auto out = empty<T>(ctx, t.shape());
  if (t.numel() == 0) return out;
  if constexpr (std::is_same_v<A, B> &&
                requires(const typename backend_traits<B>::storage& s, typename backend_traits<B>::storage& d) {
                  backend_traits<B>::copy_between(s, std::size_t{}, d, std::size_t{}, [] { return std::string(); });
                }) {
    // device to device: a strided view is made contiguous on its own context first
    const tensor<T, B> src = t.is_contiguous() ? t : t.clone();
    const auto what = [&] { return "kiln::copy_to: " + t.describe() + " to " + ctx.device_name(); };
    if (backend_traits<B>::copy_between(*src.storage(), static_cast<std::size_t>(src.offset()) * sizeof(T),
                                        *out.storage(), static_cast<std::size_t>(t.numel()) * sizeof(T), what)) {
      return out;
    }
  }
  if constexpr (requires { t.data(); }) {  // host memory already: no staging vector
    if (t.is_contiguous()) {
      backend_traits<B>::upload(*out.storage(), 0, t.data(), static_cast<std::size_t>(t.numel()) * sizeof(T));
      return out;
    }
  }
  const std::vector<T> host = t.to_host();
  backend_traits<B>::upload(*out.storage(), 0, host.data(), host.size() * sizeof(T));
  return out;
}

/// Uniform random values in [low, high) (integers: [low, high]), reproducible per seed.
/// Example: `auto w = kiln::random<float>(ctx, {512, 256});`
template <element T, class B>
tensor<T, B> random(const context<B>& ctx, const shape& s, double low = 0.0, double high = 1.0,
                    std::uint64_t seed = 0x6b696c6eu) {
  auto t = empty<T>(ctx, s);  // first: a shape too large for the device fails before the host copy
  const auto n = static_cast<std::size_t>(s.numel());
  using draw_t = std::conditional_t<is_floating_v<T>, float, int>;
  std::vector<draw_t> draws;
  std::vector<T> host;
  try {
    draws.resize(n);
    if constexpr (!std::is_same_v<T, draw_t>) host.resize(n);
  } catch (const std::bad_alloc&) {
    throw out_of_memory("kiln::random: a host buffer for " + s.to_string() + " does not fit in memory",
                        n * sizeof(draw_t), 0);
  }
  if constexpr (is_floating_v<T>) {
    detail::random_uniform_floats(draws.data(), n, static_cast<float>(low), static_cast<float>(high), seed);
  } else {
    detail::random_uniform_ints(draws.data(), n, static_cast<int>(low), static_cast<int>(high), seed);
  }
  if constexpr (std::is_same_v<T, draw_t>) {
    host = std::move(draws);
  } else {
    for (std::size_t i = 0; i < n; ++i) host[i] = T(draws[i]);
  }
  if (!host.empty()) backend_traits<B>::upload(*t.storage(), 0, host.data(), host.size() * sizeof(T));
  return t;
}

}  // namespace kiln

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/core/impl/factories.ipp"
#endif
