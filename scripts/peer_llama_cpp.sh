#!/usr/bin/env bash
# scripts/peer_llama_cpp.sh --llama-cpp DIR [options] — kiln's CPU decoder beside llama.cpp's
# on one machine, the same random weights on both sides (nothing in CI runs it):
#   1. builds llama.cpp from the source tree DIR (CPU only, -DGGML_NATIVE=ON, Release:
#      llama-bench and llama-quantize into DIR/build) unless DIR/build/bin has them, and
#      kiln's examples/transformer into --kiln-build (default build/release) unless there;
#   2. writes the checkpoints with scripts/peer_gguf.py under --work (default
#      /tmp/kiln-peer; kept, so a second run skips this): one random checkpoint as a Hugging
#      Face directory for kiln and as GGUF with llama.cpp's own gguf-py (DIR/gguf-py), then
#      llama-quantize makes the other types from it:
#        llama   hidden 2048, 16 layers, GQA 32/8, FFN 5632, vocabulary 32000: f32 GGUF, and
#                f16, Q8_0, Q4_0 (--pure: the LM head in the same type, as kiln's int8 /
#                int4 quantize it); kiln loads the f32 safetensors with --weights f32, f16,
#                int8, int4
#        bitnet  BitNet b1.58 2B-4T shape (hidden 2560, 30 layers, 20/5 heads, FFN 6912,
#                vocabulary 128256), the packed ternary layout for kiln (--lm-head bf16 /
#                int8), f16 GGUF for llama.cpp, quantized to TQ2_0 and TQ1_0 with the tied
#                table as f16 or Q8_0 (--token-embedding-type; llama-quantize's default
#                would make it Q6_K)
#   3. runs both programs interleaved, --rounds rounds (default 3): each round runs every
#      configuration once, llama.cpp and kiln alternating which goes first; the table has the
#      medians. llama.cpp: llama-bench -p 128 (prefill of a 128-token prompt) and
#      -n 64 -d 128 (64 tokens decoded after a 128-token context), -r 1 (its warm-up run
#      on), -t THREADS. kiln: examples/transformer --ids (the same 128 ids as
#      benchmarks/llama_bench) --steps 65 --threads THREADS: its prefill and decode tokens/s
#      (64 decoded tokens after the prompt; the prefill is the process's first forward step,
#      where llama-bench's is warmed up).
# Options: --llama-cpp DIR (required), --kiln-build DIR, --work DIR, --rounds N,
#   --models "llama bitnet" (which tables), --threads "2" (llama table) and --bitnet-threads
#   "1 2", --layers N (fewer layers: a quick check of the script), --jobs N (build
#   parallelism, default nproc), --table-only (print the tables of the last run's
#   WORK/results.tsv again, running nothing).
# The machine and its load (uptime before and after) are printed with the tables; the raw
# results are in WORK/results.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

llama_cpp="" kiln_build="build/release" work="/tmp/kiln-peer" rounds=3 models="llama bitnet"
threads="2" bitnet_threads="1 2" layers="" jobs="$(nproc)" table_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-cpp) llama_cpp="$2"; shift 2 ;;
    --kiln-build) kiln_build="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --bitnet-threads) bitnet_threads="$2"; shift 2 ;;
    --layers) layers="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --table-only) table_only=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "peer_llama_cpp.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
[ -n "$llama_cpp" ] && [ -f "$llama_cpp/gguf-py/gguf/__init__.py" ] ||
  { echo "peer_llama_cpp.sh: --llama-cpp DIR must name a llama.cpp source tree (with gguf-py/)" >&2; exit 2; }
