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
#include <algorithm>  // std::push_heap, std::pop_heap
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
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

/// Open addressing over 64-bit keys, for the hot lookups (a merge by its two ids, a
/// character's id by its code point): std::unordered_map's node chasing and prime modulo
/// cost a third of a cold encode.
template <class V>
class flat_map64 {
 public:
  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    rehash(cap);
  }
  void insert(std::uint64_t key, V value) {  // keeps an existing entry, as emplace does
    if (2 * (size_ + 1) > keys_.size()) rehash(keys_.empty() ? 16 : keys_.size() * 2);
    std::size_t i = slot(key);
    while (keys_[i] != empty_key) {
      if (keys_[i] == key) return;
      i = (i + 1) & mask_;
    }
    keys_[i] = key;
    values_[i] = value;
    ++size_;
  }
  const V* find(std::uint64_t key) const noexcept {
    if (keys_.empty()) return nullptr;
    for (std::size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == empty_key) return nullptr;
    }
  }

 private:
  static constexpr std::uint64_t empty_key = ~std::uint64_t{0};
  std::size_t slot(std::uint64_t key) const noexcept { return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(std::size_t cap) {
    std::vector<std::uint64_t> keys(cap, empty_key);
    std::vector<V> values(cap);
    keys.swap(keys_);
    values.swap(values_);
    mask_ = cap - 1;
    shift_ = 64;
    for (std::size_t c = cap; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (std::size_t k = 0; k < keys.size(); ++k)
      if (keys[k] != empty_key) insert(keys[k], values[k]);
  }
  std::vector<std::uint64_t> keys_;
  std::vector<V> values_;
  std::size_t mask_ = 0, size_ = 0;
  int shift_ = 64;
};

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
      if (!it.key().empty() && detail::utf8_len(static_cast<unsigned char>(it.key()[0])) == it.key().size() &&
          detail::valid_seq_len(it.key(), 0) == it.key().size()) {
        std::size_t k = 0;
        char_ids_.insert(detail::next_cp(it.key(), k), id);
      }
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
    ascii_crossing_.assign(128 * 128, false);
    for (int c = 0; c < 128; ++c) {
      const char ch = static_cast<char>(c);
      ascii_known_[c] = vocab_.contains(std::string_view(&ch, 1));
    }
    // with a prefix or a suffix, a character's symbol depends on its place in the word
    splittable_ = prefix_.empty() && suffix_.empty();
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
      merges_.insert(key(ia->second, ib->second), merge_t{rank, im->second});
      if (!a.empty() && !b.empty()) {
        std::size_t ea = a.size(), sb = 0;
        const char32_t l = detail::prev_cp(a, ea), r = detail::next_cp(b, sb);
        crossing_.insert((std::uint64_t{l} << 32) | r);
        if (l < 128 && r < 128) ascii_crossing_[l * 128 + r] = true;
      }
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

  /// Forgets the cached words (for measuring, or to free their memory).
  void clear_cache() const {
    std::lock_guard lock(cache_mutex_);
    cache_.clear();
  }

  /// Appends the ids of one pre-tokenized word.
  void encode(std::string_view word, std::vector<std::uint32_t>& out) const {
    if (word.empty()) return;
    // the cache first: it also holds the words ignore_merges finds whole, and it is much
    // smaller than the vocabulary
    if (word.size() < max_cached_length && cached(word, out)) return;
    const std::size_t first = out.size();
    if (ignore_merges_) {
      if (auto it = vocab_.find(word); it != vocab_.end()) {
        out.push_back(it->second);
        remember(word, out, first);
        return;
      }
    }
    if (word.size() <= split_threshold || !splittable_) {
      merge_word(word, out);
      remember(word, out, first);
      return;
    }
    // A long word (a whole text, where there is no pre-tokenizer, as in SentencePiece-style
    // files) is cut where no merge can ever join the two sides: between two characters of
    // the vocabulary that no merge (A, B) has as A's last and B's first character. Merges
    // never cross such a cut, so the parts merge exactly as the whole would, and each part
    // is short enough to be cached.
    std::size_t begin = 0, i = 0;
    char32_t left = 0;
    bool left_known = false;
    while (i < word.size()) {
      const std::size_t at = i;
      const char32_t c = detail::next_cp(word, i);
      const bool known = c < 128 ? ascii_known_[c] : vocab_.find(word.substr(at, i - at)) != vocab_.end();
      const bool crosses = left < 128 && c < 128 ? ascii_crossing_[left * 128 + c] : crossing_.contains((std::uint64_t{left} << 32) | c);
      if (at > begin && left_known && known && !crosses) {
        encode_cached(word.substr(begin, at - begin), out);
        begin = at;
      }
      left = c;
      left_known = known;
    }
    encode_cached(word.substr(begin), out);
  }

 private:
  bool cached(std::string_view word, std::vector<std::uint32_t>& out) const {
    std::lock_guard lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it == cache_.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }
  void remember(std::string_view word, const std::vector<std::uint32_t>& out, std::size_t first) const {
    if (word.size() >= max_cached_length) return;
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() >= cache_capacity) cache_.clear();
    cache_.emplace(std::string(word), std::vector<std::uint32_t>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
  }
  void encode_cached(std::string_view word, std::vector<std::uint32_t>& out) const {
    if (word.size() < max_cached_length && cached(word, out)) return;
    const std::size_t first = out.size();
    merge_word(word, out);
    remember(word, out, first);
  }

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
    // per-thread buffers: a cold encode merges thousands of short words
    thread_local std::vector<symbol> sym;
    sym.clear();
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
      if ((!prefix_.empty() && b > 0) || (!suffix_.empty() && i == word.size())) {
        buf.clear();
        if (b > 0) buf += prefix_;
        buf += ch;
        if (i == word.size()) buf += suffix_;
        if (auto it = vocab_.find(buf); it != vocab_.end()) {
          push(it->second, false);
          continue;
        }
      } else {
        std::size_t k = 0;
        if (const std::uint32_t* id = char_ids_.find(detail::next_cp(ch, k))) {
          push(*id, false);
          continue;
        }
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
      thread_local std::vector<cand> heap;
      heap.clear();
      auto consider = [&](int p) {
        const int n = sym[p].next;
        if (n < 0) return;
        if (const merge_t* m = merges_.find(key(sym[p].id, sym[n].id))) {
          heap.push_back({m->rank, p, m->id});
          std::push_heap(heap.begin(), heap.end(), std::greater<>{});
        }
      };
      for (int p = 0; p + 1 < static_cast<int>(sym.size()); ++p) consider(p);
      while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
        const cand c = heap.back();
        heap.pop_back();
        symbol& s = sym[c.pos];
        if (!s.alive || s.next < 0) continue;
        // stale: one side was merged since this candidate was pushed
        const merge_t* m = merges_.find(key(s.id, sym[s.next].id));
        if (!m || m->id != c.id || m->rank != c.rank) continue;
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
  static constexpr std::size_t split_threshold = 48;
  static constexpr std::size_t cache_capacity = 200000;

  detail::vocab_map vocab_;
  std::vector<std::string> id_to_token_;
  detail::flat_map64<merge_t> merges_;
  detail::flat_map64<std::uint32_t> char_ids_;  // code point -> id, for one-character tokens
  std::unordered_set<std::uint64_t> crossing_;  // (last char of A, first char of B) of each merge
  std::vector<bool> ascii_crossing_;  // the same for ASCII pairs, as a table
  bool ascii_known_[128] = {};
  bool splittable_ = false;
  std::optional<std::uint32_t> unk_;
  std::int64_t byte_ids_[256] = {};
  bool byte_fallback_ = false, ignore_merges_ = false, fuse_unk_ = false;
  std::string prefix_, suffix_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::uint32_t>, detail::string_hash, std::equal_to<>> cache_;
};

}  // namespace kiln::text
