#!/usr/bin/env bash
# scripts/gpu_check.sh [OUT_DIR] — kiln's one-command GPU check (run it on a machine with a
# Vulkan GPU; nothing in CI runs it):
#   1. builds the Vulkan tests and vulkan_gpu_bench in Release with every core, into
#      $KILN_GPU_BUILD (default build/gpu) — skipped when both binaries are there already
#      and KILN_GPU_REBUILD is unset (a build made elsewhere and carried in);
#   2. runs the whole Vulkan test suite on the GPU, validation layer on (kiln's test
#      fixture turns it on), in one process per shard over the cores;
#   3. runs vulkan_gpu_bench (GEMM, attention, quantized matvec, the 1B-shape decoder, the
#      copy bandwidth; medians of 3 repetitions) with the GPU's clocks logged
#      (nvidia-smi, where present), then the decode step under kiln's profiler and the
#      GEMM kernels' tiles (KILN_VULKAN_COOPMAT_TILE on f16, KILN_VULKAN_TILED_TILE on
#      f32; KILN_GPU_COOPMAT_TILES / KILN_GPU_TILED_TILES list them, empty: none);
#   4. writes OUT_DIR/gpu-<device>.json and OUT_DIR/gpu-<device>.md (default docs/bench),
#      each figure beside the device's peak (scripts/gpu_report.py), plus the raw logs
#      under OUT_DIR/gpu-check-<device>/.
# KILN_GPU_COMMIT names the commit the binaries were built from (default: git HEAD);
# KILN_GPU_BENCH_ARGS adds benchmark flags (e.g. a filter); KILN_GPU_TEST_TIMEOUT and
# KILN_GPU_BENCH_TIMEOUT bound the two steps (seconds).
# Bounded: each step has its own timeout; with binaries carried in, the whole check is sized
# to end within 8 minutes on an H100/H200 (tests about 40 s, benchmarks up to 330 s: the
# H200 run of 2026-11-27 reached the square f16 products in 250 s, the decode profile and
# the tile sweeps about 60 s). Exit status: 0 when every test passed and every benchmark ran.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/bench}"
build="${KILN_GPU_BUILD:-build/gpu}"
jobs="$(nproc)"
work="$(mktemp -d)"
start=$(date +%s)
stamp() { echo "[gpu_check +$(($(date +%s) - start))s] $*"; }
mkdir -p "$out"

tests_bin="$build/tests/kiln_vulkan_tests"
bench_bin="$build/benchmarks/vulkan_gpu_bench"
if [[ -n "${KILN_GPU_REBUILD:-}" || ! -x "$tests_bin" || ! -x "$bench_bin" ]]; then
  stamp "building into $build with $jobs jobs"
  timeout 300 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_VULKAN=ON >"$work/configure.log" 2>&1 &&
    timeout 300 cmake --build "$build" -j "$jobs" --target kiln_vulkan_tests vulkan_gpu_bench >"$work/build.log" 2>&1
  rc=$?
  tail -20 "$work/build.log" 2>/dev/null
  if [[ $rc -ne 0 ]]; then
    stamp "build failed (status $rc)"
    tail -40 "$work/configure.log"
    exit 1
  fi
fi

export KILN_CACHE_DIR="${KILN_CACHE_DIR:-$work/cache}"

logs="$work/logs"
mkdir -p "$logs"

