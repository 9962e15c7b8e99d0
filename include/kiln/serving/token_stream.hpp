// kiln/serving/token_stream.hpp — kiln::serving::token_stream: one request's generated
// tokens as kiln::serving::engine produces them, written by the engine's worker thread and
// read (polled or waited on) from any other thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/shape.hpp"  // index_t
#include "kiln/serving/request.hpp"

namespace kiln::serving {

/// Why a request's generation ended (none: it has not).
enum class finish_reason { none, length, stop, cancelled, error };

/// "none", "length", "stop", "cancelled", "error" (OpenAI's finish_reason uses the first three).
inline const char* to_string(finish_reason r) noexcept {
  switch (r) {
    case finish_reason::length: return "length";
    case finish_reason::stop: return "stop";
    case finish_reason::cancelled: return "cancelled";
    case finish_reason::error: return "error";
    default: return "none";
  }
}

/// The output of one request: every id generated so far, a read position for poll(), how
/// it ended, and when (for time to first token and the like). All members are safe to call
/// from any thread; engine::submit returns it as a shared_ptr that the engine and the
/// client both hold (the engine lets go when the request ends).
///   auto s = engine.submit(std::move(r));
///   while (!s->finished() || s->unread()) { s->wait_for(100ms); for (int id : s->poll()) emit(id); }
class token_stream {
 public:
  using clock = std::chrono::steady_clock;

  token_stream(request_id id, index_t prompt_tokens) : id_(id), prompt_tokens_(prompt_tokens), submitted_(clock::now()) {}
  token_stream(const token_stream&) = delete;
  token_stream& operator=(const token_stream&) = delete;

  request_id id() const noexcept { return id_; }
  index_t prompt_tokens() const noexcept { return prompt_tokens_; }

  /// The ids generated since the last poll (none when nothing is new); does not block.
  std::vector<std::int32_t> poll() {
    std::lock_guard lock(m_);
    std::vector<std::int32_t> r(tokens_.begin() + static_cast<std::ptrdiff_t>(read_), tokens_.end());
    read_ = tokens_.size();
    return r;
  }
  /// Whether poll() would return ids.
  bool unread() const {
    std::lock_guard lock(m_);
    return read_ < tokens_.size();
  }
  /// Every id generated so far.
  std::vector<std::int32_t> tokens() const {
    std::lock_guard lock(m_);
    return tokens_;
  }
  /// Blocks until there are unread ids or the request has finished, or d has passed;
  /// returns whether one of the first two holds.
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> d) {
    std::unique_lock lock(m_);
    return cv_.wait_for(lock, d, [&] { return read_ < tokens_.size() || reason_ != finish_reason::none; });
  }
  /// Blocks until the request has finished; returns every id generated.
  std::vector<std::int32_t> wait() {
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return reason_ != finish_reason::none; });
    return tokens_;
  }

  bool finished() const {
    std::lock_guard lock(m_);
    return reason_ != finish_reason::none;
  }
  finish_reason reason() const {
    std::lock_guard lock(m_);
    return reason_;
  }
  /// The failure's message when reason() is finish_reason::error.
  std::string error() const {
    std::lock_guard lock(m_);
    return error_;
  }
  /// When it was submitted, when its first token came (clock::time_point{} before) and
  /// when it finished (likewise).
  clock::time_point submitted() const noexcept { return submitted_; }
  clock::time_point first_token() const {
    std::lock_guard lock(m_);
    return first_;
  }
  clock::time_point finished_at() const {
    std::lock_guard lock(m_);
    return end_;
  }

  // The engine's side (kiln::serving::engine calls these; a user has no reason to).
  void push(std::int32_t id) {
    {
      std::lock_guard lock(m_);
      if (tokens_.empty()) first_ = clock::now();
      tokens_.push_back(id);
    }
    cv_.notify_all();
  }
  void finish(finish_reason r, std::string why = {}) {
    {
      std::lock_guard lock(m_);
      if (reason_ != finish_reason::none) return;
      reason_ = r;
      error_ = std::move(why);
      end_ = clock::now();
    }
    cv_.notify_all();
  }

 private:
  const request_id id_;
  const index_t prompt_tokens_;
  const clock::time_point submitted_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::int32_t> tokens_;
  std::size_t read_ = 0;
  finish_reason reason_ = finish_reason::none;
  std::string error_;
  clock::time_point first_{}, end_{};
};

}  // namespace kiln::serving
