// tests/fuzz/expr_fuzz_test.cpp — random expression trees on every backend against a
// float64 interpreter.
//
// Each tree comes from one seed: a skeleton (skeletons.hpp: node kinds fixed at compile
// time), then the run-time choices: the op at each dynamic node (all of kiln's elementwise
// ops, dynamic_ops.hpp), dtypes where the skeleton has several, the output's shape (rank
// 0..4, 1s and 0s included), each leaf's shape (broadcasting), how each operand is viewed
// (sliced with steps, permuted, transposed, broadcast_to, unsqueezed, a strided 1-D run
// reshaped; composed up to twice), whether the output aliases an input (the same view:
// read in place; another view of the same storage: through a temporary), and the data
// (NaN, infinities, signed zeros, huge and tiny values, integer extremes). kiln evaluates
// `out = tree`; reference.hpp's interpreter evaluates the same tree in double precision
// as the set of results a float kernel may give, element by element, from the inputs as
// they were before the statement. Every element of the output's storage is checked:
// inside the view against the interpreter, outside it unchanged.
//
//   KILN_FUZZ_ITERATIONS=<n>   trees per backend (default: 300 on the CPU, 30 on Vulkan, the CI run)
//   KILN_FUZZ_SEED=<s>         first tree's seed (default: from the run's KILN_TEST_SEED);
//                              a failure prints the seed that replays that tree alone:
//                              KILN_FUZZ_SEED=<s> KILN_FUZZ_ITERATIONS=1
//   KILN_FUZZ_VERBOSE=1        print every tree
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "backends.hpp"
#include "dynamic_ops.hpp"
#include "random.hpp"
#include "reference.hpp"
#include "skeletons.hpp"

namespace kiln_fuzz {
namespace {

using kiln::index_t;
using f32 = leaf<float>;

// The skeletons: depth 1 to 5, every node kind, every dtype. Each costs compile time on
// each backend (one fused statement type), so the list is short; the op at every dynamic
// node and everything about the operands vary at run time. At most 7 leaves each: the
// output and 7 inputs fill the 8 buffers a Vulkan statement binds today (issue 12 item 2).
using skeletons = std::tuple<
    un<f32>,                                                                 // 0
    bi<f32, f32>,                                                            // 1
    bi<scal, un<f32>>,                                                       // 2
    un<bi<un<f32>, f32>>,                                                    // 3
    bi<un<bi<f32, scal>>, un<f32>>,                                          // 4
    where<cmp<f32, scal>, un<f32>, bi<f32, f32>>,                            // 5
    bi<bi<un<f32>, un<f32>>, bi<un<f32>, f32>>,                              // 6
    un<bi<un<bi<f32, f32>>, where<cmp<un<f32>, f32>, f32, scal>>>,           // 7
    clamp<un<f32>, f32, scal>,                                               // 8
    cast<kiln::half, bi<un<cast<float, leaf<kiln::bfloat16>>>, cast<float, leaf<kiln::half>>>>,  // 9
    bi<un<leaf<kiln::bfloat16>>, cast<kiln::bfloat16, un<leaf<kiln::bfloat16>>>>,               // 10
    un<cast<float, cast<kiln::half, bi<f32, f32>>>>,                         // 11
    bi<un<leaf<std::int32_t>>, bi<leaf<std::int32_t>, scal>>,                // 12
    where<cmp<leaf<std::int8_t>, leaf<std::int8_t>>, bi<leaf<std::int8_t>, scal>, un<leaf<std::int8_t>>>,  // 13
    cmp<un<f32>, f32>,                                                       // 14
    cast<float, bi<cast<std::int32_t, leaf<std::uint8_t>>, cast<std::int32_t, f32>>>,                   // 15
    clamp<leaf<std::uint8_t>, scal, leaf<std::uint8_t>>>;                    // 16
constexpr std::size_t skeleton_count = std::tuple_size_v<skeletons>;

// ---- settings ----

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* s = std::getenv(name);
  return s && *s ? std::strtoull(s, nullptr, 0) : fallback;
}

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t first_seed() {
  static const std::uint64_t s = env_u64("KILN_FUZZ_SEED", splitmix(kiln_test::run_seed()));
  return s;
}

// ---- storages and views, modelled independently of kiln's view code ----

template <class B>
using any_tensor = std::variant<kiln::tensor<float, B>, kiln::tensor<kiln::half, B>, kiln::tensor<kiln::bfloat16, B>,
                                kiln::tensor<std::int8_t, B>, kiln::tensor<std::int32_t, B>,
                                kiln::tensor<std::uint8_t, B>>;

bool is_float(kiln::dtype t) { return t == kiln::dtype::f32 || t == kiln::dtype::f16 || t == kiln::dtype::bf16; }

/// Where a view's elements are: shape, strides and offset in its storage's elements.
struct view_model {
  int storage = -1;
  std::vector<index_t> shape, strides;
  index_t offset = 0;
  std::string how;  // the recipe, for messages

