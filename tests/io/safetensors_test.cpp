// tests/io/safetensors_test.cpp — kiln::safetensors: round trips of every dtype kiln
// stores (bit-exact, on each backend), 0-d and empty tensors, metadata, unicode names,
// a fixture written by an independent writer (scripts/make_safetensors_fixture.py),
// each class of damaged file, and randomly damaged copies of a valid one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <kiln/kiln.hpp>
#include <kiln/io/safetensors.hpp>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "backends.hpp"
#include "checks.hpp"
#include "random.hpp"

namespace fs = std::filesystem;
namespace st = kiln::safetensors;
using kiln_test::has;

namespace {

/// A directory of the test's own, removed before and after.
struct temp_dir {
  fs::path dir;
  temp_dir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string n = std::string(info->test_suite_name()) + "_" + info->name();
    for (auto& c : n) {
      if (c == '/') c = '_';
    }
    dir = fs::path(::testing::TempDir()) / ("kiln_st_" + n + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~temp_dir() { fs::remove_all(dir); }
  std::string operator/(const std::string& f) const { return (dir / f).string(); }
};

std::vector<unsigned char> read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

[[maybe_unused]] void write_file(const std::string& p, const std::vector<unsigned char>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// The message of the kiln::format_error f throws (or a marker when it throws none).
template <class F>
std::string format_error_of(F&& f) {
  try {
    f();
  } catch (const kiln::format_error& e) {
    return e.what();
  }
  return "<no kiln::format_error>";
}

template <class T>
std::vector<T> random_values(std::mt19937_64& g, std::size_t n) {
  if constexpr (kiln::is_floating_v<T>) {
    auto f = kiln_test::uniform(g, n, -100.0f, 100.0f);
    kiln_test::add_specials(f);
    return std::vector<T>(f.begin(), f.end());
  } else {
    return kiln_test::uniform_int<T>(g, n, std::is_signed_v<T> ? -128 : 0, std::is_signed_v<T> ? 127 : 255);
  }
}

/// Bitwise equality (NaN == NaN, -0 != +0).
template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace

template <class B>
class safetensors : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(safetensors, kiln_test::backend_types);

template <class T, class B>
void round_trip_one(const kiln::context<B>& ctx, const temp_dir& tmp, std::string_view dtype_name) {
  auto g = kiln_test::rng();
  const std::vector<kiln::shape> shapes = {{}, {0}, {1}, {7}, {3, 5}, {2, 0, 3}, {2, 3, 1, 5}};
  std::vector<std::vector<T>> hosts;
  std::vector<std::pair<std::string, st::item>> items;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    hosts.push_back(random_values<T>(g, static_cast<std::size_t>(shapes[k].numel())));
    items.emplace_back("t" + std::to_string(k), kiln::from_host(ctx, shapes[k], std::span<const T>(hosts.back())));
  }
  const auto path = tmp / "rt.safetensors";
  st::save(path, items);
  auto f = st::open(path);
  ASSERT_EQ(f.names().size(), shapes.size());
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const std::string name = "t" + std::to_string(k);
    EXPECT_EQ(f.names()[k], name);  // file order = the order given
    const auto& i = f.info(name);
    EXPECT_EQ(i.dtype, dtype_name);
    EXPECT_EQ(i.shape, std::vector<std::int64_t>(shapes[k].begin(), shapes[k].end()));
    EXPECT_EQ(i.bytes, hosts[k].size() * sizeof(T));
    EXPECT_EQ(i.offset % 8, 0u);
    auto t = f.template load<T>(ctx, name);
    EXPECT_EQ(t.shape(), shapes[k]);
    EXPECT_TRUE(same_bytes(t.to_host(), hosts[k])) << name << " " << kiln_test::seed_note();
  }
}

TYPED_TEST(safetensors, round_trip_every_dtype) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  temp_dir tmp;
  round_trip_one<float>(ctx, tmp, "F32");
  round_trip_one<kiln::half>(ctx, tmp, "F16");
  round_trip_one<kiln::bfloat16>(ctx, tmp, "BF16");
  round_trip_one<std::int8_t>(ctx, tmp, "I8");
  round_trip_one<std::uint8_t>(ctx, tmp, "U8");
  round_trip_one<std::int32_t>(ctx, tmp, "I32");
}

