// kiln/io/safetensors.hpp — reading and writing the safetensors format.
//
// Opt-in: <kiln/kiln.hpp> does not include this header, because it needs nlohmann-json
// (Debian: nlohmann-json3-dev). Link kiln::io (kiln::kiln + nlohmann_json), include
// <kiln/io/safetensors.hpp> after the backend headers you use.
//
// The format: 8 bytes, the little-endian length N of a JSON header; N bytes of JSON, an
// object `name -> {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}` with an
// optional "__metadata__" string -> string map; then the data, offsets counted from the
// byte after the header, row-major, little-endian.
//
//   auto f = kiln::safetensors::open("model.safetensors");   // mmap, every entry checked
//   for (const auto& name : f.names()) f.info(name).shape;   // in file order
//   auto w = f.load<kiln::bfloat16>(ctx, "layers.0.w");      // one upload from the mapping
//   kiln::safetensors::save("out.safetensors", {{"w", w}, {"b", b}}, {{"step", "10"}});
//
// open() validates the whole header before it returns, so a damaged file throws
// kiln::format_error (naming the file, and the entry where there is one) and nothing is
// ever read outside the mapping (the file must not shrink while it is mapped: another
// process truncating it would fault the reader, as with any mmap). load<T>() needs T to be exactly the stored dtype:
// F32 float, F16 kiln::half, BF16 kiln::bfloat16, I8 int8_t, U8 uint8_t, I32 int32_t.
// Entries of the format's other dtypes (F64, I64, BOOL, U16, ...) are listed by names() /
// info() and readable as bytes(), but load() throws kiln::format_error naming the dtype.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <concepts>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core/context.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"

namespace kiln::safetensors {

static_assert(std::endian::native == std::endian::little,
              "kiln::safetensors reads and writes the data as stored: little-endian hosts only");

/// Largest JSON header open() accepts (the reference implementation's limit too).
inline constexpr std::uint64_t max_header_bytes = std::uint64_t(100) << 20;

namespace detail {

/// Bytes per element of a safetensors dtype name; 0 for a name the format does not define.
inline std::size_t dtype_size(std::string_view d) noexcept {
  struct row {
    std::string_view name;
    std::size_t size;
  };
  static constexpr row rows[] = {{"F64", 8},     {"F32", 4},     {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                 {"I32", 4},     {"I16", 2},     {"I8", 1},  {"U64", 8},  {"U32", 4},
                                 {"U16", 2},     {"U8", 1},      {"BOOL", 1}, {"F8_E4M3", 1},
                                 {"F8_E5M2", 1}, {"F8_E8M0", 1}};
  for (const auto& r : rows) {
    if (r.name == d) return r.size;
  }
  return 0;
}

/// The safetensors dtype name of a kiln element type.
template <element T>
constexpr std::string_view dtype_of() noexcept {
  switch (dtype_traits<T>::value) {
    case kiln::dtype::f32: return "F32";
    case kiln::dtype::f16: return "F16";
    case kiln::dtype::bf16: return "BF16";
    case kiln::dtype::i8: return "I8";
    case kiln::dtype::i32: return "I32";
    case kiln::dtype::u8: return "U8";
    default: return "";
  }
}

inline std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }

inline std::string os_error(const std::string& what, const std::string& path) {
  return "kiln::safetensors: " + what + " " + in_quotes(path) + ": " + std::strerror(errno);
}

/// A file descriptor closed on destruction.
class fd_handle {
 public:
  explicit fd_handle(int fd) noexcept : fd_(fd) {}
  fd_handle(const fd_handle&) = delete;
  fd_handle& operator=(const fd_handle&) = delete;
  ~fd_handle() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }
  int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace detail

/// One entry of a file: its dtype as the format names it ("F32", "BF16", "I64", ...),
/// shape, byte count and where its bytes start, counted from the start of the data.
struct tensor_info {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::size_t bytes = 0;
  std::size_t offset = 0;