  index_t numel() const {
    index_t n = 1;
    for (index_t e : shape) n *= e;
    return n;
  }
};

std::string dims_text(const std::vector<index_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::vector<index_t> contiguous(const std::vector<index_t>& s) {
  std::vector<index_t> st(s.size());
  index_t k = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    st[i] = k;
    k *= s[i];
  }
  return st;
}

template <class B>
struct storage {
  kiln::dtype type;
  std::vector<double> before;  // host values before the statement
  any_tensor<B> base;          // the contiguous tensor that owns it
};

template <class B, class T>
kiln::tensor<T, B> reshape_to(const kiln::tensor<T, B>& t, const std::vector<index_t>& s) {
  switch (s.size()) {
    case 0: return kiln::reshape(t, {});
    case 1: return kiln::reshape(t, {s[0]});
    case 2: return kiln::reshape(t, {s[0], s[1]});
    case 3: return kiln::reshape(t, {s[0], s[1], s[2]});
    default: return kiln::reshape(t, {s[0], s[1], s[2], s[3]});
  }
}

template <class B, class T>
kiln::tensor<T, B> permute_to(const kiln::tensor<T, B>& t, const std::vector<int>& o) {
  switch (o.size()) {
    case 2: return kiln::permute(t, {o[0], o[1]});
    case 3: return kiln::permute(t, {o[0], o[1], o[2]});
    default: return kiln::permute(t, {o[0], o[1], o[2], o[3]});
  }
}

kiln::shape to_shape(const std::vector<index_t>& s) { return kiln::shape(std::span<const index_t>(s)); }

/// Random values of dtype t: mostly moderate, with the edge cases of the dtype mixed in
/// when `specials` (NaN, infinities, zeros of both signs, huge, tiny and subnormal
/// values; integer extremes).
std::vector<double> random_values(std::mt19937_64& g, kiln::dtype t, index_t n, bool specials) {
  std::vector<double> v(static_cast<std::size_t>(n));
  std::uniform_int_distribution<int> pct(0, 99);
  std::uniform_real_distribution<double> mid(-3, 3), wide(-20, 20);
  const double inf = std::numeric_limits<double>::infinity();
  const double sp[] = {std::numeric_limits<double>::quiet_NaN(), inf, -inf, 0.0, -0.0, 1e30, -1e30,
                       3e38, -3e38, 1e-30, -1e-30, 1e-40, 1.0, -1.0, 88.5, -88.5, -17.5, 2.0};
  for (auto& x : v) {
    const int p = pct(g);
    if (is_float(t)) {
      if (specials && p < 6) x = sp[std::uniform_int_distribution<int>(0, std::size(sp) - 1)(g)];
      else if (p < 20) x = double(std::uniform_int_distribution<int>(-3, 3)(g));
      else if (p < 30) x = static_cast<float>(wide(g));
      else x = static_cast<float>(mid(g));
      x = static_cast<float>(x);
      if (t == kiln::dtype::f16) x = round_to<kiln::half>(x);
      if (t == kiln::dtype::bf16) x = round_to<kiln::bfloat16>(x);
    } else if (t == kiln::dtype::i32) {
      const std::int32_t ext[] = {INT32_MIN, INT32_MAX, -1, 0, 1, INT32_MIN + 1};
      if (specials && p < 15) x = ext[std::uniform_int_distribution<int>(0, 5)(g)];
      else if (p < 50) x = std::uniform_int_distribution<std::int32_t>(INT32_MIN, INT32_MAX)(g);
      else x = std::uniform_int_distribution<int>(-10, 10)(g);
    } else if (t == kiln::dtype::i8) {
      x = std::uniform_int_distribution<int>(-128, 127)(g);
    } else {
      x = std::uniform_int_distribution<int>(0, 255)(g);
    }
  }
  return v;
}

template <class T>
std::vector<T> to_typed(const std::vector<double>& v) {
  std::vector<T> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (kiln::is_floating_v<T>) r[i] = T(static_cast<float>(v[i]));
    else r[i] = static_cast<T>(static_cast<std::int64_t>(v[i]));
  }
  return r;
}

template <class T, class B>
std::vector<double> read_back(const kiln::tensor<T, B>& t) {
  const std::vector<T> h = t.to_host();
  std::vector<double> r(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) {
    if constexpr (kiln::is_floating_v<T>) r[i] = static_cast<float>(h[i]);
    else r[i] = h[i];
  }
  return r;
}

/// One tree's operands: storages, the leaves' views and the output's.
template <class B>
struct operands {
  kiln::context<B>& ctx;
  std::mt19937_64& g;
  bool specials;
  std::vector<storage<B>> storages;

  int below(int n) { return std::uniform_int_distribution<int>(0, n - 1)(g); }

