// tests/ops/elementwise/cast_test.cpp — kiln::cast<T> against Eigen's conversions and the
// rules of include/kiln/expr/convert.hpp: float -> integer truncates toward zero,
// saturates and maps NaN to 0; integer -> integer wraps; integer -> float rounds to
// nearest; float -> half/bfloat16 rounds to nearest even (Eigen::half / Eigen::bfloat16
// are the oracle); a mask becomes 1 or 0.
#include "check.hpp"

#include <cmath>

using namespace kiln_test;

template <class B>
class cast_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(cast_test, backend_types);

namespace {

/// float -> integer dtype T as convert.hpp states it, computed in double: NaN -> 0, else
/// truncate toward zero and saturate to T's range (floats from 2^31 up, +inf included,
/// become INT32_MAX).
template <class T>
ArrayXl saturate_to(const ArrayXd& x) {
  return x.unaryExpr([](double v) -> std::int64_t {
    if (std::isnan(v)) return 0;
    const double lo = std::numeric_limits<T>::min();
    const double hi = double(std::numeric_limits<T>::max());
    return static_cast<std::int64_t>(std::clamp(std::trunc(v), lo, hi));
  });
}

/// Floats of every binary exponent in [2^lo, 2^hi), either sign, with specials: reaches
/// half's subnormals, its overflow threshold and the rounding ties of narrow types.
std::vector<float> draw_log_uniform(std::mt19937_64& g, std::size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> e(lo, hi);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = (neg(g) ? -1.0f : 1.0f) * std::exp2(e(g));
  add_specials(v);
  return v;
}

template <class B, class T>
void check_float_to_int(float_inputs in) {
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n) + ", to " + std::string(kiln::dtype_name_v<T>));
    const auto x = draw(g, n, in);
    const auto got = eval<T, B>([](const auto& t) { return kiln::cast<T>(t); }, x);
    const ArrayXd xd = to_double(x);
    EXPECT_TRUE(all_equal(got, wrap_to<T>(saturate_to<T>(xd))));
  }
}

}  // namespace

TYPED_TEST(cast_test, float_to_int8_truncates_saturates_nan_to_zero) {
  check_float_to_int<TypeParam, std::int8_t>({-300.0f, 300.0f});
  check_float_to_int<TypeParam, std::int8_t>({-2.0f, 2.0f});  // truncation toward zero around 0
}

TYPED_TEST(cast_test, float_to_uint8_truncates_saturates_nan_to_zero) {
  check_float_to_int<TypeParam, std::uint8_t>({-300.0f, 600.0f});
  check_float_to_int<TypeParam, std::uint8_t>({-2.0f, 2.0f});
}

TYPED_TEST(cast_test, float_to_int32_truncates_saturates_nan_to_zero) {
  check_float_to_int<TypeParam, std::int32_t>({-5e9f, 5e9f});
  check_float_to_int<TypeParam, std::int32_t>({-1e5f, 1e5f});
}

TYPED_TEST(cast_test, int_to_float_rounds_to_nearest) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    auto g = rng();
    for (std::size_t n : test_sizes) {
      SCOPED_TRACE("size " + std::to_string(n) + ", from " + std::string(kiln::dtype_name_v<T>));
      const auto x = draw_int<T>(g, n);
      const auto got = eval<float, TypeParam>([](const auto& t) { return kiln::cast<float>(t); }, x);
      const ArrayXf want = to_int64(x).template cast<float>();
      EXPECT_TRUE(all_equal(got, want));
    }
  });
}

TYPED_TEST(cast_test, int_to_int_wraps) {
  auto check = [](auto from_tag, auto to_tag) {
    using From = typename decltype(from_tag)::type;
    using To = typename decltype(to_tag)::type;
    auto g = rng();
    for (std::size_t n : test_sizes) {
      SCOPED_TRACE("size " + std::to_string(n) + ", " + std::string(kiln::dtype_name_v<From>) + " -> " +
                   std::string(kiln::dtype_name_v<To>));
      const auto x = draw_int<From>(g, n);
      const auto got = eval<To, TypeParam>([](const auto& t) { return kiln::cast<To>(t); }, x);
      EXPECT_TRUE(all_equal(got, wrap_to<To>(to_int64(x))));
    }
  };
  for_each_int_dtype([&](auto from) { for_each_int_dtype([&](auto to) { check(from, to); }); });
}

