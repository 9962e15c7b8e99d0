// examples/transformer.cpp — greedy generation with a Llama-architecture checkpoint
// (Hugging Face directory: config.json + *.safetensors), the decoder of
// kiln/models/llama.hpp. Token ids in, token ids out (no tokenizer).
//
//   transformer MODEL_DIR --ids 1,15043,29892 --steps 32 [--backend cpu|vulkan]
//               [--weights f32|f16|bf16|int8|int4] [--threads N] [--max-len N] [--logits FILE]
//
// Prints the generated ids on one line, then prefill and decode tokens/s. --logits FILE
// writes one row of vocab_size little-endian float32 logits per generated token: row i
// holds the logits that chose token i (row 0: the prompt's last position). --weights
// picks the dtype the weights are kept in (default f32; converted at load from the
// file's dtype; int8 and int4 quantize the projections and the LM head at load, the
// embedding and norms stay f32); activations and the KV cache are float32.
#include <kiln/kiln.hpp>
#include <kiln/models/llama.hpp>
#ifdef KILN_EXAMPLE_VULKAN
#include <kiln/vulkan.hpp>
#endif

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct args {
  std::string dir, backend = "cpu", weights = "f32", logits;
  std::vector<std::int32_t> ids;
  long steps = 32, threads = 0, max_len = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "transformer: " << why << "\n"
            << "usage: transformer MODEL_DIR --ids 1,15043,29892 --steps 32 [--backend cpu|vulkan]\n"
               "                   [--weights f32|f16|bf16|int8|int4] [--threads N] [--max-len N] [--logits FILE]\n";
  std::exit(2);
}

long number(const std::string& flag, const std::string& s) {
  try {
    std::size_t used = 0;
    const long v = std::stol(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  usage(flag + " needs an integer, got '" + s + "'");
}

args parse(int argc, char** argv) {
  args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(f + " needs a value");
      return argv[++i];
    };
    if (f == "--ids") {
      std::stringstream ss(value());
      for (std::string t; std::getline(ss, t, ',');) {
        const long v = number("--ids", t);
        if (v < 0 || v > INT32_MAX) usage("token id " + t + " is out of range");
        a.ids.push_back(static_cast<std::int32_t>(v));
      }
    } else if (f == "--steps") {
      a.steps = number(f, value());
    } else if (f == "--backend") {
      a.backend = value();
    } else if (f == "--weights") {
      a.weights = value();
    } else if (f == "--threads") {
      a.threads = number(f, value());
    } else if (f == "--max-len") {
      a.max_len = number(f, value());
    } else if (f == "--logits") {
      a.logits = value();
    } else if (f == "--help" || f == "-h") {
      usage("greedy generation with a Llama checkpoint");
    } else if (!f.empty() && f[0] == '-') {
      usage("unknown option " + f);
    } else if (a.dir.empty()) {
      a.dir = f;
    } else {
      usage("more than one model directory");
    }
  }
  if (a.dir.empty()) usage("no model directory");
  if (a.ids.empty()) usage("no prompt: give --ids");
  if (a.steps < 1) usage("--steps must be at least 1");
  if (a.threads < 0 || a.max_len < 0) usage("--threads and --max-len must not be negative");
  return a;
}

template <class W, class B>
int run(const kiln::context<B>& ctx, const args& a) {
  using clock = std::chrono::steady_clock;
  kiln::llama::load_options lo;
  lo.max_len = a.max_len > 0 ? a.max_len : static_cast<kiln::index_t>(a.ids.size()) + a.steps;
  if (a.weights == "int8") lo.quant = kiln::llama::weight_quant::int8;
  if (a.weights == "int4") lo.quant = kiln::llama::weight_quant::int4;
  const auto t0 = clock::now();
  auto m = kiln::llama::model<W, B>::load(ctx, a.dir, lo);
  const auto t1 = clock::now();
  std::ofstream out;
  if (!a.logits.empty()) {
    out.open(a.logits, std::ios::binary | std::ios::trunc);
    if (!out) throw kiln::error("transformer: cannot write " + a.logits);
  }
  double prefill_s = 0.0, decode_s = 0.0;
  auto last = clock::now();
  const auto ids = m.generate(a.ids, a.steps, [&](kiln::index_t i, const kiln::tensor<float, B>& logits) {
    const auto h = logits.to_host();  // waits for the step's kernels
    const double dt = std::chrono::duration<double>(clock::now() - last).count();
    (i == 0 ? prefill_s : decode_s) += dt;
    if (out.is_open()) out.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size() * sizeof(float)));
    last = clock::now();  // the file write is not the model's time
  });
  if (out.is_open() && !out.flush()) throw kiln::error("transformer: writing " + a.logits + " failed");
  std::string line;
  for (std::size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
  std::cout << line << std::endl;
  std::printf("prefill: %zu tokens in %.3f s, %.1f tokens/s\n", a.ids.size(), prefill_s, double(a.ids.size()) / prefill_s);
  if (ids.size() > 1) {
    std::printf("decode: %zu tokens in %.3f s, %.2f tokens/s\n", ids.size() - 1, decode_s,
                double(ids.size() - 1) / decode_s);
  }
  std::fprintf(stderr, "loaded %s (%lld layers, %.1fM parameters, %s weights) in %.2f s on %s\n", a.dir.c_str(),
               static_cast<long long>(m.cfg().num_hidden_layers), double(m.cfg().parameters()) / 1e6, a.weights.c_str(),
               std::chrono::duration<double>(t1 - t0).count(), a.backend.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const args a = parse(argc, argv);
  try {
    const auto go = [&](const auto& ctx) {
      if (a.weights == "f32" || a.weights == "int8" || a.weights == "int4") return run<float>(ctx, a);
      if (a.weights == "f16") return run<kiln::half>(ctx, a);
      if (a.weights == "bf16") return run<kiln::bfloat16>(ctx, a);
      usage("--weights must be f32, f16, bf16, int8 or int4, got " + a.weights);
    };
    if (a.backend == "cpu") {
      if (a.threads > 0) return go(kiln::context<kiln::cpu<>>(kiln::threads{int(a.threads)}));
      return go(kiln::context<kiln::cpu<>>());
    }
    if (a.backend == "vulkan") {
#ifdef KILN_EXAMPLE_VULKAN
      kiln::context<kiln::vulkan> ctx;
      return go(ctx);
#else
      usage("this build has no Vulkan backend (configure with -DKILN_VULKAN=ON)");
#endif
    }
    usage("--backend must be cpu or vulkan, got " + a.backend);
  } catch (const std::exception& e) {
    std::cerr << "transformer: " << e.what() << "\n";
    return 1;
  }
}
