// tests/models/fixture_bounds.hpp — the tiny Llama and BitNet fixtures' expectations
// (tests/models/data/*_expected.safetensors: prompt, greedy ids, float64-reference logits)
// and their error bounds, for the tests that run them (llama_test.cpp, bitnet_test.cpp, and
// tensor-parallel over MPI: tests/dist/tensor_parallel_test.cpp). The bounds, which
// llama_test.cpp and bitnet_test.cpp derive in their comments:
//  - Llama: |got - want| <= 2e-4 (1 + |want|);
//  - BitNet: per logit, (rho + H u) max|xf| sum_i |E_vi| + 2 flip + u |logit|, with
//    rho = delta / 254 (the fixture's distance to an int8 tie, in code units) and flip the
//    fixture's first-order sum of the changes when activation codes round the other way.
// Needs KILN_MODELS_TEST_DATA (the data directory) and kiln::io.
#pragma once

#include <gtest/gtest.h>

#include <kiln/io/safetensors.hpp>
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln_test::fixtures {

using kiln::index_t;

inline const std::string data_dir = KILN_MODELS_TEST_DATA;

/// A fixture's prompt, greedy ids, reference logits [rows, vocab] (rows: every prompt
/// position, then every generated token but the last) and the bound of each logit.
struct expected {
  std::vector<std::int32_t> prompt, generated;
  std::vector<float> logits;
  std::vector<double> tol;
  index_t rows = 0, vocab = 0;

  /// prompt + every generated id but the last: the rows of logits.
  std::vector<std::int32_t> tokens() const {
    auto t = prompt;
    t.insert(t.end(), generated.begin(), generated.end() - 1);
    return t;
  }

  /// got [n, vocab] against rows [first, first + n), each logit within its bound (times
  /// scale: a looser check for f16 or int8 weights).
  ::testing::AssertionResult within(const std::vector<float>& got, index_t first, index_t n, double scale = 1.0) const {
    if (static_cast<index_t>(got.size()) != n * vocab) {
      return ::testing::AssertionFailure() << "got " << got.size() << " logits for " << n << " rows of " << vocab;
    }
    double worst = 0.0;  // largest |error| / bound
    index_t wr = 0, wv = 0;
    for (index_t r = 0; r < n; ++r) {
      for (index_t v = 0; v < vocab; ++v) {
        const std::size_t k = static_cast<std::size_t>((first + r) * vocab + v);
        const double err =
            std::fabs(double(got[static_cast<std::size_t>(r * vocab + v)]) - double(logits[k])) / (tol[k] * scale);
        if (!(err <= worst)) {
          worst = std::isnan(err) ? INFINITY : err;
          wr = first + r;
          wv = v;
        }
      }
    }
    if (worst <= 1.0) return ::testing::AssertionSuccess();
    const std::size_t k = static_cast<std::size_t>(wr * vocab + wv);
    return ::testing::AssertionFailure() << "position " << wr << ", logit " << wv << ": reference " << logits[k]
                                         << ", error " << worst * tol[k] * scale << " above the bound " << tol[k] * scale;
  }
};

/// The Llama fixture (tests/models/data/tiny_llama).
inline const expected& llama() {
  static const expected e = [] {
    kiln::context<kiln::cpu<>> c;
    const auto f = kiln::safetensors::open(data_dir + "/tiny_llama_expected.safetensors");
    expected r;
    r.prompt = f.load<std::int32_t>(c, "prompt").to_host();
    r.generated = f.load<std::int32_t>(c, "generated").to_host();
    const auto l = f.load<float>(c, "logits");
    r.rows = l.shape()[0];
    r.vocab = l.shape()[1];
    r.logits = l.to_host();
    r.tol.resize(r.logits.size());
    for (std::size_t k = 0; k < r.logits.size(); ++k) r.tol[k] = 2e-4 * (1.0 + std::fabs(double(r.logits[k])));
    return r;
  }();
  return e;
}

/// A BitNet fixture variant ("packed": tiny_bitnet, "master": tiny_bitnet_bf16,
/// "packed_int8": the int8 table).
inline const expected& bitnet(const std::string& name) {
  static std::map<std::string, expected> all;
  if (auto it = all.find(name); it != all.end()) return it->second;
  kiln::context<kiln::cpu<>> c;
  // sum_i |E_vi| of the embedding (bf16)
  const auto m = kiln::safetensors::open(data_dir + "/tiny_bitnet/model.safetensors");
  const auto emb = m.load<kiln::bfloat16>(c, "model.embed_tokens.weight");
  const index_t V = emb.shape()[0], H = emb.shape()[1];
  const auto eh = emb.to_host();
  std::vector<double> es(static_cast<std::size_t>(V), 0.0);
  for (index_t v = 0; v < V; ++v) {
    for (index_t i = 0; i < H; ++i) es[v] += std::fabs(double(float(eh[v * H + i])));
  }
  const auto f = kiln::safetensors::open(data_dir + "/tiny_bitnet_expected.safetensors");
  expected r;
  r.prompt = f.load<std::int32_t>(c, "prompt").to_host();
  r.generated = f.load<std::int32_t>(c, name + ".generated").to_host();
  const auto l = f.load<float>(c, name + ".logits");
  r.rows = l.shape()[0];
  r.vocab = l.shape()[1];
  r.logits = l.to_host();
  const auto flip = f.load<float>(c, name + ".flip").to_host();
  const auto xf_max = f.load<float>(c, name + ".xf_max").to_host();
  const double delta = f.load<float>(c, "delta").to_host()[0];
  const double u = std::ldexp(1.0, -24), rho = delta / 254.0;
  r.tol.resize(r.logits.size());
  for (index_t t = 0; t < r.rows; ++t) {
    for (index_t v = 0; v < r.vocab; ++v) {
      const std::size_t k = static_cast<std::size_t>(t * r.vocab + v);
      const double e = name == "packed_int8" ? es[v] * (1.0 + 1.0 / 127.0) : es[v];
      r.tol[k] = (rho + double(H) * u) * double(xf_max[t]) * e + 2.0 * double(flip[k]) + u * std::fabs(double(r.logits[k]));
    }
  }
  return all.emplace(name, std::move(r)).first->second;
}

}  // namespace kiln_test::fixtures
