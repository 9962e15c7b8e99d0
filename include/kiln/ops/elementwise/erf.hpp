// kiln/ops/elementwise/erf.hpp — the error function.
#pragma once

#include <cmath>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct erf_op {
  static constexpr std::string_view name = "erf";
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    using std::erf;
    return erf(a);
  }
  static constexpr std::string_view glsl = "kiln_erf({0})";  // GLSL has no erf: codegen prelude
};

/// Elementwise error function. Dtypes: f32, f16, bf16. Example: `y = kiln::erf(x);`
template <expression X>
auto erf(X&& x) {
  return map<erf_op>(std::forward<X>(x));
}

}  // namespace kiln