# 2. the Vulkan suite, sharded over processes (each shard one context, validation on)
shards=$((jobs < 8 ? jobs : 8))
stamp "Vulkan tests: $shards shards"
pids=()
for ((i = 0; i < shards; ++i)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "${KILN_GPU_TEST_TIMEOUT:-180}" "$tests_bin" \
    --gtest_output="json:$work/tests-$i.json" >"$work/tests-$i.log" 2>&1 &
  pids+=($!)
done
test_rc=0
for p in "${pids[@]}"; do wait "$p" || test_rc=1; done
cat "$work"/tests-*.log >"$logs/tests.log"
grep -E '^\[  (FAILED|PASSED)|tests ran|^\[  SKIPPED \] [0-9]' "$logs/tests.log" | sort | uniq -c | head -40
stamp "Vulkan tests done (status $test_rc)"

# 3. the benchmarks (most telling first; a run cut off by its timeout keeps the figures
# so far: the report reads the unfinished JSON and names what did not run), with the
# GPU's clocks, power and throttle reasons logged every 500 ms (compute-bound figures
# move with the SM clock)
clock_pid=
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader,nounits -lms 500 >"$logs/clocks.csv" 2>/dev/null &
  clock_pid=$!
fi
stamp "benchmarks"
timeout "${KILN_GPU_BENCH_TIMEOUT:-330}" "$bench_bin" --benchmark_out="$work/bench-main.json" \
  --benchmark_out_format=json ${KILN_GPU_BENCH_ARGS:-} >"$logs/bench.log" 2>&1
bench_rc=$?
grep -E '_median|ERROR' "$logs/bench.log" | cut -c1-200
stamp "benchmarks done (status $bench_rc)"

# 3b. where a decode step's time goes: kiln's profiler (GPU timestamps) over four steps
stamp "decode profile"
KILN_PROFILE=1 timeout "${KILN_GPU_PROFILE_TIMEOUT:-60}" "$bench_bin" --benchmark_filter='^gpu/llama/(f16|int8)/decode(/real_time)?$' \
  --benchmark_repetitions=1 >"$logs/decode-profile.log" 2>&1
grep -E -A12 '^decode, ' "$logs/decode-profile.log" | cut -c1-160

# 3c. the GEMM kernels' tiles on 4096^3: the cooperative-matrix kernel's on f16
# (KILN_VULKAN_COOPMAT_TILE, where the device has cooperative matrices) and the tiled
# kernel's on f32 (KILN_VULKAN_TILED_TILE): the report lists them beside the defaults
sweep=()
sweep_one() {  # kernel, environment variable, tile, benchmark
  local f="$work/sweep-$1-${3//\//_}.json"
  env "$2=$3" timeout 30 "$bench_bin" --benchmark_filter="^$4(/real_time)?\$" --benchmark_out="$f" \
    --benchmark_out_format=json >>"$logs/sweep.log" 2>&1 && sweep+=("$f")
}
stamp "GEMM tiles"
if grep -q '"kiln_cooperative_matrix": "used"' "$work/bench-main.json" 2>/dev/null; then
  for tile in ${KILN_GPU_COOPMAT_TILES-128x128x32/2x2 128x256x32/2x4 256x128x32/4x2}; do
    sweep_one coopmat KILN_VULKAN_COOPMAT_TILE "$tile" gpu/gemm/f16/4096
  done
fi
for tile in ${KILN_GPU_TILED_TILES-64x64x16/4x4 128x64x16/8x4 128x128x16/8x8}; do
  sweep_one tiled KILN_VULKAN_TILED_TILE "$tile" gpu/gemm/f32/4096
done
[[ -n "$clock_pid" ]] && kill "$clock_pid" 2>/dev/null

# 4. the report, named after the device kiln opened (the benchmark's context names it)
device_name="$(python3 -c 'import sys; sys.path.insert(0, "scripts"); import gpu_report as g
print(g.parse_json_prefix(open(sys.argv[1]).read())["context"]["kiln_device"])' "$work/bench-main.json" 2>/dev/null ||
  echo unknown)"  # the JSON of a run cut off by its timeout is unclosed
slug="$(echo "$device_name" | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/-/g; s/^-+|-+$//g')"
python3 scripts/gpu_report.py --bench "$work"/bench-*.json --tests "$work"/tests-*.json --out "$out" --slug "$slug" \
  --clocks "$logs/clocks.csv" ${sweep[@]:+--sweep "${sweep[@]}"} ${KILN_GPU_COMMIT:+--commit "$KILN_GPU_COMMIT"}
report_rc=$?
cp "$work"/bench-*.json "$logs/" 2>/dev/null
python3 -c 'import json,sys; print(json.dumps([json.load(open(p)) for p in sys.argv[1:]]))' "$work"/tests-*.json \
  >"$logs/tests.json" 2>/dev/null
rm -rf "$out/gpu-check-$slug" && cp -r "$logs" "$out/gpu-check-$slug"
stamp "report written to $out/gpu-$slug.{json,md}, logs in $out/gpu-check-$slug (status $report_rc)"
rm -rf "$work"
[[ $test_rc -eq 0 && $bench_rc -eq 0 && $report_rc -eq 0 ]]
