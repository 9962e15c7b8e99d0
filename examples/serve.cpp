// examples/serve.cpp — an OpenAI-compatible HTTP server over kiln::serving::engine
// (continuous batching over a paged KV cache), for a Llama or BitNet b1.58 checkpoint
// (Hugging Face directory: config.json + *.safetensors; tokenizer.json for text), on
// Debian's cpp-httplib.
//
//   serve MODEL_DIR [--host H] [--port P] [--backend cpu|vulkan] [--threads N]
//         [--max-batch N] [--kv-memory MiB] [--queue N] [--tokenizer PATH] [--max-body KiB]
//         [--weights f32|f16|bf16|int8|int4 (Llama)] [--lm-head bf16|f16|int8 (BitNet)]
//   mpirun -np N serve MODEL_DIR --tp N ...   (tensor-parallel; see the end of this comment)
//
//   POST /v1/completions       prompt as text or as token ids
//   POST /v1/chat/completions  messages rendered by the tokenizer's chat template
//   GET  /health, /v1/models, /metrics (Prometheus text)
//   GET  /                     a chat page (examples/serve_page.hpp) that streams replies
//
// Threads: one worker runs the engine's steps; httplib's pool threads parse a request,
// tokenize, submit it and then stream its tokens by polling its token_stream (they never
// touch tensors). --weights / --lm-head keep the weights as examples/transformer does
// (default f32 for Llama, a bf16 table for BitNet). A stop string is matched here on the
// decoded text (the request is then cancelled and ends with "stop"); an end-of-sequence id
// ends it in the engine and is left out of the text. A client that goes away is cancelled
// within about 100 ms (its KV blocks back to the pool), streaming or not, waiting in the
// queue or running: a streaming one at a failed write or when httplib's DataSink finds its
// socket closed, a non-streaming one (which writes nothing until its answer is whole) when
// its socket, looked at from the handler, is closed (connection_closed below). Bad input
// is a 4xx with an OpenAI error object, a full queue a 503 with Retry-After.
// SIGTERM or SIGINT: refuse new generation requests (503), let the running ones finish for
// up to --grace seconds, cancel what is left, stop listening, join the worker, exit 0.
// Tensor parallelism (a build with kiln::dist, MPI): `mpirun -np N serve MODEL_DIR --tp N
// ...` splits the model over the N ranks as examples/transformer does; rank 0 listens and
// runs the one engine over a kiln::serving::tp_leader, which hands each step's batch to
// the other ranks before running it; they listen on nothing and run each step on their
// shard (kiln::serving::tp_follow). SIGTERM goes to rank 0 (mpirun passes its own on): when
// rank 0 has drained, it sends the stop and every rank exits 0; when rank 0 fails, the
// others exit with its status (or the job is aborted, naming the rank, when the group
// cannot agree any more: kiln::dist's timeouts, KILN_DIST_TIMEOUT).
#include <kiln/kiln.hpp>
#ifdef KILN_EXAMPLE_VULKAN
#include <kiln/vulkan.hpp>
#endif
#include <kiln/serving.hpp>  // after kiln/vulkan.hpp: the sampling kernel for Vulkan
#include <kiln/serving/tensor_parallel.hpp>
#ifdef KILN_DIST
#include <kiln/dist/dist.hpp>
#include <kiln/dist/share.hpp>
#endif
#include <kiln/text/chat_template.hpp>
#include <kiln/text/eos.hpp>
#include <kiln/text/stop_strings.hpp>
#include <kiln/text/tokenizer.hpp>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "model_choice.hpp"  // the architecture and --weights / --lm-head dispatch (shared with transformer)
#include "serve_page.hpp"    // the chat page at /
#include <netdb.h>    // getnameinfo: a socket's address spelt as httplib spells it
#include <poll.h>     // poll: whether a client's socket has something to read (its end)
#include <pthread.h>  // pthread_sigmask: SIGTERM goes to the thread that waits for it
#include <signal.h>
#include <sys/socket.h>  // listen: a larger backlog than httplib's; getpeername, recv(MSG_PEEK)
#include <unistd.h>      // getpid

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace serving = kiln::serving;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;
using kiln::index_t;

struct args {
  std::string dir, host = "127.0.0.1", backend = "cpu", tokenizer, name;
  kiln_examples::model_choice model;
  int port = 8080;
  long threads = 0, max_batch = 16, kv_mib = 256, queue = 64, max_body_kib = 1024, grace = 30, tp = 1;
};

/// The engine's settings: the same on every rank of a tensor-parallel group (their KV pools
/// must match).
serving::engine_options engine_options_of(const args& a) {
  return {.max_batch = static_cast<index_t>(a.max_batch),
          .kv_bytes = static_cast<std::size_t>(a.kv_mib) << 20,
          .max_queue = static_cast<index_t>(a.queue)};
}

/// This process's place in a tensor-parallel group (--tp; alone: size 1), without MPI.
struct tp_group {
  int rank = 0, size = 1;
  serving::share_ints share;                          // rank 0's ints on every rank
  std::chrono::milliseconds heartbeat{1000};          // an idle rank 0 tells the others this often
  std::function<void(const std::string&)> abort;      // ends the whole job, the message first
  std::atomic<bool> stop_sent{false};                 // rank 0: the others were told to stop (worker thread)
  bool split() const noexcept { return size > 1; }
};

// ---------------------------------------------------------------------------------------
// The engine, behind an interface that does not depend on the model's type (the HTTP side
// is compiled once, not per model and backend).

class service {
 public:
  virtual ~service() = default;
  virtual std::shared_ptr<serving::token_stream> submit(serving::request r) = 0;
  virtual bool cancel(serving::request_id id) = 0;
  virtual serving::engine_stats stats() const = 0;
  virtual index_t queued() const = 0;
  virtual index_t active() const = 0;
  virtual bool idle() const = 0;
  virtual index_t context() const = 0;
  virtual index_t vocab() const = 0;
  virtual index_t kv_blocks() const = 0;
  virtual std::string describe() const = 0;
  /// Stops the worker (after the step it is in) and joins it. With --tp, rank 0's worker
  /// then tells the other ranks to stop with `status` (0: a clean stop).
  virtual void stop(int status) = 0;
};