  template <class T>
  std::pair<view_model, any_tensor<B>> fresh(const std::vector<index_t>& s) {
    index_t n = 1;
    for (index_t e : s) n *= e;
    auto before = random_values(g, kiln::dtype_traits<T>::value, n, specials);
    auto t = kiln::from_host(ctx, to_shape(s), to_typed<T>(before));
    storages.push_back(storage<B>{kiln::dtype_traits<T>::value, std::move(before), any_tensor<B>{t}});
    view_model m{int(storages.size()) - 1, s, contiguous(s), 0, "new" + dims_text(s)};
    return {m, any_tensor<B>{t}};
  }

  /// A view of shape s, built by up to `depth` view ops over a fresh storage. `input`
  /// allows stride-0 (broadcast) views, which an output cannot be.
  template <class T>
  std::pair<view_model, any_tensor<B>> realize(const std::vector<index_t>& s, int depth, bool input) {
    const int r = int(s.size());
    const int choice = depth == 0 ? 0 : below(input ? 7 : 6);
    switch (choice) {
      case 1:
        if (r >= 1) {  // slice with a step along one dimension
          const int d = below(r);
          const index_t step = 1 + below(3), start = below(3), extra = below(3);
          const index_t span = s[std::size_t(d)] ? (s[std::size_t(d)] - 1) * step + 1 : 0;
          auto bs = s;
          bs[std::size_t(d)] = start + span + extra;
          auto [m, t] = realize<T>(bs, depth - 1, input);
          auto v = kiln::slice(std::get<kiln::tensor<T, B>>(t), d, start, start + span, step);
          if (s[std::size_t(d)]) m.offset += start * m.strides[std::size_t(d)];
          m.shape[std::size_t(d)] = s[std::size_t(d)];
          m.strides[std::size_t(d)] *= step;
          m.how = "slice(" + m.how + ", " + std::to_string(d) + ", " + std::to_string(start) + ", " +
                  std::to_string(start + span) + ", " + std::to_string(step) + ")";
          return {m, any_tensor<B>{v}};
        }
        break;
      case 2:
        if (r >= 2) {  // permute
          auto order = std::vector<int>(std::size_t(r));
          std::iota(order.begin(), order.end(), 0);
          std::shuffle(order.begin(), order.end(), g);
          auto bs = std::vector<index_t>(std::size_t(r));
          for (int i = 0; i < r; ++i) bs[std::size_t(order[std::size_t(i)])] = s[std::size_t(i)];
          auto [m, t] = realize<T>(bs, depth - 1, input);
          auto v = permute_to(std::get<kiln::tensor<T, B>>(t), order);
          view_model p = m;
          std::string o;
          for (int i = 0; i < r; ++i) {
            p.shape[std::size_t(i)] = m.shape[std::size_t(order[std::size_t(i)])];
            p.strides[std::size_t(i)] = m.strides[std::size_t(order[std::size_t(i)])];
            o += (i ? ", " : "") + std::to_string(order[std::size_t(i)]);
          }
          p.how = "permute(" + m.how + ", {" + o + "})";
          return {p, any_tensor<B>{v}};
        }
        break;
      case 3:
        if (r >= 2) {  // transpose (all dimensions reversed)
          std::vector<index_t> bs(s.rbegin(), s.rend());
          auto [m, t] = realize<T>(bs, depth - 1, input);
          auto v = kiln::transpose(std::get<kiln::tensor<T, B>>(t));
          std::reverse(m.shape.begin(), m.shape.end());
          std::reverse(m.strides.begin(), m.strides.end());
          m.how = "transpose(" + m.how + ")";
          return {m, any_tensor<B>{v}};
        }
        break;
      case 4:
        for (int d = 0; d < r; ++d) {  // unsqueeze of a unit dimension
          if (s[std::size_t(d)] != 1 || below(2)) continue;
          auto bs = s;
          bs.erase(bs.begin() + d);
          auto [m, t] = realize<T>(bs, depth - 1, input);
          auto v = kiln::unsqueeze(std::get<kiln::tensor<T, B>>(t), d);
          m.shape.insert(m.shape.begin() + d, 1);
          m.strides.insert(m.strides.begin() + d, 0);  // any stride: the extent is 1
          m.how = "unsqueeze(" + m.how + ", " + std::to_string(d) + ")";
          return {m, any_tensor<B>{v}};
        }
        break;
      case 5: {  // a strided run of a 1-D view, reshaped to s
        index_t n = 1;
        for (index_t e : s) n *= e;
        if (n > 4096) break;
        const index_t step = 1 + below(3), start = below(3), extra = below(2);
        const index_t span = n ? (n - 1) * step + 1 : 0;
        auto [m, t] = realize<T>({start + span + extra}, depth - 1, input);
        auto run = kiln::slice(std::get<kiln::tensor<T, B>>(t), 0, start, start + span, step);
        auto v = reshape_to(run, s);
        view_model p = m;
        if (n) p.offset += start * m.strides[0];
        p.shape = s;
        p.strides = contiguous(s);
        for (auto& x : p.strides) x *= m.strides[0] * step;
        p.how = "reshape(slice(" + m.how + ", 0, " + std::to_string(start) + ", " + std::to_string(start + span) + ", " +
                std::to_string(step) + "), " + dims_text(s) + ")";
        return {p, any_tensor<B>{v}};
      }
      case 6: {  // broadcast_to from unit extents (inputs only)
        std::vector<index_t> bs = s;
        bool any = false;
        for (auto& e : bs)
          if (e != 1 && below(2)) e = 1, any = true;
        if (!any) break;
        int drop = 0;  // leading unit extents may go altogether
        while (drop < r && bs[std::size_t(drop)] == 1 && below(2)) ++drop;
        bs.erase(bs.begin(), bs.begin() + drop);
        auto [m, t] = realize<T>(bs, depth - 1, input);
        auto v = kiln::broadcast_to(std::get<kiln::tensor<T, B>>(t), to_shape(s));
        view_model p = m;
        p.shape = s;
        p.strides.assign(std::size_t(r), 0);
        for (int i = drop; i < r; ++i) {
          const auto j = std::size_t(i - drop);
          p.strides[std::size_t(i)] = m.shape[j] == 1 && s[std::size_t(i)] != 1 ? 0 : m.strides[j];
        }
        p.how = "broadcast_to(" + m.how + ", " + dims_text(s) + ")";
        return {p, any_tensor<B>{v}};
      }
      default: break;
    }
    return fresh<T>(s);
  }

