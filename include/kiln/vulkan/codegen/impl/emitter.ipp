// kiln/vulkan/codegen/impl/emitter.ipp — definitions of kiln/vulkan/codegen/emitter.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/vulkan/codegen/emitter.hpp"

namespace kiln::detail::vk {

KILN_DECL emitter::emitter(const kernel_plan& plan) : plan_(plan) {}

KILN_DECL std::string emitter::emit_op(const op_text& op, std::string_view type, std::vector<std::string>& args,
                                       const std::vector<std::string>& names,
                                       std::span<const std::string_view> arg_types, std::string& readable) {
  readable = std::string(op.name) + "(";
  for (std::size_t i = 0; i < names.size(); ++i) readable += (i ? ", " : "") + names[i];
  readable += ")";
  for (std::size_t i = 0; i < op.conditions && i < args.size(); ++i) {
    if (arg_types[i] != "bool") args[i] = "(" + args[i] + " != 0)";
  }
  // the operand type decides int vs float spelling (comparisons yield bool)
  const std::string_view operand_type = arg_types.empty() ? "float" : arg_types.back();
  const std::string_view body_text = operand_type == "int" && !op.glsl_int.empty() ? op.glsl_int : op.glsl;
  const std::string text = substitute(body_text, args, operand_type);
  for (std::string& f : op.functions()) {
    if (std::find(functions.begin(), functions.end(), f) == functions.end()) functions.push_back(std::move(f));
  }
  return define(std::string(type), text);
}

KILN_DECL std::string emitter::leaf_name(std::size_t id) {
  std::string s;
  do {
    s.insert(s.begin(), char('a' + id % 26));
    id /= 26;
  } while (id-- > 0);
  return s;
}

KILN_DECL std::string emitter::define(const std::string& type, const std::string& text) {
  const std::string key = type + " " + text;
  if (auto it = cse_.find(key); it != cse_.end()) return it->second;  // computed once
  const std::string name = "v" + std::to_string(cse_.size());
  body += "  " + type + " " + name + " = " + text + ";\n";
  cse_.emplace(key, name);
  return name;
}

KILN_DECL std::string emitter::substitute(std::string_view body, const std::vector<std::string>& args, std::string_view type) {
  std::string out;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] == '{') {
      const std::size_t close = body.find('}', i);
      if (close == std::string_view::npos) throw shader_error("kiln: unbalanced '{' in an op's glsl body: " + std::string(body));
      const std::string_view tag = body.substr(i + 1, close - i - 1);
      if (tag == "T") {
        out += type;
      } else {
        const std::size_t k = static_cast<std::size_t>(std::stoul(std::string(tag)));
        if (k >= args.size()) {
          throw shader_error("kiln: op glsl body refers to {" + std::string(tag) + "} but has " +
                             std::to_string(args.size()) + " operands: " + std::string(body));
        }
        out += args[k];
      }
      i = close;
    } else {
      out += body[i];
    }
  }
  return out;
}

KILN_DECL std::string emitter::float_literal(float v) { return std::to_string(static_cast<double>(v)); }

}  // namespace kiln::detail::vk
