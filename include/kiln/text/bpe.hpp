// kiln/text/bpe.hpp — the BPE model of tokenizer.json.
// Merges are ranked in a hash map keyed by the two ids; a word is merged with a min-heap
// of candidate pairs (lowest rank first, leftmost on ties), so a word of n characters
// costs O(n log n); whole words are cached. Supports ignore_merges, byte_fallback,
// unk_token (+ fuse_unk), continuing_subword_prefix and end_of_word_suffix, and merges
// written as "a b" strings or as ["a", "b"] pairs.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/text/detail/json.hpp"
#include "kiln/text/detail/unicode.hpp"

namespace kiln::text {

namespace detail {

struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using vocab_map = std::unordered_map<std::string, std::uint32_t, string_hash, std::equal_to<>>;

}  // namespace detail

/// Byte-pair encoding over a vocabulary and a ranked list of merges.
class bpe_model {
 public:
  /// Reads the "model" object; where is "kiln::text: <file>: model".
  bpe_model(const detail::json& j, const std::string& where) {
    using namespace detail;
    const std::string here = where + " 'BPE'";
    const json* vocab = find(j, "vocab");
    if (!vocab || !vocab->is_object()) fail(here, "field \"vocab\" must be an object of token: id");
    vocab_.reserve(vocab->size());
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<std::int64_t>() < 0)
        fail(here, "vocab entry '" + it.key() + "' must have a non-negative integer id");
      const auto id = static_cast<std::uint32_t>(it.value().get<std::int64_t>());
      vocab_.emplace(it.key(), id);
      if (id >= id_to_token_.size()) id_to_token_.resize(id + 1);
      id_to_token_[id] = it.key();
    }
    if (const json* d = find(j, "dropout"); d && (!d->is_number() || d->get<double>() != 0.0))
      fail(here, "unsupported: dropout (a training-time option; inference uses none)");
    byte_fallback_ = get_bool_or(j, "byte_fallback", false, here);
    ignore_merges_ = get_bool_or(j, "ignore_merges", false, here);
    fuse_unk_ = get_bool_or(j, "fuse_unk", false, here);
    prefix_ = get_string_or(j, "continuing_subword_prefix", "", here);
    suffix_ = get_string_or(j, "end_of_word_suffix", "", here);
    if (const json* u = find(j, "unk_token")) {
      if (!u->is_string()) fail(here, "field \"unk_token\" must be a string");
      auto it = vocab_.find(u->get<std::string>());
      if (it == vocab_.end()) fail(here, "unk_token '" + u->get<std::string>() + "' is not in the vocabulary");
      unk_ = it->second;
    }
    if (byte_fallback_) {
      static const char* hex = "0123456789ABCDEF";
      for (int b = 0; b < 256; ++b) {
        std::string t = "<0x";
        t += hex[b >> 4];
        t += hex[b & 15];
        t += '>';
        auto it = vocab_.find(t);
        byte_ids_[b] = it == vocab_.end() ? -1 : static_cast<std::int64_t>(it->second);
      }
    }
    const json& merges = get_array(j, "merges", here);
    merges_.reserve(merges.size());
    std::uint32_t rank = 0;
    for (const auto& m : merges) {
      std::string a, b;
      if (m.is_string()) {
        const auto& s = m.get_ref<const std::string&>();
        const auto sp = s.find(' ');
        if (sp == std::string::npos) fail(here, "merge '" + s + "' is not two tokens separated by a space");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        a = m[0].get<std::string>();
        b = m[1].get<std::string>();
      } else {
        fail(here, "merge " + std::to_string(rank) + " must be \"a b\" or [\"a\", \"b\"]");
      }
      auto ia = vocab_.find(a), ib = vocab_.find(b);
      if (ia == vocab_.end() || ib == vocab_.end())
        fail(here, "merge " + std::to_string(rank) + " ('" + a + "' '" + b + "') names a token outside the vocabulary");
      // with a continuing_subword_prefix, "a ##b" makes "ab"
      const bool strip = !prefix_.empty() && b.compare(0, prefix_.size(), prefix_) == 0;
      const std::string merged = a + (strip ? b.substr(prefix_.size()) : b);
      auto im = vocab_.find(merged);
      if (im == vocab_.end())
        fail(here, "merge " + std::to_string(rank) + " ('" + a + "' '" + b + "') makes '" + merged + "', which is not in the vocabulary");
      merges_.emplace(key(ia->second, ib->second), merge_t{rank, im->second});
      ++rank;
    }
  }

  bpe_model(const bpe_model&) = delete;
  bpe_model& operator=(const bpe_model&) = delete;

  std::size_t vocab_size() const noexcept { return id_to_token_.size(); }
  std::optional<std::uint32_t> token_to_id(std::string_view t) const {
    auto it = vocab_.find(t);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
  }
  /// The token of an id, or nullptr where the model has none.
  const std::string* id_to_token(std::uint32_t id) const noexcept {
    return id < id_to_token_.size() && !id_to_token_[id].empty() ? &id_to_token_[id] : nullptr;
  }

  /// Appends the ids of one pre-tokenized word.
  void encode(std::string_view word, std::vector<std::uint32_t>& out) const {
    if (word.empty()) return;
    if (ignore_merges_) {
      if (auto it = vocab_.find(word); it != vocab_.end()) {
        out.push_back(it->second);
        return;
      }
    }
    const bool cacheable = word.size() < max_cached_length;
    if (cacheable) {
      std::lock_guard lock(cache_mutex_);
      if (auto it = cache_.find(word); it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    const std::size_t first = out.size();
    merge_word(word, out);
    if (cacheable) {
      std::lock_guard lock(cache_mutex_);
      if (cache_.size() >= cache_capacity) cache_.clear();
      cache_.emplace(std::string(word), std::vector<std::uint32_t>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
    }
  }

 private:
  struct merge_t {
    std::uint32_t rank;
    std::uint32_t id;
  };
  static std::uint64_t key(std::uint32_t a, std::uint32_t b) noexcept { return (std::uint64_t{a} << 32) | b; }

  void merge_word(std::string_view word, std::vector<std::uint32_t>& out) const {
    struct symbol {
      std::uint32_t id;
      int prev, next;
      bool alive;
      bool unk;
    };
    std::vector<symbol> sym;
    sym.reserve(word.size());
    auto push = [&](std::uint32_t id, bool unk) {
      const int n = static_cast<int>(sym.size());
      sym.push_back({id, n - 1, -1, true, unk});
      if (n > 0) sym[n - 1].next = n;
    };
    std::string buf;
    std::size_t i = 0;
    while (i < word.size()) {
      const std::size_t b = i;
      i += detail::utf8_len(static_cast<unsigned char>(word[i]));
      std::string_view ch = word.substr(b, i - b);
      std::string_view look = ch;
      if ((!prefix_.empty() && b > 0) || (!suffix_.empty() && i == word.size())) {
        buf.clear();
        if (b > 0) buf += prefix_;
        buf += ch;
        if (i == word.size()) buf += suffix_;
        look = buf;
      }
      if (auto it = vocab_.find(look); it != vocab_.end()) {
        push(it->second, false);
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (unsigned char c : ch) all = all && byte_ids_[c] >= 0;
        if (all) {
          for (unsigned char c : ch) push(static_cast<std::uint32_t>(byte_ids_[c]), false);
          continue;
        }
      }
      if (unk_) {
        if (fuse_unk_ && !sym.empty() && sym.back().unk) continue;
        push(*unk_, true);
      }
      // without an unk_token an unknown character is dropped, as Hugging Face's BPE does
    }
    if (sym.size() > 1) {
      struct cand {
        std::uint32_t rank;
        int pos;
        std::uint32_t id;
        bool operator>(const cand& o) const noexcept { return rank != o.rank ? rank > o.rank : pos > o.pos; }
      };
      std::priority_queue<cand, std::vector<cand>, std::greater<>> heap;
      auto consider = [&](int p) {
        const int n = sym[p].next;
        if (n < 0) return;
        auto it = merges_.find(key(sym[p].id, sym[n].id));
        if (it != merges_.end()) heap.push({it->second.rank, p, it->second.id});
      };
      for (int p = 0; p + 1 < static_cast<int>(sym.size()); ++p) consider(p);
      while (!heap.empty()) {
        const cand c = heap.top();
        heap.pop();
        symbol& s = sym[c.pos];
        if (!s.alive || s.next < 0) continue;
        // stale: one side was merged since this candidate was pushed
        auto it = merges_.find(key(s.id, sym[s.next].id));
        if (it == merges_.end() || it->second.id != c.id || it->second.rank != c.rank) continue;
        symbol& r = sym[s.next];
        r.alive = false;
        s.id = c.id;
        s.unk = false;
        s.next = r.next;
        if (r.next >= 0) sym[r.next].prev = c.pos;
        if (s.prev >= 0) consider(s.prev);
        consider(c.pos);
      }
    }
    for (int p = sym.empty() ? -1 : 0; p >= 0; p = sym[p].next) out.push_back(sym[p].id);
  }

  static constexpr std::size_t max_cached_length = 256;
  static constexpr std::size_t cache_capacity = 200000;

  detail::vocab_map vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::uint64_t, merge_t> merges_;
  std::optional<std::uint32_t> unk_;
  std::int64_t byte_ids_[256] = {};
  bool byte_fallback_ = false, ignore_merges_ = false, fuse_unk_ = false;
  std::string prefix_, suffix_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::uint32_t>, detail::string_hash, std::equal_to<>> cache_;
};

}  // namespace kiln::text