  std::pair<view_model, any_tensor<B>> realize_as(kiln::dtype t, const std::vector<index_t>& s, int depth, bool input) {
    switch (t) {
      case kiln::dtype::f32: return realize<float>(s, depth, input);
      case kiln::dtype::f16: return realize<kiln::half>(s, depth, input);
      case kiln::dtype::bf16: return realize<kiln::bfloat16>(s, depth, input);
      case kiln::dtype::i8: return realize<std::int8_t>(s, depth, input);
      case kiln::dtype::i32: return realize<std::int32_t>(s, depth, input);
      default: return realize<std::uint8_t>(s, depth, input);
    }
  }

  /// A view of shape s over storage `st` read as one flat run (start, step), optionally
  /// permuted: an input that overlaps the output without being its view.
  template <class T>
  std::pair<view_model, any_tensor<B>> overlapping(int st, const std::vector<index_t>& s) {
    const auto& base = std::get<kiln::tensor<T, B>>(storages[std::size_t(st)].base);
    const index_t total = base.numel();
    index_t n = 1;
    for (index_t e : s) n *= e;
    if (n == 0 || n > total) return {view_model{}, any_tensor<B>{}};
    const index_t step = (n - 1) * 2 + 1 <= total && below(2) ? 2 : 1;
    const index_t span = (n - 1) * step + 1;
    const index_t start = below(int(total - span + 1));
    const int r = int(s.size());
    auto order = std::vector<int>(std::size_t(r));
    std::iota(order.begin(), order.end(), 0);
    if (r >= 2) std::shuffle(order.begin(), order.end(), g);
    auto ps = std::vector<index_t>(std::size_t(r));
    for (int i = 0; i < r; ++i) ps[std::size_t(order[std::size_t(i)])] = s[std::size_t(i)];
    auto flat = reshape_to(base, {total});
    const auto v = reshape_to(kiln::slice(flat, 0, start, start + span, step), ps);
    view_model m{st, ps, contiguous(ps), start, ""};
    for (auto& x : m.strides) x *= step;
    std::string o;
    if (r >= 2) {
      view_model p = m;
      for (int i = 0; i < r; ++i) {
        p.shape[std::size_t(i)] = m.shape[std::size_t(order[std::size_t(i)])];
        p.strides[std::size_t(i)] = m.strides[std::size_t(order[std::size_t(i)])];
        o += (i ? ", " : "") + std::to_string(order[std::size_t(i)]);
      }
      m = p;
    }
    m.how = "reshape(slice(flat(storage " + std::to_string(st) + "), 0, " + std::to_string(start) + ", " +
            std::to_string(start + span) + ", " + std::to_string(step) + "), " + dims_text(ps) + ")" +
            (r >= 2 ? " permuted {" + o + "}" : "");
    if (r >= 2) return {m, any_tensor<B>{permute_to(v, order)}};
    return {m, any_tensor<B>{v}};
  }
};