TYPED_TEST(safetensors, mixed_dtypes_metadata_and_layout) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  temp_dir tmp;
  auto g = kiln_test::rng();
  auto wf = kiln_test::uniform(g, 13);
  std::vector<kiln::half> wh(wf.begin(), wf.begin() + 5);
  auto wi = kiln_test::uniform_int<std::int32_t>(g, 3, -1000000, 1000000);
  auto a = kiln::from_host(ctx, {13}, std::span<const float>(wf));
  auto b = kiln::from_host(ctx, {5, 1}, std::span<const kiln::half>(wh));
  auto c = kiln::from_host(ctx, {3}, std::span<const std::int32_t>(wi));
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "ünïcødé ✓"}, {"empty", ""}};
  const auto path = tmp / "m.safetensors";
  st::save(path, {{"a", a}, {"b", b}, {"c", c}}, meta);

  const auto raw = read_file(path);
  std::uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | raw[static_cast<std::size_t>(k)];
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(raw[8], '{');
  const std::string header(raw.begin() + 8, raw.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  const auto close = header.rfind('}');
  ASSERT_NE(close, std::string::npos);
  EXPECT_LT(n - close - 1, 8u);  // padding: fewer than 8 spaces after the object
  EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos);

  auto f = st::open(path);
  EXPECT_EQ(f.metadata(), meta);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(f.info("b").offset, 56u);  // 13 floats = 52 bytes, then aligned to 8
  EXPECT_EQ(f.info("c").offset, 72u);  // 56 + 10 -> 72
  EXPECT_TRUE(same_bytes(f.template load<float>(ctx, "a").to_host(), wf));
  EXPECT_TRUE(same_bytes(f.template load<kiln::half>(ctx, "b").to_host(), wh));
  EXPECT_TRUE(same_bytes(f.template load<std::int32_t>(ctx, "c").to_host(), wi));
  EXPECT_EQ(f.bytes("c").size(), 12u);
  EXPECT_EQ(std::memcmp(f.bytes("c").data(), wi.data(), 12), 0);
}

TYPED_TEST(safetensors, unicode_names_and_map_overload) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  temp_dir tmp;
  std::vector<float> v = {1.5f, -2.0f, 3.25f};
  auto t = kiln::from_host(ctx, {3}, std::span<const float>(v));
  std::map<std::string, kiln::tensor<float, TypeParam>> m = {
      {"héllo.wörld", t}, {"日本語/重み", t}, {"emoji 🔥", t}, {"quote\"back\\slash\nnl", t}, {"", t}};
  const auto path = tmp / "u.safetensors";
  st::save(path, m);
  auto f = st::open(path);
  EXPECT_TRUE(f.metadata().empty());
  ASSERT_EQ(f.names().size(), m.size());
  for (const auto& [name, _] : m) {
    ASSERT_TRUE(f.contains(name)) << name;
    EXPECT_EQ(f.template load<float>(ctx, name).to_host(), v) << name;
  }
}

TYPED_TEST(safetensors, strided_view_is_saved_row_major) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  temp_dir tmp;
  std::vector<float> v(12);
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k);
  auto t = kiln::from_host(ctx, {3, 4}, std::span<const float>(v));
  auto tt = kiln::transpose(t, 0, 1);
  const auto path = tmp / "v.safetensors";
  st::save(path, {{"tt", tt}});
  auto f = st::open(path);
  EXPECT_EQ(f.info("tt").shape, (std::vector<std::int64_t>{4, 3}));
  EXPECT_EQ(f.template load<float>(ctx, "tt").to_host(), tt.to_host());
}

// ---- The independent fixture -------------------------------------------------------------

namespace {

std::string fixture_path() { return std::string(KILN_IO_TEST_DATA) + "/fixture.safetensors"; }

template <class T>
std::vector<T> from_floats(std::initializer_list<float> v) {
  return std::vector<T>(v.begin(), v.end());
}

}  // namespace

