// tests/text/reference_test.cpp — against an independent implementation of tokenizer.json
// (scripts/tokenizer_reference.mjs), on every text of tests/text/data/texts.json: Llama 3
// (Split regex + ByteLevel BPE), Llama 2 (Prepend/Replace normalizer + BPE with
// byte_fallback) and two variants of them (NFKC + GPT-2 ByteLevel pre-tokenizer + template
// post-processor; NFC + Lowercase + Metaspace). Checked: ids with and without special
// tokens, decode (with the config's clean-up, raw, skipping special tokens), streaming decode.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <kiln/text/tokenizer.hpp>

#include "random.hpp"

#ifdef KILN_TEXT_REFERENCE

namespace {

struct reference_case {
  std::string text;
  std::vector<std::uint32_t> ids, ids_plain;
  std::string decoded, decoded_raw, decoded_skip;
};

struct reference_set {
  std::unique_ptr<kiln::text::tokenizer> tok;
  std::vector<reference_case> cases;
};

// Loaded once per tokenizer: the Llama 3 file is 9 MB of JSON.
const reference_set& reference(const std::string& name) {
  static std::map<std::string, reference_set> sets;
  auto it = sets.find(name);
  if (it != sets.end()) return it->second;
  std::ifstream in(KILN_TEXT_REFERENCE);
  if (!in) throw std::runtime_error(std::string("cannot read ") + KILN_TEXT_REFERENCE + " (the text.reference fixture writes it)");
  const auto j = nlohmann::json::parse(in);
  const auto& t = j.at(name);
  reference_set s;
  s.tok = std::make_unique<kiln::text::tokenizer>(kiln::text::tokenizer::from_pretrained(t.at("dir").get<std::string>()));
  for (const auto& c : t.at("cases")) {
    s.cases.push_back({c.at("text").get<std::string>(), c.at("ids").get<std::vector<std::uint32_t>>(),
                       c.at("ids_plain").get<std::vector<std::uint32_t>>(), c.at("decoded").get<std::string>(),
                       c.at("decoded_raw").get<std::string>(), c.at("decoded_skip").get<std::string>()});
  }
  return sets.emplace(name, std::move(s)).first->second;
}

std::string show(const std::string& s) { return nlohmann::json(s).dump(); }

std::string show(const std::vector<std::uint32_t>& v) { return nlohmann::json(v).dump(); }

template <class F>
void check_all(const std::string& name, const char* what, F&& check) {
  const auto& set = reference(name);
  ASSERT_GE(set.cases.size(), 600u);
  std::size_t agree = 0, reported = 0;
  for (const auto& c : set.cases) {
    std::string got, want;
    if (check(*set.tok, c, got, want)) {
      ++agree;
    } else if (reported++ < 8) {
      ADD_FAILURE() << name << " " << what << " differs on " << show(c.text) << "\n  kiln:      " << got << "\n  reference: " << want;
    }
  }
  EXPECT_EQ(agree, set.cases.size()) << name << " " << what;
  std::printf("[ reference] %s %s: %zu/%zu texts agree\n", name.c_str(), what, agree, set.cases.size());
}

class reference_test : public ::testing::TestWithParam<const char*> {};

TEST_P(reference_test, ids_with_special_tokens) {
  check_all(GetParam(), "ids with special tokens", [](const auto& tok, const reference_case& c, std::string& got, std::string& want) {
    const auto ids = tok.encode(c.text);
    got = show(ids), want = show(c.ids);
    return ids == c.ids;
  });
}

TEST_P(reference_test, ids_without_special_tokens) {
  check_all(GetParam(), "ids without special tokens", [](const auto& tok, const reference_case& c, std::string& got, std::string& want) {
    const auto ids = tok.encode(c.text, false);
    got = show(ids), want = show(c.ids_plain);
    return ids == c.ids_plain;
  });
}

TEST_P(reference_test, decode) {
  check_all(GetParam(), "decode", [](const auto& tok, const reference_case& c, std::string& got, std::string& want) {
    got = show(tok.decode(c.ids)), want = show(c.decoded);
    return got == want;
  });
}

TEST_P(reference_test, decode_without_clean_up) {
  check_all(GetParam(), "decode without clean-up", [](const auto& tok, const reference_case& c, std::string& got, std::string& want) {
    got = show(tok.decode(c.ids_plain, {.skip_special_tokens = false, .clean_up_tokenization_spaces = false}));
    want = show(c.decoded_raw);
    return got == want;
  });
}

TEST_P(reference_test, decode_skipping_special_tokens) {
  check_all(GetParam(), "decode skipping special tokens", [](const auto& tok, const reference_case& c, std::string& got, std::string& want) {
    got = show(tok.decode(c.ids, {.skip_special_tokens = true, .clean_up_tokenization_spaces = std::nullopt}));
    want = show(c.decoded_skip);
    return got == want;
  });
}

// Streaming: the pieces are whole UTF-8 and add up to the reference's raw decode.
TEST_P(reference_test, decode_stream) {
  check_all(GetParam(), "streaming decode", [](const auto& tok, const reference_case& c, std::string& got, std::string& want) {
    auto s = tok.stream();
    std::string all;
    bool whole = true;
    for (std::uint32_t id : c.ids_plain) {
      const std::string piece = s.step(id);
      whole = whole && kiln::text::detail::invalid_utf8_at(piece) == std::string::npos;
      all += piece;
    }
    all += s.finish();
    got = show(all) + (whole ? "" : " (a piece cut a character)");
    want = show(c.decoded_raw);
    return whole && all == c.decoded_raw;
  });
}

INSTANTIATE_TEST_SUITE_P(tokenizers, reference_test, ::testing::Values("llama3", "llama2", "bytelevel", "metaspace"),
                         [](const auto& info) { return std::string(info.param); });

TEST(reference_config, special_token_names_and_template) {
  const auto& l3 = *reference("llama3").tok;
  EXPECT_EQ(l3.config().bos_token, "<|begin_of_text|>");
  EXPECT_EQ(l3.bos_id(), 128000u);
  EXPECT_EQ(l3.eos_id(), 128001u);
  ASSERT_TRUE(l3.config().chat_template.has_value());
  EXPECT_NE(l3.config().chat_template->find("start_header_id"), std::string::npos);
  EXPECT_TRUE(l3.config().clean_up_tokenization_spaces);
  EXPECT_EQ(l3.vocab_size(), 128256u);

  const auto& l2 = *reference("llama2").tok;
  EXPECT_EQ(l2.bos_id(), 1u);
  EXPECT_EQ(l2.eos_id(), 2u);
  EXPECT_EQ(l2.unk_id(), 0u);
  EXPECT_EQ(l2.config().add_bos_token, true);
  EXPECT_EQ(l2.config().add_eos_token, false);
  EXPECT_FALSE(l2.config().clean_up_tokenization_spaces);
  EXPECT_EQ(l2.vocab_size(), 32000u);
  EXPECT_THROW(l2.decode(std::vector<std::uint32_t>{1, 32000}), kiln::text::vocabulary_error);
}

// Random text from many scripts (no special tokens) comes back exactly: ByteLevel and
// byte_fallback lose nothing, the Llama 2 decoder strips the space its normalizer added;
// streaming gives the same text in whole characters.
std::string random_text(std::mt19937_64& rng) {
  static const char32_t ranges[][2] = {{0x20, 0x7E}, {0x09, 0x0D}, {0xA0, 0x24F}, {0x370, 0x3FF}, {0x400, 0x4FF}, {0x590, 0x6FF},
                                       {0x900, 0x97F}, {0xE00, 0xE7F}, {0x1100, 0x11FF}, {0x2000, 0x206F}, {0x3040, 0x30FF},
                                       {0x4E00, 0x4FFF}, {0xAC00, 0xAD00}, {0x1F300, 0x1F6FF}, {0x1F900, 0x1F9FF}, {0x300, 0x36F}};
  std::string s;
  const int n = static_cast<int>(rng() % 60);
  for (int k = 0; k < n; ++k) {
    const auto& r = ranges[rng() % std::size(ranges)];
    const char32_t c = r[0] + static_cast<char32_t>(rng() % (r[1] - r[0] + 1));
    kiln::text::detail::append_utf8(s, c);
    if (rng() % 4 == 0) s += ' ';
  }
  return s;
}

TEST(reference_roundtrip, random_text_decodes_to_itself) {
  auto rng = kiln_test::rng();
  for (const char* name : {"llama3", "llama2"}) {
    const auto& tok = *reference(name).tok;
    int failures = 0;
    for (int k = 0; k < 300 && failures < 5; ++k) {
      const std::string text = random_text(rng);
      const auto ids = tok.encode(text, false);
      const std::string back = tok.decode(ids, {.skip_special_tokens = false, .clean_up_tokenization_spaces = false});
      auto s = tok.stream();
      std::string streamed;
      for (std::uint32_t id : ids) streamed += s.step(id);
      streamed += s.finish();
      if (back != text || streamed != text) {
        ++failures;
        ADD_FAILURE() << name << ": " << show(text) << " -> " << show(ids) << " -> " << show(back) << " / streamed " << show(streamed);
      }
    }
  }
}

// encode is const and may run on several threads at once (the word cache is shared).
TEST(reference_threads, concurrent_encodes_agree) {
  for (const char* name : {"llama3", "llama2"}) {
    const auto& set = reference(name);
    set.tok->clear_cache();
    std::vector<std::thread> threads;
    std::vector<int> wrong(4, 0);
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (std::size_t k = static_cast<std::size_t>(t); k < set.cases.size() * 2; k += 3) {
          const auto& c = set.cases[k % set.cases.size()];
          if (set.tok->encode(c.text, false) != c.ids_plain) ++wrong[static_cast<std::size_t>(t)];
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(wrong[static_cast<std::size_t>(t)], 0) << name << " thread " << t;
  }
}

}  // namespace

#endif  // KILN_TEXT_REFERENCE
