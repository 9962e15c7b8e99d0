// tests/dist/collectives_test.cpp — kiln::dist's operations on every backend, run on 2 and
// 4 ranks: sums (f32, i32; f16 and bf16 summed in f32), views, tensors with pending work,
// all-gather, broadcast, send/recv, split; and the mismatches that must throw on every
// rank instead of hanging (shape, dtype, call order, refused arguments).
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <kiln/dist/dist.hpp>
#include <kiln/kiln.hpp>

#include "backends.hpp"
#include "dist_support.hpp"

namespace {

using kiln_test::dist::backend_names;
kiln::dist::communicator& comm() { return kiln_test::dist::world(); }

template <class T, class B>
kiln::tensor<T, B> make(const kiln::shape& s, std::vector<T> v) {
  return kiln::from_host(kiln_test::ctx<B>(), s, std::span<const T>(v));
}

/// What a call threw on this rank ("" when it did not throw a kiln::dist::error).
template <class F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const kiln::dist::error& e) {
    return e.what();
  }
  return "";
}

template <class B>
class dist_collectives : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(dist_collectives, kiln_test::backend_types, backend_names);

TYPED_TEST(dist_collectives, all_reduce_f32) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  std::vector<float> v(15);
  for (int i = 0; i < 15; ++i) v[i] = float(r + 1) * float(i + 1) * 0.25f;
  auto t = make<float, B>({3, 5}, v);
  comm().all_reduce_sum(t);
  const auto got = t.to_host();
  for (int i = 0; i < 15; ++i) EXPECT_EQ(got[i], float(n * (n + 1) / 2) * float(i + 1) * 0.25f) << i;
}

TYPED_TEST(dist_collectives, all_reduce_i32) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  std::vector<std::int32_t> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = r * 100000 - i;
  auto t = make<std::int32_t, B>({10, 100}, v);
  comm().all_reduce_sum(t);
  const auto got = t.to_host();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(got[i], 100000 * (n * (n - 1) / 2) - n * i) << i;
}

TYPED_TEST(dist_collectives, all_reduce_f16) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  std::vector<kiln::half> v(64);
  for (int i = 0; i < 64; ++i) v[i] = kiln::half(float(r + 1 + i));
  auto t = make<kiln::half, B>({64}, v);
  comm().all_reduce_sum(t);
  const auto got = t.to_host();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(float(got[i]), float(n * (n + 1) / 2 + n * i)) << i;
}

// bf16 holds 8 significant bits: 256 + 1 + 1 + 1 summed in bf16 step by step stays 256,
// summed in f32 and rounded once it is 260 (4 ranks; 2 ranks: 257 rounds to 256 either way).
TYPED_TEST(dist_collectives, all_reduce_bf16_rounds_once) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  auto t = make<kiln::bfloat16, B>({8}, std::vector<kiln::bfloat16>(8, kiln::bfloat16(r == 0 ? 256.0f : 1.0f)));
  comm().all_reduce_sum(t);
  for (auto x : t.to_host()) EXPECT_EQ(float(x), float(kiln::bfloat16(256.0f + float(n - 1))));
}

// the tensor is the result of work still pending on its backend, and is read by work
// recorded after the call
TYPED_TEST(dist_collectives, all_reduce_between_kernels) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  std::vector<float> v(4096);
  for (int i = 0; i < 4096; ++i) v[i] = float(i % 97) + float(r);
  auto x = make<float, B>({4096}, v);
  auto y = kiln::empty<float>(kiln_test::ctx<B>(), {4096});
  y = x * 2.0f;
  comm().all_reduce_sum(y);
  auto z = kiln::empty<float>(kiln_test::ctx<B>(), {4096});
  z = y + 1.0f;
  const auto got = z.to_host();
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(got[i], 2.0f * (float(n * (i % 97)) + float(n * (n - 1) / 2)) + 1.0f) << i;
}

TYPED_TEST(dist_collectives, all_reduce_contiguous_view) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  auto base = make<float, B>({4, 6}, std::vector<float>(24, float(r + 1)));
  comm().all_reduce_sum(kiln::slice(base, 0, 1, 3));  // rows 1 and 2: contiguous, at an offset
  const auto got = base.to_host();
  for (int i = 0; i < 24; ++i) {
    const bool in = i >= 6 && i < 18;
    EXPECT_EQ(got[i], in ? float(n * (n + 1) / 2) : float(r + 1)) << i;
  }
}