TYPED_TEST(safetensors, reads_the_python_fixture) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto f = st::open(fixture_path());
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"writer", "make_safetensors_fixture.py"}}));
  // names() follows the data, not the JSON (which lists the entries in reverse)
  EXPECT_EQ(f.names(), (std::vector<std::string>{"weight", "half", "bf", "i8", "u8", "i32", "i64", "f64", "mask",
                                                 "scalar", "nothing", "gewicht.ä/重み"}));

  auto w = f.template load<float>(ctx, "weight");
  EXPECT_EQ(w.shape(), (kiln::shape{2, 3}));
  EXPECT_TRUE(same_bytes(w.to_host(), std::vector<float>{1.0f, -2.5f, 0.125f, 3.0e38f, -0.0f, 1.0e-40f}));

  auto h = f.template load<kiln::half>(ctx, "half").to_host();
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].bits, 0x3c00);
  EXPECT_EQ(h[1].bits, 0xb800);
  EXPECT_EQ(h[2].bits, 0x7bff);  // 65504, the largest finite half
  EXPECT_EQ(h[3].bits, 0x0400);  // 2^-14, the smallest normal

  auto bf = f.template load<kiln::bfloat16>(ctx, "bf").to_host();
  EXPECT_EQ(std::vector<float>(bf.begin(), bf.end()), (std::vector<float>{1.0f, -3.5f, 0.15625f}));

  EXPECT_EQ(f.template load<std::int8_t>(ctx, "i8").to_host(), (std::vector<std::int8_t>{-128, -1, 0, 1, 127}));
  auto u8 = f.template load<std::uint8_t>(ctx, "u8");
  EXPECT_EQ(u8.shape(), (kiln::shape{2, 2}));
  EXPECT_EQ(u8.to_host(), (std::vector<std::uint8_t>{0, 1, 200, 255}));
  EXPECT_EQ(f.template load<std::int32_t>(ctx, "i32").to_host(),
            (std::vector<std::int32_t>{INT32_MIN, 123456789, INT32_MAX}));

  auto s = f.template load<float>(ctx, "scalar");
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.to_host(), std::vector<float>{42.0f});
  auto e = f.template load<float>(ctx, "nothing");
  EXPECT_EQ(e.shape(), (kiln::shape{0, 4}));
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(f.template load<std::int32_t>(ctx, "gewicht.ä/重み").to_host(), std::vector<std::int32_t>{-7});

  // dtypes kiln has no tensors for: listed, readable as bytes, not loadable
  EXPECT_EQ(f.info("i64").dtype, "I64");
  EXPECT_EQ(f.info("i64").shape, std::vector<std::int64_t>{2});
  EXPECT_EQ(f.info("i64").bytes, 16u);
  std::int64_t i64[2];
  std::memcpy(i64, f.bytes("i64").data(), 16);
  EXPECT_EQ(i64[0], -1);
  EXPECT_EQ(i64[1], std::int64_t(1) << 40);
  double d;
  std::memcpy(&d, f.bytes("f64").data(), 8);
  EXPECT_EQ(d, 3.141592653589793);
  EXPECT_EQ(f.info("mask").dtype, "BOOL");
  EXPECT_EQ(f.bytes("mask").size(), 3u);
  for (const char* n : {"i64", "f64", "mask"}) {
    const auto msg = format_error_of([&] { (void)f.template load<std::int32_t>(ctx, n); });
    EXPECT_TRUE(has(msg, "fixture.safetensors")) << msg;
    EXPECT_TRUE(has(msg, n)) << msg;
    EXPECT_TRUE(has(msg, f.info(n).dtype)) << msg;
    EXPECT_TRUE(has(msg, "kiln has no")) << msg;
  }
}

TYPED_TEST(safetensors, wrong_dtype_and_missing_names_are_named) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto f = st::open(fixture_path());
  auto msg = format_error_of([&] { (void)f.template load<kiln::half>(ctx, "weight"); });
  EXPECT_TRUE(has(msg, "fixture.safetensors")) << msg;
  EXPECT_TRUE(has(msg, "'weight'")) << msg;
  EXPECT_TRUE(has(msg, "F32")) << msg;
  EXPECT_TRUE(has(msg, "F16")) << msg;
  msg = format_error_of([&] { (void)f.template load<std::uint8_t>(ctx, "i8"); });
  EXPECT_TRUE(has(msg, "stored as I8, requested U8")) << msg;
  msg = format_error_of([&] { (void)f.template load<float>(ctx, "no.such.tensor"); });
  EXPECT_TRUE(has(msg, "'no.such.tensor'")) << msg;
  EXPECT_TRUE(has(msg, "no such tensor")) << msg;
  EXPECT_FALSE(f.contains("no.such.tensor"));
}

TEST(safetensors_file, move_only_handle) {
  static_assert(!std::is_copy_constructible_v<st::file>);
  static_assert(!std::is_copy_assignable_v<st::file>);
  static_assert(std::is_nothrow_move_constructible_v<st::file>);
  auto f = st::open(fixture_path());
  st::file g = std::move(f);
  EXPECT_EQ(g.names().size(), 12u);
  EXPECT_EQ(g.path(), fixture_path());
  g = st::open(fixture_path());  // move-assign over a live mapping
  std::int32_t v;
  std::memcpy(&v, g.bytes("gewicht.ä/重み").data(), 4);
  EXPECT_EQ(v, -7);
}

