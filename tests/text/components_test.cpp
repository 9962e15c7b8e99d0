// tests/text/components_test.cpp — each tokenizer.json component on hand-written snippets:
// normalizers, pre-tokenizers, the BPE model, added tokens, post-processors, decoders,
// streaming decode, tokenizer_config.json and the errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <kiln/text/tokenizer.hpp>

namespace {

using nlohmann::json;
using ids_t = std::vector<std::uint32_t>;
namespace kt = kiln::text;

std::string normalize(const json& j, const std::string& s) {
  return kt::detail::make_normalizer(j, "kiln::text: test.json: normalizer")->normalize(s);
}

std::vector<std::string> pre_tokenize(const json& j, const std::string& s, bool at_start = true) {
  std::vector<kt::piece> pieces{{s, at_start}};
  kt::detail::make_pre_tokenizer(j, "kiln::text: test.json: pre_tokenizer")->pre_tokenize(pieces);
  std::vector<std::string> out;
  for (auto& p : pieces) out.push_back(p.text);
  return out;
}

std::vector<std::string> decode_chain(const json& j, std::vector<std::string> tokens) {
  kt::detail::make_decoder(j, "kiln::text: test.json: decoder")->decode_chain(tokens);
  return tokens;
}

// A character-level BPE over a..z, space and a few merges; the rest of the file is given.
json char_model() {
  json vocab = json::object();
  std::uint32_t id = 0;
  for (char c = 'a'; c <= 'z'; ++c) vocab[std::string(1, c)] = id++;  // a=0 .. z=25
  vocab[" "] = id++;                                                 // 26
  vocab["ab"] = id++;                                                // 27
  vocab["bc"] = id++;                                                // 28
  vocab["abc"] = id++;                                               // 29
  vocab["<unk>"] = id++;                                             // 30
  return {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b", "b c", "ab c"}}, {"unk_token", "<unk>"}};
}

kt::tokenizer make(json j) {
  if (!j.contains("model")) j["model"] = char_model();
  return kt::tokenizer::from_json(j.dump(), "test.json");
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const kiln::error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- normalizers ----------------------------------------------------------------------

TEST(normalizer, unicode_forms) {
  EXPECT_EQ(normalize({{"type", "NFC"}}, "e\u0301t\u00e9"), "\u00e9t\u00e9");
  EXPECT_EQ(normalize({{"type", "NFD"}}, "\u00e9"), "e\u0301");
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\ufb01 \u2460 e\u0301"), "fi 1 \u00e9");
  EXPECT_EQ(normalize({{"type", "NFKD"}}, "\ufb01\u00e9"), "fie\u0301");
  EXPECT_EQ(normalize({{"type", "NFC"}}, "plain ascii"), "plain ascii");
}

TEST(normalizer, lowercase_strip_accents_prepend) {
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "HeLLo \u00c0\u00c9 \u0394"), "hello \u00e0\u00e9 \u03b4");
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "\u039f\u0394\u039f\u03a3 \u03a3\u0391"), "\u03bf\u03b4\u03bf\u03c2 \u03c3\u03b1");  // final sigma
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "\u0130"), "i\u0307");
  const json nfd_strip = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}}}}};
  EXPECT_EQ(normalize(nfd_strip, "caf\u00e9 na\u00efve"), "cafe naive");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "\u2581"}}, "hi"), "\u2581hi");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "\u2581"}}, ""), "");
}

TEST(normalizer, strip) {
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, " \t a b \n"), "a b \n");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}}, " a b \u3000"), " a b");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, "   "), "");
}

TEST(normalizer, replace_string_and_regex) {
  EXPECT_EQ(normalize({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}, "a b  c"), "a\u2581b\u2581\u2581c");
  EXPECT_EQ(normalize({{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}}, "a \t\n b\u00a0c"), "a b c");
  EXPECT_EQ(normalize({{"type", "Replace"}, {"pattern", {{"String", "a.b"}}}, {"content", "X"}}, "a.b axb"), "X axb");
  const json seq = {{"type", "Sequence"},
                    {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}}, {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}};
  EXPECT_EQ(normalize(seq, "Hey friend"), "\u2581Hey\u2581friend");
}

// ---- pre-tokenizers -------------------------------------------------------------------

json split(const char* behavior, const char* regex, bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", behavior}, {"invert", invert}};
}

using strings = std::vector<std::string>;