TYPED_TEST(dist_collectives, all_reduce_strided_view) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  auto base = make<float, B>({4, 6}, std::vector<float>(24, float(r + 1)));
  comm().all_reduce_sum(kiln::slice(base, 1, 2, 5));  // columns 2 to 4: through a contiguous copy
  const auto got = base.to_host();
  for (int i = 0; i < 24; ++i) {
    const bool in = i % 6 >= 2 && i % 6 < 5;
    EXPECT_EQ(got[i], in ? float(n * (n + 1) / 2) : float(r + 1)) << i;
  }
}

TYPED_TEST(dist_collectives, all_reduce_refuses_broadcast_view) {
  using B = TypeParam;
  auto x = make<float, B>({1, 4}, std::vector<float>(4, 1.0f));
  const auto what = thrown([&] { comm().all_reduce_sum(kiln::broadcast_to(x, kiln::shape{3, 4})); });
  EXPECT_NE(what.find("kiln::dist::all_reduce_sum: rank " + std::to_string(comm().rank())), std::string::npos) << what;
  EXPECT_NE(what.find("broadcast view"), std::string::npos) << what;
}

TYPED_TEST(dist_collectives, mismatched_shapes_throw_on_every_rank) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  auto t = kiln::zeros<float>(kiln_test::ctx<B>(), r == 1 ? kiln::shape{4, 9} : kiln::shape{4, 8});
  const auto what = thrown([&] { comm().all_reduce_sum(t); });
  const std::string head = "kiln::dist::all_reduce_sum: rank " + std::to_string(r) + " of " + std::to_string(n) + ": tensor " +
                           t.describe() + " does not match rank ";
  EXPECT_EQ(what, head + (r == 1 ? "0's f32[4, 8]" : "1's f32[4, 9]"));
  // the ranks are still in step
  auto u = make<float, B>({2}, {1.0f, 2.0f});
  comm().all_reduce_sum(u);
  EXPECT_EQ(u.to_host(), (std::vector<float>{float(n), 2.0f * float(n)}));
}

TYPED_TEST(dist_collectives, mismatched_dtypes_throw_on_every_rank) {
  using B = TypeParam;
  const int r = comm().rank();
  std::string what;
  if (r == 0) {
    auto t = kiln::zeros<float>(kiln_test::ctx<B>(), {4});
    what = thrown([&] { comm().all_reduce_sum(t); });
  } else {
    auto t = kiln::zeros<std::int32_t>(kiln_test::ctx<B>(), {4});
    what = thrown([&] { comm().all_reduce_sum(t); });
  }
  EXPECT_NE(what.find(r == 0 ? "tensor f32[4]" : "tensor i32[4]"), std::string::npos) << what;
  EXPECT_NE(what.find(r == 0 ? "does not match rank 1's i32[4]" : "does not match rank 0's f32[4]"), std::string::npos) << what;
}

TYPED_TEST(dist_collectives, different_calls_throw_on_every_rank) {
  using B = TypeParam;
  const int r = comm().rank();
  auto t = kiln::zeros<float>(kiln_test::ctx<B>(), {4});
  const auto what = thrown([&] {
    if (r == 0) comm().broadcast(t, 0);
    else comm().all_reduce_sum(t);
  });
  EXPECT_NE(what.find("every rank must make the same calls in the same order"), std::string::npos) << what;
  EXPECT_NE(what.find(r == 0 ? "is broadcast here, but rank 1" : "is all_reduce_sum here, but rank 0"), std::string::npos)
      << what;
}

TYPED_TEST(dist_collectives, all_gather_axis0) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  std::vector<float> v(6);
  for (int i = 0; i < 6; ++i) v[i] = float(r * 100 + i);
  auto in = make<float, B>({2, 3}, v);
  auto out = kiln::zeros<float>(kiln_test::ctx<B>(), {2 * n, 3});
  comm().all_gather(in, out);
  const auto got = out.to_host();
  for (int p = 0; p < n; ++p) {
    for (int i = 0; i < 6; ++i) EXPECT_EQ(got[p * 6 + i], float(p * 100 + i));
  }
}