  /// Number of elements (1 for a 0-d entry).
  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (auto v : shape) n *= v;
    return n;
  }
};

/// A safetensors file mapped read-only into memory. Move-only; unmaps on destruction.
class file {
 public:
  file(const file&) = delete;
  file& operator=(const file&) = delete;
  file(file&& o) noexcept
      : path_(std::move(o.path_)),
        map_(std::exchange(o.map_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        data_start_(o.data_start_),
        entries_(std::move(o.entries_)),
        order_(std::move(o.order_)),
        metadata_(std::move(o.metadata_)) {}
  file& operator=(file&& o) noexcept {
    if (this != &o) {
      unmap();
      path_ = std::move(o.path_);
      map_ = std::exchange(o.map_, nullptr);
      size_ = std::exchange(o.size_, 0);
      data_start_ = o.data_start_;
      entries_ = std::move(o.entries_);
      order_ = std::move(o.order_);
      metadata_ = std::move(o.metadata_);
    }
    return *this;
  }
  ~file() { unmap(); }

  /// The path the file was opened with.
  const std::string& path() const noexcept { return path_; }

  /// Entry names in the order of their data in the file.
  const std::vector<std::string>& names() const noexcept { return order_; }

  /// True when the file holds an entry called name.
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }

  /// dtype, shape and byte size of an entry (kiln::format_error when there is none).
  const tensor_info& info(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      throw format_error(where(name) + ": no such tensor in the file (" + std::to_string(order_.size()) +
                         " entries)");
    }
    return it->second;
  }

  /// The "__metadata__" map (empty when the file has none).
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }

  /// An entry's stored bytes, straight from the mapping (valid while the file lives).
  std::span<const std::byte> bytes(const std::string& name) const {
    const auto& i = info(name);
    return {static_cast<const std::byte*>(map_) + data_start_ + i.offset, i.bytes};
  }

  /// A new tensor on ctx's device holding the entry: one upload from the mapping. T must
  /// be exactly the stored dtype, else kiln::format_error naming both.
  template <element T, class B>
  tensor<T, B> load(const context<B>& ctx, const std::string& name) const {
    const auto& i = info(name);
    constexpr std::string_view want = detail::dtype_of<T>();
    if (i.dtype != want) {
      const bool readable = i.dtype == "F32" || i.dtype == "F16" || i.dtype == "BF16" || i.dtype == "I8" ||
                            i.dtype == "U8" || i.dtype == "I32";
      throw format_error(where(name) + ": stored as " + i.dtype + ", requested " + std::string(want) +
                         (readable ? " (load it as the stored dtype)"
                                   : " (kiln has no " + i.dtype + " tensors; bytes() gives the raw data)"));
    }
    if (i.shape.size() > static_cast<std::size_t>(max_rank)) {
      throw format_error(where(name) + ": rank " + std::to_string(i.shape.size()) + " is above kiln's maximum of " +
                         std::to_string(max_rank));
    }
    shape s;
    try {
      s = shape(std::span<const index_t>(i.shape.data(), i.shape.size()));
    } catch (const shape_error& e) {
      throw format_error(where(name) + ": " + e.what());
    }
    auto t = empty<T>(ctx, s);
    if (i.bytes) {
      const auto* src = static_cast<const std::byte*>(map_) + data_start_ + i.offset;
      // Ask for the range ahead of the copy (read-ahead instead of one fault per page).
      const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
      const std::size_t first = (data_start_ + i.offset) / page * page;
      ::madvise(static_cast<std::byte*>(map_) + first, data_start_ + i.offset + i.bytes - first, MADV_WILLNEED);
      backend_traits<B>::upload(*t.storage(), 0, src, i.bytes);
    }
    return t;
  }

 private:
  friend file open(const std::string& path);

  file() = default;

  std::string where(const std::string& name) const {
    return "kiln::safetensors: " + detail::in_quotes(path_) + ", tensor " + detail::in_quotes(name);
  }
  std::string where() const { return "kiln::safetensors: " + detail::in_quotes(path_); }

  void unmap() noexcept {
    if (map_) ::munmap(map_, size_);
    map_ = nullptr;
  }

