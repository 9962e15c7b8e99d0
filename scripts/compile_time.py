#!/usr/bin/env python3
"""scripts/compile_time.py — what a fused statement costs to compile.

Generates translation units holding 0, 1 and K distinct fused statements (each a
different expression type, as distinct statements in a model are), for the CPU backend
alone and for both backends (a template over the backend, run on kiln::cpu<> and
kiln::vulkan), compiles each with g++ -O2 -std=c++20 (the release preset's flags), and
reports CPU seconds (user + sys, so a busy machine changes the figure little):

  base        the file with the includes and no statement
  first       what the first statement adds
  per stmt    what each further distinct statement adds: (t_K - t_1) / (K - 1)

in both compilation modes (kiln/detail/config.hpp), side by side: header-only (every file
compiles kiln's runtime) and separate (-DKILN_SEPARATE_COMPILATION: the runtime is compiled
once, in kiln/impl/src.hpp and kiln/vulkan/impl/src.hpp; that one-time cost is printed
too). A tree without separate compilation (--include of an older tree) is measured
header-only only.

Usage: python3 scripts/compile_time.py [--statements K] [--repeat R] [--cxx g++] [--no-vulkan]
                                      [--include <another tree's include/>] [--mode header-only|separate|both]
The median of R compilations is taken per file.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile

# Distinct expression types over three float tensors, as a model's statements would be.
STATEMENTS = [
    "kiln::gelu(a * b + c)",
    "kiln::relu(a - b) * c",
    "kiln::silu(a) + b * c",
    "kiln::exp(a) * kiln::tanh(b) - c",
    "kiln::sigmoid(a * c) + kiln::sqrt(kiln::abs(b))",
    "kiln::max(a, b) / (c + 1.0f)",
    "kiln::log(kiln::abs(a) + 1.0f) * b",
    "kiln::softplus(a) - kiln::erf(b)",
    "kiln::gelu_tanh(a) * b + c",
    "kiln::square(a - c) + b",
    "kiln::where(a > b, a, c) * 2.0f",
    "kiln::rsqrt(kiln::abs(a) + 1.0f) * (b - c)",
]


def source(n, vulkan):
    lines = ["#include <kiln/kiln.hpp>"]
    if vulkan:
        lines.append("#include <kiln/vulkan.hpp>")
    lines += [
        "template <class B> void run(kiln::context<B>& ctx) {",
        "  auto a = kiln::random<float>(ctx, {1000});",
        "  auto b = kiln::random<float>(ctx, {1000});",
        "  auto c = kiln::random<float>(ctx, {1000});",
        "  auto y = kiln::empty<float>(ctx, {1000});",
    ]
    lines += ["  y = %s;" % STATEMENTS[i] for i in range(n)]
    lines += ["}", "int main() {", "  kiln::context<kiln::cpu<>> cpu;", "  run(cpu);"]
    if vulkan:
        lines += ["  kiln::context<kiln::vulkan> gpu;", "  run(gpu);"]
    lines.append("}")
    return "\n".join(lines) + "\n"


def compile_seconds(cxx, include, path, repeat, defines=()):
    times = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([cxx, "-std=c++20", "-O2", *defines, "-I", include, "-c", path, "-o", os.devnull], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--statements", type=int, default=6, help="K, distinct statements in the largest file")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    ap.add_argument("--no-vulkan", action="store_true", help="CPU backend only")
    ap.add_argument("--include", help="kiln's include/ to measure (default: this checkout's), e.g. an older tree's")
    ap.add_argument("--mode", choices=["header-only", "separate", "both"], default="both",
                    help="compilation modes to measure (default: both, side by side)")
    args = ap.parse_args()
    k = max(2, min(args.statements, len(STATEMENTS)))
    include = args.include or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "include")
    separate_available = os.path.exists(os.path.join(include, "kiln", "impl", "src.hpp"))
    modes = {"header-only": ["header-only"], "separate": ["separate"], "both": ["header-only", "separate"]}[args.mode]
    if not separate_available:
        modes = [m for m in modes if m == "header-only"]
    configs = [("cpu", False)] + ([] if args.no_vulkan else [("cpu+vulkan", True)])
    print("| backends | mode | base s | first statement s | per further statement s | file with %d statements s |" % k)
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, vulkan in configs:
            for mode in modes:
                defines = ["-DKILN_SEPARATE_COMPILATION"] if mode == "separate" else []
                t = {}
                for n in (0, 1, k):
                    path = os.path.join(tmp, "s%d_%s.cpp" % (n, "vk" if vulkan else "cpu"))
                    with open(path, "w") as f:
                        f.write(source(n, vulkan))
                    t[n] = compile_seconds(args.cxx, include, path, args.repeat, defines)
                per = (t[k] - t[1]) / (k - 1)
                print("| %s | %s | %.2f | %.2f | %.2f | %.2f |" % (name, mode, t[0], t[1] - t[0], per, t[k]))
                sys.stdout.flush()
        if "separate" in modes:
            # the one-time cost: the runtime's own sources, as kiln::runtime and kiln::vulkan_runtime compile them
            for name, header in [("kiln::runtime", "kiln/impl/src.hpp")] + ([] if args.no_vulkan else [("kiln::vulkan_runtime", "kiln/vulkan/impl/src.hpp")]):
                path = os.path.join(tmp, name.replace("::", "_") + ".cpp")
                with open(path, "w") as f:
                    f.write("#include <%s>\n" % header)
                secs = compile_seconds(args.cxx, include, path, args.repeat, ["-DKILN_SEPARATE_COMPILATION"])
                print("| %s (once per build) | separate | %.2f | | | |" % (name, secs))
                sys.stdout.flush()


if __name__ == "__main__":
    main()