TYPED_TEST(dist_collectives, all_gather_refused_on_one_rank) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  auto in = kiln::zeros<std::int32_t>(kiln_test::ctx<B>(), {2, 3});
  auto out = kiln::zeros<std::int32_t>(kiln_test::ctx<B>(), {2 * n + (r == 1 ? 1 : 0), 3});
  const auto what = thrown([&] { comm().all_gather(in, out); });
  if (r == 1) {
    EXPECT_NE(what.find("the output " + out.describe() + " is not the input " + in.describe() + " gathered from " +
                        std::to_string(n) + " ranks (i32[" + std::to_string(2 * n) + ", 3])"),
              std::string::npos)
        << what;
  } else {
    EXPECT_NE(what.find("rank 1 refused its arguments"), std::string::npos) << what;
  }
}

TYPED_TEST(dist_collectives, broadcast_from_last_rank) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  std::vector<kiln::half> v(40);
  for (int i = 0; i < 40; ++i) v[i] = kiln::half(float(r * 10 + i));
  auto t = make<kiln::half, B>({5, 8}, v);
  comm().broadcast(t, n - 1);
  const auto got = t.to_host();
  for (int i = 0; i < 40; ++i) EXPECT_EQ(float(got[i]), float((n - 1) * 10 + i));
}

TYPED_TEST(dist_collectives, broadcast_bad_root) {
  using B = TypeParam;
  const int n = comm().size();
  auto t = kiln::zeros<float>(kiln_test::ctx<B>(), {4});
  const auto what = thrown([&] { comm().broadcast(t, n); });
  EXPECT_NE(what.find("root " + std::to_string(n) + " is not a rank of this communicator"), std::string::npos) << what;
}

TYPED_TEST(dist_collectives, send_recv_pairs) {
  using B = TypeParam;
  const int r = comm().rank();
  const int peer = r % 2 == 0 ? r + 1 : r - 1;
  if (peer >= comm().size()) return;
  for (int count : {64, 1 << 20}) {  // an eager message and a rendezvous one
    std::vector<float> v(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) v[i] = float(r * 1000 + i % 1000);
    auto mine = make<float, B>({count}, v);
    auto got = kiln::zeros<float>(kiln_test::ctx<B>(), {count});
    if (r % 2 == 0) {
      comm().send(mine, peer, 5);
      comm().recv(got, peer, 6);
    } else {
      comm().recv(got, peer, 5);
      comm().send(mine, peer, 6);
    }
    const auto h = got.to_host();
    for (int i = 0; i < count; ++i) ASSERT_EQ(h[i], float(peer * 1000 + i % 1000)) << i;
  }
}

TYPED_TEST(dist_collectives, recv_mismatch_names_both) {
  using B = TypeParam;
  const int r = comm().rank();
  if (r == 0) {
    auto t = kiln::zeros<float>(kiln_test::ctx<B>(), {4});
    comm().send(t, 1, 9);
  } else if (r == 1) {
    auto t = kiln::zeros<float>(kiln_test::ctx<B>(), {5});
    const auto what = thrown([&] { comm().recv(t, 0, 9); });
    EXPECT_EQ(what, "kiln::dist::recv: rank 1 of " + std::to_string(comm().size()) + ": tensor " + t.describe() +
                        " does not match rank 0's f32[4] (tag 9)");
  }
  auto u = make<float, B>({1}, {1.0f});  // the message was consumed: the ranks are in step
  comm().all_reduce_sum(u);
  EXPECT_EQ(u.to_host()[0], float(comm().size()));
}

TYPED_TEST(dist_collectives, send_bad_arguments) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  auto t = kiln::zeros<float>(kiln_test::ctx<B>(), {4});
  EXPECT_NE(thrown([&] { comm().send(t, r, 0); }).find("dest is this rank itself"), std::string::npos);
  EXPECT_NE(thrown([&] { comm().send(t, n, 0); }).find("dest " + std::to_string(n) + " is not a rank"), std::string::npos);
  EXPECT_NE(thrown([&] { comm().recv(t, -1, 0); }).find("src -1 is not a rank"), std::string::npos);
  EXPECT_NE(thrown([&] { comm().send(t, (r + 1) % n, -3); }).find("tag -3 is outside 0 to"), std::string::npos);
}