/// Whether kiln's view metadata agrees with the model (strides of unit extents are free).
template <class B>
std::string check_model(const view_model& m, const any_tensor<B>& t) {
  return std::visit(
      [&](const auto& v) -> std::string {
        std::vector<index_t> shape(v.shape().begin(), v.shape().end());
        std::string bad;
        if (shape != m.shape) return "shape " + dims_text(shape) + ", model " + dims_text(m.shape);
        // (an empty view's strides address nothing: kiln may keep its own there)
        for (std::size_t i = 0; i < shape.size() && m.numel() > 0; ++i)
          if (shape[i] > 1 && v.strides()[int(i)] != m.strides[i]) bad = "strides differ";
        if (m.numel() > 0 && v.offset() != m.offset) bad = "offset " + std::to_string(v.offset()) + ", model " + std::to_string(m.offset);
        return bad.empty() ? bad : "view " + m.how + ": " + bad;
      },
      t);
}

// ---- the tree ----

std::string type_name(kiln::dtype t) { return std::string(kiln::name(t)); }

std::string leaf_letter(int k) { return std::string(1, char('a' + k)); }

std::string tree_text(const node& n) {
  auto args = [&](std::size_t from = 0) {
    std::string s;
    for (std::size_t i = from; i < n.kids.size(); ++i) s += (i > from ? ", " : "") + tree_text(n.kids[i]);
    return s;
  };
  switch (n.kind) {
    case node_kind::leaf: return leaf_letter(n.leaf);
    case node_kind::scalar: return fmt(n.scalar);
    case node_kind::unary: return std::string(op_name<unary_ops>(std::size_t(n.op))) + "(" + args() + ")";
    case node_kind::binary: return std::string(op_name<binary_ops>(std::size_t(n.op))) + "(" + args() + ")";
    case node_kind::compare: return std::string(op_name<compare_ops>(std::size_t(n.op))) + "(" + args() + ")";
    case node_kind::where: return "where(" + args() + ")";
    case node_kind::clamp: return "clamp(" + args() + ")";
    case node_kind::cast: return "cast<" + type_name(n.type) + ">(" + args() + ")";
  }
  return "?";
}

/// The ops a tree uses, for the coverage summary.
void count_ops(const node& n, std::map<std::string, long>& used) {
  switch (n.kind) {
    case node_kind::unary: ++used[std::string(op_name<unary_ops>(std::size_t(n.op)))]; break;
    case node_kind::binary: ++used[std::string(op_name<binary_ops>(std::size_t(n.op)))]; break;
    case node_kind::compare: ++used[std::string(op_name<compare_ops>(std::size_t(n.op)))]; break;
    case node_kind::where: ++used["where"]; break;
    case node_kind::clamp: ++used["clamp"]; break;
    case node_kind::cast: ++used["cast<" + type_name(n.type) + ">"]; break;
    default: break;
  }
  for (const node& k : n.kids) count_ops(k, used);
}

template <class T>
value convert_from(kiln::dtype from, const value& v) {
  switch (from) {
    case kiln::dtype::f32: return convert<T, float>(v);
    case kiln::dtype::f16: return convert<T, kiln::half>(v);
    case kiln::dtype::bf16: return convert<T, kiln::bfloat16>(v);
    case kiln::dtype::i8: return convert<T, std::int8_t>(v);
    case kiln::dtype::i32: return convert<T, std::int32_t>(v);
    case kiln::dtype::u8: return convert<T, std::uint8_t>(v);
    case kiln::dtype::mask: return convert<T, bool>(v);
  }
  return v;
}

value convert_to(kiln::dtype to, kiln::dtype from, const value& v) {
  switch (to) {
    case kiln::dtype::f32: return convert_from<float>(from, v);
    case kiln::dtype::f16: return convert_from<kiln::half>(from, v);
    case kiln::dtype::bf16: return convert_from<kiln::bfloat16>(from, v);
    case kiln::dtype::i8: return convert_from<std::int8_t>(from, v);
    case kiln::dtype::i32: return convert_from<std::int32_t>(from, v);
    default: return convert_from<std::uint8_t>(from, v);
  }
}

/// The interpreter: the value set of node n at one output element, given each leaf's value there.
value interpret(const node& n, const std::vector<double>& leaf_values, bool vulkan) {
  auto kid = [&](std::size_t i) { return interpret(n.kids[i], leaf_values, vulkan); };
  switch (n.kind) {
    case node_kind::leaf: {
      const double v = leaf_values[std::size_t(n.leaf)];
      return is_float(n.type) ? value::point(v) : value::integer_value(static_cast<std::int32_t>(v));
    }
    case node_kind::scalar: {
      if (!is_float(n.type)) return value::integer_value(static_cast<std::int32_t>(n.scalar));
      return value::point(static_cast<float>(n.scalar));  // a scalar is a float push constant, never rounded to f16
    }
    case node_kind::unary: return eval_unary(n.op, kid(0), vulkan);
    case node_kind::binary: return eval_binary(n.op, kid(0), kid(1), vulkan);
    case node_kind::compare: return eval_compare(n.op, kid(0), kid(1));
    case node_kind::where: return eval_where(kid(0), kid(1), kid(2));
    case node_kind::clamp: return eval_clamp(kid(0), kid(1), kid(2));
    case node_kind::cast: return convert_to(n.type, n.kids[0].type, kid(0));
  }
  return {};
}