llama_cpp=$(cd "$llama_cpp" && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
"$py" -c 'import numpy' 2>/dev/null || { echo "peer_llama_cpp.sh: needs numpy (apt-get install python3-numpy)" >&2; exit 2; }

bench="$llama_cpp/build/bin/llama-bench" quantize="$llama_cpp/build/bin/llama-quantize"
transformer="$kiln_build/examples/transformer"
tsv="$work/results.tsv"
if [ "$table_only" = 0 ]; then
# ---- 1. builds --------------------------------------------------------------------------
if [ ! -x "$bench" ] || [ ! -x "$quantize" ]; then
  echo "== building llama.cpp in $llama_cpp/build (CPU, native, Release)"
  cmake -S "$llama_cpp" -B "$llama_cpp/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build "$llama_cpp/build" -j "$jobs" --target llama-bench llama-quantize
fi
if [ ! -x "$transformer" ]; then
  echo "== building kiln's examples/transformer in $kiln_build (Release)"
  cmake -S . -B "$kiln_build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$kiln_build" -j "$jobs" --target transformer
fi

# ---- 2. checkpoints ---------------------------------------------------------------------
mkdir -p "$work"
layer_args=() suffix=""
[ -n "$layers" ] && { layer_args=(--layers "$layers"); suffix="-l$layers"; }
gguf_py() { PYTHONPATH="$llama_cpp/gguf-py" "$py" "$root/scripts/peer_gguf.py" "$@"; }
quant() {  # quant SRC DST TYPE [llama-quantize flags]
  [ -f "$2" ] || "$quantize" "${@:4}" "$1" "$2" "$3" >"$2.log" 2>&1 || { tail -20 "$2.log" >&2; exit 1; }
}
for m in $models; do
  d="$work/$m$suffix"
  case "$m" in
    llama)
      [ -f "$d/llama-f32.gguf" ] || gguf_py llama "$d" "${layer_args[@]}"
      quant "$d/llama-f32.gguf" "$d/llama-f16.gguf" F16
      quant "$d/llama-f32.gguf" "$d/llama-q8_0.gguf" Q8_0 --pure
      quant "$d/llama-f32.gguf" "$d/llama-q4_0.gguf" Q4_0 --pure ;;
    bitnet)
      [ -f "$d/bitnet-f16.gguf" ] || gguf_py bitnet "$d" "${layer_args[@]}"
      for t in tq2_0 tq1_0; do
        quant "$d/bitnet-f16.gguf" "$d/bitnet-$t-f16.gguf" "${t^^}" --token-embedding-type f16
        quant "$d/bitnet-f16.gguf" "$d/bitnet-$t-q8_0.gguf" "${t^^}" --token-embedding-type q8_0
      done ;;
    *) echo "peer_llama_cpp.sh: unknown model $m (llama, bitnet)" >&2; exit 2 ;;
  esac
done

# ---- 3. runs ----------------------------------------------------------------------------
ids=$("$py" -c 'print(",".join(str((i * 7919 + 1) % 32000) for i in range(128)))')
: >"$tsv"
{ echo "Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "llama.cpp: $(git -C "$llama_cpp" log -1 --format='%h (%cs)' 2>/dev/null || echo "$llama_cpp"), $bench"
  echo "kiln: $transformer, built $(date -u -r "$transformer" '+%Y-%m-%d %H:%M UTC') (this repository: $(git log -1 --format='%h'))"
  echo "load before: $(uptime)"; } >"$work/machine.txt"

parse_jsonl='
import json, sys
m, label, t, prog, r, path = sys.argv[1:7]
for line in open(path):
    if line.strip():
        j = json.loads(line)
        metric, ts = ("prefill" if j["n_prompt"] > 0 else "decode"), j["avg_ts"]
        print(f"{m}\t{label}\t{t}\t{prog}\t{metric}\t{ts:.3f}\t{r}")
'
run_llama_cpp() {  # model label gguf threads round [column name]
  local f="$work/llama-bench.jsonl"
  { "$bench" -m "$3" -p 128 -n 0 -r 1 -t "$4" -o jsonl && "$bench" -m "$3" -p 0 -n 64 -d 128 -r 1 -t "$4" -o jsonl; } \
    >"$f" 2>"$f.err" || { echo "llama-bench failed on $3: $(tail -3 "$f.err")" >&2; return 0; }
  "$py" -c "$parse_jsonl" "$1" "$2" "$4" "${6:-llama.cpp}" "$5" "$f" >>"$tsv"
}
run_kiln() {  # model label dir threads round [transformer flags]
  local out p d
  out=$("$transformer" "$3" --ids "$ids" --steps 65 --threads "$4" "${@:6}" 2>&1) ||
    { echo "kiln transformer failed on $3: $out" >&2; return 0; }
  p=$(sed -n 's/^prefill: .*, \([0-9.]*\) tokens\/s$/\1/p' <<<"$out")
  d=$(sed -n 's/^decode: .*, \([0-9.]*\) tokens\/s$/\1/p' <<<"$out")
  printf '%s\t%s\t%s\tkiln\tprefill\t%s\t%s\n%s\t%s\t%s\tkiln\tdecode\t%s\t%s\n' "$1" "$2" "$4" "$p" "$5" "$1" "$2" "$4" "$d" "$5" >>"$tsv"
}
pair() {  # round model label threads gguf kiln_dir [kiln flags]: both, the order alternating
  local col=llama.cpp
  [ "$2" = bitnet ] && col="llama.cpp TQ2_0"
  if [ $(($1 % 2)) -eq 1 ]; then
    run_llama_cpp "$2" "$3" "$5" "$4" "$1" "$col"; run_kiln "$2" "$3" "$6" "$4" "$1" "${@:7}"
  else
    run_kiln "$2" "$3" "$6" "$4" "$1" "${@:7}"; run_llama_cpp "$2" "$3" "$5" "$4" "$1" "$col"
  fi
}
for r in $(seq 1 "$rounds"); do
  echo "== round $r/$rounds ($(date -u +%H:%M:%S))" >&2
  for m in $models; do
    d="$work/$m$suffix"
    if [ "$m" = llama ]; then
      for t in $threads; do
        pair "$r" llama f32 "$t" "$d/llama-f32.gguf" "$d/kiln" --weights f32
        pair "$r" llama f16 "$t" "$d/llama-f16.gguf" "$d/kiln" --weights f16
        pair "$r" llama "int8 / Q8_0" "$t" "$d/llama-q8_0.gguf" "$d/kiln" --weights int8
        pair "$r" llama "int4 g32 / Q4_0" "$t" "$d/llama-q4_0.gguf" "$d/kiln" --weights int4
      done
    else
      for t in $bitnet_threads; do
        for k in bf16 int8; do
          lm=$([ $k = bf16 ] && echo f16 || echo q8_0)
          pair "$r" bitnet "$k / ${lm^^}" "$t" "$d/bitnet-tq2_0-$lm.gguf" "$d/kiln" --lm-head "$k"
          run_llama_cpp bitnet "$k / ${lm^^}" "$d/bitnet-tq1_0-$lm.gguf" "$t" "$r" "llama.cpp TQ1_0"
        done
      done
    fi
  done
