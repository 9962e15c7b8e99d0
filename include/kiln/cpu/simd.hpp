// kiln/cpu/simd.hpp — loads, stores and conversions between storage dtypes and xsimd
// batches of their compute type (float or int32; masks are batch_bool). Hot dtypes get
// intrinsics (F16C/AVX-512 half conversion, widening int8 loads, streaming stores); the
// rest go lane by lane through a small aligned buffer (no heap).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "kiln/core/dtype.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/expr/convert.hpp"
#include "kiln/expr/lanes.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace kiln {

/// lane_traits for xsimd batches: lane type, and masks converted between lane types.
template <class T, class A>
struct lane_traits<xsimd::batch<T, A>> {
  using scalar_type = T;
  using batch = xsimd::batch<T, A>;

  template <class M>
  static typename batch::batch_bool_type mask_for(const M& m) {
    if constexpr (std::is_same_v<M, typename batch::batch_bool_type>) {
      return m;
    } else if constexpr (requires { typename M::batch_type; }) {  // a batch_bool of another lane type
      using U = typename M::batch_type::value_type;
      const auto ones = xsimd::select(m, xsimd::batch<U, A>(U(1)), xsimd::batch<U, A>(U(0)));
      return xsimd::batch_cast<T>(ones) != batch(T(0));
    } else {  // an integer batch used as a mask
      return mask_for(m != M(0));
    }
  }

  static batch select(const typename batch::batch_bool_type& m, const batch& a, const batch& b) {
    return xsimd::select(m, a, b);
  }

  /// Whether fma below rounds once on this architecture (AVX-512, FMA3, NEON64); on SSE2
  /// and AVX without FMA3 xsimd's fma is a multiply and an add (kiln::detail::square_error
  /// then splits its operands instead).
  static constexpr bool fused_fma =
      std::is_base_of_v<xsimd::avx512f, A> || std::is_base_of_v<xsimd::fma3<xsimd::avx2>, A> ||
      std::is_base_of_v<xsimd::fma3<xsimd::avx>, A> || std::is_base_of_v<xsimd::fma3<xsimd::sse4_2>, A>
#if XSIMD_WITH_NEON64
      || std::is_base_of_v<xsimd::neon64, A>
#endif
      ;

  /// a * b + c rounded once (kiln::detail::fmadd): AVX-512's own instruction, which
  /// xsimd 8 does not use (its AVX-512 fma is a multiply and an add).
  static batch fma(const batch& a, const batch& b, const batch& c) {
    if constexpr (std::is_base_of_v<xsimd::avx512f, A> && std::is_same_v<T, float>) {
      return _mm512_fmadd_ps(a, b, c);
    } else if constexpr (std::is_base_of_v<xsimd::avx512f, A> && std::is_same_v<T, double>) {
      return _mm512_fmadd_pd(a, b, c);
    } else {
      return xsimd::fma(a, b, c);
    }
  }

  /// a / b within about an ulp for a finite, normal, non-zero b (kiln::detail::divide_approx):
  /// on AVX-512 b's 14-bit reciprocal estimate, refined once by Newton's step (error
  /// ~2^-28 before the last rounding), times a. Elsewhere no member: callers divide.
  static batch divide_approx(const batch& a, const batch& b)
    requires(std::is_base_of_v<xsimd::avx512f, A> && std::is_same_v<T, float>)
  {
    const batch r = _mm512_rcp14_ps(b);
    return a * (r * fma(-b, r, batch(2.0f)));
  }

  /// x * 2^n (see kiln::detail::scale_by_pow2): AVX-512's scalef; elsewhere two exact
  /// powers of two built from exponent bits, so that 2^n itself never leaves the normals.
  static batch scale_by_pow2(const batch& x, const batch& n) {
    static_assert(std::is_same_v<T, float>, "scale_by_pow2 is for float lanes");
    if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
      return _mm512_scalef_ps(x, n);
    } else {
      using ibatch = xsimd::batch<std::int32_t, A>;
      const batch h = xsimd::floor(n * batch(0.5f));  // n = h + (n - h), both in [-75, 64]
      const auto pow2 = [](const batch& e) {
        return xsimd::bitwise_cast<batch>((xsimd::to_int(e) + ibatch(127)) << 23);
      };
      return x * pow2(h) * pow2(n - h);  // x * 2^h is exact (x >= 0.5): one rounding
    }
  }

  template <class F, class... Vs>
  static batch per_lane(F&& f, const batch& a, const Vs&... b) {
    return per_lane_impl(f, std::index_sequence_for<Vs...>{}, a, b...);
  }
  template <class F, std::size_t... I, class... Vs>
  static batch per_lane_impl(F& f, std::index_sequence<I...>, const batch& a, const Vs&... b) {
    alignas(64) T in[1 + sizeof...(Vs)][batch::size];
    alignas(64) T out[batch::size];
    a.store_aligned(in[0]);
    (b.store_aligned(in[I + 1]), ...);
    for (std::size_t j = 0; j < batch::size; ++j) out[j] = f(in[0][j], in[I + 1][j]...);
    return batch::load_aligned(out);
  }
};