/// Whether `got` (read back from storage of dtype t) is a result the value set allows
/// once stored as t.
bool stored_ok(kiln::dtype t, const value& v, double got) {
  switch (v.what) {
    case value::kind::mask: return (got == 1 && v.can_true) || (got == 0 && v.can_false);
    case value::kind::integer: {
      const auto w = t == kiln::dtype::i8 ? double(std::int8_t(v.i)) : t == kiln::dtype::u8 ? double(std::uint8_t(v.i)) : double(v.i);
      return got == w;
    }
    case value::kind::number: break;
  }
  if (t == kiln::dtype::f16) return round_value<kiln::half>(v).accepts(got);
  if (t == kiln::dtype::bf16) return round_value<kiln::bfloat16>(v).accepts(got);
  return v.accepts(got);
}

/// Shapes: rank 0..4, extents mostly small, some 1 and (rarely) 0; now and then a large
/// statement (the CPU splits it across threads, Vulkan across workgroups).
std::vector<index_t> output_shape(std::mt19937_64& g) {
  std::uniform_int_distribution<int> pct(0, 99);
  if (pct(g) < 3) {
    const index_t n = 60000 + std::uniform_int_distribution<index_t>(0, 70000)(g);
    if (pct(g) < 50) return {n};
    return {n / 67, 67};
  }
  const int rank_pct = pct(g);
  const int rank = rank_pct < 8 ? 0 : rank_pct < 30 ? 1 : rank_pct < 60 ? 2 : rank_pct < 85 ? 3 : 4;
  auto s = std::vector<index_t>(std::size_t(rank));
  const bool empty = pct(g) < 4;
  for (auto& e : s) {
    const int p = pct(g);
    e = p < 25 ? 1 : p < 85 ? 2 + std::uniform_int_distribution<int>(0, 7)(g) : 10 + std::uniform_int_distribution<int>(0, 30)(g);
  }
  if (rank > 0 && empty) s[std::size_t(std::uniform_int_distribution<int>(0, rank - 1)(g))] = 0;
  index_t n = 1;
  for (auto e : s) n *= e;
  while (n > 4000) {  // keep ordinary trees small: many trees beat big ones
    auto& big = *std::max_element(s.begin(), s.end());
    n = n / big * (big / 2);
    big /= 2;
  }
  return s;
}

/// A leaf's shape: broadcastable to out (fewer leading dimensions, unit extents).
std::vector<index_t> leaf_shape(std::mt19937_64& g, const std::vector<index_t>& out) {
  std::uniform_int_distribution<int> pct(0, 99);
  const int r = int(out.size());
  int rank = r;
  if (r > 0 && pct(g) < 25) rank = std::uniform_int_distribution<int>(0, r - 1)(g);
  std::vector<index_t> s(out.end() - rank, out.end());
  for (auto& e : s)
    if (pct(g) < 20) e = 1;
  return s;
}

struct tally {
  long trees = 0, skipped_limits = 0, elements = 0, loose = 0, aliased = 0, failures = 0;
  std::map<std::string, long> ops;
  std::vector<long> per_skeleton = std::vector<long>(skeleton_count, 0);
  std::vector<std::string> notes;
};

/// The message kiln gives for a statement beyond the device's push-constant block: a
/// known limit of the Vulkan backend today (issue 12 item 2), counted, not failed.
bool push_constant_limit(const kiln::error& e) {
  return std::strstr(e.what(), "bytes of push constants; the device allows") != nullptr;
}

