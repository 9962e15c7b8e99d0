// tests/cpu/scheduler_test.cpp — the CPU backend's thread pool (kiln/cpu/scheduler.hpp)
// and how statements use it: every chunk runs once, results are bit-identical to one
// thread whatever the thread count, nested loops and several user threads neither
// deadlock nor mix results, an exception reaches the caller without hanging it, a caller
// never waits for a worker that has not started nor for the unstarted part of a stalled
// worker's batch, per-thread scratch is reused, and the
// cost hints decide the thread count.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "random.hpp"
#include "scoped_env.hpp"

namespace {

using kiln::index_t;
using cpu_ctx = kiln::context<kiln::cpu<>>;
using kiln::detail::cpu_scheduler;

cpu_scheduler& pool() { return cpu_scheduler::instance(); }

/// Fresh random values in [-4, 4) (the run's seed, see random.hpp), one stream per `stream`.
std::vector<float> host_values(index_t n, std::uint64_t stream) {
  std::mt19937_64 g(kiln_test::rng()() ^ (stream * 0x9E3779B97F4A7C15ull));
  return kiln_test::uniform(g, static_cast<std::size_t>(n));
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  // (memcmp of two empty vectors would take null pointers: undefined, and UBSan says so)
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

/// Runs parallel_for and checks that every index of [0, n) was covered exactly once, by
/// calls whose bounds are the chunk grid.
void check_cover(index_t n, index_t chunk, int threads) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  std::atomic<bool> grid_ok{true};
  pool().parallel_for(n, chunk, threads, [&](index_t b, index_t e) {
    if (b < 0 || e > n || b >= e) grid_ok = false;
    // a loop that runs inline gets [0, n) in one call; otherwise the calls are the grid
    if (!(b == 0 && e == n) && (b % chunk != 0 || e != std::min(n, b + chunk))) grid_ok = false;
    for (index_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1, std::memory_order_relaxed);
  });
  EXPECT_TRUE(grid_ok) << "n=" << n << " chunk=" << chunk << " threads=" << threads;
  index_t wrong = 0;
  for (auto& h : hits) wrong += h.load() != 1;
  EXPECT_EQ(wrong, 0) << "n=" << n << " chunk=" << chunk << " threads=" << threads;
}

}  // namespace

TEST(scheduler, every_index_runs_exactly_once) {
  for (int threads : {1, 2, 3, 4, 8}) {
    for (index_t chunk : {1, 7, 64, 4096}) {
      for (index_t n : {index_t(0), index_t(1), chunk - 1, chunk, chunk + 1, 5 * chunk, 5 * chunk + 3, index_t(100003)}) {
        if (n >= 0) check_cover(n, chunk, threads);
      }
    }
  }
}

TEST(scheduler, statements_match_one_thread_bit_for_bit) {
  cpu_ctx one{kiln::threads{1}};
  // sizes around the chunk grid (multiples of 64, chunk floors of 4K floats, the
  // two-thread thresholds) and large enough to use every thread and stream
  const index_t sizes[] = {0, 1, 63, 64, 65, 4095, 4096, 4097, 35001, 131072, 262147, 1 << 20, (1 << 22) + 5};
  for (int threads : {2, 3, 4, 7}) {
    cpu_ctx many{kiln::threads{threads}};
    for (index_t n : sizes) {
      const auto ha = host_values(n, 1), hb = host_values(n, 2), hc = host_values(n, 3);
      auto a1 = kiln::from_host(one, {n}, std::span(ha)), b1 = kiln::from_host(one, {n}, std::span(hb)),
           c1 = kiln::from_host(one, {n}, std::span(hc));
      auto am = kiln::from_host(many, {n}, std::span(ha)), bm = kiln::from_host(many, {n}, std::span(hb)),
           cm = kiln::from_host(many, {n}, std::span(hc));
      auto y1 = kiln::empty<float>(one, {n}), ym = kiln::empty<float>(many, {n});
      y1 = kiln::gelu(a1 * b1 + c1);
      ym = kiln::gelu(am * bm + cm);
      EXPECT_TRUE(bits_equal(y1.to_host(), ym.to_host())) << "gelu chain, n=" << n << " threads=" << threads;
      y1 = a1 + b1;
      ym = am + bm;
      EXPECT_TRUE(bits_equal(y1.to_host(), ym.to_host())) << "add, n=" << n << " threads=" << threads;
      auto i1 = kiln::empty<std::int32_t>(one, {n}), im = kiln::empty<std::int32_t>(many, {n});
      i1 = kiln::cast<std::int32_t>(kiln::exp(a1) * 100.0f);
      im = kiln::cast<std::int32_t>(kiln::exp(am) * 100.0f);
      EXPECT_EQ(i1.to_host(), im.to_host()) << "cast, n=" << n << " threads=" << threads;
    }
  }
}