TYPED_TEST(dist_collectives, split_by_parity) {
  using B = TypeParam;
  const int r = comm().rank(), n = comm().size();
  auto half = comm().split(r % 2, -r);  // keys reversed: the highest rank first
  int expect_size = 0, expect_sum = 0, higher = 0;
  for (int p = 0; p < n; ++p) {
    if (p % 2 != r % 2) continue;
    ++expect_size;
    expect_sum += p;
    if (p > r) ++higher;
  }
  EXPECT_EQ(half.size(), expect_size);
  EXPECT_EQ(half.rank(), higher);
  auto t = make<std::int32_t, B>({3}, std::vector<std::int32_t>(3, r));
  half.all_reduce_sum(t);
  for (auto x : t.to_host()) EXPECT_EQ(x, expect_sum);
}

TYPED_TEST(dist_collectives, split_negative_color) {
  const auto what = thrown([&] { (void)comm().split(-1, 0); });
  EXPECT_NE(what.find("kiln::dist::split: rank " + std::to_string(comm().rank()) + " of " + std::to_string(comm().size()) +
                      ": color -1 is negative"),
            std::string::npos)
      << what;
}

TEST(dist_communicator, timeout_from_environment_and_options) {
  EXPECT_EQ(comm().settings().timeout, std::chrono::seconds(30));  // the tests run with KILN_DIST_TIMEOUT=30
  kiln::dist::options o;
  o.timeout = std::chrono::milliseconds(1500);
  auto c = kiln::dist::communicator::world(o);
  EXPECT_EQ(c.settings().timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(c.size(), comm().size());
  EXPECT_EQ(c.rank(), comm().rank());
  EXPECT_NE(c.native(), comm().native());  // each communicator is a private duplicate
}

#if defined(KILN_TEST_VULKAN)
// Vulkan tensors reach MPI through host-visible memory: the mapped storage itself where the
// context keeps tensors in mapped memory (zero-copy, lavapipe), else a downloaded copy
// that is uploaded afterwards (a context made with zero_copy = false).
class dist_vulkan : public kiln_test::backend_test<kiln::vulkan> {};

void reduce_gather_broadcast(kiln::context<kiln::vulkan>& ctx, bool expect_staged) {
  const int r = comm().rank(), n = comm().size();
  std::vector<float> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = float(i) + float(r);
  auto x = kiln::from_host(ctx, {1000}, std::span<const float>(v));
  auto y = kiln::empty<float>(ctx, {1000});
  y = x * 3.0f;  // pending
  std::vector<std::byte> scratch;
  {
    kiln::dist::detail::host_span<float, kiln::vulkan> h(y, kiln::dist::detail::access::read, scratch);
    EXPECT_EQ(h.staged(), expect_staged);
    EXPECT_EQ(h.data()[7], 3.0f * float(7 + r));  // the pending kernel finished before the host read
  }
  comm().all_reduce_sum(y);
  auto z = kiln::empty<float>(ctx, {1000});
  z = y - 1.0f;
  const auto got = z.to_host();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(got[i], 3.0f * float(n * i + n * (n - 1) / 2) - 1.0f) << i;

  auto g = kiln::zeros<float>(ctx, {1000 * n});
  comm().all_gather(x, g);
  const auto gh = g.to_host();
  for (int p = 0; p < n; ++p) EXPECT_EQ(gh[static_cast<std::size_t>(p * 1000 + 5)], float(5 + p));

  auto b = kiln::from_host(ctx, {1000}, std::span<const float>(v));
  comm().broadcast(b, 0);
  EXPECT_EQ(b.to_host()[9], 9.0f);
}

TEST_F(dist_vulkan, zero_copy_where_mapped) {
  auto& ctx = kiln_test::ctx<kiln::vulkan>();
  auto probe = kiln::zeros<float>(ctx, {4});
  if (kiln::vulkan::device(ctx).type == kiln::vulkan::device_type::cpu) {
    EXPECT_NE(probe.storage()->mapped(), nullptr) << "a CPU device (lavapipe) keeps tensors in mapped memory";
  }
  reduce_gather_broadcast(ctx, probe.storage()->mapped() == nullptr);
}

TEST_F(dist_vulkan, staged_through_host_copies) {
  kiln::vulkan::options o;
  o.validation = true;
  o.zero_copy = false;
  kiln::context<kiln::vulkan> ctx{o};
  reduce_gather_broadcast(ctx, true);
}
#endif

}  // namespace