TEST(pre_tokenizer, split_behaviors) {
  EXPECT_EQ(pre_tokenize(split("Removed", "\\d+"), "ab12cd345"), (strings{"ab", "cd"}));
  EXPECT_EQ(pre_tokenize(split("Isolated", "\\d+"), "ab12cd345"), (strings{"ab", "12", "cd", "345"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithPrevious", "\\d+"), "ab12cd345"), (strings{"ab12", "cd345"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithNext", "\\d+"), "ab12cd345"), (strings{"ab", "12cd", "345"}));
  EXPECT_EQ(pre_tokenize(split("Contiguous", "\\d"), "ab12cd3"), (strings{"ab", "12", "cd", "3"}));
  EXPECT_EQ(pre_tokenize(split("Isolated", "\\d"), "ab12cd3"), (strings{"ab", "1", "2", "cd", "3"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithNext", "\\d"), "12ab"), (strings{"1", "2ab"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithPrevious", "\\d"), "12ab3"), (strings{"1", "2", "ab3"}));
  // invert: the matches are what is kept
  EXPECT_EQ(pre_tokenize(split("Removed", "\\d+", true), "ab12cd345"), (strings{"12", "345"}));
  const json by_string = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}, {"invert", false}};
  EXPECT_EQ(pre_tokenize(by_string, "a b  c"), (strings{"a", "b", "c"}));
}

TEST(pre_tokenizer, split_regex_unicode_and_lookahead) {
  EXPECT_EQ(pre_tokenize(split("Isolated", "\\s+(?!\\S)|\\s+"), "a   b"), (strings{"a", "  ", " ", "b"}));
  EXPECT_EQ(pre_tokenize(split("Isolated", "\\p{L}+"), "\u65e5\u672c1\u00e9t\u00e9"), (strings{"\u65e5\u672c", "1", "\u00e9t\u00e9"}));
  EXPECT_EQ(pre_tokenize(split("Isolated", "(?i:'s|'t)"), "IT'S it's"), (strings{"IT", "'S", " it", "'s"}));
  EXPECT_EQ(pre_tokenize(split("Isolated", "\\p{N}{1,3}"), "1234567"), (strings{"123", "456", "7"}));
}

TEST(pre_tokenizer, byte_level) {
  const json bl = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(pre_tokenize(bl, "Hello world"), (strings{"\u0120Hello", "\u0120world"}));
  const json no_prefix = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  EXPECT_EQ(pre_tokenize(no_prefix, "Hello world's 42!!\n"), (strings{"Hello", "\u0120world", "'s", "\u012042", "!!", "\u010a"}));
  const json no_regex = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  EXPECT_EQ(pre_tokenize(no_regex, "\u00e9 x"), (strings{"\u00c3\u00a9\u0120x"}));
}

