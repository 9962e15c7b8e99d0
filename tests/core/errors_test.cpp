// tests/core/errors_test.cpp — the exception hierarchy, and what shape errors say: the
// op, every operand's dtype and shape, and the device.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "backends.hpp"
#include "checks.hpp"

namespace {

using kiln_test::shape_error_of;

/// msg mentions every part.
::testing::AssertionResult mentions(const std::string& msg, std::initializer_list<std::string> parts) {
  for (const auto& p : parts) {
    if (msg.find(p) == std::string::npos) {
      return ::testing::AssertionFailure() << "\"" << msg << "\" does not mention \"" << p << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

static_assert(std::is_base_of_v<std::runtime_error, kiln::error>);
static_assert(std::is_base_of_v<kiln::error, kiln::shape_error>);
static_assert(std::is_base_of_v<kiln::error, kiln::dtype_error>);
static_assert(std::is_base_of_v<kiln::error, kiln::device_error>);
static_assert(std::is_base_of_v<kiln::device_error, kiln::device_unavailable>);
static_assert(std::is_base_of_v<kiln::device_error, kiln::out_of_memory>);
static_assert(std::is_base_of_v<kiln::error, kiln::shader_error>);

TEST(errors, hierarchy_catches_as_base_classes) {
  EXPECT_THROW(throw kiln::shape_error("s"), kiln::error);
  EXPECT_THROW(throw kiln::shape_error("s"), std::runtime_error);
  EXPECT_THROW(throw kiln::dtype_error("d"), kiln::error);
  EXPECT_THROW(throw kiln::device_unavailable("u"), kiln::device_error);
  EXPECT_THROW(throw kiln::shader_error("g"), std::runtime_error);
  try {
    throw kiln::shape_error("kiln::test: message kept");
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "kiln::test: message kept");
  }
}

TEST(errors, out_of_memory_carries_sizes) {
  const kiln::out_of_memory e("kiln::test: out of memory", 1000, 10);
  EXPECT_EQ(e.requested(), 1000u);
  EXPECT_EQ(e.available(), 10u);
  EXPECT_STREQ(e.what(), "kiln::test: out of memory");
  const kiln::device_error& base = e;
  EXPECT_STREQ(base.what(), "kiln::test: out of memory");
}

TEST(errors, cpu_device_name_and_thread_count) {
  kiln::context<kiln::cpu<>> ctx{kiln::threads{2}};
  EXPECT_EQ(ctx.device_name(), "cpu");
  EXPECT_EQ(kiln::empty<float>(ctx, {2, 3}).describe(), "f32[2, 3] on cpu");
  try {
    kiln::context<kiln::cpu<>> bad{kiln::threads{0}};
    ADD_FAILURE() << "threads{0} accepted";
  } catch (const kiln::error& e) {
    EXPECT_TRUE(mentions(e.what(), {"kiln::cpu", "thread count 0"}));
  }
}

TEST(errors, bad_thread_count_in_the_environment) {
  const char* old = std::getenv("KILN_NUM_THREADS");
  const std::string saved = old ? old : "";
  ::setenv("KILN_NUM_THREADS", "lots", 1);
  std::string msg;
  try {
    kiln::context<kiln::cpu<>> ctx;
  } catch (const kiln::error& e) {
    msg = e.what();
  }
  if (old) ::setenv("KILN_NUM_THREADS", saved.c_str(), 1);
  else ::unsetenv("KILN_NUM_THREADS");
  EXPECT_TRUE(mentions(msg, {"KILN_NUM_THREADS", "lots"}));
}

template <class B>
class errors_on : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(errors_on, kiln_test::backend_types);

TYPED_TEST(errors_on, binary_op_shape_error_names_op_dtypes_shapes_and_device) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  const std::string dev = ctx.device_name();
  auto a = kiln::zeros<float>(ctx, {2, 3});
  auto b = kiln::zeros<float>(ctx, {4});
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)(a + b); }),
                       {"kiln::add", "shapes cannot be broadcast", "f32[2, 3] on " + dev, "f32[4] on " + dev}));
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)(a - b); }), {"kiln::sub", "f32[2, 3]", "f32[4]"}));
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)(b * a); }), {"kiln::mul", "a is f32[4]", "b is f32[2, 3]"}));
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)(a / b); }), {"kiln::div", "f32[2, 3]", "f32[4]"}));
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)kiln::max(a, b); }), {"kiln::max", dev}));
}

TYPED_TEST(errors_on, shape_error_names_other_dtypes) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  const std::string dev = ctx.device_name();
  auto h1 = kiln::zeros<kiln::half>(ctx, {5});
  auto h2 = kiln::zeros<kiln::half>(ctx, {6});
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)(h1 * h2); }), {"kiln::mul", "f16[5] on " + dev, "f16[6] on " + dev}));
  auto i1 = kiln::zeros<std::int8_t>(ctx, {2, 2});
  auto i2 = kiln::zeros<std::int8_t>(ctx, {3});
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)(i1 + i2); }), {"kiln::add", "i8[2, 2]", "i8[3]", dev}));
  auto n1 = kiln::zeros<std::int32_t>(ctx, {7});
  auto n2 = kiln::zeros<std::int32_t>(ctx, {8});
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)(n1 - n2); }), {"kiln::sub", "i32[7]", "i32[8]"}));
  auto b1 = kiln::zeros<kiln::bfloat16>(ctx, {1, 9});
  auto b2 = kiln::zeros<kiln::bfloat16>(ctx, {2, 1, 3});
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)(b1 + b2); }), {"bf16[1, 9]", "bf16[2, 1, 3]"}));
}

