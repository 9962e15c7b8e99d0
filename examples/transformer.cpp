// examples/transformer.cpp — text generation with a Llama or BitNet b1.58 checkpoint
// (Hugging Face directory: config.json + *.safetensors, and tokenizer.json for text), the
// decoders of kiln/models/llama.hpp and bitnet.hpp (config.json's model_type /
// architectures picks one), kiln::text's tokenizer and chat template, and kiln::sample on
// the logits' device.
//
//   transformer MODEL_DIR --prompt "Once upon a time" --steps 64 --temperature 0.8 --top-p 0.95
//   echo "Why is the sky blue?" | transformer MODEL_DIR --chat --system "Be brief."
//   transformer MODEL_DIR --ids 1,15043,29892 --steps 32 [--logits FILE]
//
// Text (--prompt TEXT, or standard input without --prompt and --ids): the prompt is
// encoded by the tokenizer (with --chat: rendered by the tokenizer's chat template as a
// user message, after --system's, with the generation prompt, then encoded without
// adding special tokens, as transformers' apply_chat_template does); the generated text is
// streamed to standard output as it is decoded; generation ends after --steps tokens, at
// an end-of-sequence id (generation_config.json / config.json, else the tokenizer's
// eos_token; --ignore-eos keeps going)
// or at a --stop string (not printed). Then prefill and decode tokens/s on standard error
// (with --print-ids, the prompt's and the generated ids too).
// Ids (--ids): exactly --steps ids are generated and printed on one line, then prefill and
// decode tokens/s, as before text came in. --logits FILE writes one row of vocab_size
// little-endian float32 logits per generated token: row i holds the logits that chose
// token i (row 0: the prompt's last position).
// Sampling (both modes): greedy unless --temperature > 0; then --top-k, --top-p, --min-p,
// --repeat-penalty / --presence-penalty over the last --repeat-last-n ids (prompt
// included), in llama.cpp's order (kiln/ops/sampling/sample.hpp), and --seed names the
// run: the same seed and flags repeat the same tokens on a backend (without --seed a
// random one is picked and printed on standard error). Llama: --weights picks the dtype
// the weights are kept in (default f32; int8 and int4 quantize the projections and the LM
// head at load). BitNet: the projections are ternary (W1.58A8) as the checkpoint has
// them (packed, or bf16 master weights quantized at load), and --lm-head keeps the
// embedding and tied LM head as bf16 (default), f16 or int8. Activations and the KV cache
// are float32.
// Tensor parallelism (a build with kiln::dist, MPI): `mpirun -np N transformer MODEL_DIR
// --tp N ...` splits the model over the N ranks (kiln/dist/tensor_parallel.hpp: each loads
// its heads, FFN columns and vocabulary rows); rank 0 reads the prompt and prints, every
// rank runs the same steps; each rank reports the weights it holds on standard error.
// Several devices in one process: `transformer MODEL_DIR --backend vulkan --devices 0,1`
// splits the layers into consecutive stages, one per listed device (indices into
// kiln::vulkan::devices(); an index may repeat: `--devices 0,0` is two contexts on one
// device), the embedding on the first and the LM head on the last, the hidden state
// copied between them (kiln/models/pipeline.hpp); the stages are printed on standard
// error. On the CPU backend the one device is 0 (`--devices 0,0`: two contexts).
#include <kiln/kiln.hpp>
#ifdef KILN_EXAMPLE_VULKAN
#include <kiln/vulkan.hpp>
#endif
#ifdef KILN_DIST
#include <kiln/dist/dist.hpp>
#endif
#include <kiln/sampling.hpp>  // after kiln/vulkan.hpp: with its Vulkan kernel
#include <kiln/text/chat_template.hpp>
#include <kiln/text/eos.hpp>
#include <kiln/text/stop_strings.hpp>
#include <kiln/text/tokenizer.hpp>

#include <CLI/CLI.hpp>