TEST(safetensors_file, missing_file_is_a_kiln_error_naming_it) {
  try {
    (void)st::open("/nonexistent/dir/model.safetensors");
    FAIL() << "no exception";
  } catch (const kiln::format_error&) {
    FAIL() << "a file that is not there is not a format error";
  } catch (const kiln::error& e) {
    EXPECT_TRUE(has(e.what(), "/nonexistent/dir/model.safetensors"));
  }
}

// ---- Damaged files -------------------------------------------------------------------------

namespace {

/// A file of an 8-byte length, the header text, then data bytes.
std::vector<unsigned char> make_file(const std::string& header, std::size_t data_bytes, std::uint64_t length) {
  std::vector<unsigned char> b(8);
  for (int k = 0; k < 8; ++k) b[static_cast<std::size_t>(k)] = static_cast<unsigned char>(length >> (8 * k));
  b.insert(b.end(), header.begin(), header.end());
  for (std::size_t k = 0; k < data_bytes; ++k) b.push_back(static_cast<unsigned char>(k));
  return b;
}
std::vector<unsigned char> make_file(const std::string& header, std::size_t data_bytes = 64) {
  return make_file(header, data_bytes, header.size());
}

/// The format_error opening these bytes gives (written to a file under tmp).
std::string open_error(const temp_dir& tmp, const std::vector<unsigned char>& bytes) {
  const auto p = tmp / "damaged.safetensors";
  write_file(p, bytes);
  return format_error_of([&] { (void)st::open(p); });
}

struct damage {
  const char* what;
  std::string header;
  const char* says;         // a part of the message
  const char* tensor = "";  // the entry it names, if any
};

}  // namespace

TEST(safetensors_damage, short_files) {
  temp_dir tmp;
  for (std::size_t n = 0; n < 8; ++n) {
    const auto msg = open_error(tmp, std::vector<unsigned char>(n, 0));
    EXPECT_TRUE(has(msg, "damaged.safetensors")) << msg;
    EXPECT_TRUE(has(msg, "shorter than the 8-byte header length")) << msg;
  }
}