/// The engine and its worker thread. Model is a decoder, or (rank 0 of a tensor-parallel
/// group) a serving::tp_leader over one, made in place from model_args.
template <class Model>
class model_service final : public service {
 public:
  template <class... Args>
  model_service(const serving::engine_options& o, std::string what, std::function<void(const std::string&)> fatal,
                Args&&... model_args)
      : model_(std::forward<Args>(model_args)...), eng_(model_, o), what_(std::move(what)), fatal_(std::move(fatal)),
        worker_([this](std::stop_token st) { loop(st); }) {}
  ~model_service() override { stop(1); }  // not stopped before: rank 0 failed

  std::shared_ptr<serving::token_stream> submit(serving::request r) override { return eng_.submit(std::move(r)); }
  bool cancel(serving::request_id id) override { return eng_.cancel(id); }
  serving::engine_stats stats() const override { return eng_.stats(); }
  index_t queued() const override { return eng_.queued(); }
  index_t active() const override { return eng_.active(); }
  bool idle() const override { return eng_.idle(); }
  index_t context() const override { return eng_.context(); }
  index_t vocab() const override { return model_.cfg().vocab_size; }
  index_t kv_blocks() const override { return blocks_; }
  std::string describe() const override { return what_; }
  void stop(int status) override {
    if (worker_.joinable()) {
      status_ = status;
      worker_.request_stop();
      worker_.join();
    }
  }

 private:
  // rank 0 of a tensor-parallel group: every call that reaches the other ranks (begin, the
  // steps, heartbeats, stop) is made on this worker thread
  static constexpr bool leads = requires(Model& m) { m.heartbeat(); };

  void loop(std::stop_token st) {
    blocks_ = eng_.cache().num_blocks();
    try {
      if constexpr (leads) model_.begin(blocks_);
    } catch (const std::exception& e) {
      fatal_(std::string("the tensor-parallel group did not start: ") + e.what());
    }
    while (!st.stop_requested()) {
      try {
        if (eng_.wait_for_work(std::chrono::milliseconds(50))) {
          eng_.step();
        } else if constexpr (leads) {
          model_.heartbeat();
        }
      } catch (const std::exception& e) {
        // the engine has ended the step's requests with finish_reason::error (their
        // clients get the message); the server goes on with the next step, unless the
        // ranks of a tensor-parallel group are out of step now
        if (fatal_) fatal_(std::string("a step failed: ") + e.what());
        std::fprintf(stderr, "serve: a step failed: %s\n", e.what());
      }
    }
    if constexpr (leads) {
      try {
        model_.stop(status_);
      } catch (const std::exception& e) {
        fatal_(std::string("the stop did not reach the other ranks: ") + e.what());
      }
    }
  }

  Model model_;
  serving::engine<Model> eng_;
  std::string what_;
  std::function<void(const std::string&)> fatal_;  // with --tp: ends the job
  std::atomic<index_t> blocks_{0};
  std::atomic<int> status_{1};
  std::jthread worker_;  // last: started once everything it uses exists
};

// ---------------------------------------------------------------------------------------
// Errors: OpenAI's shape, {"error": {"message", "type", "param", "code"}}.

struct api_error {
  int status = 400;
  std::string message, param, code;
  std::string type = "invalid_request_error";
};

json error_body(const api_error& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

[[noreturn]] void bad(const std::string& param, const std::string& message, const std::string& code = {}) {
  throw api_error{400, message, param, code};
}

// ---------------------------------------------------------------------------------------
// Metrics (Prometheus text format).

class histogram {
 public:
  explicit histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v) {
    std::lock_guard lock(m_);
    const auto i = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
    ++counts_[i];
    sum_ += v;
  }
  void write(std::ostringstream& o, const std::string& name, const std::string& help) const {
    std::lock_guard lock(m_);
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " histogram\n";
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < bounds_.size(); ++i) {
      total += counts_[i];
      o << name << "_bucket{le=\"" << bounds_[i] << "\"} " << total << '\n';
    }
    total += counts_.back();
    o << name << "_bucket{le=\"+Inf\"} " << total << '\n' << name << "_sum " << sum_ << '\n' << name << "_count " << total << '\n';
  }

 private:
  mutable std::mutex m_;
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;
  double sum_ = 0.0;
};

struct metrics {
  std::mutex m;
  std::map<std::pair<std::string, int>, std::uint64_t> requests;  // (endpoint, status) -> count
  histogram ttft{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  histogram itl{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};

  void count(const std::string& endpoint, int status) {
    std::lock_guard lock(m);
    ++requests[{endpoint, status}];
  }
};

// ---------------------------------------------------------------------------------------
// Whether a client has gone away while its request runs. A streaming request finds out from
// httplib's DataSink (a failed write, or is_writable(), which peeks at the socket); a
// non-streaming one writes nothing until its answer is whole, so its handler looks at the
// socket itself, as httplib does since 0.18.5 (Request::is_connection_closed, used when
// present): 0.11 gives a handler no socket, so it is found by its two addresses.

/// "ip", port of a socket address, as httplib writes Request::remote_addr and local_addr
/// (getnameinfo, numeric host); false for what is not IPv4 or IPv6.
bool address_of(const sockaddr_storage& a, socklen_t n, std::string& ip, int& port) {
  if (a.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
  } else if (a.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
  } else {
    return false;
  }
  std::array<char, NI_MAXHOST> host{};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), n, host.data(), static_cast<socklen_t>(host.size()), nullptr, 0,
                  NI_NUMERICHOST) != 0)
    return false;
  ip = host.data();
  return true;
}

/// The socket of q's connection, or -1 when none or several match. The connection stays
/// open while its handler runs (httplib closes it after the answer), so the descriptor
/// found stays q's for the whole handler.
int connection_socket(const httplib::Request& q) {
  std::error_code ec;
  int found = -1, matches = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    int fd = -1;
    try {
      fd = std::stoi(it->path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    sockaddr_storage a{};
    socklen_t n = sizeof a;
    std::string ip;
    int port = -1;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0 || !address_of(a, n, ip, port) || port != q.remote_port ||
        ip != q.remote_addr)
      continue;
    n = sizeof a;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0 || !address_of(a, n, ip, port) || port != q.local_port ||
        ip != q.local_addr)
      continue;
    found = fd;
    ++matches;
  }
  return matches == 1 ? found : -1;
}

