#!/usr/bin/env bash
# scripts/test.sh — installs missing packages, builds kiln (release preset: tests,
# benchmarks, examples) and runs the whole test suite with ctest.
# `scripts/test.sh asan` runs the suite under AddressSanitizer + UBSan instead.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
jobs="$(nproc)"

bash scripts/setup.sh
cmake --preset "$preset"
cmake --build --preset "$preset" -j "$jobs"
ctest --preset "$preset" -j "$jobs" --timeout 600