template <class S, class B>
void run_tree(kiln::context<B>& ctx, std::uint64_t seed, std::size_t skeleton, tally& t) {
  using out_t = stored_t<S>;
  constexpr bool vulkan = !std::is_same_v<B, kiln_test::cpu>;
  std::mt19937_64 g(splitmix(seed));
  std::uniform_int_distribution<int> pct(0, 99);

  maker mk{g, {}};
  const node root = S::make(mk, kiln::dtype_traits<out_t>::value);
  const std::vector<index_t> out_shape = output_shape(g);
  const int n_leaves = int(mk.leaf_types.size());
  std::vector<std::vector<index_t>> shapes;
  for (int k = 0; k < n_leaves; ++k) shapes.push_back(leaf_shape(g, out_shape));

  operands<B> ops{ctx, g, pct(g) < 40, {}};
  const kiln::dtype out_type = kiln::dtype_traits<out_t>::value;
  // aliasing: which leaf (of the output's dtype) shares the output's storage, and how
  std::vector<int> same_type;
  for (int k = 0; k < n_leaves; ++k)
    if (mk.leaf_types[std::size_t(k)] == out_type) same_type.push_back(k);
  int alias_leaf = -1;
  bool alias_exact = false;
  if (!same_type.empty() && pct(g) < 35) {
    alias_leaf = same_type[std::size_t(std::uniform_int_distribution<int>(0, int(same_type.size()) - 1)(g))];
    alias_exact = pct(g) < 50;
    if (alias_exact) shapes[std::size_t(alias_leaf)] = out_shape;
  }

  auto [out_model, out_any] = ops.template realize<out_t>(out_shape, std::uniform_int_distribution<int>(0, 2)(g), false);
  // (handles are only ever constructed here, never assigned: assigning a kiln tensor
  // writes values into the elements it views)
  std::vector<view_model> models;
  std::vector<any_tensor<B>> views;
  for (int k = 0; k < n_leaves; ++k) {
    const auto kk = std::size_t(k);
    if (k == alias_leaf) {
      if (alias_exact) {
        models.push_back(out_model);
        views.push_back(out_any);
        continue;
      }
      auto mv = ops.template overlapping<out_t>(out_model.storage, shapes[kk]);
      if (mv.first.storage >= 0) {
        models.push_back(mv.first);
        views.push_back(mv.second);
        continue;
      }
      alias_leaf = -1;  // too many elements to fit: an ordinary input
    }
    auto mv = ops.realize_as(mk.leaf_types[kk], shapes[kk], std::uniform_int_distribution<int>(0, 2)(g), true);
    models.push_back(mv.first);
    views.push_back(mv.second);
  }

  std::ostringstream about;
  about << "tree seed " << seed << " (replay: KILN_FUZZ_SEED=" << seed << " KILN_FUZZ_ITERATIONS=1), skeleton "
        << skeleton << " on " << (vulkan ? "vulkan" : "cpu") << "\n  out " << type_name(out_type) << dims_text(out_shape)
        << " = " << out_model.how << " (storage " << out_model.storage << ")\n  tree: " << tree_text(root) << "\n";
  for (int k = 0; k < n_leaves; ++k) {
    const auto& m = models[std::size_t(k)];
    about << "  " << leaf_letter(k) << ": " << type_name(mk.leaf_types[std::size_t(k)]) << dims_text(m.shape)
          << " strides " << dims_text(m.strides) << " offset " << m.offset << " = " << m.how << " (storage "
          << m.storage << ")" << (k == alias_leaf ? (alias_exact ? " [the output's view]" : " [overlaps the output]") : "")
          << "\n";
  }
  if (env_u64("KILN_FUZZ_VERBOSE", 0)) std::printf("%s", about.str().c_str());

  // kiln's view metadata against the model (so the interpreter reads what kiln reads)
  std::string bad = check_model(out_model, out_any);
  for (int k = 0; k < n_leaves && bad.empty(); ++k) bad = check_model(models[std::size_t(k)], views[std::size_t(k)]);
  if (!bad.empty()) {
    ++t.failures;
    ADD_FAILURE() << "view metadata differs from the model: " << bad << "\n" << about.str();
    return;
  }

  leaf_tensors<B> in;
  for (int k = 0; k < n_leaves; ++k) {
    std::visit(
        [&](const auto& v) {
          using V = std::remove_cvref_t<decltype(v)>;
          auto& vec = std::get<std::vector<V>>(in.by_type);
          in.slot.push_back(int(vec.size()));
          vec.push_back(v);
        },
        views[std::size_t(k)]);
  }

  ++t.trees;
  ++t.per_skeleton[skeleton];
  if (alias_leaf >= 0) ++t.aliased;
  count_ops(root, t.ops);

  auto out = std::get<kiln::tensor<out_t, B>>(out_any);
  try {
    out = S::template build<out_t>(root, in);
  } catch (const kiln::shader_error& e) {
    if (vulkan && push_constant_limit(e)) {
      ++t.skipped_limits;
      return;
    }
    ++t.failures;
    ADD_FAILURE() << "kiln threw " << e.what() << "\n" << about.str();
    return;
  } catch (const std::exception& e) {
    ++t.failures;
    ADD_FAILURE() << "kiln threw " << e.what() << "\n" << about.str();
    return;
  }

  const auto& st = ops.storages[std::size_t(out_model.storage)];
  if (env_u64("KILN_FUZZ_DEBUG", 0)) {
    auto h = out.to_host();
    std::printf("debug: out[0] = %g, numel %ld, storage %p base storage %p\n", h.empty() ? -1.0 : double(h[0]), long(out.numel()),
                (void*)out.storage().get(), std::visit([](const auto& b) { return (void*)b.storage().get(); }, st.base));
  }
  const std::vector<double> after =
      std::visit([](const auto& b) { return read_back(b); }, st.base);

  // expected: inside the view the interpreter's set; outside, the old values
  std::vector<char> inside(after.size(), 0);
  const int r = int(out_shape.size());
  auto idx = std::vector<index_t>(std::size_t(r));
  auto leaf_values = std::vector<double>(std::size_t(n_leaves));
  long mismatches = 0;
  std::string first;
  const index_t count = out_model.numel();
  for (index_t e = 0; e < count; ++e) {
    // idx: the e-th output index in row-major order
    index_t rest = e;
    for (int d = r - 1; d >= 0; --d) {
      idx[std::size_t(d)] = rest % out_shape[std::size_t(d)];
      rest /= out_shape[std::size_t(d)];
    }
    for (int k = 0; k < n_leaves; ++k) {
      const auto& m = models[std::size_t(k)];
      const int lr = int(m.shape.size());
      index_t at = m.offset;
      for (int j = 0; j < lr; ++j)
        if (m.shape[std::size_t(j)] != 1) at += idx[std::size_t(r - lr + j)] * m.strides[std::size_t(j)];
      leaf_values[std::size_t(k)] = ops.storages[std::size_t(m.storage)].before[std::size_t(at)];
    }
    index_t at = out_model.offset;
    for (int d = 0; d < r; ++d) at += idx[std::size_t(d)] * out_model.strides[std::size_t(d)];
    inside[std::size_t(at)] = 1;
    const value want = interpret(root, leaf_values, vulkan);
    ++t.elements;
    if (!want.tight()) ++t.loose;
    const double got = after[std::size_t(at)];
    if (!stored_ok(out_type, want, got)) {
      if (mismatches++ == 0) {
        std::ostringstream m;
        m << "  first mismatch at out" << dims_text(idx) << ": got " << fmt(got) << " (was " << fmt(st.before[std::size_t(at)])
          << " before), expected " << want.describe()
          << "\n  inputs there:";
        for (int k = 0; k < n_leaves; ++k) m << " " << leaf_letter(k) << " = " << fmt(leaf_values[std::size_t(k)]);
        first = m.str();
      }
    }
  }
  for (std::size_t i = 0; i < after.size(); ++i) {
    if (inside[i]) continue;
    const double was = st.before[i];
    if (!(after[i] == was || (std::isnan(after[i]) && std::isnan(was)))) {
      if (mismatches++ == 0)
        first = "  element " + std::to_string(i) + " of the output's storage, outside its view, changed from " + fmt(was) +
                " to " + fmt(after[i]);
    }
  }
  if (mismatches) {
    ++t.failures;
    ADD_FAILURE() << mismatches << " of " << count << " elements differ\n" << about.str() << first;
  }
}