  /// Checks the header and fills entries_, order_ and metadata_.
  void parse() {
    const auto* base = static_cast<const unsigned char*>(map_);
    std::uint64_t n = 0;
    for (int k = 7; k >= 0; --k) n = (n << 8) | base[k];
    if (n > max_header_bytes) {
      throw format_error(where() + ": header length " + std::to_string(n) + " is above the limit of " +
                         std::to_string(max_header_bytes) + " bytes (not a safetensors file?)");
    }
    if (n > size_ - 8) {
      throw format_error(where() + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                         std::to_string(size_) + " bytes)");
    }
    data_start_ = 8 + static_cast<std::size_t>(n);
    const std::size_t data_size = size_ - data_start_;

    nlohmann::json h;
    try {
      const char* text = reinterpret_cast<const char*>(base + 8);
      // A name given twice would hide the first entry's bytes: refused while parsing.
      std::vector<std::string> seen;
      h = nlohmann::json::parse(text, text + n, [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& v) {
        if (depth == 1 && ev == nlohmann::json::parse_event_t::key) seen.push_back(v.get<std::string>());
        return true;
      });
      std::sort(seen.begin(), seen.end());
      if (auto d = std::adjacent_find(seen.begin(), seen.end()); d != seen.end()) {
        throw format_error(where(*d) + ": the name appears twice in the header");
      }
    } catch (const nlohmann::json::exception& e) {
      throw format_error(where() + ": the header is not valid JSON (" + e.what() + ")");
    }
    if (!h.is_object()) {
      throw format_error(where() + ": the header is JSON " + std::string(h.type_name()) + ", not an object");
    }

    struct range {
      std::size_t begin, end;
      const std::string* name;
    };
    std::vector<range> ranges;
    for (auto it = h.begin(); it != h.end(); ++it) {
      const std::string& name = it.key();
      const auto& v = it.value();
      if (name == "__metadata__") {
        if (!v.is_object()) {
          throw format_error(where() + ": __metadata__ is JSON " + std::string(v.type_name()) + ", not an object");
        }
        for (auto m = v.begin(); m != v.end(); ++m) {
          if (!m.value().is_string()) {
            throw format_error(where() + ": __metadata__ value of " + detail::in_quotes(m.key()) + " is JSON " +
                               m.value().type_name() + ", not a string");
          }
          metadata_.emplace(m.key(), m.value().get<std::string>());
        }
        continue;
      }
      if (!v.is_object()) {
        throw format_error(where(name) + ": entry is JSON " + std::string(v.type_name()) + ", not an object");
      }
      tensor_info info;
      auto field = [&](const char* key) -> const nlohmann::json& {
        auto f = v.find(key);
        if (f == v.end()) throw format_error(where(name) + ": entry has no \"" + key + "\"");
        return *f;
      };
      const auto& d = field("dtype");
      if (!d.is_string()) {
        throw format_error(where(name) + ": \"dtype\" is JSON " + std::string(d.type_name()) + ", not a string");
      }
      info.dtype = d.get<std::string>();
      const std::size_t esize = detail::dtype_size(info.dtype);
      if (esize == 0) throw format_error(where(name) + ": unknown dtype " + detail::in_quotes(info.dtype));

      const auto& sh = field("shape");
      if (!sh.is_array()) {
        throw format_error(where(name) + ": \"shape\" is JSON " + std::string(sh.type_name()) + ", not an array");
      }
      // Each extent counted as at least 1 stays within max_numel: no element or byte count
      // made from the shape (nor kiln's strides) can wrap.
      std::uint64_t bound = 1, numel = 1;
      for (const auto& e : sh) {
        if (!e.is_number_integer() || (e.is_number_integer() && !e.is_number_unsigned() && e.get<std::int64_t>() < 0)) {
          throw format_error(where(name) + ": shape " + sh.dump() + " holds " + e.dump() +
                             ", not a non-negative integer");
        }
        const std::uint64_t x = e.get<std::uint64_t>();
        const std::uint64_t y = x > 1 ? x : 1;
        if (y > static_cast<std::uint64_t>(max_numel) / bound) {
          throw format_error(where(name) + ": shape " + sh.dump() + " spans more than 2^59 elements");
        }
        bound *= y;
        numel *= x;
        info.shape.push_back(static_cast<std::int64_t>(x));
      }

      const auto& off = field("data_offsets");
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
        throw format_error(where(name) + ": \"data_offsets\" is " + off.dump() +
                           ", not two non-negative integers [begin, end]");
      }
      const std::uint64_t b = off[0].get<std::uint64_t>(), e = off[1].get<std::uint64_t>();
      if (b > e) {
        throw format_error(where(name) + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                           "] begin after they end");
      }
      if (e > data_size) {
        throw format_error(where(name) + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                           "] run past the end of the data (" + std::to_string(data_size) + " bytes)");
      }
      if (e - b != numel * esize) {  // numel <= 2^59, esize <= 8: no wrap
        throw format_error(where(name) + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                           "] hold " + std::to_string(e - b) + " bytes, but " + info.dtype + sh.dump() + " needs " +
                           std::to_string(numel * esize));
      }
      info.offset = static_cast<std::size_t>(b);
      info.bytes = static_cast<std::size_t>(e - b);
      auto [pos, fresh] = entries_.emplace(name, std::move(info));
      ranges.push_back({static_cast<std::size_t>(b), static_cast<std::size_t>(e), &pos->first});
    }

