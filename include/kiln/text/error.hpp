// kiln/text/error.hpp — what the tokenizers throw.
// Files that are not what the tokenizer.json format requires (bad JSON, an unknown or
// unsupported component, a merge naming a token outside the vocabulary) throw
// tokenizer_error, a kiln::format_error; an id outside the vocabulary throws
// vocabulary_error, a kiln::index_error. Messages start "kiln::text: <file>: <component>".
#pragma once

#include <string>

#include "kiln/core/error.hpp"

namespace kiln::text {

/// A tokenizer.json / tokenizer_config.json that cannot be used, or text the tokenizer
/// cannot take (not UTF-8); the message names the file and the component.
class tokenizer_error : public kiln::format_error {
 public:
  using kiln::format_error::format_error;
};

/// An id that is not in the tokenizer's vocabulary (model vocabulary plus added tokens).
class vocabulary_error : public kiln::index_error {
 public:
  using kiln::index_error::index_error;
};

}  // namespace kiln::text
