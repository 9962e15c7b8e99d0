// expect: kiln: this structural op has no Vulkan kernel (specialise kiln::detail::vk::vk_structural_kernel
// A structural op of one's own with a CPU kernel only: assigning it on a Vulkan context
// names the specialisation to add.
#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

#include <string_view>

struct twice_op {
  static constexpr std::string_view name = "twice";
  static constexpr kiln::detail::structural_family family = kiln::detail::structural_family::row;
  template <class In>
  using result_type = In;
};

template <>
struct kiln::detail::cpu_structural_kernel<twice_op> {
  template <class A, class Io, class S>
  static void run(const cpu_state&, const Io&, const S&, axis_split) {}
};

void misuse(kiln::context<kiln::vulkan>& gpu) {
  auto x = kiln::zeros<float>(gpu, {4, 8});
  auto y = kiln::empty<float>(gpu, {4, 8});
  y = kiln::detail::make_structural(twice_op{}, x, {});
}