TEST(pre_tokenizer, metaspace) {
  const auto ms = [](const char* scheme, bool split) {
    return json{{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", scheme}, {"split", split}};
  };
  EXPECT_EQ(pre_tokenize(ms("always", true), "Hey friend"), (strings{"\u2581Hey", "\u2581friend"}));
  EXPECT_EQ(pre_tokenize(ms("never", true), "Hey friend"), (strings{"Hey", "\u2581friend"}));
  EXPECT_EQ(pre_tokenize(ms("first", true), "Hey friend", true), (strings{"\u2581Hey", "\u2581friend"}));
  EXPECT_EQ(pre_tokenize(ms("first", true), "Hey friend", false), (strings{"Hey", "\u2581friend"}));
  EXPECT_EQ(pre_tokenize(ms("always", false), "Hey  friend"), (strings{"\u2581Hey\u2581\u2581friend"}));
  // the older spelling: add_prefix_space instead of prepend_scheme
  const json legacy = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", false}};
  EXPECT_EQ(pre_tokenize(legacy, "a b"), (strings{"a", "\u2581b"}));
}

TEST(pre_tokenizer, digits_whitespace_punctuation_sequence) {
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", true}}, "a123b"), (strings{"a", "1", "2", "3", "b"}));
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", false}}, "a123b4"), (strings{"a", "123", "b", "4"}));
  EXPECT_EQ(pre_tokenize({{"type", "Whitespace"}}, "Hey, friend!  \u00e7a\tva"), (strings{"Hey", ",", "friend", "!", "\u00e7a", "va"}));
  EXPECT_EQ(pre_tokenize({{"type", "WhitespaceSplit"}}, " a\u3000b\n c "), (strings{"a", "b", "c"}));
  EXPECT_EQ(pre_tokenize({{"type", "Punctuation"}, {"behavior", "Isolated"}}, "a,b!?"), (strings{"a", ",", "b", "!", "?"}));
  const json seq = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Whitespace"}}, {{"type", "Digits"}, {"individual_digits", true}}}}};
  EXPECT_EQ(pre_tokenize(seq, "ab 12"), (strings{"ab", "1", "2"}));
}

// ---- the BPE model --------------------------------------------------------------------

TEST(bpe, merges_by_rank_in_both_forms) {
  auto t = make({});
  EXPECT_EQ(t.encode("abc"), (ids_t{29}));
  EXPECT_EQ(t.encode("bca"), (ids_t{28, 0}));
  EXPECT_EQ(t.encode("abab"), (ids_t{27, 27}));
  json pairs = char_model();
  pairs["merges"] = json::array({{"a", "b"}, {"b", "c"}, {"ab", "c"}});
  EXPECT_EQ(make({{"model", pairs}}).encode("abc"), (ids_t{29}));
  // ranks decide, not position: "b c" outranks nothing here, so "bcab" -> bc, ab
  EXPECT_EQ(t.encode("bcab"), (ids_t{28, 27}));
}

// Words longer than the cache takes are cut where no merge crosses; the result is the same.
TEST(bpe, long_words) {
  auto t = make({});
  std::string abc, aab;
  ids_t abc_ids, aab_ids;
  for (int k = 0; k < 40; ++k) {
    abc += "abc";
    abc_ids.push_back(29);
    aab += "aab";
    aab_ids.insert(aab_ids.end(), {0, 27});
  }
  EXPECT_EQ(t.encode(abc), abc_ids);
  EXPECT_EQ(t.encode(aab), aab_ids);
  EXPECT_EQ(t.encode("bc" + abc + "\u00e9a"), [&] {
    ids_t v{28};
    v.insert(v.end(), abc_ids.begin(), abc_ids.end());
    v.insert(v.end(), {30, 0});
    return v;
  }());
}

TEST(bpe, unknown_characters) {
  auto t = make({});
  EXPECT_EQ(t.encode("ab\u00e9\u00e9"), (ids_t{27, 30, 30}));
  json fused = char_model();
  fused["fuse_unk"] = true;
  EXPECT_EQ(make({{"model", fused}}).encode("ab\u00e9\u00e9c"), (ids_t{27, 30, 2}));
  json no_unk = char_model();
  no_unk.erase("unk_token");
  EXPECT_EQ(make({{"model", no_unk}}).encode("a\u00e9b"), (ids_t{27}));  // dropped, then merged
}

TEST(bpe, ignore_merges) {
  json m = char_model();
  m["merges"] = {"a b"};
  EXPECT_EQ(make({{"model", m}}).encode("abc"), (ids_t{27, 2}));
  m["ignore_merges"] = true;
  EXPECT_EQ(make({{"model", m}}).encode("abc"), (ids_t{29}));
}

TEST(bpe, byte_fallback) {
  json m = char_model();
  m["byte_fallback"] = true;
  m["vocab"]["<0xC3>"] = 31;
  m["vocab"]["<0xA9>"] = 32;
  auto t = make({{"model", m}, {"decoder", {{"type", "ByteFallback"}}}});
  EXPECT_EQ(t.encode("a\u00e9"), (ids_t{0, 31, 32}));
  EXPECT_EQ(t.encode("\u00e8"), (ids_t{30}));  // 0xA8 is not in the vocabulary: unk
  EXPECT_EQ(t.decode(ids_t{0, 31, 32}), "a\u00e9");
  EXPECT_EQ(t.decode(ids_t{31, 0}), "\ufffda");  // an incomplete character: U+FFFD per byte
}

TEST(bpe, subword_prefix_and_word_suffix) {
  const json prefix = {{"type", "BPE"}, {"vocab", {{"a", 0}, {"##b", 1}, {"ab", 2}, {"##c", 3}, {"abc", 4}}},
                       {"merges", {"a ##b", "ab ##c"}}, {"continuing_subword_prefix", "##"}};
  EXPECT_EQ(make({{"model", prefix}}).encode("abc"), (ids_t{4}));
  EXPECT_EQ(make({{"model", prefix}}).encode("ab"), (ids_t{2}));
  const json suffix = {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b</w>", 1}, {"ab</w>", 2}, {"b", 3}}}, {"merges", {"a b</w>"}},
                       {"end_of_word_suffix", "</w>"}};
  EXPECT_EQ(make({{"model", suffix}}).encode("ab"), (ids_t{2}));
  EXPECT_EQ(make({{"model", suffix}, {"pre_tokenizer", {{"type", "WhitespaceSplit"}}}}).encode("b ab"), (ids_t{1, 2}));
}

// ---- added tokens ---------------------------------------------------------------------

json added(const char* content, int id, bool special, json extra = json::object()) {
  json t = {{"content", content}, {"id", id}, {"special", special}, {"normalized", false}};
  t.update(extra);
  return t;
}

TEST(added_tokens, split_before_the_pipeline) {
  auto t = make({{"added_tokens", {added("<s>", 40, true), added("<s>x", 41, true)}}});
  EXPECT_EQ(t.encode("ab<s>c<s>xab"), (ids_t{27, 40, 2, 41, 27}));  // longest match wins
  EXPECT_EQ(t.encode("<s"), (ids_t{30, 18}));                        // '<' is unknown, 's' = 18
  EXPECT_EQ(t.decode(ids_t{27, 40, 2}), "ab <s> c");                 // no decoder: joined by spaces
  EXPECT_EQ(t.decode(ids_t{27, 40, 2}, {.skip_special_tokens = true, .clean_up_tokenization_spaces = std::nullopt}), "ab c");
  EXPECT_EQ(t.token_to_id("<s>x"), 41u);
  EXPECT_EQ(t.id_to_token(40), "<s>");
  EXPECT_TRUE(t.is_special(40));
  EXPECT_EQ(t.vocab_size(), 42u);
}

TEST(added_tokens, lstrip_rstrip_single_word) {
  auto t = make({{"added_tokens", {added("<m>", 40, true, {{"lstrip", true}}), added("<n>", 41, true, {{"rstrip", true}}),
                                   added("ab", 42, false, {{"single_word", true}})}}});
  EXPECT_EQ(t.encode("a  <m>b"), (ids_t{0, 40, 1}));
  EXPECT_EQ(t.encode("a<n>  b"), (ids_t{0, 41, 1}));
  EXPECT_EQ(t.encode("a <m> b"), (ids_t{0, 40, 26, 1}));
  EXPECT_EQ(t.encode("ab c"), (ids_t{42, 26, 2}));
  EXPECT_EQ(t.encode("cab"), (ids_t{2, 27}));  // inside a word: the model's ab
  // not special: kept when special tokens are skipped
  EXPECT_EQ(t.decode(ids_t{42, 40}, {.skip_special_tokens = true, .clean_up_tokenization_spaces = std::nullopt}), "ab");
}

TEST(added_tokens, normalized_tokens_match_the_normalized_text) {
  auto t = make({{"normalizer", {{"type", "Lowercase"}}},
                 {"added_tokens", {added("HI", 40, false, {{"normalized", true}}), added("OK", 41, true)}}});
  EXPECT_EQ(t.encode("Hi c"), (ids_t{40, 26, 2}));
  EXPECT_EQ(t.encode("OK ok"), (ids_t{41, 26, 14, 10}));  // raw match first, then lower-cased text
}

// ---- post-processors ------------------------------------------------------------------

TEST(post_processor, template_bert_roberta_sequence) {
  const json tp = {{"type", "TemplateProcessing"},
                   {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                               {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
                   {"pair", json::array()},
                   {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {40}}, {"tokens", {"<s>"}}}},
                                       {"</s>", {{"id", "</s>"}, {"ids", {41}}, {"tokens", {"</s>"}}}}}}};
  auto t = make({{"post_processor", tp}});
  EXPECT_EQ(t.encode("ab"), (ids_t{40, 27, 41}));
  EXPECT_EQ(t.encode("ab", false), (ids_t{27}));
  EXPECT_EQ(t.encode(""), (ids_t{40, 41}));
  auto bert = make({{"post_processor", {{"type", "BertProcessing"}, {"sep", {"[SEP]", 7}}, {"cls", {"[CLS]", 5}}}}});
  EXPECT_EQ(bert.encode("c"), (ids_t{5, 2, 7}));
  auto roberta = make({{"post_processor", {{"type", "RobertaProcessing"}, {"sep", {"</s>", 2}}, {"cls", {"<s>", 0}}}}});
  EXPECT_EQ(roberta.encode("c"), (ids_t{0, 2, 2}));
  auto seq = make({{"post_processor", {{"type", "Sequence"}, {"processors", {{{"type", "ByteLevel"}, {"trim_offsets", false}}, tp}}}}});
  EXPECT_EQ(seq.encode("c"), (ids_t{40, 2, 41}));
  EXPECT_EQ(make({{"post_processor", {{"type", "ByteLevel"}}}}).encode("c"), (ids_t{2}));
}