namespace detail::simd {

template <class A>
inline constexpr bool enabled = !std::is_same_v<A, xsimd::unavailable>;

template <class A>
inline constexpr bool is_avx512 = std::is_base_of_v<xsimd::avx512f, A>;
template <class A>
inline constexpr bool is_avx2 = std::is_base_of_v<xsimd::avx2, A>;
template <class A>
inline constexpr bool is_avx = std::is_base_of_v<xsimd::avx, A>;
template <class A>
inline constexpr bool is_sse2 = std::is_base_of_v<xsimd::sse2, A>;

template <class T, class A>
using cbatch = xsimd::batch<compute_t<T>, A>;

template <class A>
inline constexpr std::size_t lanes = xsimd::batch<float, A>::size;

/// Lane-by-lane fallback: convert through an aligned buffer.
template <class T, class A>
cbatch<T, A> load_slow(const T* p, index_t stride) {
  alignas(64) compute_t<T> buf[lanes<A>];
  for (std::size_t j = 0; j < lanes<A>; ++j) buf[j] = static_cast<compute_t<T>>(p[index_t(j) * stride]);
  return cbatch<T, A>::load_aligned(buf);
}

/// Loads lanes<A> consecutive elements of p as their compute type.
template <class A, class T>
cbatch<T, A> load(const T* p) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::int32_t>) {
    return cbatch<T, A>::load_unaligned(p);
  } else if constexpr (std::is_same_v<T, half> && is_avx512<A>) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#if defined(__F16C__)
  } else if constexpr (std::is_same_v<T, half> && is_avx<A> && !is_avx512<A>) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#endif
  } else if constexpr (std::is_same_v<T, bfloat16> && is_avx512<A>) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  } else if constexpr (std::is_same_v<T, bfloat16> && is_avx2<A> && !is_avx512<A>) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  } else if constexpr (std::is_same_v<T, std::int8_t> && is_avx512<A>) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else if constexpr (std::is_same_v<T, std::uint8_t> && is_avx512<A>) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else if constexpr (std::is_same_v<T, std::int8_t> && is_avx2<A> && !is_avx512<A>) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  } else if constexpr (std::is_same_v<T, std::uint8_t> && is_avx2<A> && !is_avx512<A>) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  } else {
    return load_slow<T, A>(p, 1);
  }
}

/// Loads lanes<A> elements p[0], p[stride], p[2*stride], ...
template <class A, class T>
cbatch<T, A> gather(const T* p, index_t stride) {
  return load_slow<T, A>(p, stride);
}

/// Loads n < lanes<A> elements p[0], p[stride], ... p[(n-1)*stride]; the other lanes
/// repeat p[0] (a value the statement computes anyway: no new division by zero). The
/// head and tail of a row run through the same vector code as its body, so an element's
/// result never depends on where a row or a thread's chunk starts.
template <class A, class T>
cbatch<T, A> load_part(const T* p, index_t stride, index_t n) {
  alignas(64) compute_t<T> buf[lanes<A>];
  for (std::size_t j = 0; j < lanes<A>; ++j) buf[j] = static_cast<compute_t<T>>(p[index_t(j) < n ? index_t(j) * stride : 0]);
  return cbatch<T, A>::load_aligned(buf);
}

/// Mask or value batch -> the compute batch of storage dtype T (masks become 1/0).
template <class T, class A, class V>
cbatch<T, A> as_compute(const V& v) {
  if constexpr (std::is_same_v<V, cbatch<T, A>>) {
    return v;
  } else {
    const auto m = lane_traits<cbatch<T, A>>::mask_for(v);
    return xsimd::select(m, cbatch<T, A>(1), cbatch<T, A>(0));
  }
}

