// kiln/core/factories.hpp — making tensors: empty, zeros, full, from_host, random.
// Free functions, context first, so generic code never needs `ctx.template`.
#pragma once

#include <cstdint>
#include <new>  // std::bad_alloc
#include <random>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/context.hpp"
#include "kiln/core/tensor.hpp"

namespace kiln {

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

/// Uniform random values in [low, high) (integers: [low, high]), reproducible per seed.
/// Example: `auto w = kiln::random<float>(ctx, {512, 256});`
template <element T, class B>
tensor<T, B> random(const context<B>& ctx, const shape& s, double low = 0.0, double high = 1.0,
                    std::uint64_t seed = 0x6b696c6eu) {
  auto t = empty<T>(ctx, s);  // first: a shape too large for the device fails before the host copy
  std::mt19937_64 gen(seed);
  std::vector<T> host;
  try {
    host.resize(static_cast<std::size_t>(s.numel()));
  } catch (const std::bad_alloc&) {
    throw out_of_memory("kiln::random: a host buffer for " + s.to_string() + " does not fit in memory",
                        static_cast<std::size_t>(s.numel()) * sizeof(T), 0);
  }
  if constexpr (is_floating_v<T>) {
    std::uniform_real_distribution<float> dist(static_cast<float>(low), static_cast<float>(high));
    for (auto& v : host) v = T(dist(gen));
  } else {
    std::uniform_int_distribution<int> dist(static_cast<int>(low), static_cast<int>(high));
    for (auto& v : host) v = static_cast<T>(dist(gen));
  }
  if (!host.empty()) backend_traits<B>::upload(*t.storage(), 0, host.data(), host.size() * sizeof(T));
  return t;
}

}  // namespace kiln