TYPED_TEST(cast_test, float_to_half_and_back_rounds_to_nearest_even) {
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n));
    // 2^-26 .. 2^17: below half's smallest subnormal up to beyond its overflow (65520)
    const auto x = draw_log_uniform(g, n, -26.0f, 17.0f);
    const ArrayXf want = as_array(x).cast<Eigen::half>().cast<float>();
    // rounded inside an expression (f32 in, f32 out) ...
    const auto round_trip = eval<float, TypeParam>(
        [](const auto& t) { return kiln::cast<float>(kiln::cast<kiln::half>(t)); }, x);
    EXPECT_TRUE(all_equal(round_trip, want));
    // ... and rounded on store into a half tensor
    const auto stored = eval<kiln::half, TypeParam>([](const auto& t) { return kiln::cast<kiln::half>(t); }, x);
    EXPECT_TRUE(all_equal(stored, want));
    // and read back from it exactly
    const auto back = eval<float, TypeParam>([](const auto& t) { return kiln::cast<float>(t); }, stored);
    EXPECT_TRUE(all_equal(back, want));
  }
}

TYPED_TEST(cast_test, float_to_bfloat16_and_back_rounds_to_nearest_even) {
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n));
    const auto x = draw_log_uniform(g, n, -130.0f, 128.0f);
    const ArrayXf want = as_array(x).cast<Eigen::bfloat16>().cast<float>();
    const auto round_trip = eval<float, TypeParam>(
        [](const auto& t) { return kiln::cast<float>(kiln::cast<kiln::bfloat16>(t)); }, x);
    EXPECT_TRUE(all_equal(round_trip, want));
    const auto stored =
        eval<kiln::bfloat16, TypeParam>([](const auto& t) { return kiln::cast<kiln::bfloat16>(t); }, x);
    EXPECT_TRUE(all_equal(stored, want));
    const auto back = eval<float, TypeParam>([](const auto& t) { return kiln::cast<float>(t); }, stored);
    EXPECT_TRUE(all_equal(back, want));
  }
}

TYPED_TEST(cast_test, half_to_int_saturates) {
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n));
    const auto x = convert_all<kiln::half>(draw(g, n, {-400.0f, 400.0f}));
    const auto got = eval<std::int8_t, TypeParam>([](const auto& t) { return kiln::cast<std::int8_t>(t); }, x);
    const ArrayXd xd = to_double(x);
    EXPECT_TRUE(all_equal(got, wrap_to<std::int8_t>(saturate_to<std::int8_t>(xd))));
  }
}

TYPED_TEST(cast_test, mask_to_number_is_one_or_zero) {
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n));
    const auto a = draw_grid(g, n), b = draw_grid(g, n);
    const ArrayXd ad = to_double(a), bd = to_double(b);
    const ArrayXb m = ad < bd;
    const auto f32 = eval<float, TypeParam>([](const auto& x, const auto& y) { return kiln::cast<float>(x < y); }, a, b);
    EXPECT_TRUE(all_equal(f32, m.cast<float>()));
    const auto i32 =
        eval<std::int32_t, TypeParam>([](const auto& x, const auto& y) { return kiln::cast<std::int32_t>(x < y); }, a, b);
    EXPECT_TRUE(all_equal(i32, m.cast<std::int32_t>()));
    const auto i8 =
        eval<std::int8_t, TypeParam>([](const auto& x, const auto& y) { return kiln::cast<std::int8_t>(x < y); }, a, b);
    EXPECT_TRUE(all_equal(i8, m.cast<std::int32_t>()));
    const auto f16 =
        eval<kiln::half, TypeParam>([](const auto& x, const auto& y) { return kiln::cast<kiln::half>(x < y); }, a, b);
    EXPECT_TRUE(all_equal(f16, m.cast<float>()));
  }
}

TYPED_TEST(cast_test, in_a_chain) {
  // dequantise: int8 * scale + bias, and quantise back: clamp(round-toward-zero(x * 100))
  auto g = rng();
  for (std::size_t n : test_sizes) {
    SCOPED_TRACE("size " + std::to_string(n));
    const auto q = draw_int<std::int8_t>(g, n);
    const auto x = draw(g, n, {});
    const auto deq = eval<float, TypeParam>(
        [](const auto& qt, const auto& xt) { return kiln::cast<float>(qt) * 0.125f + xt; }, q, x);
    const ArrayXd want = to_int64(q).cast<double>() * 0.125 + to_double(x);
    EXPECT_TRUE(all_close(deq, want, tol::exact));
    const auto quant = eval<std::int8_t, TypeParam>(
        [](const auto& xt) { return kiln::cast<std::int8_t>(xt * 100.0f) + std::int8_t(1); }, x);
    const ArrayXd xd = to_double(x);
    // x * 100 is rounded to float before the conversion, as kiln does
    const ArrayXd scaled = round_f32(xd * 100.0);
    EXPECT_TRUE(all_equal(quant, wrap_to<std::int8_t>(saturate_to<std::int8_t>(scaled) + 1)));
  }
}