TEST(scheduler, strided_and_broadcast_statements_match_one_thread) {
  cpu_ctx one{kiln::threads{1}}, many{kiln::threads{4}};
  for (index_t rows : {1, 3, 517}) {
    for (index_t cols : {1, 63, 1000, 4099}) {
      const auto hx = host_values(rows * cols, 4), hbias = host_values(cols, 5);
      auto x1 = kiln::from_host(one, {rows, cols}, std::span(hx)), xm = kiln::from_host(many, {rows, cols}, std::span(hx));
      auto b1 = kiln::from_host(one, {cols}, std::span(hbias)), bm = kiln::from_host(many, {cols}, std::span(hbias));
      auto y1 = kiln::empty<float>(one, {cols, rows}), ym = kiln::empty<float>(many, {cols, rows});
      // a transposed output: strided stores over a broadcast bias
      kiln::transpose(y1, 0, 1) = kiln::silu(x1 + b1) * 0.5f;
      kiln::transpose(ym, 0, 1) = kiln::silu(xm + bm) * 0.5f;
      EXPECT_TRUE(bits_equal(y1.to_host(), ym.to_host())) << rows << "x" << cols;
    }
  }
}

TEST(scheduler, nested_loops_run_inline_and_complete) {
  std::atomic<index_t> inner_total{0};
  std::atomic<bool> nested_inline{true};
  pool().parallel_for(64, 1, 4, [&](index_t, index_t) {
    const auto self = std::this_thread::get_id();
    pool().parallel_for(1000, 10, 4, [&](index_t b, index_t e) {
      if (std::this_thread::get_id() != self) nested_inline = false;
      inner_total += e - b;
    });
  });
  EXPECT_EQ(inner_total.load(), 64 * 1000);
  EXPECT_TRUE(nested_inline.load());
}

TEST(scheduler, statement_inside_a_pool_task) {
  cpu_ctx ctx{kiln::threads{2}};
  const index_t n = 300000;
  const auto ha = host_values(n, 6);
  auto a = kiln::from_host(ctx, {n}, std::span(ha));
  std::vector<kiln::tensor<float, kiln::cpu<>>> outs;
  for (int i = 0; i < 4; ++i) outs.push_back(kiln::empty<float>(ctx, {n}));
  pool().parallel_for(4, 1, 2, [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) outs[static_cast<std::size_t>(i)] = kiln::gelu(a) + static_cast<float>(i);
  });
  auto ref = kiln::empty<float>(ctx, {n});
  for (int i = 0; i < 4; ++i) {
    ref = kiln::gelu(a) + static_cast<float>(i);
    EXPECT_TRUE(bits_equal(outs[static_cast<std::size_t>(i)].to_host(), ref.to_host())) << i;
  }
}