// ---- decoders -------------------------------------------------------------------------

TEST(decoder, each_type) {
  EXPECT_EQ(decode_chain({{"type", "ByteLevel"}}, {"\u0120hello", "\u0120w", "\u00c3\u00a9", "<|x|>"}), (strings{" hello w\u00e9<|x|>"}));
  EXPECT_EQ(decode_chain({{"type", "ByteLevel"}}, {"\u00c3"}), (strings{"\ufffd"}));
  EXPECT_EQ(decode_chain({{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}}, {"\u2581a\u2581", "b"}), (strings{" a ", "b"}));
  EXPECT_EQ(decode_chain({{"type", "Replace"}, {"pattern", {{"Regex", "x+"}}}, {"content", "-"}}, {"axxbx"}), (strings{"a-b-"}));
  EXPECT_EQ(decode_chain({{"type", "ByteFallback"}}, {"<0xE2>", "<0x9C>", "<0x93>", "x", "<0xC3>", "y"}), (strings{"\u2713", "x", "\ufffd", "y"}));
  EXPECT_EQ(decode_chain({{"type", "Fuse"}}, {"a", " b", "c"}), (strings{"a bc"}));
  EXPECT_EQ(decode_chain({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}, {"  a", " b ", "c"}), (strings{" a", "b ", "c"}));
  EXPECT_EQ(decode_chain({{"type", "Strip"}, {"content", "x"}, {"start", 0}, {"stop", 2}}, {"axxx"}), (strings{"ax"}));
  const json ms = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(decode_chain(ms, {"\u2581Hey", "\u2581friend", "!"}), (strings{"Hey", " friend", "!"}));
  const json ms_never = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "never"}};
  EXPECT_EQ(decode_chain(ms_never, {"\u2581Hey", "\u2581friend"}), (strings{" Hey", " friend"}));
  EXPECT_EQ(decode_chain({{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}, {"hel", "##lo", "world", "."}),
            (strings{"hel", "lo", " world", "."}));
  EXPECT_EQ(decode_chain({{"type", "BPEDecoder"}, {"suffix", "</w>"}}, {"hel", "lo</w>", "you</w>"}), (strings{"hel", "lo ", "you"}));
}