/// Whether the peer of socket fd has closed or reset the connection, decided as httplib's
/// is_socket_alive does: nothing to read is alive; bytes to read (a pipelined request) are
/// alive; the end of the stream or an error is gone. Never blocks.
bool socket_closed(int fd) {
  pollfd p{fd, POLLIN, 0};
  const int ready = ::poll(&p, 1, 0);
  if (ready == 0) return false;
  if (ready < 0) return errno != EINTR && errno != EAGAIN && errno != ENOMEM;
  char c;
  const ssize_t got = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (got > 0) return false;
  return got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/// A test for whether q's client has gone, to call while its handler runs (never after).
/// Without a way to tell (no socket found), it says never.
template <class Request>
std::function<bool()> connection_closed(const Request& q) {
  if constexpr (requires { q.is_connection_closed(); }) {
    return [&q] { return q.is_connection_closed(); };
  } else {
    const int fd = connection_socket(q);
    if (fd < 0) return [] { return false; };
    return [fd] { return socket_closed(fd); };
  }
}

// ---------------------------------------------------------------------------------------
// A parsed completion request.

struct job {
  serving::request req;
  std::vector<std::string> stops;
  bool chat = false, stream = false, return_ids = false, include_usage = false;
};

/// The finished (or ended) generation as the client sees it.
struct outcome {
  std::string text;
  std::vector<std::int32_t> ids;
  std::string finish = "length";
  std::string error;        // a failed step's message
  bool client_gone = false;  // the client went away first (the request was cancelled)
};

class server {
 public:
  server(const args& a, service& svc, std::optional<kiln::text::tokenizer> tok, std::vector<std::int32_t> eos)
      : a_(a), svc_(svc), tok_(std::move(tok)), eos_(std::move(eos)), created_(std::time(nullptr)) {
    name_ = a.name.empty() ? std::filesystem::path(a.dir).lexically_normal().filename().string() : a.name;
    if (name_.empty()) name_ = std::filesystem::absolute(a.dir).parent_path().filename().string();
    tokenizer_path_ = (a.tokenizer.empty() ? std::filesystem::path(a.dir) / "tokenizer.json" : std::filesystem::path(a.tokenizer)).string();
  }

  void install(httplib::Server& http) {
    http.set_payload_max_length(static_cast<std::size_t>(a_.max_body_kib) * 1024);
    http.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { completion(q, r, false); });
    http.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) { completion(q, r, true); });
    http.Get("/", [](const httplib::Request&, httplib::Response& r) {
      r.set_content(kiln_examples::chat_page, "text/html; charset=utf-8");
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& r) {
      r.set_content(json{{"status", stopping_ ? "stopping" : "ok"}}.dump(), "application/json");
      if (stopping_) r.status = 503;
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& r) {
      const json m = {{"id", name_}, {"object", "model"}, {"created", created_}, {"owned_by", "kiln"},
                      {"max_model_len", svc_.context()}};
      r.set_content(json{{"object", "list"}, {"data", json::array({m})}}.dump(), "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
      r.set_content(metrics_text(), "text/plain; version=0.0.4");
    });
    // httplib's own refusals (a body over --max-body: 413; no such route: 404; a request
    // it cannot parse: 400) get the error object too; answers that have a body keep it
    http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& q, httplib::Response& r) {
      if (!r.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      api_error e{r.status, "", "", ""};
      if (r.status == 413) {
        e.message = "the request body is over the server's limit (--max-body)";
        e.code = "request_too_large";
      } else if (r.status == 404) {
        e.message = "no route " + q.method + " " + q.path;
        e.code = "not_found";
      } else {
        e.message = "the request could not be served (HTTP " + std::to_string(r.status) + ")";
      }
      r.set_content(error_body(e).dump(), "application/json");
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& r, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& x) {
        what = x.what();
      } catch (...) {
      }
      r.status = 500;
      r.set_content(error_body({500, "internal error: " + what, "", "", "server_error"}).dump(), "application/json");
    });
  }

  /// Stops taking generation requests (they get 503), waits up to `grace` for the running
  /// ones, cancels the rest, then waits for their answers to be written (httplib cuts a
  /// chunked response short once the server stops, so stop() comes after this).
  void drain(std::chrono::seconds grace) {
    stopping_ = true;
    const auto until = clock_type::now() + grace;
    while (!svc_.idle() && clock_type::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<serving::request_id> left;
    {
      std::lock_guard lock(live_m_);
      left.assign(live_.begin(), live_.end());
    }
    for (auto id : left) svc_.cancel(id);
    const auto writing = clock_type::now() + std::chrono::seconds(10);
    while (answering_ > 0 && clock_type::now() < writing) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  bool stopping() const { return stopping_; }

 private:
  // --- parsing -------------------------------------------------------------------------

  static double number(const json& body, const char* key, double lo, double hi, bool lo_open, const char* range) {
    const json& v = body.at(key);
    if (!v.is_number()) bad(key, std::string("'") + key + "' must be a number, got " + v.type_name());
    const double x = v.get<double>();
    if (!(lo_open ? x > lo : x >= lo) || !(x <= hi)) bad(key, std::string("'") + key + "' must be in " + range + ", got " + v.dump());
    return x;
  }
  static bool flag(const json& body, const char* key) {
    if (!body.contains(key) || body.at(key).is_null()) return false;
    if (!body.at(key).is_boolean()) bad(key, std::string("'") + key + "' must be a boolean, got " + body.at(key).type_name());
    return body.at(key).get<bool>();
  }
  static bool has(const json& body, const char* key) { return body.contains(key) && !body.at(key).is_null(); }

  void need_tokenizer(const std::string& param, const std::string& what) const {
    if (!tok_) bad(param, what + " needs a tokenizer, and the model has none: " + tokenizer_path_ + " is missing (give the prompt as token ids)", "tokenizer_missing");
  }

  std::vector<std::int32_t> encode(const std::string& text, bool special, const std::string& param) const {
    std::vector<std::uint32_t> enc;
    try {
      enc = tok_->encode(text, special);
    } catch (const std::exception& e) {
      bad(param, std::string("the text could not be tokenized: ") + e.what());
    }
    return {enc.begin(), enc.end()};
  }

  job parse(const std::string& text, bool chat) const {
    json body;
    try {
      body = json::parse(text);
    } catch (const json::parse_error& e) {
      bad("", std::string("the request body is not valid JSON: ") + e.what(), "invalid_json");
    }
    if (!body.is_object()) bad("", std::string("the request body must be a JSON object, got ") + body.type_name());
    job j;
    j.chat = chat;
    if (has(body, "model")) {
      if (!body["model"].is_string()) bad("model", std::string("'model' must be a string, got ") + body["model"].type_name());
      if (body["model"].get<std::string>() != name_) {
        throw api_error{404, "the model '" + body["model"].get<std::string>() + "' does not exist; this server has '" + name_ + "'",
                        "model", "model_not_found"};
      }
    }
    const std::string prompt_param = chat ? "messages" : "prompt";
    if (chat) {
      if (!body.contains("messages")) bad("messages", "'messages' is required");
      const json& ms = body["messages"];
      if (!ms.is_array() || ms.empty()) bad("messages", "'messages' must be a non-empty array of {role, content} objects");
      std::vector<kiln::text::chat_message> msgs;
      for (std::size_t i = 0; i < ms.size(); ++i) {
        const std::string at = "messages[" + std::to_string(i) + "]";
        const json& m = ms[i];
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) bad(at, at + " must be an object with a string 'role'");
        std::string content;
        const json c = m.value("content", json(nullptr));
        if (c.is_string()) {
          content = c.get<std::string>();
        } else if (c.is_array()) {  // [{"type": "text", "text": "..."}]
          for (const json& part : c) {
            if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
              bad(at + ".content", at + ".content: only parts of type \"text\" with a string 'text' are supported");
            content += part["text"].get<std::string>();
          }
        } else if (!c.is_null()) {
          bad(at + ".content", at + ".content must be a string or an array of text parts, got " + std::string(c.type_name()));
        }
        msgs.push_back({m["role"].get<std::string>(), content});
      }
      need_tokenizer("messages", "a chat request");
      std::string rendered;
      try {
        rendered = kiln::text::apply_chat_template(*tok_, msgs, true);
      } catch (const std::exception& e) {
        bad("messages", std::string("the chat template could not be applied: ") + e.what());
      }
      j.req.prompt = encode(rendered, false, "messages");
    } else {
      if (!body.contains("prompt")) bad("prompt", "'prompt' is required");
      json p = body["prompt"];
      if (p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array())) p = json(p[0]);  // one prompt in a list
      if (p.is_string()) {
        need_tokenizer("prompt", "a text prompt");
        j.req.prompt = encode(p.get<std::string>(), true, "prompt");
      } else if (p.is_array() && !p.empty()) {
        const auto V = svc_.vocab();
        for (std::size_t i = 0; i < p.size(); ++i) {
          if (!p[i].is_number_integer())
            bad("prompt", "'prompt' as a list must hold token ids (integers); prompt[" + std::to_string(i) + "] is " + p[i].dump());
          const auto v = p[i].get<std::int64_t>();
          if (v < 0 || v >= V)
            bad("prompt", "token id " + std::to_string(v) + " at prompt[" + std::to_string(i) + "] is outside the vocabulary [0, " +
                              std::to_string(V) + ")", "invalid_token_id");
          j.req.prompt.push_back(static_cast<std::int32_t>(v));
        }
      } else {
        bad("prompt", "'prompt' must be a string or a non-empty array of token ids, got " + p.dump().substr(0, 80));
      }
    }
    if (j.req.prompt.empty()) bad(prompt_param, "the prompt encodes to no tokens");

    // lengths: prompt + max_tokens - 1 positions must fit the context
    const index_t n = static_cast<index_t>(j.req.prompt.size()), ctx = svc_.context();
    if (n > ctx) {
      bad(prompt_param, "the prompt is " + std::to_string(n) + " tokens; the model's context is " + std::to_string(ctx) + " tokens",
          "context_length_exceeded");
    }
    const char* mt = chat && has(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (has(body, mt)) {
      const json& v = body[mt];
      if (!v.is_number_integer() || v.get<std::int64_t>() < 1) bad(mt, std::string("'") + mt + "' must be an integer >= 1, got " + v.dump());
      const auto m = v.get<std::int64_t>();
      if (n + m - 1 > ctx) {
        bad(mt, "a prompt of " + std::to_string(n) + " tokens and " + mt + " " + std::to_string(m) + " need " + std::to_string(n + m - 1) +
                    " positions; the model's context is " + std::to_string(ctx) + " (" + mt + " <= " + std::to_string(ctx - n + 1) + ")",
            "context_length_exceeded");
      }
      j.req.max_tokens = static_cast<index_t>(m);
    } else {
      j.req.max_tokens = ctx - n + 1;
    }

    // sampling
    auto& s = j.req.sampling;
    if (has(body, "n") && body["n"] != 1) bad("n", "only n = 1 is supported, got " + body["n"].dump());
    for (const char* k : {"logprobs", "echo", "best_of", "logit_bias", "tools"}) {
      if (has(body, k) && body[k] != false && !(std::string(k) == "best_of" && body[k] == 1))
        bad(k, std::string("'") + k + "' is not supported");
    }
    if (has(body, "temperature")) s.temperature = static_cast<float>(number(body, "temperature", 0, 1e6, false, "[0, inf)"));
    if (has(body, "top_p")) s.top_p = static_cast<float>(number(body, "top_p", 0, 1, true, "(0, 1]"));
    if (has(body, "min_p")) s.min_p = static_cast<float>(number(body, "min_p", 0, 1, false, "[0, 1]"));
    if (has(body, "top_k")) {
      const json& v = body["top_k"];
      if (!v.is_number_integer() || v.get<std::int64_t>() < -1 || v.get<std::int64_t>() > INT32_MAX)
        bad("top_k", "'top_k' must be an integer >= -1 (-1 and 0: off), got " + v.dump());
      s.top_k = std::max<std::int32_t>(0, static_cast<std::int32_t>(v.get<std::int64_t>()));
    }
    if (has(body, "presence_penalty")) s.presence_penalty = static_cast<float>(number(body, "presence_penalty", -2, 2, false, "[-2, 2]"));
    if (has(body, "repetition_penalty")) s.repeat_penalty = static_cast<float>(number(body, "repetition_penalty", 0, 1e6, true, "(0, inf)"));
    if (has(body, "frequency_penalty") && number(body, "frequency_penalty", -2, 2, false, "[-2, 2]") != 0.0)
      bad("frequency_penalty", "'frequency_penalty' is not supported (presence_penalty and repetition_penalty are)");
    if (has(body, "seed")) {
      const json& v = body["seed"];
      if (!v.is_number_integer()) bad("seed", "'seed' must be an integer, got " + v.dump());
      s.seed = v.is_number_unsigned() ? v.get<std::uint64_t>() : static_cast<std::uint64_t>(v.get<std::int64_t>());
    } else {
      s.seed = std::random_device{}();
    }

    // stop strings and ids
    if (has(body, "stop")) {
      const json& v = body["stop"];
      if (v.is_string()) {
        j.stops.push_back(v.get<std::string>());
      } else if (v.is_array()) {
        for (const json& x : v) {
          if (!x.is_string()) bad("stop", "'stop' must be a string or an array of strings, got an element " + x.dump());
          j.stops.push_back(x.get<std::string>());
        }
      } else {
        bad("stop", std::string("'stop' must be a string or an array of strings, got ") + v.type_name());
      }
      for (const auto& st : j.stops)
        if (st.empty()) bad("stop", "a stop string must not be empty");
      if (!j.stops.empty()) need_tokenizer("stop", "'stop'");
    }
    if (!flag(body, "ignore_eos")) {
      for (std::int32_t id : eos_)
        if (id >= 0 && id < svc_.vocab()) j.req.stop_ids.push_back(id);
    }
    j.stream = flag(body, "stream");
    j.return_ids = flag(body, "return_token_ids") || !tok_;
    if (has(body, "stream_options")) {
      const json& so = body["stream_options"];
      if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
      j.include_usage = flag(so, "include_usage");
    }
    return j;
  }

  // --- generation ----------------------------------------------------------------------

  /// Submits j; a refusal becomes an api_error (queue full: 503; what the engine rejects: 400).
  std::shared_ptr<serving::token_stream> start(job& j) {
    if (stopping_) throw api_error{503, "the server is shutting down", "", "server_shutting_down", "server_error"};
    try {
      auto s = svc_.submit(j.req);
      std::lock_guard lock(live_m_);
      live_.insert(s->id());
      return s;
    } catch (const serving::queue_full& e) {
      throw api_error{503, std::string("the server is busy: ") + e.what(), "", "queue_full", "server_error"};
    } catch (const kiln::shape_error& e) {
      bad("", e.what());
    } catch (const kiln::index_error& e) {
      bad("", e.what(), "invalid_token_id");
    }
  }

  /// Reads s to its end: ids and text, stop strings, metrics. emit(text, ids) gets each
  /// new piece; when it returns false, or gone_away() returns true (asked at least every
  /// 100 ms, tokens or not: the request may wait in the queue or in its prefill), the
  /// client has gone and the request is cancelled.
  outcome consume(const job& j, serving::token_stream& s, const std::function<bool(const std::string&, std::span<const std::int32_t>)>& emit,
                  const std::function<bool()>& gone_away) {
    outcome o;
    std::optional<kiln::text::decode_stream> ds;
    if (tok_) ds.emplace(tok_->stream(true));
    kiln::text::stop_strings stop(j.stops);
    auto last = clock_type::now();
    bool first = true, stopped = false, gone = false;
    while (!stopped && !gone) {
      s.wait_for(std::chrono::milliseconds(100));
      const bool done = s.finished();
      if (!done && gone_away()) {
        gone = true;
        break;
      }
      const auto ids = s.poll();
      if (!ids.empty()) {
        const auto now = clock_type::now();
        if (first) {
          metrics_.ttft.observe(std::chrono::duration<double>(s.first_token() - s.submitted()).count());
          if (ids.size() > 1) {
            const double dt = std::chrono::duration<double>(now - s.first_token()).count() / double(ids.size() - 1);
            for (std::size_t k = 1; k < ids.size(); ++k) metrics_.itl.observe(dt);
          }
        } else {
          const double dt = std::chrono::duration<double>(now - last).count() / double(ids.size());
          for (std::size_t k = 0; k < ids.size(); ++k) metrics_.itl.observe(dt);
        }
        first = false;
        last = now;
        std::string text;
        std::size_t used = 0;
        for (std::int32_t id : ids) {
          ++used;
          o.ids.push_back(id);
          const bool eos = std::find(j.req.stop_ids.begin(), j.req.stop_ids.end(), id) != j.req.stop_ids.end();
          if (ds && !eos) {
            text += stop.push(ds->step(static_cast<std::uint32_t>(id)));
            if (stop.stopped()) {
              stopped = true;
              svc_.cancel(s.id());
              break;
            }
          }
        }
        o.text += text;
        if (!emit(text, std::span<const std::int32_t>(o.ids).last(used))) gone = true;
      }
      if (done && !s.unread()) break;
    }
    if (gone) {
      svc_.cancel(s.id());
      o.finish = "cancelled";
      o.client_gone = true;
    } else if (stopped) {
      o.finish = "stop";
    } else {
      if (ds) {
        std::string rest = stop.push(ds->finish());
        if (stop.stopped()) {
          o.finish = "stop";
        } else {
          rest += stop.finish();
        }
        if (!rest.empty()) {
          o.text += rest;
          emit(rest, {});
        }
      }
      if (o.finish != "stop") {
        switch (s.reason()) {
          case serving::finish_reason::stop: o.finish = "stop"; break;
          case serving::finish_reason::length: o.finish = "length"; break;
          case serving::finish_reason::cancelled: o.finish = "cancelled"; break;
          default:
            o.finish = "error";
            o.error = s.error();
            break;
        }
      }
    }
    std::lock_guard lock(live_m_);
    live_.erase(s.id());
    return o;
  }

  // --- responses -----------------------------------------------------------------------

  json usage(const job& j, const outcome& o) const {
    const auto p = j.req.prompt.size(), c = o.ids.size();
    return {{"prompt_tokens", p}, {"completion_tokens", c}, {"total_tokens", p + c}};
  }

  json choice(const job& j, const std::string& text, std::span<const std::int32_t> ids, const json& finish, bool delta, bool first) const {
    json c = {{"index", 0}};
    if (j.chat) {
      if (delta) {
        c["delta"] = json::object();
        if (first) c["delta"]["role"] = "assistant";
        if (!text.empty() || first) c["delta"]["content"] = text;
      } else {
        c["message"] = {{"role", "assistant"}, {"content", text}};
      }
    } else {
      c["text"] = text;
    }
    c["logprobs"] = nullptr;
    c["finish_reason"] = finish;
    if (j.return_ids) c["token_ids"] = std::vector<std::int32_t>(ids.begin(), ids.end());
    return c;
  }

  json envelope(const job& j, const std::string& id, bool chunk) const {
    return {{"id", id},
            {"object", j.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
            {"created", std::time(nullptr)},
            {"model", name_}};
  }

  void completion(const httplib::Request& q, httplib::Response& r, bool chat) {
    const std::string endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
    const auto fail = [&](const api_error& e) {
      r.status = e.status;
      if (e.status == 503 && e.code == "queue_full") r.set_header("Retry-After", "1");
      r.set_content(error_body(e).dump(), "application/json");
      metrics_.count(endpoint, e.status);
    };
    ++answering_;  // until the answer is written: the handler's scope or the stream's provider
    const std::shared_ptr<void> answering(nullptr, [this](void*) { --answering_; });
    std::shared_ptr<job> j;
    std::shared_ptr<serving::token_stream> s;
    try {
      j = std::make_shared<job>(parse(q.body, chat));
      s = start(*j);
    } catch (const api_error& e) {
      fail(e);
      return;
    } catch (const json::exception& e) {  // a field of a type the checks above did not foresee
      fail({400, std::string("the request has a field of the wrong type: ") + e.what(), "", "invalid_type"});
      return;
    }
    const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(s->id());
    if (!j->stream) {
      const outcome o = consume(*j, *s, [](const std::string&, std::span<const std::int32_t>) { return true; },
                                connection_closed(q));
      if (o.client_gone) {
        // the client went away (consume cancelled the request): nobody reads this answer;
        // 499, nginx's "client closed request", in the metrics
        fail({499, "the client closed the connection before the answer was ready", "", "client_closed_request"});
        return;
      }
      if (o.finish == "error") {
        fail({500, "generation failed: " + o.error, "", "", "server_error"});
        return;
      }
      json body = envelope(*j, id, false);
      body["choices"] = json::array({choice(*j, o.text, o.ids, o.finish, false, false)});
      body["usage"] = usage(*j, o);
      r.set_content(body.dump(), "application/json");
      metrics_.count(endpoint, 200);
      return;
    }
    metrics_.count(endpoint, 200);
    r.set_header("Cache-Control", "no-cache");
    r.set_chunked_content_provider(
        "text/event-stream",
        [this, j, s, id, answering](std::size_t, httplib::DataSink& sink) {
          const auto send = [&](const json& v) {
            const std::string line = "data: " + v.dump() + "\n\n";
            return sink.write(line.data(), line.size());
          };
          bool first = true, broken = false;
          outcome o;
          try {
            o = consume(*j, *s, [&](const std::string& text, std::span<const std::int32_t> ids) {
              if (text.empty() && !(j->return_ids && !ids.empty())) return true;
              json c = envelope(*j, id, true);
              c["choices"] = json::array({choice(*j, text, ids, nullptr, true, first)});
              first = false;
              broken = !send(c);
              return !broken;
            }, [&] { return !sink.is_writable(); });  // httplib 0.11: select and a peek at the socket
          } catch (const std::exception& e) {  // the provider runs outside httplib's exception handler
            svc_.cancel(s->id());
            o.finish = "error";
            o.error = e.what();
          }
          if (broken || o.client_gone) return false;  // the client has gone (consume cancelled the request)
          json last = envelope(*j, id, true);
          if (o.finish == "error") {
            last = error_body({500, "generation failed: " + o.error, "", "", "server_error"});
          } else {
            last["choices"] = json::array({choice(*j, "", {}, o.finish, true, first)});
            if (j->return_ids) last["choices"][0]["token_ids"] = json::array();
          }
          if (!send(last)) return false;
          if (j->include_usage && o.finish != "error") {
            json u = envelope(*j, id, true);
            u["choices"] = json::array();
            u["usage"] = usage(*j, o);
            if (!send(u)) return false;
          }
          const std::string done = "data: [DONE]\n\n";
          if (!sink.write(done.data(), done.size())) return false;
          sink.done();
          return true;
        },
        [this, s](bool) {
          // the provider did not run to the end (the connection broke first): let go
          if (!s->finished()) svc_.cancel(s->id());
          std::lock_guard lock(live_m_);
          live_.erase(s->id());
        });
  }

  std::string metrics_text() {
    const auto st = svc_.stats();
    std::ostringstream o;
    const auto gauge = [&](const char* name, const char* help, double v, const char* type = "gauge") {
      o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << v << '\n';
    };
    o << "# HELP kiln_requests_total HTTP generation requests by endpoint and status\n# TYPE kiln_requests_total counter\n";
    {
      std::lock_guard lock(metrics_.m);
      for (const auto& [k, v] : metrics_.requests)
        o << "kiln_requests_total{endpoint=\"" << k.first << "\",status=\"" << k.second << "\"} " << v << '\n';
    }
    gauge("kiln_engine_requests_submitted_total", "requests the engine accepted", double(st.submitted), "counter");
    gauge("kiln_engine_requests_refused_total", "requests refused with a full queue", double(st.refused), "counter");
    gauge("kiln_engine_requests_completed_total", "requests ended by length or a stop id", double(st.completed), "counter");
    gauge("kiln_engine_requests_cancelled_total", "requests cancelled (stop strings, disconnects, shutdown)", double(st.cancelled), "counter");
    gauge("kiln_engine_requests_failed_total", "requests ended by an error", double(st.failed), "counter");
    gauge("kiln_prompt_tokens_total", "prompt tokens run", double(st.prompt_tokens), "counter");
    gauge("kiln_generation_tokens_total", "tokens generated", double(st.generated_tokens), "counter");
    gauge("kiln_engine_steps_total", "engine steps that ran a batch", double(st.steps), "counter");
    gauge("kiln_batch_size", "sequences in the last step's batch", double(st.last.sequences));
    gauge("kiln_queue_length", "requests waiting for a place in the batch", double(svc_.queued()));
    gauge("kiln_requests_running", "requests admitted and not finished", double(svc_.active()));
    gauge("kiln_kv_blocks_used", "paged KV cache blocks in use after the latest step", double(st.kv_blocks_used));
    gauge("kiln_kv_blocks_total", "paged KV cache blocks in the pool", double(svc_.kv_blocks()));
    gauge("kiln_step_seconds", "the last step's wall time", st.last.seconds);
    metrics_.ttft.write(o, "kiln_time_to_first_token_seconds", "time from submission to the first token");
    metrics_.itl.write(o, "kiln_inter_token_latency_seconds", "time between a request's tokens");
    return o.str();
  }

  const args& a_;
  service& svc_;
  std::optional<kiln::text::tokenizer> tok_;
  std::vector<std::int32_t> eos_;
  std::string name_, tokenizer_path_;
  std::time_t created_;
  metrics metrics_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> answering_{0};  // generation requests whose answer is not yet written
  std::mutex live_m_;
  std::set<serving::request_id> live_;  // submitted and not yet read to the end
};

// ---------------------------------------------------------------------------------------

int parse_args(int argc, char** argv, args& a) {
  CLI::App app{"An OpenAI-compatible HTTP server for a Llama or BitNet b1.58 checkpoint (kiln)", "serve"};
  app.get_formatter()->column_width(30);
  app.add_option("model", a.dir, "Hugging Face model directory (config.json, *.safetensors; tokenizer.json for text)")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--host", a.host, "address to listen on");
  app.add_option("--port", a.port, "port (0: any free one; the address is printed)")->check(CLI::Range(0, 65535));
  app.add_option("--backend", a.backend, "where to run")->check(CLI::IsMember({"cpu", "vulkan"}));
  auto* weights = app.add_option("--weights", a.model.weights, "Llama: dtype the weights are kept in")
                      ->check(CLI::IsMember({"f32", "f16", "bf16", "int8", "int4"}));
  auto* lm_head = app.add_option("--lm-head", a.model.lm_head, "BitNet: dtype of the embedding and tied LM head")
                      ->check(CLI::IsMember({"bf16", "f16", "int8"}));
  app.add_option("--threads", a.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  app.add_option("--max-batch", a.max_batch, "sequences run at once")->check(CLI::Range(1L, 4096L));
  app.add_option("--kv-memory", a.kv_mib, "the paged KV cache's pool, MiB")->check(CLI::Range(1L, 1L << 20));
  app.add_option("--queue", a.queue, "requests that may wait beyond the batch (then 503)")->check(CLI::Range(0L, 1L << 20));
  app.add_option("--tokenizer", a.tokenizer, "tokenizer.json or its directory (default: the model directory's)")->check(CLI::ExistingPath);
  app.add_option("--max-body", a.max_body_kib, "largest request body, KiB (then 413)")->check(CLI::Range(1L, 1L << 20));
  app.add_option("--grace", a.grace, "on SIGTERM, seconds the running requests may take before they are cancelled")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--served-model-name", a.name, "the model's name in the API (default: the directory's name)");
  app.add_option("--tp", a.tp, "tensor-parallel ranks (run under mpirun -np N; needs kiln::dist)")->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
    a.model.has_weights = weights->count() > 0;
    a.model.has_lm_head = lm_head->count() > 0;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return -1;
}

/// The engine for the checkpoint in a.dir on ctx's backend; with a split group (rank 0),
/// over a tp_leader of this rank's shard (tp: the group's collectives).
template <class B>
std::unique_ptr<service> make_service(const kiln::context<B>& ctx, const args& a, kiln::models::architecture arch,
                                      tp_group& g, const kiln::models::tensor_parallel<B>& tp) {
  const serving::engine_options o = engine_options_of(a);
  return kiln_examples::with_model(
      ctx, a.dir, arch, a.model,
      [&](auto&& load, const std::string& what) -> std::unique_ptr<service> {
        auto m = load(0);  // the context: the config's, at most 4096 positions
        using M = decltype(m);
        if (g.split()) {
          return std::make_unique<model_service<serving::tp_leader<M>>>(
              o, what + ", tensor-parallel over " + std::to_string(g.size) + " ranks", g.abort, std::move(m), g.share,
              g.heartbeat);
        }
        return std::make_unique<model_service<M>>(o, what, nullptr, std::move(m));
      },
      tp);
}

/// A rank other than 0: its shard of the model, then rank 0's steps until its stop.
/// Returns rank 0's status.
template <class B>
int follow(const kiln::context<B>& ctx, const args& a, kiln::models::architecture arch, const tp_group& g,
           const kiln::models::tensor_parallel<B>& tp) {
  return kiln_examples::with_model(
      ctx, a.dir, arch, a.model,
      [&](auto&& load, const std::string&) {
        auto m = load(0);
        std::fprintf(stderr, "serve: rank %d of %d (pid %d): following rank 0 (%.1f MB of weights held)\n", g.rank, g.size,
                     static_cast<int>(getpid()), m.weight_bytes() / 1e6);
        const int status = serving::tp_follow(m, engine_options_of(a), g.share);
        if (status == 0) {
          std::fprintf(stderr, "serve: rank %d of %d: stopped\n", g.rank, g.size);
        } else {
          std::fprintf(stderr, "serve: rank %d of %d: rank 0 stopped with status %d\n", g.rank, g.size, status);
        }
        return status;
      },
      tp);
}

}  // namespace