TEST(scheduler, several_user_threads_on_one_context) {
  cpu_ctx ctx{kiln::threads{2}};
  const index_t n = 200003;
  const auto ha = host_values(n, 7), hb = host_values(n, 8);
  auto a = kiln::from_host(ctx, {n}, std::span(ha)), b = kiln::from_host(ctx, {n}, std::span(hb));
  cpu_ctx one{kiln::threads{1}};
  auto a1 = kiln::from_host(one, {n}, std::span(ha)), b1 = kiln::from_host(one, {n}, std::span(hb));
  constexpr int users = 4;
  std::vector<std::vector<float>> want(users);
  for (int u = 0; u < users; ++u) {
    auto y = kiln::empty<float>(one, {n});
    y = kiln::tanh(a1 * static_cast<float>(u + 1) + b1);
    want[static_cast<std::size_t>(u)] = y.to_host();
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> ts;
  for (int u = 0; u < users; ++u) {
    ts.emplace_back([&, u] {
      auto y = kiln::empty<float>(ctx, {n});
      for (int rep = 0; rep < 30; ++rep) {
        y = kiln::tanh(a * static_cast<float>(u + 1) + b);
        if (!bits_equal(y.to_host(), want[static_cast<std::size_t>(u)])) ++mismatches;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(ctx.kernels_launched(), std::uint64_t(users * 30));
}

TEST(scheduler, exceptions_reach_the_caller_and_the_pool_recovers) {
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> ran{0};
    const index_t bad = round % 10;  // the first chunk (the caller's, often) or a later one
    try {
      pool().parallel_for(10, 1, 2, [&](index_t b, index_t) {
        ++ran;
        if (b == bad) throw std::runtime_error("chunk " + std::to_string(b));
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      });
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "chunk " + std::to_string(bad));
    }
    EXPECT_GE(ran.load(), 1);
    EXPECT_LE(ran.load(), 10);
  }
  // every chunk throws: one exception comes out, the others are dropped
  EXPECT_THROW(pool().parallel_for(100, 1, 4, [](index_t, index_t) { throw std::logic_error("x"); }), std::logic_error);
  check_cover(50000, 64, 2);
}

TEST(scheduler, caller_never_waits_for_a_busy_or_late_worker) {
  // Occupy every worker (and one more thread) with chunks that block until released; a
  // statement posted meanwhile must finish on its caller alone.
  check_cover(1000, 1, 2);  // at least one worker exists
  const int busy = static_cast<int>(pool().workers()) + 1;
  std::atomic<int> started{0};
  std::atomic<bool> release{false};
  std::thread blocker([&] {
    pool().parallel_for(busy, 1, busy, [&](index_t, index_t) {
      ++started;
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (started.load() < busy && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(started.load(), busy) << "the workers did not all start the blocking job";
  std::atomic<index_t> covered{0};
  pool().parallel_for(10000, 64, 2, [&](index_t b, index_t e) { covered += e - b; });
  EXPECT_EQ(covered.load(), 10000);
  EXPECT_FALSE(release.load());  // finished while every worker was still held
  release = true;
  blocker.join();
}

TEST(scheduler, a_stalled_worker_holds_only_the_chunk_it_runs) {
  // A worker that stops in its first chunk (as if descheduled) keeps only that chunk: the
  // caller takes over the rest of the worker's batch.
  const auto caller = std::this_thread::get_id();
  std::atomic<int> by_caller{0}, by_others{0};
  std::atomic<bool> other_started{false};
  std::vector<std::atomic<int>> hits(256);
  pool().parallel_for(256, 1, 2, [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
    if (std::this_thread::get_id() == caller) {
      if (by_caller++ == 0) {  // give a worker the time to claim a batch
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (!other_started.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      }
    } else {
      ++by_others;
      other_started = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  if (other_started.load()) {
    EXPECT_EQ(by_others.load(), 1);  // its batch was more than one chunk: the rest was taken
    EXPECT_EQ(by_caller.load(), 255);
  } else {
    ADD_FAILURE() << "no worker started within 2 s";
  }
}

TEST(scheduler, scratch_is_aligned_reused_and_per_thread) {
  std::byte* p = cpu_scheduler::scratch(1000);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  std::memset(p, 0xAB, 1000);
  EXPECT_EQ(cpu_scheduler::scratch(1000), p);
  EXPECT_EQ(cpu_scheduler::scratch(10), p);  // smaller: the same block, contents kept
  EXPECT_EQ(p[999], std::byte{0xAB});
  std::byte* q = cpu_scheduler::scratch(1 << 20);  // larger: a new block, whole size usable
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(q) % 64, 0u);
  std::memset(q, 0, 1 << 20);
  EXPECT_EQ(cpu_scheduler::scratch(4096), q);

  // inside a loop body: one block per thread, kept across loops, never the caller's
  // outer-level block
  std::mutex m;
  std::set<std::thread::id> ids;
  std::set<std::byte*> blocks;
  std::atomic<bool> stable{true};
  for (int round = 0; round < 3; ++round) {
    pool().parallel_for(64, 1, 4, [&](index_t, index_t) {
      thread_local std::byte* mine = nullptr;
      std::byte* s = cpu_scheduler::scratch(256 << 10);
      std::memset(s, 1, 256 << 10);
      if (mine && mine != s) stable = false;
      mine = s;
      std::lock_guard lk(m);
      ids.insert(std::this_thread::get_id());
      blocks.insert(s);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    });
  }
  EXPECT_TRUE(stable.load());
  EXPECT_EQ(blocks.size(), ids.size());  // distinct threads, distinct blocks
  EXPECT_EQ(blocks.count(q), 0u);
  EXPECT_EQ(cpu_scheduler::scratch(4096), q);  // the outer level is untouched

  // a nested level gets its own block
  std::byte* outer = nullptr;
  std::byte* inner = nullptr;
  pool().parallel_for(1, 1, 1, [&](index_t, index_t) {
    outer = cpu_scheduler::scratch(128);
    pool().parallel_for(1, 1, 1, [&](index_t, index_t) { inner = cpu_scheduler::scratch(128); });
  });
  EXPECT_NE(outer, nullptr);
  EXPECT_NE(outer, inner);
}

TEST(scheduler, cost_hints_decide_the_thread_count) {
  using namespace kiln::detail;
  cpu_ctx ctx{kiln::threads{1}};
  auto a = kiln::empty<float>(ctx, {1}), b = kiln::empty<float>(ctx, {1}), c = kiln::empty<float>(ctx, {1});
  using add_tree = decltype(a + b);
  using gelu_tree = decltype(kiln::gelu(a * b + c));
  using cast_tree = decltype(kiln::cast<std::int32_t>(a));
  static_assert(op_cost_v<kiln::add_op> == 1);  // no hint: one cheap op
  static_assert(op_cost_v<kiln::gelu_op> > op_cost_v<kiln::mul_op>);
  static_assert(tree_cost_v<add_tree> == 1);
  static_assert(tree_cost_v<gelu_tree> == 2 + op_cost_v<kiln::gelu_op>);
  static_assert(tree_cost_v<cast_tree> == 1);
  static_assert(leaf_bytes_v<gelu_tree> == 3 * sizeof(float));

  const auto plan_add = [](index_t n, int t) { return cpu_loop::plan_threads<float, add_tree>(n, t); };
  const auto plan_gelu = [](index_t n, int t) { return cpu_loop::plan_threads<float, gelu_tree>(n, t); };
  EXPECT_EQ(plan_add(4096, 8).threads, 1);   // a few microseconds of work: inline
  EXPECT_EQ(plan_gelu(4096, 8).threads, 1);
  EXPECT_EQ(plan_add(1 << 24, 8).threads, 8);  // plenty: every thread allowed
  EXPECT_EQ(plan_add(1 << 24, 2).threads, 2);
  EXPECT_EQ(plan_add(1 << 24, 1).threads, 1);
  // the costlier body goes parallel at fewer elements
  index_t add_from = 0, gelu_from = 0;
  for (index_t n = 64; n < (1 << 24) && (!add_from || !gelu_from); n += 64 * ((n >> 12) + 1)) {
    if (!add_from && plan_add(n, 2).threads == 2) add_from = n;
    if (!gelu_from && plan_gelu(n, 2).threads == 2) gelu_from = n;
  }
  EXPECT_GT(gelu_from, 0);
  EXPECT_LT(gelu_from, add_from);
  EXPECT_GT(add_from, 4096);
  for (index_t n : {index_t(1) << 16, index_t(1) << 20, index_t(1) << 26}) {
    for (const auto p : {plan_add(n, 4), plan_gelu(n, 4)}) {
      EXPECT_EQ(p.chunk % 64, 0) << n;
      EXPECT_GE(p.chunk * index_t(sizeof(float)), index_t(16 << 10)) << n;
    }
  }
}

TEST(scheduler, thread_count_from_the_environment) {
  {
    kiln_test::scoped_env env("KILN_NUM_THREADS", "3");
    cpu_ctx ctx;
    EXPECT_EQ(ctx.state()->num_threads, 3);
    const index_t n = 1 << 20;
    const auto ha = host_values(n, 9);
    auto a = kiln::from_host(ctx, {n}, std::span(ha));
    auto y = kiln::empty<float>(ctx, {n});
    y = kiln::exp(a);
    cpu_ctx one{kiln::threads{1}};
    auto a1 = kiln::from_host(one, {n}, std::span(ha));
    auto y1 = kiln::empty<float>(one, {n});
    y1 = kiln::exp(a1);
    EXPECT_TRUE(bits_equal(y.to_host(), y1.to_host()));
  }
  kiln_test::scoped_env env("KILN_NUM_THREADS", nullptr);
  cpu_ctx ctx;
  EXPECT_EQ(ctx.state()->num_threads, kiln::detail::usable_cores());
}
