// kiln/core/backend.hpp — what a backend is.
// A backend is a tag type B with a backend_traits<B> specialisation giving its context
// state, its storage and its entry points (allocate, upload, download, evaluate, ...).
// Everything above the backend folders is written once against this interface.
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <string>

#include "kiln/fwd.hpp"

namespace kiln {

/// A backend tag: kiln::cpu<Arch> or kiln::vulkan.
///
/// backend_traits<B> provides:
///   context_state            shared by a context and every tensor made from it
///   storage                  one allocation; keeps its context_state alive
///   asynchronous             whether work may still run after a call returns
///   create(args...)          -> shared_ptr<context_state> (the context's constructor)
///   allocate(state, bytes)   -> shared_ptr<storage>
///   upload / download        host <-> storage copies (bytes, at a byte offset)
///   evaluate(out, expr)      run one expression into a tensor view (one kernel)
///   device_name(state)       "cpu", "vulkan:0"
template <class B>
concept backend = requires {
  typename backend_traits<B>::context_state;
  typename backend_traits<B>::storage;
  { backend_traits<B>::asynchronous } -> std::convertible_to<bool>;
};

}  // namespace kiln