    std::sort(ranges.begin(), ranges.end(), [](const range& a, const range& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    for (std::size_t k = 1; k < ranges.size(); ++k) {
      const auto& p = ranges[k - 1];
      const auto& q = ranges[k];
      if (q.begin < p.end && q.end > q.begin) {  // an empty range overlaps nothing
        throw format_error(where(*q.name) + ": data_offsets [" + std::to_string(q.begin) + ", " +
                           std::to_string(q.end) + "] overlap those of " + detail::in_quotes(*p.name) + " [" +
                           std::to_string(p.begin) + ", " + std::to_string(p.end) + "]");
      }
    }
    order_.reserve(ranges.size());
    for (const auto& r : ranges) order_.push_back(*r.name);
  }

  std::string path_;
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::size_t data_start_ = 0;
  std::map<std::string, tensor_info> entries_;
  std::vector<std::string> order_;
  std::map<std::string, std::string> metadata_;
};

/// Maps path read-only and checks its header. Throws kiln::format_error for a damaged
/// file, kiln::error when it cannot be opened or mapped.
inline file open(const std::string& path) {
  detail::fd_handle fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw error(detail::os_error("cannot open", path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw error(detail::os_error("cannot stat", path));
  if (!S_ISREG(st.st_mode)) throw format_error("kiln::safetensors: " + detail::in_quotes(path) + " is not a regular file");
  file f;
  f.path_ = path;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < 8) {
    throw format_error("kiln::safetensors: " + detail::in_quotes(path) + " is " + std::to_string(size) +
                       " bytes long, shorter than the 8-byte header length");
  }
  void* m = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (m == MAP_FAILED) throw error(detail::os_error("cannot map", path));
  f.map_ = m;
  f.size_ = static_cast<std::size_t>(size);
  f.parse();
  return f;
}

/// One tensor to save: a kiln tensor on any backend (read back when save() writes it),
/// or raw little-endian bytes with a safetensors dtype name and a shape.
class item {
 public:
  template <class T, class B>
  item(const tensor<T, B>& t)  // NOLINT: implicit, so save(path, {{"w", w}}) reads well
      : dtype_(detail::dtype_of<T>()), bytes_(static_cast<std::size_t>(t.numel()) * sizeof(T)) {
    for (auto e : t.shape()) shape_.push_back(e);
    fill_ = [t](std::byte* dst) {
      std::vector<T> host(static_cast<std::size_t>(t.numel()));
      t.copy_to(std::span<T>(host));
      if (!host.empty()) std::memcpy(dst, host.data(), host.size() * sizeof(T));
    };
  }

  /// Raw data (any dtype the format defines, e.g. "I64"): bytes.size() must be the
  /// element count of shape times the dtype's size. The bytes are read when save() writes
  /// them, so they must outlive the item.
  item(std::string dtype, std::vector<std::int64_t> shape, std::span<const std::byte> bytes)
      : dtype_(std::move(dtype)), shape_(std::move(shape)), bytes_(bytes.size()) {
    const std::size_t es = detail::dtype_size(dtype_);
    if (es == 0) throw format_error("kiln::safetensors::item: unknown dtype " + detail::in_quotes(dtype_));
    std::uint64_t n = 1;
    for (auto e : shape_) {
      if (e < 0) throw shape_error("kiln::safetensors::item: negative extent " + std::to_string(e));
      if (e > 0 && n > static_cast<std::uint64_t>(max_numel) / static_cast<std::uint64_t>(e)) {
        throw shape_error("kiln::safetensors::item: shape spans more than 2^59 elements");
      }
      n *= static_cast<std::uint64_t>(e);
    }
    if (n * es != bytes.size()) {
      throw shape_error("kiln::safetensors::item: " + std::to_string(bytes.size()) + " bytes for " + dtype_ +
                        " with " + std::to_string(n) + " elements (" + std::to_string(n * es) + " bytes needed)");
    }
    fill_ = [bytes](std::byte* dst) {
      if (!bytes.empty()) std::memcpy(dst, bytes.data(), bytes.size());
    };
  }

  const std::string& dtype() const noexcept { return dtype_; }
  const std::vector<std::int64_t>& shape() const noexcept { return shape_; }
  std::size_t bytes() const noexcept { return bytes_; }
  /// Writes the bytes() bytes of data to dst.
  void fill(std::byte* dst) const { fill_(dst); }

 private:
  std::string dtype_;
  std::vector<std::int64_t> shape_;
  std::size_t bytes_ = 0;
  std::function<void(std::byte*)> fill_;
};

namespace detail {

inline void write_all(int fd, const void* p, std::size_t n, const std::string& path) {
  const auto* c = static_cast<const char*>(p);
  while (n) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw error(os_error("cannot write", path));
    }
    c += w;
    n -= static_cast<std::size_t>(w);
  }
}

inline std::size_t align8(std::size_t n) noexcept { return (n + 7) & ~std::size_t(7); }

inline void save_items(const std::string& path, const std::vector<std::pair<const std::string*, const item*>>& items,
                       const std::map<std::string, std::string>& metadata) {
  const std::string op = "kiln::safetensors::save(" + in_quotes(path) + ")";
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = std::move(m);
  }
  std::size_t at = 0;
  std::vector<std::size_t> starts;
  for (const auto& [name, it] : items) {
    if (*name == "__metadata__") throw format_error(op + ": \"__metadata__\" is reserved, not a tensor name");
    if (h.contains(*name)) throw format_error(op + ": tensor " + in_quotes(*name) + " given twice");
    at = align8(at);
    starts.push_back(at);
    h[*name] = {{"dtype", it->dtype()}, {"shape", it->shape()}, {"data_offsets", {at, at + it->bytes()}}};
    at += it->bytes();
  }
  std::string text;
  try {
    text = h.dump();
  } catch (const nlohmann::json::exception& e) {
    throw format_error(op + ": a name or metadata string is not valid UTF-8 (" + e.what() + ")");
  }
  text.resize(align8(text.size()), ' ');