done

echo "load after:  $(uptime)" >>"$work/machine.txt"
fi

# ---- the tables -------------------------------------------------------------------------
echo
cat "$work/machine.txt"
"$py" - "$tsv" <<'EOF'
import statistics, sys
from collections import defaultdict
v = defaultdict(list)
order, rounds = [], set()
for line in open(sys.argv[1]):
    m, label, t, prog, metric, val, r = line.rstrip("\n").split("\t")
    if val:
        v[(m, label, t, prog, metric)].append(float(val))
    rounds.add(r)
    if (m, label, t) not in order:
        order.append((m, label, t))
def med(*k):
    x = v.get(k)
    return f"{statistics.median(x):.1f}" if x else "-"
def rng(*k):
    x = v.get(k)
    return f"{statistics.median(x):.1f} ({min(x):.1f}-{max(x):.1f})" if x else "-"
print(f"\nMedians of {len(rounds)} interleaved rounds (min-max), tokens/s; prefill: 128-token prompt; "
      "decode: 64 tokens after 128.")
for model in ("llama", "bitnet"):
    rows = [k for k in order if k[0] == model]
    if not rows:
        continue
    if model == "llama":
        print("\nLlama, hidden 2048, 16 layers, GQA 32/8, FFN 5632, vocabulary 32000 (kiln --weights / llama.cpp type):\n")
        print("| weights | threads | kiln prefill tok/s | llama.cpp prefill | kiln decode tok/s | llama.cpp decode |")
        print("|---|---|---|---|---|---|")
        for m, label, t in rows:
            print(f"| {label} | {t} | {rng(m, label, t, 'kiln', 'prefill')} | {rng(m, label, t, 'llama.cpp', 'prefill')} | "
                  f"{rng(m, label, t, 'kiln', 'decode')} | {rng(m, label, t, 'llama.cpp', 'decode')} |")
    else:
        print("\nBitNet b1.58 2B-4T shape, hidden 2560, 30 layers, 20/5 heads, FFN 6912, vocabulary 128256, tied "
              "table (kiln: W1.58A8 projections, --lm-head; llama.cpp: TQ2_0 / TQ1_0 projections, table type):\n")
        print("| table | threads | kiln prefill tok/s | llama.cpp TQ2_0 prefill | TQ1_0 prefill "
              "| kiln decode tok/s | llama.cpp TQ2_0 decode | TQ1_0 decode |")
        print("|---|---|---|---|---|---|---|---|")
        for m, label, t in rows:
            print(f"| {label} | {t} | {rng(m, label, t, 'kiln', 'prefill')} | {rng(m, label, t, 'llama.cpp TQ2_0', 'prefill')} | "
                  f"{rng(m, label, t, 'llama.cpp TQ1_0', 'prefill')} | {rng(m, label, t, 'kiln', 'decode')} | "
                  f"{rng(m, label, t, 'llama.cpp TQ2_0', 'decode')} | {rng(m, label, t, 'llama.cpp TQ1_0', 'decode')} |")
EOF
