// tests/ops/sampling/stop_test.cpp — generation's stop conditions: kiln::text::eos_token_ids
// (generation_config.json before config.json, an int or a list, errors naming the file)
// and kiln::text::stop_strings (matches across pieces, the held-back tail, the first of
// several, nothing shown after a stop).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <unistd.h>  // getpid
#include <fstream>
#include <string>
#include <vector>

#include <kiln/text/eos.hpp>
#include <kiln/text/stop_strings.hpp>

namespace {

struct temp_dir {
  std::filesystem::path path;
  explicit temp_dir(const std::string& name) : path(std::filesystem::temp_directory_path() / name) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
  void write(const std::string& file, const std::string& text) const { std::ofstream(path / file) << text; }
};

}  // namespace

TEST(eos_token_ids, generation_config_first_then_config_int_or_list) {
  temp_dir d("kiln_eos_test_" + std::to_string(::getpid()));
  EXPECT_TRUE(kiln::text::eos_token_ids(d.path).empty());
  d.write("config.json", R"({"model_type": "llama", "eos_token_id": 2})");
  EXPECT_EQ(kiln::text::eos_token_ids(d.path), (std::vector<std::int32_t>{2}));
  d.write("generation_config.json", R"({"eos_token_id": [128001, 128008, 128009]})");
  EXPECT_EQ(kiln::text::eos_token_ids(d.path), (std::vector<std::int32_t>{128001, 128008, 128009}));
  d.write("generation_config.json", R"({"do_sample": true})");  // says nothing: config.json's
  EXPECT_EQ(kiln::text::eos_token_ids(d.path), (std::vector<std::int32_t>{2}));
  d.write("generation_config.json", R"({"eos_token_id": "</s>"})");
  try {
    (void)kiln::text::eos_token_ids(d.path);
    ADD_FAILURE() << "no error for a string eos_token_id";
  } catch (const kiln::text::tokenizer_error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: eos_token_id"), std::string::npos) << e.what();
  }
  d.write("generation_config.json", "{not json");
  EXPECT_THROW((void)kiln::text::eos_token_ids(d.path), kiln::text::tokenizer_error);
}

TEST(stop_strings, match_across_pieces_and_hold_back_prefixes) {
  kiln::text::stop_strings s({"\nUser:", "###"});
  std::string shown;
  for (const char* piece : {"Hello", " wor", "ld.\n", "Us", "er", ": more"}) {
    shown += s.push(piece);
    if (s.stopped()) break;
  }
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.matched(), "\nUser:");
  EXPECT_EQ(shown, "Hello world.");
  EXPECT_EQ(s.push("after"), "");
  EXPECT_EQ(s.finish(), "");
}

TEST(stop_strings, a_prefix_that_does_not_complete_is_shown_later) {
  kiln::text::stop_strings s({"###"});
  EXPECT_EQ(s.push("a #"), "a ");
  EXPECT_EQ(s.push("#"), "");
  EXPECT_EQ(s.push("b"), "##b");
  EXPECT_EQ(s.push("##"), "");
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.finish(), "##");
  // the earliest of several in one piece; no stop strings: everything at once
  kiln::text::stop_strings two({"bb", "a"});
  EXPECT_EQ(two.push("xxbbya"), "xx");
  EXPECT_EQ(two.matched(), "bb");
  kiln::text::stop_strings none;
  EXPECT_EQ(none.push("text"), "text");
  EXPECT_THROW(kiln::text::stop_strings({""}), kiln::text::tokenizer_error);
}