  // The new file appears whole or not at all: a temporary beside it, renamed over it.
  std::string tmp = path + ".tmp.XXXXXX";
  fd_handle fd(::mkstemp(tmp.data()));
  if (fd.get() < 0) throw error(os_error("cannot create a temporary beside", path));
  try {
    if (::fchmod(fd.get(), 0644) != 0) throw error(os_error("cannot set the mode of", tmp));
    unsigned char len[8];
    for (int k = 0; k < 8; ++k) len[k] = static_cast<unsigned char>(std::uint64_t(text.size()) >> (8 * k));
    write_all(fd.get(), len, 8, tmp);
    write_all(fd.get(), text.data(), text.size(), tmp);
    std::vector<std::byte> buf;
    std::size_t pos = 0;
    static constexpr std::byte zeros[8] = {};
    for (std::size_t k = 0; k < items.size(); ++k) {
      write_all(fd.get(), zeros, starts[k] - pos, tmp);
      const item& it = *items[k].second;
      buf.resize(it.bytes());
      it.fill(buf.data());
      write_all(fd.get(), buf.data(), buf.size(), tmp);
      pos = starts[k] + it.bytes();
    }
    if (::fsync(fd.get()) != 0) throw error(os_error("cannot sync", tmp));
    if (::close(fd.release()) != 0) throw error(os_error("cannot close", tmp));
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw error(os_error("cannot rename " + in_quotes(tmp) + " to", path));
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace detail

/// Writes the tensors, in the order given, to path, atomically (a temporary in the same
/// directory renamed over path). Data offsets are 8-byte aligned and the header is
/// padded with spaces to a multiple of 8 bytes.
inline void save(const std::string& path, const std::vector<std::pair<std::string, item>>& tensors,
                 const std::map<std::string, std::string>& metadata = {}) {
  std::vector<std::pair<const std::string*, const item*>> v;
  v.reserve(tensors.size());
  for (const auto& [n, t] : tensors) v.emplace_back(&n, &t);
  detail::save_items(path, v, metadata);
}

/// The same from a map (std::map<std::string, item> or of kiln tensors), in its order.
template <class Map>
  requires requires(const Map& m) {
    { m.begin()->first } -> std::convertible_to<const std::string&>;
    item(m.begin()->second);
  }
void save(const std::string& path, const Map& tensors, const std::map<std::string, std::string>& metadata = {}) {
  std::vector<std::pair<std::string, item>> v;
  v.reserve(tensors.size());
  for (const auto& [n, t] : tensors) v.emplace_back(n, item(t));
  save(path, v, metadata);
}

}  // namespace kiln::safetensors
