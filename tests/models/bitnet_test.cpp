// tests/models/bitnet_test.cpp — kiln::bitnet (kiln/models/bitnet.hpp) on each backend,
// against the tiny BitNet b1.58 fixture (scripts/make_bitnet_fixture.py): the packed
// layout (uint8 codes + weight_scale) and the bf16 master weights, each compared at every
// position (all at once and token by token on the KV cache) with a float64 reference
// written from the formulas, greedy ids identical; the table kept as bf16, f16 or int8;
// matrices in small row blocks; the architecture dispatch; damaged checkpoints.
//
// The error bound (derived per logit, see bound()):
//  - every ternary product is exact (integer codes, int32 sums), so kiln and the reference
//    differ only by float32 rounding elsewhere (norms, rope, attention, the rescaling) and
//    by int8 activation codes that round the other way;
//  - a code can only round the other way where x * 127 / max|x| lies within kiln's float32
//    error of a tie. The fixture lists every site within DELTA = 2e-3 code units of one and
//    records, per logit, the sum of |change| when each of them flips ("flip": a first-order
//    bound on any combination of flips; interactions are second order, hence a factor 2);
//  - everywhere else the codes agree as long as kiln's float32 error at a site stays below
//    DELTA code units: |dx| + |d max|x|| <= rho * max|x| with rho = DELTA / 254 (7.9e-6,
//    132 float32 roundings u = 2^-24 of the site's largest value; the longest float32
//    paths in this 2-layer model of width 40 are of that order). The final hidden state
//    then carries a relative error of at most rho, and the LM head's float32 dot product of
//    length H adds H * u: |d logit_v| <= (rho + H u) * max|xf| * sum_i |E_vi|;
//  - so |kiln - reference| <= (rho + H u) max|xf| sum_i |E_vi| + 2 flip_v (+ the f32 storage
//    of the reference, 2^-24 |logit|). Flip sums are up to ~0.3 here against logits
//    spread over ~7; without flips the bound is about 5e-4.
// Greedy ids: at each choosing position the fixture's best logit beats the second by more
// than the two bounds together (checked), so identical ids follow from the bound.
#include <gtest/gtest.h>
#include <unistd.h>

#include <kiln/kiln.hpp>
#include <kiln/models/architecture.hpp>
#include <kiln/models/bitnet.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backends.hpp"
#include "checks.hpp"
#include "fixture_bounds.hpp"

namespace bitnet_test {

namespace fs = std::filesystem;
using kiln::index_t;
using kiln_test::has;

const std::string data = KILN_MODELS_TEST_DATA;
const std::string packed_dir = data + "/tiny_bitnet", master_dir = data + "/tiny_bitnet_bf16";

/// One variant of the fixture's expectations (packed, master, packed_int8) with the bound
/// of each logit (derived above; computed in fixture_bounds.hpp, which the tensor-parallel
/// tests share).
using variant = kiln_test::fixtures::expected;

const variant& fixture(const std::string& name) { return kiln_test::fixtures::bitnet(name); }

/// prompt + every generated id but the last: the rows of the fixture's logits.
std::vector<std::int32_t> tokens(const variant& e) { return e.tokens(); }

/// got [n, vocab] against the fixture's rows [first, first + n), each logit within its bound.
::testing::AssertionResult within_bound(const variant& e, const std::vector<float>& got, index_t first, index_t n) {
  return e.within(got, first, n);
}

/// The fixture's greedy choices are decided by the bound: best - second > both bounds.
void expect_clear_choices(const variant& e) {
  for (index_t t = static_cast<index_t>(e.prompt.size()) - 1; t < e.rows; ++t) {
    const float* row = e.logits.data() + t * e.vocab;
    std::vector<index_t> order(static_cast<std::size_t>(e.vocab));
    for (index_t v = 0; v < e.vocab; ++v) order[v] = v;
    std::partial_sort(order.begin(), order.begin() + 2, order.end(), [&](index_t a, index_t b) { return row[a] > row[b]; });
    const double gap = row[order[0]] - row[order[1]];
    const double both = e.tol[t * e.vocab + order[0]] + e.tol[t * e.vocab + order[1]];
    EXPECT_GT(gap, both) << "position " << t << ": the fixture's greedy gap is within the bound";
  }
}

/// Loads dir with options o and checks it against the fixture variant: every position at
/// once, token by token on the cache, and greedy generation (ids and the logits of each step).
template <class B>
void check_variant(const kiln::context<B>& ctx, const std::string& dir, const variant& e, kiln::bitnet::load_options o) {
  expect_clear_choices(e);
  auto m = kiln::bitnet::model<B>::load(ctx, dir, o);
  const auto t = tokens(e);
  const auto all = m.forward(t, true);
  EXPECT_EQ(all.shape(), kiln::shape({e.rows, e.vocab}));
  EXPECT_TRUE(within_bound(e, all.to_host(), 0, e.rows)) << "all positions at once";
  m.reset();
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_TRUE(within_bound(e, m.forward(std::span(t).subspan(i, 1)).to_host(), static_cast<index_t>(i), 1))
        << "token " << i << " on the cache";
  }
  m.reset();
  const index_t P = static_cast<index_t>(e.prompt.size());
  const auto ids = m.generate(e.prompt, static_cast<index_t>(e.generated.size()),
                              [&](index_t i, const kiln::tensor<float, B>& l) {
                                EXPECT_TRUE(within_bound(e, l.to_host(), P - 1 + i, 1)) << "greedy step " << i;
                              });
  EXPECT_EQ(ids, e.generated);
}