TEST(safetensors_damage, header_length) {
  temp_dir tmp;
  const std::string h = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
  // one past the end, far past it, the limit, and values that wrap 8 + n
  for (std::uint64_t n : {std::uint64_t(h.size() + 5), std::uint64_t(1) << 20, st::max_header_bytes}) {
    const auto msg = open_error(tmp, make_file(h, 4, n));
    EXPECT_TRUE(has(msg, "runs past the end of the file")) << n << ": " << msg;
    EXPECT_TRUE(has(msg, "damaged.safetensors")) << msg;
  }
  for (std::uint64_t n : {st::max_header_bytes + 1, std::uint64_t(1) << 40, ~std::uint64_t(0), ~std::uint64_t(0) - 7}) {
    const auto msg = open_error(tmp, make_file(h, 4, n));
    EXPECT_TRUE(has(msg, "above the limit")) << n << ": " << msg;
  }
  // too short: the JSON is cut
  EXPECT_TRUE(has(open_error(tmp, make_file(h, 4, h.size() - 1)), "not valid JSON"));
  EXPECT_TRUE(has(open_error(tmp, make_file(h, 4, 0)), "not valid JSON"));
  // exact: fine, also with no data at all for an empty tensor
  write_file(tmp / "ok.safetensors", make_file(h, 4));
  EXPECT_EQ(st::open(tmp / "ok.safetensors").info("a").bytes, 4u);
  write_file(tmp / "ok0.safetensors", make_file(R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", 0));
  EXPECT_EQ(st::open(tmp / "ok0.safetensors").info("e").bytes, 0u);
  write_file(tmp / "none.safetensors", make_file("{}", 0));
  EXPECT_TRUE(st::open(tmp / "none.safetensors").names().empty());
}

TEST(safetensors_damage, every_class_throws_format_error_naming_file_and_tensor) {
  temp_dir tmp;
  const std::vector<damage> cases = {
      {"bad JSON", R"({"a":{"dtype":"U8","shape":[4],)", "not valid JSON"},
      {"bad JSON", "hello", "not valid JSON"},
      {"bad JSON", std::string("{\"\xff\xfe\":1}"), "not valid JSON"},
      {"trailing", R"({} {})", "not valid JSON"},
      {"not an object", "[1, 2]", "not an object"},
      {"not an object", "42", "not an object"},
      {"not an object", "null", "not an object"},
      {"not an object", R"("text")", "not an object"},
      {"entry not an object", R"({"a":5})", "entry is JSON number", "a"},
      {"entry not an object", R"({"a":[1,2]})", "entry is JSON array", "a"},
      {"no dtype", R"({"a":{"shape":[4],"data_offsets":[0,4]}})", "no \"dtype\"", "a"},
      {"no shape", R"({"a":{"dtype":"U8","data_offsets":[0,4]}})", "no \"shape\"", "a"},
      {"no offsets", R"({"a":{"dtype":"U8","shape":[4]}})", "no \"data_offsets\"", "a"},
      {"dtype type", R"({"a":{"dtype":8,"shape":[4],"data_offsets":[0,4]}})", "not a string", "a"},
      {"shape type", R"({"a":{"dtype":"U8","shape":"4","data_offsets":[0,4]}})", "not an array", "a"},
      {"shape type", R"({"a":{"dtype":"U8","shape":{"n":4},"data_offsets":[0,4]}})", "not an array", "a"},
      {"shape entry", R"({"a":{"dtype":"U8","shape":[4.0],"data_offsets":[0,4]}})", "not a non-negative integer", "a"},
      {"shape entry", R"({"a":{"dtype":"U8","shape":["4"],"data_offsets":[0,4]}})", "not a non-negative integer", "a"},
      {"shape entry", R"({"a":{"dtype":"U8","shape":[[4]],"data_offsets":[0,4]}})", "not a non-negative integer", "a"},
      {"negative extent", R"({"a":{"dtype":"U8","shape":[-4],"data_offsets":[0,4]}})", "not a non-negative integer", "a"},
      {"negative extent", R"({"a":{"dtype":"U8","shape":[2,-2,-1],"data_offsets":[0,4]}})", "not a non-negative integer", "a"},
      {"overflow", R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", "more than 2^59", "a"},
      {"overflow", R"({"a":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})", "more than 2^59", "a"},
      {"overflow", R"({"a":{"dtype":"F32","shape":[0,1152921504606846976],"data_offsets":[0,0]}})", "more than 2^59", "a"},
      {"overflow wraps to 4", R"({"a":{"dtype":"F32","shape":[4611686018427387905],"data_offsets":[0,4]}})", "more than 2^59", "a"},
      {"huge extent", R"({"a":{"dtype":"U8","shape":[100000000000000000000],"data_offsets":[0,4]}})", "", "a"},
      {"offsets type", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":"0,4"}})", "not two non-negative integers", "a"},
      {"offsets count", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0]}})", "not two non-negative integers", "a"},
      {"offsets count", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4,8]}})", "not two non-negative integers", "a"},
      {"offsets negative", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[-4,0]}})", "not two non-negative integers", "a"},
      {"offsets float", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0.0,4.0]}})", "not two non-negative integers", "a"},
      {"offsets string", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":["0","4"]}})", "not two non-negative integers", "a"},
      {"out of range", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[62,66]}})", "past the end of the data", "a"},
      {"out of range", R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[65,65]}})", "past the end of the data", "a"},
      {"out of range", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[18446744073709551614,2]}})", "begin after they end", "a"},
      {"wraps", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[18446744073709551614,18446744073709551618]}})", "", "a"},
      {"begin > end", R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,4]}})", "begin after they end", "a"},
      {"overlap", R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})", "overlap", "b"},
      {"overlap", R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", "overlap", "b"},
      {"same range", R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"I8","shape":[8],"data_offsets":[0,8]}})", "overlap", ""},
      {"size", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "needs 12", "a"},
      {"size", R"({"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,16]}})", "needs 8", "a"},
      {"size", R"({"a":{"dtype":"F64","shape":[],"data_offsets":[0,4]}})", "needs 8", "a"},
      {"size", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,4]}})", "needs 0", "a"},
      {"unknown dtype", R"({"a":{"dtype":"F17","shape":[4],"data_offsets":[0,4]}})", "unknown dtype 'F17'", "a"},
      {"unknown dtype", R"({"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", "unknown dtype 'f32'", "a"},
      {"duplicate", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"a":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})", "appears twice", "a"},
      {"duplicate", R"({"__metadata__":{},"__metadata__":{"k":"v"}})", "appears twice"},
      {"deep", R"({"a":)" + std::string(100000, '[') + std::string(100000, ']') + "}", "entry is JSON array", "a"},
      {"deep", R"({"a":)" + std::string(100000, '{'), "not valid JSON"},
      {"metadata", R"({"__metadata__":[1]})", "__metadata__ is JSON array"},
      {"metadata", R"({"__metadata__":{"k":1}})", "not a string"},
      {"metadata", R"({"__metadata__":{"k":null}})", "not a string"},
  };
  for (const auto& c : cases) {
    const auto msg = open_error(tmp, make_file(c.header));
    SCOPED_TRACE(std::string(c.what) + ": " + c.header);
    EXPECT_TRUE(has(msg, "damaged.safetensors")) << msg;
    EXPECT_TRUE(has(msg, c.says)) << msg;
    if (*c.tensor) {
      EXPECT_TRUE(has(msg, std::string("tensor '") + c.tensor + "'")) << msg;
    }
  }
}

