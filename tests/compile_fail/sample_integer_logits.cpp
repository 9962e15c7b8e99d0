// expect: sample needs floating-point logits
// Logits are scores of floating type; integer tensors hold ids or masks.
#include <kiln/sampling.hpp>

void misuse(kiln::context<kiln::cpu<>>& ctx) {
  auto logits = kiln::zeros<std::int32_t>(ctx, {2, 10});
  auto ids = kiln::sample(logits, {.temperature = 1.0f});
  (void)ids;
}