/// A directory of the test's own, removed before and after.
struct temp_dir {
  fs::path dir;
  temp_dir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string n = std::string(info->test_suite_name()) + "_" + info->name();
    std::replace(n.begin(), n.end(), '/', '_');
    dir = fs::path(::testing::TempDir()) / ("kiln_bitnet_" + n + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~temp_dir() { fs::remove_all(dir); }
};

/// The packed fixture copied to dir with its tensors changed by edit(name, dtype, shape,
/// bytes) (returning false drops the tensor).
template <class F>
void write_damaged(const fs::path& dir, F&& edit) {
  fs::copy_file(packed_dir + "/config.json", dir / "config.json");
  const auto f = kiln::safetensors::open(packed_dir + "/model.safetensors");
  std::vector<std::vector<std::byte>> keep;
  keep.reserve(f.names().size());
  std::vector<std::pair<std::string, kiln::safetensors::item>> items;
  for (const auto& n : f.names()) {
    const auto& i = f.info(n);
    std::string dtype = i.dtype;
    std::vector<std::int64_t> shape = i.shape;
    const auto b = f.bytes(n);
    std::vector<std::byte> bytes(b.begin(), b.end());
    if (!edit(n, dtype, shape, bytes)) continue;
    keep.push_back(std::move(bytes));
    items.emplace_back(n, kiln::safetensors::item(dtype, shape, keep.back()));
  }
  kiln::safetensors::save((dir / "model.safetensors").string(), items);
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

template <class B>
class bitnet : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(bitnet, kiln_test::backend_types);

TYPED_TEST(bitnet, packed_checkpoint_at_every_position_and_greedy) {
  check_variant(kiln_test::ctx<TypeParam>(), packed_dir, fixture("packed"), {});
}

TYPED_TEST(bitnet, bf16_master_weights_quantized_at_load) {
  check_variant(kiln_test::ctx<TypeParam>(), master_dir, fixture("master"), {});
}

TYPED_TEST(bitnet, f16_and_int8_tables) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  // f16 holds the fixture's bf16 table exactly (no value below 2^-10): the bf16 reference
  check_variant(ctx, packed_dir, fixture("packed"), {.lm_head = kiln::bitnet::table_dtype::f16});
  // int8 rows (absmax per row) for the embedding and the head: its own reference
  check_variant(ctx, packed_dir, fixture("packed_int8"), {.lm_head = kiln::bitnet::table_dtype::int8});
  auto b = kiln::bitnet::model<TypeParam>::load(ctx, packed_dir);
  auto q = kiln::bitnet::model<TypeParam>::load(ctx, packed_dir, {.lm_head = kiln::bitnet::table_dtype::int8});
  EXPECT_EQ(q.lm_head().t16b.q8.size(), 1u);
  EXPECT_TRUE(q.lm_head().t16b.blocks.empty());
  EXPECT_LT(q.weight_bytes_per_token(), b.weight_bytes_per_token());
}

TYPED_TEST(bitnet, matrices_in_small_row_blocks) {
  // 256-byte blocks: 8 rows of ternary codes (K = 40 pads to one 128-weight chunk, 32
  // bytes), so [Wq; Wk; Wv] (40 + 20 + 20 rows) is 10 blocks straddling the parts and
  // [Wgate; Wup] 14; 3 rows of the bf16 table (23 blocks; int8 quantizes each of them).
  auto& ctx = kiln_test::ctx<TypeParam>();
  kiln::bitnet::load_options o;
  o.max_block_bytes = 256;
  auto m = kiln::bitnet::model<TypeParam>::load(ctx, master_dir, o);
  EXPECT_EQ(m.layers()[0].wqkv.blocks.size(), 10u);
  EXPECT_EQ(m.layers()[0].wgu.blocks.size(), 14u);
  EXPECT_EQ(m.lm_head().t16b.blocks.size(), 23u);
  check_variant(ctx, master_dir, fixture("master"), o);
  o.lm_head = kiln::bitnet::table_dtype::int8;
  check_variant(ctx, packed_dir, fixture("packed_int8"), o);
}

TYPED_TEST(bitnet, config_and_architecture_dispatch) {
  const auto c = kiln::bitnet::config::load(packed_dir + "/config.json");
  EXPECT_EQ(c.hidden_size, 40);
  EXPECT_EQ(c.intermediate_size, 56);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 10);
  EXPECT_EQ(c.vocab_size, 67);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  using kiln::models::architecture;
  EXPECT_EQ(kiln::models::architecture_of_dir(packed_dir), architecture::bitnet);
  EXPECT_EQ(kiln::models::architecture_of_dir(master_dir), architecture::bitnet);
  EXPECT_EQ(kiln::models::architecture_of_dir(data + "/tiny_llama"), architecture::llama);
  const auto arch = [](const std::string& json) {
    return kiln_test::message_of<kiln::format_error>(
        [&] { kiln::models::architecture_of(kiln::models::hf_config(json, "cfg.json")); });
  };
  EXPECT_TRUE(has(arch(R"({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})"),
                  "cfg.json: model_type \"gpt2\", architectures [\"GPT2LMHeadModel\"] is not an architecture kiln loads"));
  EXPECT_TRUE(has(arch(R"({"model_type": "llama", "architectures": ["BitNetForCausalLM"]})"), "is not an architecture"));
  EXPECT_TRUE(has(arch(R"({"architectures": ["MistralForCausalLM"]})"), "model_type (absent)"));
  EXPECT_EQ(kiln::models::architecture_of(kiln::models::hf_config(R"({"architectures": ["BitNetForCausalLM"]})")),
            architecture::bitnet);
  const auto cfg = [](const std::string& json) {
    return kiln_test::message_of<kiln::format_error>([&] { kiln::bitnet::config::parse(json, "cfg.json"); });
  };
  const std::string base = R"("model_type": "bitnet", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10)";
  EXPECT_NO_THROW(kiln::bitnet::config::parse("{" + base + "}"));
  EXPECT_TRUE(has(cfg(R"({"model_type": "llama", "hidden_size": 64})"), "not a BitNet config (model_type \"llama\"); load it with kiln::llama"));
  EXPECT_TRUE(has(cfg("{" + base + R"(, "hidden_act": "silu"})"), "hidden_act \"silu\" is not supported"));
  EXPECT_TRUE(has(cfg("{" + base + R"(, "rope_scaling": {"rope_type": "yarn"}})"), "rope_scaling"));
  EXPECT_TRUE(has(cfg("{" + base + R"(, "num_key_value_heads": 3})"), "not a multiple of num_key_value_heads 3"));
  EXPECT_TRUE(has(kiln_test::message_of<kiln::format_error>(
                      [&] { kiln::bitnet::model<TypeParam>::load(kiln_test::ctx<TypeParam>(), data + "/tiny_llama"); }),
                  "not a BitNet config"));
  EXPECT_EQ(kiln::bitnet::table_dtype_from("int8"), kiln::bitnet::table_dtype::int8);
  EXPECT_TRUE(has(kiln_test::message_of<kiln::value_error>([] { kiln::bitnet::table_dtype_from("fp8"); }), "'fp8'"));
}