template <class T, class A>
void store_slow(T* p, index_t stride, const cbatch<T, A>& v) {
  alignas(64) compute_t<T> buf[lanes<A>];
  v.store_aligned(buf);
  for (std::size_t j = 0; j < lanes<A>; ++j) p[index_t(j) * stride] = to_storage<T>(buf[j]);
}

/// Stores lanes<A> consecutive elements (compute type -> storage dtype).
template <class A, class T, class V>
void store(T* p, const V& value) {
  const cbatch<T, A> v = as_compute<T, A>(value);
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::int32_t>) {
    v.store_unaligned(p);
  } else if constexpr (std::is_same_v<T, half> && is_avx512<A>) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#if defined(__F16C__)
  } else if constexpr (std::is_same_v<T, half> && is_avx<A> && !is_avx512<A>) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  } else if constexpr ((std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>) && is_avx512<A>) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));  // truncation = wrap
  } else {
    store_slow<T, A>(p, 1, v);
  }
}

/// Stores lanes<A> elements to p[0], p[stride], ...
template <class A, class T, class V>
void scatter(T* p, index_t stride, const V& value) {
  store_slow<T, A>(p, stride, as_compute<T, A>(value));
}

/// Stores the first n < lanes<A> lanes to p[0], p[stride], ... converted as store() does.
template <class A, class T, class V>
void store_part(T* p, index_t stride, index_t n, const V& value) {
  alignas(64) T buf[lanes<A>];
  store<A>(buf, value);
  for (index_t j = 0; j < n; ++j) p[j * stride] = buf[j];
}

/// Whether stream() bypasses the cache for dtype T on arch A.
template <class A, class T>
inline constexpr bool can_stream =
    (std::is_same_v<T, float> || std::is_same_v<T, std::int32_t>) && (is_avx512<A> || is_avx<A> || is_sse2<A>);

/// Non-temporal store of lanes<A> elements to a p aligned to A::alignment().
template <class A, class T, class V>
void stream(T* p, const V& value) {
  const cbatch<T, A> v = as_compute<T, A>(value);
  if constexpr (is_avx512<A>) {
    if constexpr (std::is_same_v<T, float>) _mm512_stream_ps(p, v);
    else _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v);
  } else if constexpr (is_avx<A>) {
    if constexpr (std::is_same_v<T, float>) _mm256_stream_ps(p, v);
    else _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v);
  } else if constexpr (is_sse2<A>) {
    if constexpr (std::is_same_v<T, float>) _mm_stream_ps(p, v);
    else _mm_stream_si128(reinterpret_cast<__m128i*>(p), v);
  } else {
    v.store_aligned(p);
  }
}

/// Orders streaming stores before later loads or stores from other threads.
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

/// Batch conversion between compute types, mirroring detail::convert_value.
template <class To, class From, class A, class V>
cbatch<To, A> convert(const V& v) {
  using R = cbatch<To, A>;
  if constexpr (std::is_same_v<From, bool>) {
    return as_compute<To, A>(v);
  } else if constexpr (std::is_same_v<To, float>) {
    if constexpr (std::is_same_v<compute_t<From>, float>) return v;
    else return xsimd::batch_cast<float>(v);
  } else if constexpr (is_floating_v<To>) {  // round to f16 / bf16 precision
    alignas(64) float buf[lanes<A>];
    const xsimd::batch<float, A> f = convert<float, From, A>(v);
    f.store_aligned(buf);
    for (auto& x : buf) x = convert_value<To, float>(x);
    return R::load_aligned(buf);
  } else if constexpr (is_floating_v<From>) {
    using F = xsimd::batch<float, A>;
    const F c = xsimd::min(xsimd::max(v, F(int_lo<To>())), F(int_hi<To>()));
    const R r = xsimd::batch_cast<std::int32_t>(xsimd::select(xsimd::isnan(v), F(0.0f), c));
    if constexpr (std::is_same_v<To, std::int32_t>) {
      return xsimd::select(lane_traits<R>::mask_for(v >= F(2147483648.0f)), R(std::numeric_limits<std::int32_t>::max()), r);
    } else {
      return r;
    }
  } else if constexpr (std::is_same_v<To, std::int8_t>) {
    return (v << 24) >> 24;
  } else if constexpr (std::is_same_v<To, std::uint8_t>) {
    return v & R(0xff);
  } else {
    return v;
  }
}

}  // namespace detail::simd
}  // namespace kiln
