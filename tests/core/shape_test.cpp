// tests/core/shape_test.cpp — kiln::shape / kiln::strides: rank limits, extents, numel,
// row-major strides and NumPy broadcasting.
#include <gtest/gtest.h>

#include <kiln/core/shape.hpp>

#include <string>
#include <vector>

#include "checks.hpp"

namespace {

using kiln_test::shape_error_of;

kiln::shape broadcast(const kiln::shape& a, const kiln::shape& b) {
  kiln::shape out{99};
  EXPECT_TRUE(kiln::broadcast_shapes(a, b, out)) << a.to_string() << " with " << b.to_string();
  return out;
}

}  // namespace

TEST(shape, rank_zero_is_one_element) {
  const kiln::shape s;
  EXPECT_EQ(s.rank(), 0);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.to_string(), "[]");
  EXPECT_EQ(kiln::contiguous_strides(s).rank(), 0);
}

TEST(shape, extents_rank_and_numel) {
  const kiln::shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s[0], 2);
  EXPECT_EQ(s[2], 4);
  EXPECT_EQ(s.back(), 4);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.to_string(), "[2, 3, 4]");
  EXPECT_EQ(std::vector<kiln::index_t>(s.begin(), s.end()), (std::vector<kiln::index_t>{2, 3, 4}));
  EXPECT_EQ((kiln::shape{5, 0, 7}.numel()), 0);
  EXPECT_EQ((kiln::shape{1}.numel()), 1);
  EXPECT_EQ((kiln::shape{1 << 20, 1 << 12}.numel()), kiln::index_t(1) << 32);  // no 32-bit overflow
  const std::vector<kiln::index_t> v{6, 7};
  EXPECT_EQ(kiln::shape(std::span<const kiln::index_t>(v)), (kiln::shape{6, 7}));
}

TEST(shape, equality) {
  EXPECT_EQ((kiln::shape{2, 3}), (kiln::shape{2, 3}));
  EXPECT_FALSE((kiln::shape{2, 3}) == (kiln::shape{3, 2}));
  EXPECT_FALSE((kiln::shape{2, 3}) == (kiln::shape{2, 3, 1}));
  EXPECT_FALSE(kiln::shape{} == (kiln::shape{1}));
}