TEST(decoder, llama2_style_sequence) {
  const json seq = {{"type", "Sequence"},
                    {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}}, {{"type", "Fuse"}}, {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  EXPECT_EQ(decode_chain(seq, {"\u2581Hello", "\u2581world", "<0xE2>", "<0x9C>", "<0x93>"}), (strings{"Hello world\u2713"}));
}

TEST(decoder, clean_up_tokenization_spaces) {
  auto t = make({});
  t.load_config_json(R"({"clean_up_tokenization_spaces": true})");
  // ids of "a", " ", "c" ... the no-decoder join puts spaces between tokens
  EXPECT_EQ(t.decode(ids_t{0}), "a");
  EXPECT_EQ(kt::detail::clean_up_tokenization("I do n't know . Is it ? yes , it 's"), "I don't know. Is it? yes, it's");
}

// ---- streaming decode -----------------------------------------------------------------

TEST(decode_stream, holds_back_incomplete_characters) {
  json m = char_model();
  m["byte_fallback"] = true;
  m["vocab"]["<0xE2>"] = 31;
  m["vocab"]["<0x9C>"] = 32;
  m["vocab"]["<0x93>"] = 33;
  m["vocab"]["\u2581"] = 34;
  const json dec = {{"type", "Sequence"},
                    {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}}, {{"type", "Fuse"}}, {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  auto t = make({{"model", m}, {"decoder", dec}});
  auto s = t.stream();
  EXPECT_EQ(s.step(34), "");  // " " at the start is stripped
  EXPECT_EQ(s.step(0), "a");
  EXPECT_EQ(s.step(34), " ");
  EXPECT_EQ(s.step(31), "");  // the first byte of a check mark
  EXPECT_EQ(s.step(32), "");  // two of its three bytes
  EXPECT_EQ(s.step(33), "\u2713");
  EXPECT_EQ(s.step(1), "b");
  EXPECT_EQ(s.step(31), "");
  EXPECT_EQ(s.finish(), "\ufffd");
}

// ---- tokenizer_config.json ------------------------------------------------------------

TEST(config, token_names_in_both_forms_and_templates) {
  auto t = make({{"added_tokens", {added("<s>", 40, true), added("</s>", 41, true)}}});
  t.load_config_json(R"({"bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false}, "eos_token": "</s>",
                         "pad_token": null, "add_bos_token": true, "add_eos_token": false,
                         "chat_template": [{"name": "default", "template": "{{ x }}"}, {"name": "tool_use", "template": "t"}]})");
  EXPECT_EQ(t.config().bos_token, "<s>");
  EXPECT_EQ(t.bos_id(), 40u);
  EXPECT_EQ(t.eos_id(), 41u);
  EXPECT_FALSE(t.pad_id().has_value());
  EXPECT_EQ(t.config().add_bos_token, true);
  EXPECT_EQ(t.config().add_eos_token, false);
  EXPECT_EQ(t.config().chat_template, "{{ x }}");
  EXPECT_EQ(t.config().chat_templates.at("tool_use"), "t");
  t.load_config_json(R"({"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"})");
  EXPECT_EQ(t.config().chat_template, "{% for m in messages %}{{ m.content }}{% endfor %}");
}