TEST(safetensors_damage, not_a_regular_file) {
  static_assert(std::is_base_of_v<kiln::error, kiln::format_error>);
  temp_dir tmp;
  auto msg = format_error_of([&] { (void)st::open(tmp.dir.string()); });
  EXPECT_TRUE(has(msg, "not a regular file")) << msg;
  msg = format_error_of([&] { (void)st::open("/dev/null"); });
  EXPECT_TRUE(has(msg, "'/dev/null' is not a regular file")) << msg;
}

TEST(safetensors_damage, rank_above_kiln_maximum_is_listed_but_not_loaded) {
  temp_dir tmp;
  write_file(tmp / "r9.safetensors",
             make_file(R"({"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,2],"data_offsets":[0,2]}})", 2));
  auto f = st::open(tmp / "r9.safetensors");
  EXPECT_EQ(f.info("a").shape.size(), 9u);
  const auto msg = format_error_of([&] { (void)f.load<std::uint8_t>(kiln_test::ctx<kiln_test::cpu>(), "a"); });
  EXPECT_TRUE(has(msg, "rank 9")) << msg;
  EXPECT_TRUE(has(msg, "'a'")) << msg;
}

TEST(safetensors_damage, gaps_and_unsorted_offsets_are_valid) {
  temp_dir tmp;
  // data in reverse order with a gap: allowed by the format (padding, alignment)
  write_file(tmp / "g.safetensors",
             make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[40,42]},"b":{"dtype":"I8","shape":[3],"data_offsets":[1,4]}})"));
  auto f = st::open(tmp / "g.safetensors");
  EXPECT_EQ(f.names(), (std::vector<std::string>{"b", "a"}));
  auto& ctx = kiln_test::ctx<kiln_test::cpu>();
  EXPECT_EQ(f.load<std::uint8_t>(ctx, "a").to_host(), (std::vector<std::uint8_t>{40, 41}));
  EXPECT_EQ(f.load<std::int8_t>(ctx, "b").to_host(), (std::vector<std::int8_t>{1, 2, 3}));
}

// ---- Random damage ---------------------------------------------------------------------------

namespace {

/// Opens path and reads every entry; each loadable one must hold exactly the bytes the
/// file has at its offsets (read here independently of the reader).
template <class B>
void open_and_check_all(const kiln::context<B>& ctx, const std::string& path, const std::vector<unsigned char>& raw) {
  auto f = st::open(path);
  std::uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | raw[static_cast<std::size_t>(k)];
  const std::size_t start = 8 + static_cast<std::size_t>(n);
  for (const auto& name : f.names()) {
    const auto& i = f.info(name);
    ASSERT_LE(start + i.offset + i.bytes, raw.size());
    const unsigned char* want = raw.data() + start + i.offset;
    auto check = [&](auto tag) {
      using T = decltype(tag);
      const auto got = f.template load<T>(ctx, name).to_host();
      ASSERT_EQ(got.size() * sizeof(T), i.bytes);
      EXPECT_TRUE(got.empty() || std::memcmp(got.data(), want, i.bytes) == 0) << name;
    };
    if (i.dtype == "F32") check(float{});
    else if (i.dtype == "F16") check(kiln::half{});
    else if (i.dtype == "BF16") check(kiln::bfloat16{});
    else if (i.dtype == "I8") check(std::int8_t{});
    else if (i.dtype == "U8") check(std::uint8_t{});
    else if (i.dtype == "I32") check(std::int32_t{});
    else {
      EXPECT_THROW((void)f.template load<float>(ctx, name), kiln::format_error);
      EXPECT_EQ(std::memcmp(f.bytes(name).data(), want, i.bytes), 0);
    }
  }
}

}  // namespace

