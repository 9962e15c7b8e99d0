// kiln/models/checkpoint.hpp — the tensors of a Hugging Face checkpoint directory: every
// *.safetensors file of it (one file or a sharded checkpoint), looked up by tensor name,
// loaded (whole or a range of rows) as a float dtype on any backend, converted from the
// stored F32 / F16 / BF16 on the way. Errors name the file (or directory) and the tensor.
//
// Opt-in like kiln/io/safetensors.hpp: link kiln::io.
//
//   const kiln::models::checkpoint ck("TinyLlama-1.1B");
//   auto norm = ck.load<kiln::half>(ctx, "model.norm.weight", {2048});
//   auto rows = ck.load_rows<float>(ctx, "model.embed_tokens.weight", {32000, 2048}, 0, 1024);
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "kiln/io/safetensors.hpp"
#include "kiln/kiln.hpp"

namespace kiln::models {

/// The tensors of a checkpoint, from one or several safetensors files of a directory.
class checkpoint {
 public:
  /// Opens every *.safetensors file of dir (sharded checkpoints too; each name must be in
  /// one file only). Throws kiln::format_error when there is none or a name repeats.
  explicit checkpoint(const std::string& dir) : dir_(dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw error("kiln::models::checkpoint: " + dir + " is not a directory");
    std::vector<std::string> paths;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".safetensors") paths.push_back(e.path().string());
    }
    if (ec) throw error("kiln::models::checkpoint: cannot list " + dir + ": " + ec.message());
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) throw format_error("kiln::models::checkpoint: " + dir + " holds no *.safetensors file");
    for (const auto& p : paths) {
      files_.push_back(std::make_unique<safetensors::file>(safetensors::open(p)));
      for (const auto& n : files_.back()->names()) {
        const auto [it, fresh] = where_.emplace(n, files_.size() - 1);
        if (!fresh) {
          throw format_error("kiln::models::checkpoint: tensor '" + n + "' is in both " + files_[it->second]->path() +
                             " and " + p);
        }
      }
    }
  }

  /// Whether some file holds a tensor called name.
  bool contains(const std::string& name) const { return where_.count(name) != 0; }

  /// The dtype and shape of the tensor called name (kiln::format_error when there is none).
  const safetensors::tensor_info& info(const std::string& name) const { return file_of(name).info(name); }

  /// Rows [r0, r1) of the tensor called name (whose shape must be want) as dtype W on
  /// ctx's device, converted from the stored float dtype (F32, F16, BF16) when it differs.
  /// A 1-D tensor's rows are its elements.
  template <element W, class B>
  tensor<W, B> load_rows(const context<B>& ctx, const std::string& name, const shape& want, index_t r0,
                         index_t r1) const {
    const auto& f = checked_file(name, want);
    if (want.rank() == 0) {
      throw format_error("kiln::models::checkpoint: " + f.path() + ": '" + name + "' must not be 0-d");
    }
    const index_t cols = want.rank() > 1 ? want.numel() / std::max<index_t>(want[0], 1) : 1;
    std::vector<index_t> ext(want.begin(), want.end());
    ext[0] = r1 - r0;
    const shape out{std::span<const index_t>(ext)};
    const auto upload = [&](auto stored) {
      using S = decltype(stored);
      const std::byte* p = f.bytes(name).data() + static_cast<std::size_t>(r0 * cols) * sizeof(S);
      const auto n = static_cast<std::size_t>((r1 - r0) * cols);
      std::vector<S> copy;
      std::span<const S> src;
      if (reinterpret_cast<std::uintptr_t>(p) % alignof(S) == 0) {
        src = std::span<const S>(reinterpret_cast<const S*>(p), n);  // straight from the mapping
      } else {  // safetensors does not align data: copy to aligned memory first
        copy.resize(n);
        std::memcpy(copy.data(), p, n * sizeof(S));
        src = copy;
      }
      return upload_as<W>(ctx, out, src);
    };
    return with_stored_float(f, name, upload);
  }

  /// Rows [r0, r1) and columns [c0, c1) of the 2-D tensor called name (whose shape must be
  /// want), as dtype W on ctx's device: a tensor-parallel rank's slice of a row-parallel
  /// weight. Only the slice is copied out of the mapped file (row by row), never the whole
  /// tensor. Errors as load_rows.
  template <element W, class B>
  tensor<W, B> load_block(const context<B>& ctx, const std::string& name, const shape& want, index_t r0, index_t r1,
                          index_t c0, index_t c1) const {
    if (want.rank() != 2 || (c0 == 0 && c1 == want[1])) return load_rows<W>(ctx, name, want, r0, r1);
    const auto& f = checked_file(name, want);
    const index_t cols = want[1], rows = r1 - r0, w = c1 - c0;
    const shape out{rows, w};
    const auto upload = [&](auto stored) {
      using S = decltype(stored);
      const std::byte* base = f.bytes(name).data();
      std::vector<S> copy(static_cast<std::size_t>(rows * w));
      for (index_t r = 0; r < rows; ++r) {
        std::memcpy(copy.data() + r * w, base + static_cast<std::size_t>((r0 + r) * cols + c0) * sizeof(S),
                    static_cast<std::size_t>(w) * sizeof(S));
      }
      const std::span<const S> src(copy);
      return upload_as<W>(ctx, out, src);
    };
    return with_stored_float(f, name, upload);
  }

  /// The whole tensor (see load_rows).
  template <element W, class B>
  tensor<W, B> load(const context<B>& ctx, const std::string& name, const shape& want) const {
    return load_rows<W>(ctx, name, want, 0, want.rank() > 0 ? want[0] : 1);
  }

  /// The stored bytes of the tensor called name, as the file holds them (for dtypes
  /// load_rows does not convert, such as packed codes).
  std::span<const std::byte> bytes(const std::string& name) const { return file_of(name).bytes(name); }

  /// The path of the file holding the tensor called name (named in messages).
  const std::string& path_of(const std::string& name) const { return file_of(name).path(); }

  /// The directory (named in messages).
  const std::string& dir() const noexcept { return dir_; }

 private:
  const safetensors::file& file_of(const std::string& name) const {
    const auto it = where_.find(name);
    if (it == where_.end()) throw format_error("kiln::models::checkpoint: no tensor '" + name + "' in " + dir_);
    return *files_[it->second];
  }

  /// The file holding the tensor called name, whose shape must be want.
  const safetensors::file& checked_file(const std::string& name, const shape& want) const {
    const auto& f = file_of(name);
    const auto& i = f.info(name);
    const shape got{std::span<const index_t>(i.shape.data(), i.shape.size())};
    if (got != want) {
      throw format_error("kiln::models::checkpoint: " + f.path() + ": '" + name + "' is " + got.to_string() +
                         ", the config needs " + want.to_string());
    }
    return f;
  }

  /// upload(S{}) for the stored float dtype S (float, half, bfloat16) of the tensor called
  /// name; kiln::format_error naming it for any other dtype.
  template <class F>
  static auto with_stored_float(const safetensors::file& f, const std::string& name, F&& upload) {
    const auto& dtype = f.info(name).dtype;
    if (dtype == "F32") return upload(float{});
    if (dtype == "F16") return upload(half{});
    if (dtype == "BF16") return upload(bfloat16{});
    throw format_error("kiln::models::checkpoint: " + f.path() + ": '" + name + "' is stored as " + dtype +
                       "; weights must be F32, F16 or BF16");
  }

  /// Host values of dtype S as a tensor of dtype W and shape out on ctx's device.
  template <element W, class B, class S>
  static tensor<W, B> upload_as(const context<B>& ctx, const shape& out, std::span<const S> src) {
    if constexpr (std::is_same_v<S, W>) {
      return from_host(ctx, out, src);
    } else {
      auto t = empty<W>(ctx, out);
      t = cast<W>(from_host(ctx, out, src));
      return t;
    }
  }

  std::string dir_;
  std::vector<std::unique_ptr<safetensors::file>> files_;
  std::map<std::string, std::size_t> where_;
};

}  // namespace kiln::models