template <class B, std::size_t... I>
void run_skeleton(kiln::context<B>& ctx, std::uint64_t seed, std::size_t k, tally& t, std::index_sequence<I...>) {
  ((k == I ? run_tree<std::tuple_element_t<I, skeletons>, B>(ctx, seed, k, t) : void()), ...);
}

}  // namespace
}  // namespace kiln_fuzz

template <class B>
class expr_fuzz : public kiln_test::backend_test<B> {};

namespace kiln_fuzz {
inline constexpr std::uint64_t vulkan_trees = 30;
}
TYPED_TEST_SUITE(expr_fuzz, kiln_test::backend_types);

// Trees per run: 300 on the CPU; on Vulkan each tree compiles its own shader (lavapipe:
// about a second), so the suite runs fewer there. KILN_FUZZ_ITERATIONS sets both.
TYPED_TEST(expr_fuzz, random_trees_match_the_float64_interpreter) {
  using namespace kiln_fuzz;
  auto& ctx = kiln_test::ctx<TypeParam>();
  constexpr bool on_vulkan = !std::is_same_v<TypeParam, kiln_test::cpu>;
  const std::uint64_t iterations = env_u64("KILN_FUZZ_ITERATIONS", on_vulkan ? vulkan_trees : 300);
  const std::uint64_t seed0 = first_seed();
  const auto start = std::chrono::steady_clock::now();
  tally t;
  for (std::uint64_t i = 0; i < iterations && t.failures < 5; ++i) {
    const std::uint64_t seed = seed0 + i * 0x9E3779B97F4A7C15ull;
    const std::size_t k = std::size_t(splitmix(seed ^ 0x5eed) % skeleton_count);
    run_skeleton(ctx, seed, k, t, std::make_index_sequence<skeleton_count>{});
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("expr_fuzz: %ld trees (first seed %llu) in %.1f s, %ld elements checked (%.1f%% with a loose enclosure), "
              "%ld with aliasing, %ld skipped at the push-constant limit, %ld failed\n",
              t.trees, static_cast<unsigned long long>(seed0), secs, t.elements,
              t.elements ? 100.0 * double(t.loose) / double(t.elements) : 0.0, t.aliased, t.skipped_limits, t.failures);
  std::string used;
  for (const auto& [name, n] : t.ops) used += " " + name + ":" + std::to_string(n);
  std::printf("expr_fuzz: ops used:%s\n", used.c_str());
}