int main(int argc, char** argv) {
  args a;
  if (const int rc = parse_args(argc, argv, a); rc >= 0) return rc;
  // SIGTERM and SIGINT are taken by one thread (sigwait), never by a handler: the other
  // threads, created after this, inherit the mask
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that goes away is a failed write, not the end of the server
  tp_group g;
#ifdef KILN_DIST
  std::optional<kiln::dist::environment> env;  // MPI's start and end, with --tp
  std::optional<kiln::dist::communicator> comm;
#endif
  try {
    if (a.tp > 1) {
#ifdef KILN_DIST
      // rank 0's collectives run on the engine's worker thread, not main's
      env.emplace(argc, argv, MPI_THREAD_SERIALIZED);
      comm.emplace(kiln::dist::communicator::world());
      if (comm->size() != a.tp) {
        throw kiln::error("--tp " + std::to_string(a.tp) + " but mpirun started " + std::to_string(comm->size()) +
                          " ranks (mpirun -np " + std::to_string(a.tp) + ")");
      }
      g.rank = comm->rank();
      g.size = comm->size();
      // the first message (rank 0's begin) waits for every rank to have loaded its shard:
      // KILN_DIST_TIMEOUT, but at least 10 minutes (a large checkpoint's load); then the timeout
      g.share = [&g, &comm, share = kiln::dist::share_from_root(*comm), first = true](std::vector<std::int32_t>& v) mutable {
        const auto timeout = comm->settings().timeout;
        if (first) comm->set_timeout(std::max<std::chrono::milliseconds>(timeout, std::chrono::minutes(10)));
        first = false;
        try {
          share(v);
        } catch (...) {
          comm->set_timeout(timeout);
          throw;
        }
        comm->set_timeout(timeout);
        if (!v.empty() && v[0] == static_cast<std::int32_t>(serving::tp_step::kind::stop)) g.stop_sent = true;
      };
      // well inside the others' wait for rank 0's next message (KILN_DIST_TIMEOUT)
      g.heartbeat = std::min<std::chrono::milliseconds>(std::chrono::seconds(1), comm->settings().timeout / 4);
      g.abort = [&g](const std::string& why) {
        std::fprintf(stderr, "serve: rank %d of %d: %s; aborting the job\n", g.rank, g.size, why.c_str());
        std::fflush(nullptr);
        MPI_Abort(MPI_COMM_WORLD, 1);
      };
#else
      std::fprintf(stderr, "serve: --tp needs a build with kiln::dist (MPI: configure with -DKILN_MPI=ON, libopenmpi-dev)\n");
      return 2;
#endif
    }
    const auto arch = kiln::models::architecture_of_dir(a.dir);
    if (const std::string bad = kiln_examples::model_choice_problem(arch, a.model); !bad.empty()) {
      std::fprintf(stderr, "%s\nRun with --help for more information.\n", bad.c_str());
      return 2;
    }
    std::optional<kiln::text::tokenizer> tok;  // rank 0's: the others see token ids only
    std::vector<std::int32_t> eos;
    if (g.rank == 0) {
      const std::filesystem::path tok_path = a.tokenizer.empty() ? std::filesystem::path(a.dir) / "tokenizer.json" : std::filesystem::path(a.tokenizer);
      if (std::filesystem::exists(tok_path)) tok.emplace(kiln::text::tokenizer::from_pretrained(tok_path));
      eos = kiln::text::eos_token_ids(a.dir);
      if (eos.empty() && tok && tok->eos_id()) eos.push_back(static_cast<std::int32_t>(*tok->eos_id()));
    }

    std::unique_ptr<service> svc;
    int follower_status = 0;
    // rank 0 (or alone): the engine; another rank: rank 0's steps until its stop
    const auto start = [&](const auto& ctx) {
      using B = typename std::remove_cvref_t<decltype(ctx)>::backend_type;
      kiln::models::tensor_parallel<B> tp;
#ifdef KILN_DIST
      if (comm) tp = kiln::dist::tensor_parallel(ctx, *comm);
#endif
      if (g.rank != 0) {
        follower_status = follow(ctx, a, arch, g, tp);
      } else {
        svc = make_service(ctx, a, arch, g, tp);
      }
    };
#ifdef KILN_EXAMPLE_VULKAN
    std::optional<kiln::context<kiln::vulkan>> gpu;
#endif
    std::optional<kiln::context<kiln::cpu<>>> cpu;
    if (a.backend == "vulkan") {
#ifdef KILN_EXAMPLE_VULKAN
      gpu.emplace();
      start(*gpu);
#else
      std::fprintf(stderr, "serve: this build has no Vulkan backend (configure with -DKILN_VULKAN=ON)\n");
      return 2;
#endif
    } else {
      if (a.threads > 0) {
        cpu.emplace(kiln::threads{int(a.threads)});
      } else {
        cpu.emplace();
      }
      start(*cpu);
    }
    if (g.rank != 0) return follower_status;

    server srv(a, *svc, std::move(tok), eos);
    httplib::Server http;
    // each streaming request holds a pool thread while it runs: room for a full batch, a
    // full queue and a few quick requests (health, metrics, refusals) beside them
    const auto pool = static_cast<std::size_t>(a.max_batch + a.queue + 8);
    http.new_task_queue = [pool] { return new httplib::ThreadPool(pool); };
    srv.install(http);
    // Debian's cpp-httplib 0.11 listens with a backlog of 5, which many clients connecting
    // at once overflow (the kernel drops or resets their connections): the listening
    // socket is kept here and listen() called again with a larger backlog
    int listen_fd = -1;
    http.set_socket_options([&](socket_t fd) {
      httplib::default_socket_options(fd);
      listen_fd = fd;
    });
    int port = a.port;
    if (port == 0) {
      port = http.bind_to_any_port(a.host);
    } else if (!http.bind_to_port(a.host, port)) {
      port = -1;
    }
    if (port < 0) {
      std::fprintf(stderr, "serve: cannot listen on %s:%d\n", a.host.c_str(), a.port);
      return 1;
    }
    if (listen_fd >= 0 && ::listen(listen_fd, 1024) != 0) {
      std::fprintf(stderr, "serve: listen(backlog 1024) failed; keeping httplib's backlog of 5\n");
    }
    std::printf("serve: %s (%s, context %lld, %s) listening on http://%s:%d", a.dir.c_str(), svc->describe().c_str(),
                static_cast<long long>(svc->context()), a.backend.c_str(), a.host.c_str(), port);
    if (g.split()) std::printf(" (rank 0 of %d, pid %d)", g.size, static_cast<int>(getpid()));
    std::printf("\n");
    std::fflush(stdout);

    std::atomic<bool> listen_failed{false};
    std::jthread signals([&] {
      int sig = 0;
      sigwait(&sigs, &sig);
      if (listen_failed) return;  // main woke this thread
      std::fprintf(stderr, "serve: %s: stopping\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      srv.drain(std::chrono::seconds(a.grace));  // new generation requests get 503 meanwhile
      http.stop();  // listen_after_bind returns once the handlers have

    });
    const bool ok = http.listen_after_bind();
    if (!ok) {  // a listen that failed by itself (after a stop it returns true)
      listen_failed = true;
      pthread_kill(signals.native_handle(), SIGTERM);
    }
    signals.join();
    const bool failed = !ok && !srv.stopping();
    svc->stop(failed ? 1 : 0);  // with --tp, the other ranks stop with this status
    if (failed) {
      std::fprintf(stderr, "serve: listening on %s:%d failed\n", a.host.c_str(), port);
      return 1;
    }
    std::fprintf(stderr, "serve: stopped\n");
    return 0;
  } catch (const std::exception& e) {
    if (!g.split()) {
      std::fprintf(stderr, "serve: %s\n", e.what());
      return 1;
    }
    // a rank that fails ends the job, unless it is rank 0 and has told the others to stop
    if (g.rank != 0 || !g.stop_sent) g.abort(e.what());
    std::fprintf(stderr, "serve: rank 0 of %d: %s\n", g.size, e.what());
    return 1;
  }
}
