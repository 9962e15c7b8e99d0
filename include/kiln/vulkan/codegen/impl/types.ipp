// kiln/vulkan/codegen/impl/types.ipp — definitions of kiln/vulkan/codegen/types.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/codegen/types.hpp"

namespace kiln::detail::vk {

KILN_DECL std::string_view glsl_storage_type(dtype t) {
  switch (t) {
    case dtype::f32: return "float";
    case dtype::f16: return "float16_t";
    case dtype::bf16: return "uint16_t";
    case dtype::i8: return "int8_t";
    case dtype::i32: return "int";
    case dtype::u8: return "uint8_t";
    case dtype::mask: break;
  }
  return "uint8_t";
}

KILN_DECL std::string glsl_load(dtype t, const std::string& x) {
  switch (t) {
    case dtype::f32:
    case dtype::i32: return x;
    case dtype::f16: return "float(" + x + ")";
    case dtype::bf16: return "uintBitsToFloat(uint(" + x + ") << 16)";
    case dtype::i8:
    case dtype::u8: return "int(" + x + ")";
    case dtype::mask: break;
  }
  return x;
}

KILN_DECL std::string glsl_store(dtype t, std::string_view from, const std::string& v) {
  const std::string x = from == "bool" ? "(" + v + " ? 1 : 0)" : v;
  switch (t) {
    case dtype::f32:
    case dtype::i32: return x;
    case dtype::f16: return "float16_t(" + x + ")";
    case dtype::bf16: return "uint16_t(kiln_to_bf16(" + x + "))";
    case dtype::i8: return "int8_t(" + x + ")";
    case dtype::u8: return "uint8_t(" + x + ")";
    case dtype::mask: break;
  }
  return x;
}

}  // namespace kiln::detail::vk
