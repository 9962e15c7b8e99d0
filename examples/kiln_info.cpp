// examples/kiln_info.cpp — every Vulkan device's compute capabilities, and the one kiln
// selects (a compute-focused `vulkaninfo --summary`). Honors KILN_DEVICE.
// `kiln_info --self-test` also runs a few profiled statements on the selected device and
// prints the kernel table (kiln::profile_table) and the memory and cache report.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include <kiln/kiln.hpp>
#include <kiln/vulkan.hpp>

namespace {

std::string mib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

const char* yes(bool b) { return b ? "yes" : "no"; }

void print(const kiln::vulkan::device_info& d, bool selected) {
  std::printf("%s vulkan:%d  %s\n", selected ? "*" : " ", d.index, d.name.c_str());
  std::printf("    type               %s\n", kiln::detail::vk::name(d.type));
  std::printf("    vendor / device    0x%04x / 0x%04x\n", d.vendor_id, d.device_id);
  std::printf("    driver             %s (%s), id %u\n", d.driver_name.c_str(), d.driver_info.c_str(), d.driver_id);
  std::printf("    Vulkan             %s\n", d.api_version_string().c_str());
  if (!d.usable()) {
    std::printf("    unusable           %s\n\n", d.unusable_reason.c_str());
    return;
  }
  std::string ops;
  for (const auto& o : d.subgroup_operations) ops += (ops.empty() ? "" : " ") + o;
  std::printf("    subgroup           %u lanes (%s)%s\n", d.subgroup_size, ops.c_str(),
              d.subgroups_in_compute ? "" : " [not in compute shaders]");
  std::printf("    workgroup          %u invocations max, size %u x %u x %u, %u KiB shared memory\n",
              d.max_workgroup_invocations, d.max_workgroup_size[0], d.max_workgroup_size[1], d.max_workgroup_size[2],
              d.max_shared_memory / 1024);
  std::printf("    arithmetic         fp16 %s, int8 %s, int64 %s, integer dot product %s\n", yes(d.fp16_arithmetic),
              yes(d.int8_arithmetic), yes(d.int64), yes(d.integer_dot_product));
  std::printf("    f32 controls       NaN/inf preserved %s, subnormals preserved %s\n", yes(d.f32_nan_preserve),
              yes(d.f32_denorm_preserve));
  if (d.integer_dot_product) {
    std::string fast;
    for (const auto& [on, what] : {std::pair{d.dot4x8_signed_accelerated, "signed"},
                                   std::pair{d.dot4x8_unsigned_accelerated, "unsigned"},
                                   std::pair{d.dot4x8_mixed_accelerated, "mixed"}}) {
      if (on) fast += (fast.empty() ? "" : ", ") + std::string(what);
    }
    std::printf("    4x8-bit dots       accelerated: %s (quantized products: %s)\n", fast.empty() ? "none" : fast.c_str(),
                d.dot4x8_signed_accelerated ? "packed dot products" : "plain integer multiply-adds");
  }
  std::printf("    storage            8-bit %s, 16-bit %s\n", yes(d.storage_8bit), yes(d.storage_16bit));
  std::printf("    cooperative matrix %s%s\n", yes(d.cooperative_matrix),
              d.cooperative_matrix_claimed && !d.cooperative_matrix ? " (claimed by the driver, not on kiln's allow-list)" : "");
  std::printf("    limits             allocation %s, buffer %s, binding %s, push constants %u B\n",
              mib(d.max_allocation_size).c_str(), mib(d.max_buffer_size).c_str(), mib(d.max_storage_buffer_range).c_str(),
              d.max_push_constants);
  std::printf("    texel reads        %s\n", d.max_texel_buffer_elements
                                                  ? ("uniform texel buffers up to " + mib(d.max_texel_buffer_elements * 16)).c_str()
                                                  : "no");
  for (std::size_t h = 0; h < d.heaps.size(); ++h) {
    std::string types;
    for (std::size_t t = 0; t < d.memory_types.size(); ++t) {
      const auto& m = d.memory_types[t];
      if (m.heap != h) continue;
      types += " [" + std::to_string(t) + ":";
      types += m.device_local ? " device-local" : "";
      types += m.host_visible ? " host-visible" : "";
      types += m.host_coherent ? " coherent" : "";
      types += m.host_cached ? " cached" : "";
      types += "]";
    }
    std::printf("    heap %zu             %s%s%s\n", h, mib(d.heaps[h].size).c_str(), d.heaps[h].device_local ? " device-local" : "",
                types.c_str());
  }
  std::printf("    timestamps         %s\n",
              d.timestamp_valid_bits ? (std::to_string(d.timestamp_valid_bits) + " bits, " +
                                        std::to_string(d.timestamp_period) + " ns per tick (kiln's GPU times)").c_str()
                                     : "none on the compute queue (the profiler reports host time only)");
  std::printf("    unified memory     %s\n", yes(d.unified_memory));
  // copies between contexts of devices with the same deviceUUID/driverUUID go device to device
  std::printf("    external memory    %s\n\n",
              d.external_memory_fd ? "opaque fd (copies between contexts of this device go device to device)"
                                   : "no (copies between contexts are staged through the host)");
}

/// A short profiled run: a fused chain, a matmul with an epilogue, a softmax.
void self_test(kiln::context<kiln::vulkan>& ctx) {
  ctx.set_profiling(true);
  auto a = kiln::random<float>(ctx, {256, 256}, -1, 1, 1);
  auto b = kiln::random<float>(ctx, {256, 256}, -1, 1, 2);
  auto y = kiln::empty<float>(ctx, {256, 256});
  for (int i = 0; i < 3; ++i) {
    y = kiln::gelu(a * b + 1.0f);
    y = kiln::relu(kiln::matmul(a, y) + b);
    y = kiln::softmax(y * 0.5f);
  }
  (void)y.to_host();
  std::cout << "self-test on " << ctx.device_name() << ":\n\n" << kiln::profile_table(ctx) << "\n"
            << kiln::memory_report(ctx);
}

}  // namespace

int main(int argc, char** argv) {
  const bool run_self_test = argc > 1 && std::string(argv[1]) == "--self-test";
  if (argc > 1 && !run_self_test) {
    std::fprintf(stderr, "usage: kiln_info [--self-test]\n");
    return 2;
  }
  const auto devices = kiln::vulkan::devices();
  if (devices.empty()) {
    std::printf("no Vulkan device (no loader, no driver, or no device the driver reports)\n");
    return 1;
  }
  int selected = -1;
  std::string why;
  std::optional<kiln::context<kiln::vulkan>> ctx;
  try {
    ctx.emplace();
    selected = kiln::vulkan::device(*ctx).index;
  } catch (const kiln::error& e) {
    why = e.what();
  }
  std::printf("kiln: %zu Vulkan device(s), * = selected\n\n", devices.size());
  for (const auto& d : devices) print(d, d.index == selected);
  if (selected < 0) {
    std::printf("kiln selects no device: %s\n", why.c_str());
    return 1;
  }
  if (run_self_test) {
    try {
      self_test(*ctx);
    } catch (const kiln::error& e) {
      std::printf("self-test failed: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