TYPED_TEST(safetensors, random_damage_loads_correctly_or_throws_format_error) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  temp_dir tmp;
  auto g = kiln_test::rng();
  // A valid file of several dtypes, a scalar, an empty tensor and metadata.
  auto vf = kiln_test::uniform(g, 10);
  auto vi = kiln_test::uniform_int<std::int32_t>(g, 6, -1000, 1000);
  std::vector<kiln::half> vh(vf.begin(), vf.begin() + 3);
  const std::vector<std::int64_t> i64 = {-5, 7};
  const auto base = tmp / "base.safetensors";
  st::save(base,
           {{"w", kiln::from_host(ctx, {2, 5}, std::span<const float>(vf))},
            {"ids", kiln::from_host(ctx, {6}, std::span<const std::int32_t>(vi))},
            {"h", kiln::from_host(ctx, {3}, std::span<const kiln::half>(vh))},
            {"s", kiln::from_host(ctx, kiln::shape{}, std::span<const float>(vf.data(), 1))},
            {"e", kiln::from_host(ctx, {0, 3}, std::span<const float>())},
            {"l", st::item("I64", {2}, std::as_bytes(std::span(i64)))}},
           {{"k", "v"}});
  const auto good = read_file(base);
  std::uint64_t header = 0;
  for (int k = 7; k >= 0; --k) header = (header << 8) | good[static_cast<std::size_t>(k)];

  const int iterations = std::is_same_v<TypeParam, kiln_test::cpu> ? 300 : 60;  // lavapipe: fewer
  int opened = 0, rejected = 0;
  const auto path = tmp / "bad.safetensors";
  for (int it = 0; it < iterations; ++it) {
    auto bad = good;
    std::string how;
    switch (std::uniform_int_distribution<int>(0, 5)(g)) {
      case 0:
      case 1: {  // 1-4 bytes of the length and header changed
        const int flips = std::uniform_int_distribution<int>(1, 4)(g);
        for (int k = 0; k < flips; ++k) {
          const auto at = std::uniform_int_distribution<std::size_t>(0, 8 + header - 1)(g);
          bad[at] ^= static_cast<unsigned char>(std::uniform_int_distribution<int>(1, 255)(g));
          how += " flip@" + std::to_string(at);
        }
        break;
      }
      case 2: {  // truncated anywhere
        const auto len = std::uniform_int_distribution<std::size_t>(0, good.size() - 1)(g);
        bad.resize(len);
        how = " truncated to " + std::to_string(len);
        break;
      }
      case 3: {  // the header length edited: near its value, or anything
        std::uint64_t n = std::uniform_int_distribution<int>(0, 1)(g)
                              ? header + static_cast<std::uint64_t>(std::uniform_int_distribution<int>(-16, 16)(g))
                              : std::uniform_int_distribution<std::uint64_t>()(g) >> std::uniform_int_distribution<int>(0, 63)(g);
        for (int k = 0; k < 8; ++k) bad[static_cast<std::size_t>(k)] = static_cast<unsigned char>(n >> (8 * k));
        how = " length " + std::to_string(n);
        break;
      }
      case 4: {  // a number in the JSON (a shape extent or an offset) replaced: still JSON
        std::string text(good.begin() + 8, good.begin() + 8 + static_cast<std::ptrdiff_t>(header));
        std::vector<std::pair<std::size_t, std::size_t>> numbers;  // [begin, end) of digit runs
        for (std::size_t k = 0; k < text.size();) {
          if (std::isdigit(static_cast<unsigned char>(text[k]))) {
            std::size_t e = k;
            while (e < text.size() && std::isdigit(static_cast<unsigned char>(text[e]))) ++e;
            numbers.emplace_back(k, e);
            k = e;
          } else {
            ++k;
          }
        }
        const auto [b, e] = numbers[std::uniform_int_distribution<std::size_t>(0, numbers.size() - 1)(g)];
        const std::uint64_t old_value = std::stoull(text.substr(b, e - b));
        std::uint64_t v = 0;
        switch (std::uniform_int_distribution<int>(0, 3)(g)) {
          case 0: v = old_value + static_cast<std::uint64_t>(std::uniform_int_distribution<int>(-8, 8)(g)); break;
          case 1: v = std::uniform_int_distribution<std::uint64_t>(0, 256)(g); break;
          case 2: v = std::uniform_int_distribution<std::uint64_t>()(g); break;
          default: v = std::uint64_t(1) << std::uniform_int_distribution<int>(0, 63)(g); break;
        }
        text.replace(b, e - b, std::to_string(v));
        bad = make_file(text, 0, text.size());
        bad.insert(bad.end(), good.begin() + 8 + static_cast<std::ptrdiff_t>(header), good.end());
        how = " number@" + std::to_string(b) + " " + std::to_string(old_value) + " -> " + std::to_string(v);
        break;
      }
      default: {  // a data byte changed: still a valid file, the load must show it
        const auto at = std::uniform_int_distribution<std::size_t>(8 + header, good.size() - 1)(g);
        bad[at] ^= 0x5a;
        how = " data flip@" + std::to_string(at);
        break;
      }
    }
    write_file(path, bad);
    SCOPED_TRACE("damage" + how + " " + kiln_test::seed_note());
    try {
      open_and_check_all(ctx, path, bad);
      ++opened;
    } catch (const kiln::format_error& e) {
      EXPECT_TRUE(has(e.what(), "bad.safetensors"));
      ++rejected;
    }
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_EQ(opened + rejected, iterations);
  std::printf("  %d damaged copies: %d opened and read back correctly, %d rejected with kiln::format_error\n",
              iterations, opened, rejected);
  EXPECT_GT(rejected, 0);
  EXPECT_GT(opened, 0);
}