#include "model_choice.hpp"  // the architecture and --weights / --lm-head dispatch (shared with serve)

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct args {
  std::string dir, backend = "cpu", logits, ids_text, tokenizer, system, prompt, devices_text;
  kiln_examples::model_choice model;
  bool has_prompt = false, has_seed = false;
  std::vector<std::int32_t> ids;
  std::vector<int> devices;  // --devices: one pipeline stage per entry (empty: one context)
  long steps = 32, threads = 0, max_len = 0, repeat_last_n = 64, tp = 1;
  int rank = 0;  // with --tp: this process's rank; share(v) gives every rank rank 0's v
  std::function<void(std::vector<std::int32_t>&)> share;
  bool chat = false, ignore_eos = false, print_ids = false;
  std::uint64_t seed = 0;
  kiln::sampling_options sampling;
  std::vector<std::string> stops;
};

/// "1,15043,29892" (commas and/or spaces) as ids; throws CLI::ValidationError naming the bad one.
std::vector<std::int32_t> parse_ids(const std::string& text) {
  std::vector<std::int32_t> ids;
  std::string t;
  std::stringstream ss(text);
  while (ss >> std::ws && std::getline(ss, t, ',')) {
    std::stringstream parts(t);
    for (std::string w; parts >> w;) {
      std::size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(w, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != w.size()) throw CLI::ValidationError("--ids", "'" + w + "' is not a token id");
      if (v < 0 || v > INT32_MAX) throw CLI::ValidationError("--ids", "token id " + w + " is out of range [0, 2^31)");
      ids.push_back(static_cast<std::int32_t>(v));
    }
  }
  if (ids.empty()) throw CLI::ValidationError("--ids", "no token ids in '" + text + "'");
  return ids;
}

/// "0,1" (commas and/or spaces) as device indices; throws CLI::ValidationError naming the bad one.
std::vector<int> parse_devices(const std::string& text) {
  std::vector<int> out;
  std::string t = text;
  std::replace(t.begin(), t.end(), ',', ' ');
  std::stringstream ss(t);
  for (std::string w; ss >> w;) {
    std::size_t used = 0;
    long v = -1;
    try {
      v = std::stol(w, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != w.size() || v < 0 || v > 1024) throw CLI::ValidationError("--devices", "'" + w + "' is not a device index");
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) throw CLI::ValidationError("--devices", "no device indices in '" + text + "'");
  return out;
}

/// --stop's escapes: \n, \t, \\ (a newline is the usual stop).
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == 't' || s[i + 1] == '\\')) {
      out += s[i + 1] == 'n' ? '\n' : s[i + 1] == 't' ? '\t' : '\\';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

/// A range check that names the flag and the range ("--top-p must be in (0, 1]").
CLI::Validator within(double lo, bool lo_open, double hi, bool hi_open, const std::string& range) {
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        double v = 0;
        try {
          std::size_t used = 0;
          v = std::stod(s, &used);
          if (used != s.size()) return "'" + s + "' is not a number";
        } catch (const std::exception&) {
          return "'" + s + "' is not a number";
        }
        if (!(lo_open ? v > lo : v >= lo) || !(hi_open ? v < hi : v <= hi)) return "must be in " + range + ", got " + s;
        return {};
      },
      range);
}

constexpr double unbounded = 1e300;

