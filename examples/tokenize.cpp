// examples/tokenize.cpp — text to token ids (or ids to text) with a tokenizer.json.
//
//   tokenize PATH [--no-special] [--decode] < input
//
// PATH is a model directory (tokenizer.json, maybe tokenizer_config.json) or a
// tokenizer.json. Standard input is the whole text, newlines included; the ids go to
// standard output on one line, separated by spaces, with the post-processor's special
// tokens unless --no-special. With --decode, standard input holds ids separated by spaces
// or commas, and standard output gets the decoded text exactly (--no-special then leaves
// the special tokens out of it).
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <kiln/text/tokenizer.hpp>

namespace {

int usage(const char* why) {
  std::fprintf(stderr, "tokenize: %s\nusage: tokenize PATH [--no-special] [--decode] < input\n", why);
  return 2;
}

// Ids separated by spaces, commas, tabs or newlines; anything else is an error.
std::vector<std::uint32_t> parse_ids(const std::string& s) {
  std::vector<std::uint32_t> ids;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == ',' || c == '\n' || c == '\r' || c == '\t') {
      ++i;
      continue;
    }
    if (c < '0' || c > '9') throw std::runtime_error("--decode: '" + std::string(1, c) + "' at byte " + std::to_string(i) + " is not part of an id");
    std::uint64_t v = 0;
    const std::size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
      if (v > 0xFFFFFFFFu) throw std::runtime_error("--decode: id at byte " + std::to_string(start) + " is too large");
      ++i;
    }
    ids.push_back(static_cast<std::uint32_t>(v));
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  bool special = true, decode = false;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    if (a == "--no-special") special = false;
    else if (a == "--decode") decode = true;
    else if (a == "--help" || a == "-h") {
      std::printf("usage: tokenize PATH [--no-special] [--decode] < input\n");
      return 0;
    } else if (a.starts_with("--")) return usage(("unknown option " + a).c_str());
    else if (path.empty()) path = a;
    else return usage("more than one PATH");
  }
  if (path.empty()) return usage("no PATH (a model directory or a tokenizer.json)");
  try {
    const auto tok = kiln::text::tokenizer::from_pretrained(path);
    std::ios::sync_with_stdio(false);
    const std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
    if (decode) {
      const std::string text = tok.decode(parse_ids(input), {.skip_special_tokens = !special, .clean_up_tokenization_spaces = std::nullopt});
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
      std::string line;
      for (std::uint32_t id : tok.encode(input, special)) {
        if (!line.empty()) line += ' ';
        line += std::to_string(id);
      }
      line += '\n';
      std::fwrite(line.data(), 1, line.size(), stdout);
    }
    return std::fflush(stdout) == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenize: %s\n", e.what());
    return 1;
  }
}