// ---- errors ---------------------------------------------------------------------------

TEST(errors, name_the_file_and_the_component) {
  EXPECT_EQ(error_of([] { make({{"pre_tokenizer", {{"type", "Foo"}}}}); }),
            "kiln::text: test.json: pre_tokenizer: unknown pre_tokenizer type 'Foo'");
  EXPECT_EQ(error_of([] { make({{"normalizer", {{"type", "Bar"}}}}); }), "kiln::text: test.json: normalizer: unknown normalizer type 'Bar'");
  EXPECT_EQ(error_of([] { make({{"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "Fuse"}}, {{"type", "Baz"}}}}}}}); }),
            "kiln::text: test.json: decoders[1]: unknown decoder type 'Baz'");
  EXPECT_EQ(error_of([] { make({{"post_processor", {{"type", "Qux"}}}}); }),
            "kiln::text: test.json: post_processor: unknown post_processor type 'Qux'");
  EXPECT_EQ(error_of([] { make({{"normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}}}}); }),
            "kiln::text: test.json: normalizer: unsupported normalizer type 'Precompiled'");
  EXPECT_EQ(error_of([] { make({{"model", {{"type", "WordPiece"}, {"vocab", json::object()}}}}); }),
            "kiln::text: test.json: model: unsupported model type 'WordPiece' (kiln::text reads BPE models)");
  EXPECT_NE(error_of([] { make({{"pre_tokenizer", split("Isolated", "(unclosed")}}); }).find("pre_tokenizer 'Split': regex '(unclosed' does not compile"),
            std::string::npos);
  json bad_merge = char_model();
  bad_merge["merges"] = {"a b", "q zz"};
  EXPECT_EQ(error_of([&] { make({{"model", bad_merge}}); }),
            "kiln::text: test.json: model 'BPE': merge 1 ('q' 'zz') names a token outside the vocabulary");
}

TEST(errors, bad_json_files_ids_and_text) {
  EXPECT_NE(error_of([] { kt::tokenizer::from_json("{\"model\": ", "broken.json"); }).find("kiln::text: broken.json: bad JSON"), std::string::npos);
  EXPECT_THROW(kt::tokenizer::from_json("{oops", "x.json"), kt::tokenizer_error);
  EXPECT_EQ(error_of([] { kt::tokenizer::from_pretrained("/nonexistent/model"); }),
            "kiln::text: /nonexistent/model: cannot open the file");
  auto t = make({});
  EXPECT_THROW(t.decode(ids_t{0, 999}), kt::vocabulary_error);
  EXPECT_THROW(t.decode(ids_t{0, 999}), kiln::index_error);
  EXPECT_EQ(error_of([&] { t.decode(ids_t{999}); }), "kiln::text: test.json: id 999 is outside the vocabulary (size 31)");
  EXPECT_EQ(error_of([&] { t.encode("ab\xff"); }), "kiln::text: test.json: encode: the text is not valid UTF-8 (byte 2)");
  EXPECT_THROW(t.load_config_json("[1, 2", "tokenizer_config.json"), kt::tokenizer_error);
}

}  // namespace