TYPED_TEST(bitnet, damaged_checkpoints_name_the_tensor_and_file) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  using M = kiln::bitnet::model<TypeParam>;
  const std::string q = "model.layers.1.self_attn.q_proj.weight";
  const auto damaged = [&](auto edit) {
    temp_dir t;
    write_damaged(t.dir, edit);
    return kiln_test::message_of<kiln::format_error>([&] { M::load(ctx, t.dir.string()); });
  };
  using bytes = std::vector<std::byte>;
  using dims = std::vector<std::int64_t>;
  std::string msg = damaged([&](const std::string& n, std::string&, dims&, bytes&) { return n != q + "_scale"; });
  EXPECT_TRUE(has(msg, "model.safetensors: '" + q + "' is packed (U8) but '" + q + "_scale' is missing")) << msg;
  msg = damaged([&](const std::string& n, std::string&, dims& s, bytes& b) {
    if (n == q) {  // [10, 40] -> [10, 39]
      s[1] = 39;
      b.resize(390);
    }
    return true;
  });
  EXPECT_TRUE(has(msg, "'" + q + "' is U8[10, 39]; packed, the config needs U8[10, 40]")) << msg;
  msg = damaged([&](const std::string& n, std::string& d, dims& s, bytes&) {
    if (n == q) {  // 400 bytes read as 100 int32
      d = "I32";
      s = {10, 10};
    }
    return true;
  });
  EXPECT_TRUE(has(msg, "'" + q + "' is stored as I32; a BitNet projection is U8")) << msg;
  msg = damaged([&](const std::string& n, std::string& d, dims& s, bytes& b) {
    if (n == q + "_scale") {
      d = "I16";
      s = {1};
      b.resize(2);
    }
    return true;
  });
  EXPECT_TRUE(has(msg, "'" + q + "_scale' is stored as I16; a weight_scale must be F32, F16 or BF16")) << msg;
  msg = damaged([&](const std::string& n, std::string&, dims&, bytes& b) {
    if (n == q + "_scale") std::memset(b.data(), 0, b.size());  // bf16 0
    return true;
  });
  EXPECT_TRUE(has(msg, "'" + q + "_scale' = 0.000000 must be positive")) << msg;
  msg = damaged([&](const std::string& n, std::string&, dims&, bytes& b) {
    if (n == q) b[2 * 40 + 7] = std::byte{0xC0};  // bits 6..7 = 3 at packed row 2, column 7
    return true;
  });
  EXPECT_TRUE(has(msg, "'" + q + "' holds the unused code 3 at packed row 2, column 7 (bits 6..7)")) << msg;
  msg = damaged([&](const std::string& n, std::string&, dims&, bytes&) { return n != "model.layers.0.mlp.ffn_sub_norm.weight"; });
  EXPECT_TRUE(has(msg, "no tensor 'model.layers.0.mlp.ffn_sub_norm.weight'")) << msg;
  msg = damaged([&](const std::string& n, std::string&, dims& s, bytes& b) {
    if (n == "model.embed_tokens.weight") {  // one row short
      s[0] = 66;
      b.resize(66 * 40 * 2);
    }
    return true;
  });
  EXPECT_TRUE(has(msg, "model.safetensors: 'model.embed_tokens.weight' is [66, 40], the config needs [67, 40]")) << msg;
  {  // a config whose sizes disagree with the packed rows (k_proj: 1 head of 10 rows)
    temp_dir t;
    write_damaged(t.dir, [](const std::string&, std::string&, dims&, bytes&) { return true; });
    std::ifstream in(t.dir / "config.json");
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    s.replace(s.find("\"num_key_value_heads\": 2"), 24, "\"num_key_value_heads\": 1");
    write_text(t.dir / "config.json", s);
    msg = kiln_test::message_of<kiln::format_error>([&] { M::load(ctx, t.dir.string()); });
    EXPECT_TRUE(has(msg, "'model.layers.0.self_attn.k_proj.weight': a packed weight needs out_features divisible by 4; the config gives 10")) << msg;
  }
}

TYPED_TEST(bitnet, bad_ids_and_cache_overflow_change_nothing) {
  auto& ctx = kiln_test::ctx<TypeParam>();
  auto m = kiln::bitnet::model<TypeParam>::load(ctx, packed_dir, {.max_len = 6});
  const std::vector<std::int32_t> bad{1, 67}, five{5, 17, 60, 2, 9};
  EXPECT_TRUE(has(kiln_test::message_of<kiln::index_error>([&] { m.forward(bad); }), "token id 67 is outside the vocabulary [0, 67)"));
  m.forward(five);
  EXPECT_TRUE(has(kiln_test::message_of<kiln::shape_error>([&] { m.forward(five); }), "overflow the KV cache of 6"));
  EXPECT_EQ(m.position(), 5);
  m.rewind(4);
  EXPECT_EQ(m.position(), 4);
}

}  // namespace bitnet_test