// ---- Writing ------------------------------------------------------------------------------

TYPED_TEST(safetensors, save_replaces_atomically_and_leaves_no_temporaries) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  temp_dir tmp;
  const auto path = tmp / "a.safetensors";
  std::vector<float> v1 = {1, 2, 3}, v2 = {4, 5};
  st::save(path, {{"x", kiln::from_host(ctx, {3}, std::span<const float>(v1))}});
  auto old = st::open(path);  // a reader keeps its mapping of the old file
  st::save(path, {{"y", kiln::from_host(ctx, {2}, std::span<const float>(v2))}});
  EXPECT_EQ(old.template load<float>(ctx, "x").to_host(), v1);
  auto now = st::open(path);
  EXPECT_EQ(now.names(), std::vector<std::string>{"y"});
  EXPECT_EQ(now.template load<float>(ctx, "y").to_host(), v2);
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::owner_read, fs::perms::owner_read);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.dir)) ++files;
  EXPECT_EQ(files, 1);  // no temporaries left beside it
}

TYPED_TEST(safetensors, save_rejects_bad_requests_and_keeps_the_old_file) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  temp_dir tmp;
  const auto path = tmp / "k.safetensors";
  std::vector<float> v = {1, 2};
  auto t = kiln::from_host(ctx, {2}, std::span<const float>(v));
  st::save(path, {{"keep", t}});
  const auto before = read_file(path);

  auto msg = format_error_of([&] { st::save(path, {{"a", t}, {"a", t}}); });
  EXPECT_TRUE(has(msg, "'a' given twice")) << msg;
  msg = format_error_of([&] { st::save(path, {{"__metadata__", t}}); });
  EXPECT_TRUE(has(msg, "reserved")) << msg;
  msg = format_error_of([&] { st::save(path, {{"bad\xff", t}}); });
  EXPECT_TRUE(has(msg, "UTF-8")) << msg;
  msg = format_error_of([&] { st::save(path, {{"a", t}}, {{"k", "\xc3"}}); });
  EXPECT_TRUE(has(msg, "UTF-8")) << msg;
  EXPECT_EQ(read_file(path), before);

  // no directory to write into: a kiln::error naming the path, nothing created
  const auto nowhere = tmp / "missing/dir/x.safetensors";
  EXPECT_THROW(st::save(nowhere, {{"a", t}}), kiln::error);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.dir)) ++files;
  EXPECT_EQ(files, 1);

  // raw items: the byte count must match
  std::vector<std::byte> three(3);
  EXPECT_THROW(st::item("F32", {1}, three), kiln::shape_error);
  EXPECT_THROW(st::item("Q4", {3}, three), kiln::format_error);
  EXPECT_THROW(st::item("U8", {-3}, three), kiln::shape_error);
}

TYPED_TEST(safetensors, empty_file_and_large_tensor) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  temp_dir tmp;
  st::save(tmp / "none.safetensors", std::vector<std::pair<std::string, st::item>>{}, {{"only", "metadata"}});
  auto f = st::open(tmp / "none.safetensors");
  EXPECT_TRUE(f.names().empty());
  EXPECT_EQ(f.metadata().at("only"), "metadata");

  auto g = kiln_test::rng();
  const std::size_t n = 300007;  // odd, > 1 MB
  auto v = kiln_test::uniform(g, n);
  st::save(tmp / "big.safetensors", {{"big", kiln::from_host(ctx, {static_cast<kiln::index_t>(n)}, std::span<const float>(v))}});
  auto b = st::open(tmp / "big.safetensors");
  EXPECT_TRUE(same_bytes(b.template load<float>(ctx, "big").to_host(), v));
  const auto raw = read_file(tmp / "big.safetensors");
  std::uint64_t h = 0;
  for (int k = 7; k >= 0; --k) h = (h << 8) | raw[static_cast<std::size_t>(k)];
  EXPECT_EQ(h % 8, 0u);
  EXPECT_EQ(b.info("big").offset, 0u);
  EXPECT_EQ(raw.size(), 8 + h + n * 4);  // no padding after the last tensor
}
