#!/usr/bin/env bash
# scripts/tour.sh — installs missing packages, builds and runs examples/tour.cpp: fused
# expressions checked against Eigen, with a small timing table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build/tour -DCMAKE_BUILD_TYPE=Release \
      -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCHMARKS=OFF -DKILN_BUILD_EXAMPLES=ON >/dev/null
cmake --build build/tour --target tour -j "$(nproc)"
./build/tour/examples/tour
