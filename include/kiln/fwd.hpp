// kiln/fwd.hpp — forward declarations of every public type.
// Include this in signatures to avoid pulling in the heavy headers.
#pragma once

#include "kiln/core/dtype.hpp"

namespace kiln {

template <class B>
struct backend_traits;  // specialised by each backend folder

template <class Arch>
struct cpu;  // kiln/cpu/backend.hpp (default Arch: best xsimd arch of this build)

struct vulkan;  // kiln/vulkan.hpp

template <class B>
class context;

template <class T, class B>
class tensor;

template <class Scheme, class B>
class qtensor;

class shape;
class strides;

}  // namespace kiln
