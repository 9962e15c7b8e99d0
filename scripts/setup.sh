#!/usr/bin/env bash
# scripts/setup.sh — installs what kiln's build, tests, examples and benchmarks need on
# Debian 12 (apt-get update, then apt-get install -y); packages already present are
# skipped, so a prepared machine does nothing here. Runs as root, or through sudo.
set -euo pipefail

packages=(
  cmake make g++ pkg-config                       # toolchain
  libgtest-dev libgmock-dev libbenchmark-dev      # tests and benchmarks
  libeigen3-dev xtl-dev libxsimd-dev              # oracle, SIMD
  nlohmann-json3-dev                              # kiln::io (safetensors)
  libxtensor-dev libopenblas-dev                  # benchmark peers
  libvulkan-dev libshaderc-dev glslc              # Vulkan backend (build)
  glslang-dev spirv-tools                         # the static libraries shaderc_combined needs (kiln-vulkan.pc)
  mesa-vulkan-drivers vulkan-validationlayers     # lavapipe + validation (tests)
  vulkan-tools
  python3 python3-matplotlib                      # scripts/bench_report.py (plots; a ctest runs it)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y "${missing[@]}"