TEST(shape, rank_eight_is_the_limit) {
  const kiln::shape s8{1, 2, 1, 2, 1, 2, 1, 2};
  EXPECT_EQ(s8.rank(), kiln::max_rank);
  EXPECT_EQ(s8.numel(), 16);
  const std::string msg = shape_error_of([] { kiln::shape s9{1, 2, 3, 4, 5, 6, 7, 8, 9}; });
  EXPECT_NE(msg.find("kiln::shape"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 9"), std::string::npos) << msg;
  EXPECT_NE(msg.find("8"), std::string::npos) << msg;
  const std::vector<kiln::index_t> nine(9, 1);
  EXPECT_THROW(kiln::shape(std::span<const kiln::index_t>(nine)), kiln::shape_error);
  kiln::shape grow = s8;
  EXPECT_THROW(grow.push_back(1), kiln::shape_error);
  EXPECT_THROW(grow.insert(0, 1), kiln::shape_error);
  EXPECT_EQ(grow, s8) << "a failed push_back must not change the shape";
  EXPECT_THROW((kiln::strides{1, 1, 1, 1, 1, 1, 1, 1, 1}), kiln::shape_error);
}

TEST(shape, negative_extents_throw) {
  const std::string msg = shape_error_of([] { kiln::shape s{3, -2}; });
  EXPECT_NE(msg.find("negative extent -2"), std::string::npos) << msg;
  const std::vector<kiln::index_t> v{-1};
  EXPECT_THROW(kiln::shape(std::span<const kiln::index_t>(v)), kiln::shape_error);
}

TEST(shape, insert_and_erase) {
  kiln::shape s{2, 4};
  s.insert(1, 3);
  EXPECT_EQ(s, (kiln::shape{2, 3, 4}));
  s.insert(3, 5);
  EXPECT_EQ(s, (kiln::shape{2, 3, 4, 5}));
  s.insert(0, 1);
  EXPECT_EQ(s, (kiln::shape{1, 2, 3, 4, 5}));
  s.erase(0);
  s.erase(3);
  EXPECT_EQ(s, (kiln::shape{2, 3, 4}));
  s.erase(1);
  EXPECT_EQ(s, (kiln::shape{2, 4}));
}

TEST(shape, strides_allow_zero_and_negative) {
  const kiln::strides st{0, -3, 1};
  EXPECT_EQ(st.rank(), 3);
  EXPECT_EQ(st[0], 0);
  EXPECT_EQ(st[1], -3);
  EXPECT_EQ(st.to_string(), "[0, -3, 1]");
}

TEST(shape, contiguous_strides_are_row_major) {
  EXPECT_EQ(kiln::contiguous_strides({2, 3, 4}), (kiln::strides{12, 4, 1}));
  EXPECT_EQ(kiln::contiguous_strides({5}), (kiln::strides{1}));
  EXPECT_EQ(kiln::contiguous_strides({3, 1, 2}), (kiln::strides{2, 2, 1}));
  // a zero extent still gives distinct, positive strides to the other dimensions
  EXPECT_EQ(kiln::contiguous_strides({2, 0, 3}), (kiln::strides{3, 3, 1}));
}

TEST(shape, broadcast_shapes_follows_numpy) {
  EXPECT_EQ(broadcast({3, 1}, {4}), (kiln::shape{3, 4}));
  EXPECT_EQ(broadcast({4}, {3, 1}), (kiln::shape{3, 4}));
  EXPECT_EQ(broadcast({}, {2, 3}), (kiln::shape{2, 3}));
  EXPECT_EQ(broadcast({2, 3}, {}), (kiln::shape{2, 3}));
  EXPECT_EQ(broadcast({}, {}), kiln::shape{});
  EXPECT_EQ(broadcast({2, 1, 5}, {3, 1}), (kiln::shape{2, 3, 5}));
  EXPECT_EQ(broadcast({1}, {0}), (kiln::shape{0}));
  EXPECT_EQ(broadcast({0, 1}, {1, 7}), (kiln::shape{0, 7}));
  EXPECT_EQ(broadcast({1, 1, 1, 1, 1, 1, 1, 8}, {8, 1}), (kiln::shape{1, 1, 1, 1, 1, 1, 8, 8}));
}

TEST(shape, incompatible_shapes_do_not_broadcast) {
  kiln::shape out{42};
  EXPECT_FALSE(kiln::broadcast_shapes({2, 3}, {3, 2}, out));
  EXPECT_FALSE(kiln::broadcast_shapes({3}, {4}, out));
  EXPECT_FALSE(kiln::broadcast_shapes({0}, {2}, out));
  EXPECT_FALSE(kiln::broadcast_shapes({2, 3, 4}, {5, 4}, out));
  EXPECT_EQ(out, (kiln::shape{42})) << "a failed broadcast must leave out untouched";
}

TEST(shape, broadcasts_to_is_broadcast_giving_the_target) {
  const kiln::shape cases[] = {{}, {1}, {0}, {4}, {3, 1}, {1, 4}, {3, 4}, {2, 3, 4}, {2, 1, 4}, {5, 4}, {1, 1, 1}};
  for (const auto& from : cases) {
    for (const auto& to : cases) {
      kiln::shape out;
      const bool expected = kiln::broadcast_shapes(from, to, out) && out == to;
      EXPECT_EQ(kiln::broadcasts_to(from, to), expected) << from.to_string() << " to " << to.to_string();
    }
  }
}

TEST(shape, broadcast_can_write_into_an_input) {
  kiln::shape a{3, 1};
  ASSERT_TRUE(kiln::broadcast_shapes(a, {1, 4}, a));
  EXPECT_EQ(a, (kiln::shape{3, 4}));
  ASSERT_TRUE(kiln::broadcast_shapes(a, a, a));
  EXPECT_EQ(a, (kiln::shape{3, 4}));
  kiln::shape s{};
  ASSERT_TRUE(kiln::broadcast_shapes(s, {2, 5}, s));
  EXPECT_EQ(s, (kiln::shape{2, 5}));
}