int parse(int argc, char** argv, args& a) {
  CLI::App app{"Text generation with a Llama or BitNet b1.58 checkpoint (kiln)", "transformer"};
  app.get_formatter()->column_width(34);
  app.add_option("model", a.dir, "Hugging Face model directory (config.json, *.safetensors; tokenizer.json for text)")
      ->required()
      ->check(CLI::ExistingDirectory);
  auto* ids = app.add_option("--ids", a.ids_text, "prompt token ids (1,15043,29892): prints generated ids, no tokenizer");
  auto* prompt = app.add_option("--prompt", a.prompt, "prompt text (default: standard input)");
  auto* chat = app.add_flag("--chat", a.chat, "render the prompt with the tokenizer's chat template as a user message");
  auto* system = app.add_option("--system", a.system, "with --chat: a system message before the prompt")->needs(chat);
  auto* tok = app.add_option("--tokenizer", a.tokenizer, "tokenizer.json or its directory (default: the model directory)")
                  ->check(CLI::ExistingPath);
  app.add_option("--steps,-n", a.steps, "tokens to generate (text: at most)")->check(CLI::PositiveNumber);
  app.add_option("--backend", a.backend, "where to run")->check(CLI::IsMember({"cpu", "vulkan"}));
  auto* weights = app.add_option("--weights", a.model.weights, "Llama: dtype the weights are kept in")
                      ->check(CLI::IsMember({"f32", "f16", "bf16", "int8", "int4"}));
  auto* lm_head = app.add_option("--lm-head", a.model.lm_head, "BitNet: dtype of the embedding and tied LM head")
                      ->check(CLI::IsMember({"bf16", "f16", "int8"}));
  app.add_option("--threads", a.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  auto* tp = app.add_option("--tp", a.tp, "tensor-parallel ranks (run under mpirun -np N; needs kiln::dist)")
                 ->check(CLI::PositiveNumber);
  auto* devices = app.add_option("--devices", a.devices_text,
                                 "split the layers over these devices, in order (0,1; vulkan: kiln::vulkan::devices() indices)");
  devices->excludes(tp);
  app.add_option("--max-len", a.max_len, "KV cache positions (0: prompt + steps)")->check(CLI::NonNegativeNumber);
  app.add_option("--logits", a.logits, "write each step's logits (float32 rows) to FILE");
  app.add_option("--temperature,--temp", a.sampling.temperature, "0: greedy (default); > 0: sample")
      ->check(within(0, false, unbounded, true, "[0, inf)"));
  app.add_option("--top-k", a.sampling.top_k, "keep the k most likely tokens (0: off)")->check(within(0, false, INT32_MAX, false, "[0, 2^31)"));
  app.add_option("--top-p", a.sampling.top_p, "keep the smallest set of probability >= p (1: off)")->check(within(0, true, 1, false, "(0, 1]"));
  app.add_option("--min-p", a.sampling.min_p, "keep tokens at least p times the most likely (0: off)")->check(within(0, false, 1, false, "[0, 1]"));
  app.add_option("--repeat-penalty", a.sampling.repeat_penalty, "divide recent tokens' logits by this (1: off)")
      ->check(within(0, true, unbounded, true, "(0, inf)"));
  app.add_option("--presence-penalty", a.sampling.presence_penalty, "subtract this from recent tokens' logits (0: off)")
      ->check(within(-unbounded, true, unbounded, true, "(-inf, inf)"));
  app.add_option("--repeat-last-n", a.repeat_last_n, "recent tokens the penalties look at (0: all)")->check(CLI::NonNegativeNumber);
  auto* seed = app.add_option("--seed", a.seed, "the run's random seed (default: a random one, printed)");
  auto* stop = app.add_option("--stop", a.stops, "stop at this text (repeatable; \\n for a newline)")->allow_extra_args(false);
  auto* ignore = app.add_flag("--ignore-eos", a.ignore_eos, "do not stop at end-of-sequence ids");
  auto* print = app.add_flag("--print-ids", a.print_ids, "text: print the prompt's and the generated ids on standard error");
  for (CLI::Option* o : {prompt, chat, system, tok, stop, ignore, print}) ids->excludes(o);
  try {
    app.parse(argc, argv);
    if (ids->count()) a.ids = parse_ids(a.ids_text);
    if (devices->count()) a.devices = parse_devices(a.devices_text);
    a.has_prompt = prompt->count() > 0;
    a.has_seed = seed->count() > 0;
    a.model.has_weights = weights->count() > 0;
    a.model.has_lm_head = lm_head->count() > 0;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (std::string& s : a.stops) {
    s = unescape(s);
    if (s.empty()) {
      std::cerr << "--stop: a stop string must not be empty\nRun with --help for more information.\n";
      return 2;
    }
  }
  return -1;
}

/// Text mode's tokenizer and end-of-sequence ids.
struct text_io {
  std::optional<kiln::text::tokenizer> tok;
  std::vector<std::int32_t> eos;
};

/// Generation with the model load(max_len) returns (a kiln::llama::model or a
/// kiln::bitnet::model: the same forward / capacity / cfg); `what` names its weights.
template <class B, class Load>
int run(const kiln::context<B>&, const args& a, Load&& load, const std::string& what) {
  using clock = std::chrono::steady_clock;
  const bool text = a.ids.empty();
  text_io tio;
  std::vector<std::int32_t> prompt = a.ids;
  if (text) {
    tio.tok.emplace(kiln::text::tokenizer::from_pretrained(a.tokenizer.empty() ? a.dir : a.tokenizer));
    std::string p;
    if (a.rank != 0) {  // rank 0 reads and encodes the prompt, then shares its ids
    } else if (a.has_prompt) {
      p = a.prompt;
    } else {
      p.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    std::vector<std::uint32_t> enc;
    if (a.chat) {
      std::vector<kiln::text::chat_message> msgs;
      if (!a.system.empty()) msgs.push_back({"system", a.system});
      msgs.push_back({"user", p});
      enc = tio.tok->encode(kiln::text::apply_chat_template(*tio.tok, msgs, true), false);
    } else {
      enc = tio.tok->encode(p);
    }
    prompt.assign(enc.begin(), enc.end());
    if (a.share) a.share(prompt);
    if (prompt.empty()) throw kiln::error("transformer: the prompt encodes to no tokens");
    if (!a.ignore_eos) {  // the model's (generation_config.json, config.json), else the tokenizer's eos_token
      tio.eos = kiln::text::eos_token_ids(a.dir);
      if (tio.eos.empty() && tio.tok->eos_id()) tio.eos.push_back(static_cast<std::int32_t>(*tio.tok->eos_id()));
    }
  }

  const auto t0 = clock::now();
  auto m = load(a.max_len > 0 ? a.max_len : static_cast<kiln::index_t>(prompt.size()) + a.steps);
  const auto t1 = clock::now();
  if (m.placement().split()) {
    std::fprintf(stderr, "pipeline of %zu stages: %s\n", m.placement().stages().size(), m.placement().describe().c_str());
  }
  if (a.share) {  // every rank's share of the weights (and the process's resident memory)
    long rss_kb = 0;
    std::ifstream st("/proc/self/status");
    for (std::string line; std::getline(st, line);) {
      if (line.rfind("VmRSS:", 0) == 0) rss_kb = std::atol(line.c_str() + 6);
    }
    std::fprintf(stderr, "rank %d of %ld: %.1f MB of weights held, %.1f MB resident\n", a.rank, a.tp, m.weight_bytes() / 1e6,
                 double(rss_kb) / 1e3);
  }
  if (static_cast<kiln::index_t>(prompt.size()) + a.steps - 1 > m.capacity()) {
    throw kiln::shape_error("transformer: " + std::to_string(prompt.size()) + " prompt tokens and " + std::to_string(a.steps) +
                            " steps need " + std::to_string(prompt.size() + std::size_t(a.steps) - 1) +
                            " cache positions; --max-len is " + std::to_string(m.capacity()));
  }
  std::ofstream out;
  if (!a.logits.empty() && a.rank == 0) {
    out.open(a.logits, std::ios::binary | std::ios::trunc);
    if (!out) throw kiln::error("transformer: cannot write " + a.logits);
  }

  // the chooser: today's greedy argmax where nothing else is asked, else kiln::sample
  kiln::sampling_options so = a.sampling;
  so.seed = a.has_seed ? a.seed : std::random_device{}();
  if (a.share) {  // rank 0's seed on every rank: the same choices everywhere
    std::vector<std::int32_t> s{static_cast<std::int32_t>(so.seed & 0xffffffffu), static_cast<std::int32_t>(so.seed >> 32)};
    a.share(s);
    so.seed = std::uint64_t(std::uint32_t(s[0])) | (std::uint64_t(std::uint32_t(s[1])) << 32);
  }
  const bool plain_greedy = so.temperature == 0.0f && so.repeat_penalty == 1.0f && so.presence_penalty == 0.0f;
  if (!plain_greedy && so.temperature > 0.0f && !a.has_seed && a.rank == 0) std::fprintf(stderr, "seed: %llu\n", static_cast<unsigned long long>(so.seed));
  kiln::sampler sampler(so, static_cast<std::size_t>(a.repeat_last_n));
  sampler.accept(prompt);
  const auto choose = [&](const kiln::tensor<float, B>& logits) {
    return plain_greedy ? kiln::llama::argmax_row(logits, 0) : sampler.next(logits);
  };

  std::optional<kiln::text::decode_stream> stream;
  kiln::text::stop_strings stop(a.stops);
  if (text) stream.emplace(tio.tok->stream(true));
  double prefill_s = 0.0, decode_s = 0.0;
  std::vector<std::int32_t> generated;
  auto last = clock::now();
  auto logits = m.forward(prompt);
  for (kiln::index_t i = 0;; ++i) {
    if (out.is_open()) {
      const auto h = logits.to_host();
      out.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size() * sizeof(float)));
    }
    const std::int32_t id = choose(logits);  // waits for the step's kernels
    const double dt = std::chrono::duration<double>(clock::now() - last).count();
    (i == 0 ? prefill_s : decode_s) += dt;
    if (id < 0) throw kiln::error("transformer: the logits hold no finite value to choose from (step " + std::to_string(i) + ")");
    if (text && std::find(tio.eos.begin(), tio.eos.end(), id) != tio.eos.end()) break;
    generated.push_back(id);
    if (text) {
      std::cout << stop.push(stream->step(static_cast<std::uint32_t>(id))) << std::flush;
      if (stop.stopped()) break;
    }
    if (i + 1 == a.steps) break;
    last = clock::now();  // writing text and logits is not the model's time
    logits = m.forward(std::span<const std::int32_t>(&generated.back(), 1));
  }
  if (out.is_open() && !out.flush()) throw kiln::error("transformer: writing " + a.logits + " failed");
  const auto join = [](const std::vector<std::int32_t>& v) {
    std::string line;
    for (std::size_t i = 0; i < v.size(); ++i) line += (i ? "," : "") + std::to_string(v[i]);
    return line;
  };
  if (a.rank != 0) return 0;  // rank 0 prints
  // stats: on standard output after ids (as before), on standard error after text
  std::FILE* stats = text ? stderr : stdout;
  if (text) {
    if (!stop.stopped()) std::cout << stop.push(stream->finish()) << stop.finish();
    std::cout << std::endl;
    if (a.print_ids) std::fprintf(stderr, "prompt ids: %s\ngenerated ids: %s\n", join(prompt).c_str(), join(generated).c_str());
  } else {
    std::cout << join(generated) << std::endl;
  }
  std::fprintf(stats, "prefill: %zu tokens in %.3f s, %.1f tokens/s\n", prompt.size(), prefill_s, double(prompt.size()) / prefill_s);
  if (generated.size() > 1) {
    std::fprintf(stats, "decode: %zu tokens in %.3f s, %.2f tokens/s\n", generated.size() - 1, decode_s,
                 double(generated.size() - 1) / decode_s);
  }
  std::fprintf(stderr, "loaded %s (%lld layers, %s, %.1f MB of weights read per token) in %.2f s on %s\n", a.dir.c_str(),
               static_cast<long long>(m.cfg().num_hidden_layers), what.c_str(), m.weight_bytes_per_token() / 1e6,
               std::chrono::duration<double>(t1 - t0).count(), a.backend.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  args a;
  if (const int rc = parse(argc, argv, a); rc >= 0) return rc;
#ifdef KILN_DIST
  std::optional<kiln::dist::environment> env;  // MPI's start and end, with --tp
  std::optional<kiln::dist::communicator> comm;
#endif
  try {
    if (a.tp > 1) {
#ifdef KILN_DIST
      env.emplace(argc, argv);
      comm.emplace(kiln::dist::communicator::world());
      if (comm->size() != a.tp) {
        throw kiln::error("--tp " + std::to_string(a.tp) + " but mpirun started " +
                          std::to_string(comm->size()) + " ranks (mpirun -np " + std::to_string(a.tp) + ")");
      }
      a.rank = comm->rank();
      a.share = kiln::dist::share_from_root(*comm);
      if (a.rank != 0) std::cout.setstate(std::ios::failbit);  // rank 0 prints
#else
      std::cerr << "transformer: --tp needs a build with kiln::dist (MPI: configure with -DKILN_MPI=ON, libopenmpi-dev)\n";
      return 2;
#endif
    }
    const auto arch = kiln::models::architecture_of_dir(a.dir);
    if (const std::string bad = kiln_examples::model_choice_problem(arch, a.model); !bad.empty()) {
      std::cerr << bad << "\nRun with --help for more information.\n";
      return 2;
    }
    // ctxs: one context, or with --devices one per pipeline stage (the first: the embedding's)
    const auto go = [&](const auto& ctxs) {
      using B = typename std::remove_cvref_t<decltype(ctxs.front())>::backend_type;
      const auto& ctx = ctxs.front();
      kiln::models::tensor_parallel<B> tp;
#ifdef KILN_DIST
      if (comm) tp = kiln::dist::tensor_parallel(ctx, *comm);
#endif
      kiln::models::pipeline<B> pp;
      if (ctxs.size() > 1) pp.contexts = ctxs;
      return kiln_examples::with_model(
          ctx, a.dir, arch, a.model, [&](auto&& load, const std::string& what) { return run(ctx, a, load, what); }, tp, pp);
    };
    if (a.backend == "vulkan") {
#ifdef KILN_EXAMPLE_VULKAN
      std::vector<kiln::context<kiln::vulkan>> ctxs;
      if (a.devices.empty()) ctxs.emplace_back();
      const auto all = kiln::vulkan::devices();
      for (const int d : a.devices) {
        if (d >= static_cast<int>(all.size())) {
          std::string list;
          for (const auto& i : all) list += (list.empty() ? "" : "; ") + std::to_string(i.index) + ": " + i.name;
          std::cerr << "--devices: device " << d << " does not exist; the Vulkan devices are "
                    << (list.empty() ? std::string("none") : list) << "\nRun with --help for more information.\n";
          return 2;
        }
        ctxs.emplace_back(kiln::vulkan::device_index{d});
      }
      return go(ctxs);
#else
      std::cerr << "transformer: this build has no Vulkan backend (configure with -DKILN_VULKAN=ON)\n";
      return 2;
#endif
    }
    std::vector<kiln::context<kiln::cpu<>>> ctxs;
    for (std::size_t i = 0; i < std::max<std::size_t>(a.devices.size(), 1); ++i) {
      if (!a.devices.empty() && a.devices[i] != 0) {
        std::cerr << "--devices: device " << a.devices[i]
                  << " does not exist; the cpu backend has one device, 0 (--devices 0,0: two contexts on it)\n"
                     "Run with --help for more information.\n";
        return 2;
      }
      if (a.threads > 0) ctxs.emplace_back(kiln::threads{int(a.threads)});
      else ctxs.emplace_back();
    }
    return go(ctxs);
  } catch (const std::exception& e) {
    std::cerr << "transformer: " << e.what() << "\n";
    return 1;
  }
}
