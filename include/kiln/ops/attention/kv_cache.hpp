// kiln/ops/attention/kv_cache.hpp — kiln::kv_cache: one layer's keys and values for
// decoding, preallocated [B, Hkv, S_max, D] on a context. append() writes new positions
// into the buffers (one kernel each for k and v, fused with whatever expression gives
// them: `cache.append(kiln::rope(k, pos), v)`), and k() / v() are views of the positions
// so far: the past is never copied.
//
//   kiln::kv_cache<float, B> cache(ctx, 1, 8, 4096, 128);
//   cache.append(k_new, v_new);                     // [1, 8, s, 128] each
//   y = kiln::attention(q, cache.k(), cache.v(), {.causal = true});
#pragma once

#include <string>
#include <utility>

#include "kiln/core/error.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/core/views.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

template <class T, class B>
class kv_cache {
 public:
  /// Buffers for `batch` sequences of up to `max_len` positions, `heads` kv heads of
  /// `head_dim` (keys) and `value_dim` (values; default head_dim) elements.
  kv_cache(const context<B>& ctx, index_t batch, index_t heads, index_t max_len, index_t head_dim,
           index_t value_dim = -1)
      : k_(empty<T>(ctx, checked_dims(ctx, batch, heads, max_len, head_dim, value_dim))),
        v_(empty<T>(ctx, {batch, heads, max_len, value_dim < 0 ? head_dim : value_dim})) {}

  /// Appends k_new [B, Hkv, s, D] and v_new [B, Hkv, s, Dv] (tensors or expressions) at
  /// positions size() .. size() + s. Throws kiln::shape_error, changing nothing, when they
  /// do not match the cache or when the cache would hold more than capacity() positions.
  template <expression K, expression V>
  void append(K&& k_new, V&& v_new) {
    const shape ks = detail::as_node(k_new).shape();
    const shape vs = detail::as_node(v_new).shape();
    const auto fail = [&](const std::string& why) {
      throw shape_error("kiln::kv_cache::append: " + why + ": k is " + detail::as_node(k_new).describe() + ", v is " +
                        detail::as_node(v_new).describe() + ", the cache holds " + std::to_string(len_) + " of " +
                        std::to_string(capacity()) + " positions of k " + k_.describe() + ", v " + v_.describe());
    };
    const auto matches = [](const shape& s, const shape& c) {
      return s.rank() == 4 && s[0] == c[0] && s[1] == c[1] && s[3] == c[3];
    };
    if (!matches(ks, k_.shape()) || !matches(vs, v_.shape())) fail("shapes do not match the cache's [B, Hkv, s, D]");
    if (ks[2] != vs[2]) fail("k and v have different lengths");
    if (ks[2] > capacity() - len_) fail("appending " + std::to_string(ks[2]) + " positions overflows the cache");
    const index_t s = ks[2];
    auto kd = slice(k_, 2, len_, len_ + s);
    auto vd = slice(v_, 2, len_, len_ + s);
    kd = std::forward<K>(k_new);
    vd = std::forward<V>(v_new);
    len_ += s;
  }

  /// The keys so far: a [B, Hkv, size(), D] view of the buffer.
  tensor<T, B> k() const { return slice(k_, 2, 0, len_); }
  /// The values so far: a [B, Hkv, size(), Dv] view.
  tensor<T, B> v() const { return slice(v_, 2, 0, len_); }

  index_t size() const noexcept { return len_; }
  index_t capacity() const noexcept { return k_.shape()[2]; }
  /// Forgets every position (the buffers stay allocated).
  void clear() noexcept { len_ = 0; }
  /// Keeps the first n positions (n <= size()): rewinds after a rejected draft.
  void truncate(index_t n) {
    if (n < 0 || n > len_) {
      throw shape_error("kiln::kv_cache::truncate: " + std::to_string(n) + " is outside 0 .. " + std::to_string(len_));
    }
    len_ = n;
  }

 private:
  // The keys' shape, after checking every size (a negative one, or a value_dim below -1,
  // throws kiln::shape_error naming kv_cache rather than a bare "negative extent").
  static shape checked_dims(const context<B>& ctx, index_t batch, index_t heads, index_t max_len, index_t head_dim,
                            index_t value_dim) {
    if (batch < 0 || heads < 0 || max_len < 0 || head_dim < 0 || value_dim < -1) {
      throw shape_error("kiln::kv_cache: batch " + std::to_string(batch) + ", heads " + std::to_string(heads) +
                        ", max_len " + std::to_string(max_len) + ", head_dim " + std::to_string(head_dim) +
                        ", value_dim " + std::to_string(value_dim) + " on " + ctx.device_name() +
                        ": sizes must be >= 0 (value_dim: -1 for head_dim)");
    }
    return shape{batch, heads, max_len, head_dim};
  }

  tensor<T, B> k_, v_;
  index_t len_ = 0;
};

}  // namespace kiln
