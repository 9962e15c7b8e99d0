#!/usr/bin/env bash
# scripts/test.sh — installs missing packages, builds kiln (ci preset: the release build
# of the library, with its tests, benchmarks and examples compiled at -Og to check
# that they build and run; measure with the release preset) and runs the whole test
# suite with ctest. `scripts/test.sh release` builds and tests the release preset instead.
# `scripts/test.sh asan` runs the suite under AddressSanitizer + UBSan instead.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-ci}"
jobs="$(nproc)"

bash scripts/setup.sh
cmake --preset "$preset"
cmake --build --preset "$preset" -j "$jobs"
# one test more than cores: a dozen tests spend seconds waiting (watchdogs, servers, mpirun)
ctest --preset "$preset" -j "$((jobs + 1))" --timeout 600
