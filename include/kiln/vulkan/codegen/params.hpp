// kiln/vulkan/codegen/params.hpp — a generated kernel's parameter block, declared once.
//
// Every kernel kiln generates reads its geometry, operand offsets, extents, strides and
// the statement's scalars from one block (push constants, or a storage buffer when they
// do not fit). A family appends each member once, with its GLSL type, its name and its
// value, in block order:
//
//   param_block p("the Vulkan matmul kernels");
//   p.u32("M", d.M, "M");                 // uint M;   checked to fit 32 bits
//   p.i32("bsk", bsk, "stride");          // int bsk;  checked to fit int32
//   p.f32("eps", eps);                    // float eps;
//
// The push words (`words()`), the GLSL members (`glsl()`, spliced into the generated
// source when the source cache misses) and the word count all come from that one list,
// so they cannot disagree. Recording stays cheap: a member costs a word and a small
// record (a static name, up to two indices); its text is only made when a source is.
#pragma once

#include <bit>  // std::bit_cast
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kiln/core/shape.hpp"  // index_t
#include "kiln/detail/config.hpp"
#include "kiln/vulkan/codegen/plan.hpp"   // throw_index_limit
#include "kiln/vulkan/codegen/types.hpp"  // glsl_compute_type

namespace kiln::detail::vk {

/// A generated kernel's parameters: typed, named members and their 32-bit words, in block
/// order. Names are static strings with up to two indices: ("ist", 2, 1) is `ist2_1`,
/// ("off", 3) is `off3`.
class param_block {
 public:
  /// kernels: what the errors name as the indexing limit's owner ("the Vulkan matmul kernels").
  explicit param_block(const char* kernels = "generated kernels") : kernels_(kernels) {}

  /// `uint name`: v in [0, 2^32) (or a negative int32, stored as its bits); otherwise
  /// kiln::shape_error naming `what` and v (throw_index_limit).
  void u32(const char* name, index_t v, const char* what, int i = -1, int j = -1);
  /// `int name`: v in int32; otherwise kiln::shape_error naming `what` and v.
  void i32(const char* name, index_t v, const char* what, int i = -1, int j = -1);
  /// `float name`.
  void f32(const char* name, float v, int i = -1, int j = -1) {
    add("float", name, i, j, std::bit_cast<std::uint32_t>(v));
  }
  /// A statement scalar (an expression's constant): its compute type's member, named
  /// name<i> ("s0", "t1").
  template <class Sc>
  void scalar(const char* name, const Sc& sc, int i) {
    using V = typename Sc::value_type;
    using C = std::remove_cvref_t<decltype(sc.value)>;
    std::uint32_t bits;
    if constexpr (std::is_same_v<C, float>) bits = std::bit_cast<std::uint32_t>(sc.value);
    else bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(sc.value));
    add(glsl_compute_type<V>(), name, i, -1, bits);
  }

  std::size_t size() const noexcept { return words_.size(); }
  std::size_t bytes() const noexcept { return words_.size() * 4; }
  const std::vector<std::uint32_t>& words() const noexcept { return words_; }
  std::vector<std::uint32_t> take_words() noexcept { return std::move(words_); }

  /// The members as GLSL declarations, one a line ("  uint M;\n  int bsk;\n").
  KILN_DECL std::string glsl() const;
  /// The member names in order, comma-separated, each after `prefix` ("kiln_pc.M, kiln_pc.bsk").
  KILN_DECL std::string names(std::string_view prefix) const;

 private:
  struct member {
    std::string_view type;
    const char* name;
    std::int16_t i, j;
  };
  void add(std::string_view type, const char* name, int i, int j, std::uint32_t bits) {
    members_.push_back({type, name, static_cast<std::int16_t>(i), static_cast<std::int16_t>(j)});
    words_.push_back(bits);
  }
  [[noreturn]] KILN_DECL void out_of_range(const char* what, index_t v) const;
  KILN_DECL static void name_of(std::string& s, const member& m);

  const char* kernels_;
  std::vector<member> members_;
  std::vector<std::uint32_t> words_;
};

inline void param_block::u32(const char* name, index_t v, const char* what, int i, int j) {
  if (v < INT32_MIN || v > index_t(UINT32_MAX)) out_of_range(what, v);
  add("uint", name, i, j, static_cast<std::uint32_t>(v));
}

inline void param_block::i32(const char* name, index_t v, const char* what, int i, int j) {
  if (v < INT32_MIN || v > INT32_MAX) out_of_range(what, v);
  add("int", name, i, j, static_cast<std::uint32_t>(static_cast<std::int32_t>(v)));
}

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/codegen/impl/params.ipp"
#endif