TYPED_TEST(errors_on, nested_expression_errors_describe_the_subexpression) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto a = kiln::zeros<float>(ctx, {2, 3});
  auto c = kiln::zeros<float>(ctx, {5});
  // the inner a * 2 is an f32[2, 3] expression, reported as such
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)(kiln::relu(a * 2.0f) + c); }),
                       {"kiln::add", "f32[2, 3] expression", "f32[5] on " + ctx.device_name()}));
  // three operands: each is labelled
  auto m = kiln::zeros<float>(ctx, {4});
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)kiln::where(m > 0.0f, a, c); }),
                       {"kiln::where", "a is mask[4] expression", "b is f32[2, 3]", "c is f32[5]"}));
}

TYPED_TEST(errors_on, assignment_shape_error_names_both_sides) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  const std::string dev = ctx.device_name();
  auto a = kiln::zeros<float>(ctx, {2, 3});
  auto y = kiln::zeros<float>(ctx, {3, 2});
  EXPECT_TRUE(mentions(shape_error_of([&] { y = a * 2.0f; }), {"kiln::assign", "f32[2, 3]", "f32[3, 2] on " + dev}));
  auto small = kiln::zeros<float>(ctx, {3});
  EXPECT_TRUE(mentions(shape_error_of([&] { small = a; }), {"kiln::assign", "f32[2, 3]", "f32[3] on " + dev}));
  // broadcasting into a larger target is fine; the other way round is not
  auto big = kiln::zeros<float>(ctx, {4, 2, 3});
  big = a + 1.0f;
  EXPECT_EQ(big.to_host(), std::vector<float>(24, 1.0f));
  EXPECT_EQ(y.to_host(), std::vector<float>(6, 0.0f)) << "a failed assignment must not write";
}

TYPED_TEST(errors_on, view_errors_name_the_op_and_the_tensor) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  const std::string t = "i32[2, 3] on " + ctx.device_name();
  auto x = kiln::zeros<std::int32_t>(ctx, {2, 3});
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)kiln::slice(x, 0, 0, 1, 0); }), {"kiln::slice", t}));
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)kiln::reshape(x, {4}); }), {"kiln::reshape", t, "[4]"}));
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)kiln::reshape(kiln::transpose(x), {6}); }),
                       {"kiln::reshape", "i32[3, 2] on " + ctx.device_name(), "without a copy"}));
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)kiln::permute(x, {0}); }), {"kiln::permute", t}));
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)kiln::broadcast_to(x, {3, 3}); }), {"kiln::broadcast_to", t, "[3, 3]"}));
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)kiln::squeeze(x, 1); }), {"kiln::squeeze", t}));
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)kiln::unsqueeze(x, 5); }), {"kiln::unsqueeze", t}));
  EXPECT_TRUE(mentions(shape_error_of([&] { (void)x.size(2); }), {"dimension 2", t}));
  std::vector<std::int32_t> dst(5);
  EXPECT_TRUE(mentions(shape_error_of([&] { x.copy_to(dst); }), {"kiln::copy_to", t, "5"}));
}

TYPED_TEST(errors_on, errors_are_catchable_as_kiln_error_and_runtime_error) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto a = kiln::zeros<float>(ctx, {2});
  auto b = kiln::zeros<float>(ctx, {3});
  EXPECT_THROW((void)(a + b), kiln::error);
  EXPECT_THROW((void)(a + b), std::runtime_error);
  EXPECT_THROW((void)kiln::reshape(a, {3}), kiln::error);
}

// A moved-from context owns no state: using it throws kiln::device_error naming what was
// asked of it (it used to dereference a null state and crash); the context it was moved
// into works.
TYPED_TEST(errors_on, moved_from_context_throws) {
  kiln::context<TypeParam> from = kiln_test::ctx<TypeParam>();  // a handle sharing the test context's state
  kiln::context<TypeParam> into = std::move(from);
  const auto device_error_of = [](auto&& f) { return kiln_test::message_of<kiln::device_error>(f); };
  const std::string made = device_error_of([&] { (void)kiln::empty<float>(from, {4}); });
  EXPECT_NE(made.find("moved from"), std::string::npos) << made;
  EXPECT_NE(device_error_of([&] { (void)from.device_name(); }).find("kiln::context::device_name"), std::string::npos);
  EXPECT_THROW(from.synchronize(), kiln::device_error);
  EXPECT_THROW(from.set_profiling(true), kiln::device_error);
  EXPECT_THROW((void)from.profile(), kiln::device_error);
  EXPECT_THROW((void)kiln::profile_table(from), kiln::device_error);
  EXPECT_THROW((void)kiln::full(from, {2}, 1.0f), kiln::device_error);
  auto y = kiln::full(into, {3}, 2.0f);
  y = y * 3.0f;
  EXPECT_EQ(y.to_host(), (std::vector<float>(3, 6.0f)));
}
