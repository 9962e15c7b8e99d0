#!/usr/bin/env python3
"""kiln's benchmark report: runs benchmark binaries with Google Benchmark's JSON output
(or reads JSON files saved earlier) and writes a markdown report with PNG plots:

  bandwidth.png  GB/s of the elementwise benchmarks (against size where they have one),
                 with the machine's copy / STREAM triad line measured in the same run
  gflops.png     GFLOP/s of the matrix products against size, with the FMA peak line
  ratios.png     kiln against each peer: the peer's time over kiln's (> 1: kiln is faster)
  report.md      the tables (every benchmark, the ratios), the plots, and the machine

Usage (from the repository root, after building the benchmarks):
  python3 scripts/bench_report.py --build build/release --out bench-report \\
      --bench 'fusion_bench:BM_(gelu_chain|add3|triad)/' --bench 'matmul_bench:BM_(gemm|fma_peak)/'
  python3 scripts/bench_report.py --json results/*.json --out bench-report

A --bench argument is NAME or NAME:FILTER (a --benchmark_filter regex). The default run
is short (--min-time 0.1, one repetition); --repetitions 9 --min-time 0.5 is the
benchmarks' own default measurement, the one to publish.
Needs matplotlib (Debian: python3-matplotlib, installed by scripts/setup.sh).
"""

import argparse
import json
import os
import platform
import re
import subprocess
import sys


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build/release", help="build directory holding benchmarks/, or that directory itself (default: %(default)s)")
    p.add_argument("--bench", action="append", default=[], metavar="NAME[:FILTER]",
                   help="benchmark binary to run (repeatable), optionally with a --benchmark_filter regex")
    p.add_argument("--json", nargs="+", default=[], metavar="FILE", help="read these JSON results instead of running")
    p.add_argument("--out", default="bench-report", help="output directory (default: %(default)s)")
    p.add_argument("--min-time", default="0.1", help="--benchmark_min_time per benchmark (default: %(default)s)")
    p.add_argument("--repetitions", type=int, default=1, help="--benchmark_repetitions (default: %(default)s)")
    p.add_argument("--title", default="kiln benchmarks", help="the report's heading")
    p.add_argument("--timeout", type=float, default=3600, help="seconds one binary may run (default: %(default)s)")
    a = p.parse_args(argv)
    if not a.bench and not a.json:
        p.error("give --bench NAME[:FILTER] (run binaries) or --json FILE... (read results)")
    return a


def run_benchmark(build, spec, out_dir, min_time, repetitions, timeout):
    """Runs one binary with JSON output into out_dir; returns the JSON file's path."""
    name, _, flt = spec.partition(":")
    exe = os.path.join(build, "benchmarks", name)
    if not os.path.isfile(exe) and os.path.isfile(os.path.join(build, name)):
        exe = os.path.join(build, name)  # --build names the benchmarks' own directory
    if not os.path.isfile(exe):
        sys.exit(f"bench_report: {exe} does not exist; build it first (make {name})")
    path = os.path.join(out_dir, f"{name}.json")
    cmd = [exe, "--benchmark_format=json", f"--benchmark_out={path}", "--benchmark_out_format=json",
           f"--benchmark_min_time={min_time}", f"--benchmark_repetitions={repetitions}"]
    if repetitions <= 1:  # aggregates of one run say nothing; report the run itself
        cmd.append("--benchmark_report_aggregates_only=false")
    if flt:
        cmd.append(f"--benchmark_filter={flt}")
    print("bench_report: running " + " ".join(cmd), flush=True)
    try:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=timeout)
    except subprocess.CalledProcessError as e:
        sys.exit(f"bench_report: {name} failed with exit status {e.returncode}")
    except subprocess.TimeoutExpired:
        sys.exit(f"bench_report: {name} ran longer than {timeout} s")
    return path


UNIT_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)([KMG]?)$")
THREADS_RE = re.compile(r"^(\d+)T$")
SKIP_KEYS = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads", "iterations",
             "real_time", "cpu_time", "time_unit", "family_index", "per_family_instance_index",
             "aggregate_name", "aggregate_unit", "error_occurred", "error_message", "label"}


def size_value(text):
    m = SIZE_RE.match(text)
    if not m:
        return None
    return float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


class result:
    """One benchmark: its name split into op / impl / size / threads, time and counters."""

    def __init__(self, name, real_ms, counters, binary):
        for suffix in ("/real_time", "/manual_time", "/process_time"):  # how it was timed, not what
            if name.endswith(suffix):
                name = name[: -len(suffix)]
        self.name, self.ms, self.counters, self.binary = name, real_ms, counters, binary
        parts = name.split("/")
        self.op = parts[0][3:] if parts[0].startswith("BM_") else parts[0]
        self.impl, self.size, self.size_label, self.threads = "", None, "", None
        rest = parts[1:]
        if rest and size_value(rest[0]) is None and not THREADS_RE.match(rest[0]):
            self.impl = rest[0]
            rest = rest[1:]
        for r in rest:
            if THREADS_RE.match(r):
                self.threads = int(r[:-1])
            elif size_value(r) is not None and self.size is None:
                self.size, self.size_label = size_value(r), r
            else:
                self.impl = (self.impl + "/" + r) if self.impl else r

    def gbps(self):
        c = self.counters
        for k in ("GB/s", "GB"):
            if k in c:
                return c[k]
        if "bytes_per_second" in c:
            return c["bytes_per_second"] / 1e9
        return None

    def gflops(self):
        for k in ("GFLOP/s", "GFLOPs"):
            if k in self.counters:
                return self.counters[k]
        return None

    def group(self):
        """Benchmarks that compare with each other: same op, size and threads."""
        return (self.op, self.size_label, self.threads)


def load(paths):
    results, context = [], {}
    for path in paths:
        with open(path) as f:
            text = f.read()
        if not text.strip():
            sys.exit(f"bench_report: {path} is empty (did the filter match no benchmark?)")
        data = json.loads(text)
        context = context or data.get("context", {})
        binary = os.path.basename(data.get("context", {}).get("executable", path))
        rows = data.get("benchmarks", [])
        medians = [b for b in rows if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"]
        use = medians if medians else [b for b in rows if b.get("run_type", "iteration") == "iteration"]
        seen = {}
        for b in use:
            if b.get("error_occurred"):
                continue
            name = b.get("run_name", b["name"])
            ms = b["real_time"] * UNIT_TO_MS.get(b.get("time_unit", "ns"), 1e-6)
            counters = {k: v for k, v in b.items() if k not in SKIP_KEYS and isinstance(v, (int, float))}
            if name in seen:  # several repetitions without aggregates: keep the fastest
                if ms < seen[name].ms:
                    seen[name].ms, seen[name].counters = ms, counters
                continue
            seen[name] = result(name, ms, counters, binary)
            results.append(seen[name])
    return results, context


def fmt(v, digits=2):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def machine_line(context):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    n = context.get("num_cpus", os.cpu_count())
    mhz = context.get("mhz_per_cpu")
    caches = ", ".join(f"L{c['level']} {c['type'][0].lower() if c['type'] != 'Unified' else ''}{c['size'] // 1024} KiB"
                       for c in context.get("caches", []) if "level" in c and "size" in c)
    parts = [cpu or platform.processor() or platform.machine(), f"{n} CPUs"]
    if mhz:
        parts.append(f"{mhz} MHz")
    if caches:
        parts.append(caches)
    parts.append(f"{platform.system()} {platform.release()}")
    if context.get("library_build_type"):
        parts.append(f"benchmark library: {context['library_build_type']}")
    return "; ".join(parts) + (f" (run {context['date']})" if context.get("date") else "")


def ratios(results):
    """(group, peer impl, peer time / kiln time) for every group holding kiln and a peer."""
    groups = {}
    for r in results:
        groups.setdefault(r.group(), []).append(r)
    out = []
    for g, rs in groups.items():
        kiln = [r for r in rs if r.impl == "kiln"]
        if not kiln:
            continue
        for r in rs:
            if r.impl in ("kiln", "") or r.impl.startswith("kiln_vs") or r.ms <= 0:
                continue
            out.append((g, r.impl, r.ms / kiln[0].ms))
    return sorted(out, key=lambda x: (x[0][0], size_value(x[0][1]) or 0, x[0][2] or 0, x[1]))


def label(group):
    op, size, threads = group
    s = op
    if size:
        s += f" {size}"
    if threads:
        s += f" {threads}T"
    return s


def plots(results, out_dir, plt):
    made = []
    # --- bandwidth -------------------------------------------------------------------
    bw = [r for r in results if r.gbps() is not None and r.gflops() is None]
    refs = [r for r in bw if r.op in ("triad", "copy") or "copy" in r.impl or r.impl.startswith("stream")]
    chains = sorted((r for r in bw if r not in refs and not r.impl.startswith("kiln_vs")),
                    key=lambda r: (r.op, r.threads or 0, r.size or 0, r.impl != "kiln", r.impl))
    if chains:
        fig, ax = plt.subplots(figsize=(9, 5))
        series = {}
        for r in chains:
            series.setdefault((r.op, r.impl, r.threads), []).append(r)
        sized = any(len({r.size for r in s if r.size}) > 1 for s in series.values())
        if sized:
            for (op, impl, t), s in sorted(series.items(), key=lambda kv: str(kv[0])):
                s = sorted((r for r in s if r.size), key=lambda r: r.size)
                if len(s) < 2:
                    continue
                ax.plot([r.size for r in s], [r.gbps() for r in s], marker="o",
                        linestyle="-" if impl == "kiln" else "--", label=f"{op} {impl}" + (f" {t}T" if t else ""))
            ax.set_xscale("log", base=2)
            ax.set_xlabel("elements")
        else:
            names = [f"{r.op} {r.impl}" + (f" {r.threads}T" if r.threads else "") for r in chains]
            colors = ["tab:red" if r.impl == "kiln" else "tab:gray" for r in chains]
            ax.barh(range(len(chains)), [r.gbps() for r in chains], color=colors)
            ax.set_yticks(range(len(chains)), names, fontsize=7)
            ax.invert_yaxis()
        for r in refs:
            tag = f" {r.op} {r.impl}" + (f" {r.threads}T" if r.threads else "") + f" {r.gbps():.1f} GB/s"
            if sized:
                ax.axhline(r.gbps(), color="black", linestyle=":", linewidth=1)
                ax.text(ax.get_xlim()[0], r.gbps(), tag, fontsize=7, va="bottom")
            else:
                ax.axvline(r.gbps(), color="black", linestyle=":", linewidth=1)
                ax.text(r.gbps(), -0.6, tag, fontsize=7, rotation=90, va="top", ha="right")
        if sized:
            ax.set_ylabel("GB/s (inputs read once, output written once)")
            ax.legend(fontsize=7, ncol=2)
        else:
            ax.set_xlabel("GB/s (inputs read once, output written once)")
        ax.set_title("Elementwise bandwidth (" + ("solid: kiln, dashed: peers" if sized else "kiln red") +
                     "; dotted: copy / triad of the same run)")
        if sized:
            ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "bandwidth.png"), dpi=110)
        plt.close(fig)
        made.append("bandwidth.png")
    # --- GFLOP/s ---------------------------------------------------------------------
    fl = [r for r in results if r.gflops() is not None]
    peaks = [r for r in fl if "peak" in r.op]
    prods = [r for r in fl if r not in peaks]
    if prods:
        fig, ax = plt.subplots(figsize=(9, 5))
        series = {}
        for r in prods:
            series.setdefault((r.op, r.impl, r.threads), []).append(r)
        for (op, impl, t), s in sorted(series.items(), key=lambda kv: str(kv[0])):
            s = sorted(s, key=lambda r: r.size or 0)
            xs = [r.size or 0 for r in s]
            ax.plot(xs, [r.gflops() for r in s], marker="o", linestyle="-" if impl == "kiln" else "--",
                    label=f"{op} {impl}" + (f" {t}T" if t else ""))
        for p in peaks:
            ax.axhline(p.gflops(), color="black", linestyle=":", linewidth=1)
            ax.text(ax.get_xlim()[0], p.gflops(), f" FMA peak {p.threads or ''}T {p.gflops():.0f}", fontsize=7, va="bottom")
        if any(r.size for r in prods):
            ax.set_xscale("log", base=2)
        ax.set_xlabel("n (square matrices n x n)")
        ax.set_ylabel("GFLOP/s")
        ax.set_title("Matrix products (solid: kiln, dashed: peers; dotted: FMA peak of the same run)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, ncol=2)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "gflops.png"), dpi=110)
        plt.close(fig)
        made.append("gflops.png")
    # --- ratios ----------------------------------------------------------------------
    rs = ratios(results)
    if rs:
        fig, ax = plt.subplots(figsize=(9, max(3, 0.25 * len(rs) + 1)))
        names = [f"{label(g)}: {impl}" for g, impl, _ in rs]
        vals = [v for _, _, v in rs]
        ax.barh(range(len(rs)), vals, color=["tab:green" if v >= 1 else "tab:orange" for v in vals])
        ax.set_yticks(range(len(rs)), names, fontsize=7)
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("peer time / kiln time (> 1: kiln faster)")
        ax.set_title("kiln against its peers")
        ax.grid(True, axis="x", alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "ratios.png"), dpi=110)
        plt.close(fig)
        made.append("ratios.png")
    return made


def markdown(results, context, made, title):
    lines = [f"# {title}", "", f"Machine: {machine_line(context)}", ""]
    for png in made:
        lines += [f"![{png[:-4]}]({png})", ""]
    lines += ["| benchmark | time (ms) | GB/s | GFLOP/s | other counters |", "|---|---:|---:|---:|---|"]
    for r in results:
        other = ", ".join(f"{k} {fmt(v)}" for k, v in r.counters.items()
                          if k not in ("GB/s", "GB", "GFLOP/s", "GFLOPs", "bytes_per_second", "items_per_second"))
        lines.append(f"| {r.name} | {fmt(r.ms, 4)} | {fmt(r.gbps())} | {fmt(r.gflops())} | {other} |")
    rs = ratios(results)
    if rs:
        lines += ["", "kiln against its peers (the peer's time over kiln's; > 1: kiln is faster):", "",
                  "| benchmark | peer | peer / kiln |", "|---|---|---:|"]
        lines += [f"| {label(g)} | {impl} | {v:.2f} |" for g, impl, v in rs]
    return "\n".join(lines) + "\n"


def main(argv):
    a = parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("bench_report: matplotlib is missing (Debian: apt-get install python3-matplotlib; "
                 "scripts/setup.sh installs it)")
    os.makedirs(a.out, exist_ok=True)
    paths = list(a.json)
    for spec in a.bench:
        paths.append(run_benchmark(a.build, spec, a.out, a.min_time, a.repetitions, a.timeout))
    results, context = load(paths)
    if not results:
        sys.exit("bench_report: no benchmark results (did the filter match anything?)")
    made = plots(results, a.out, plt)
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(markdown(results, context, made, a.title))
    print(f"bench_report: {len(results)} benchmarks -> {os.path.join(a.out, 'report.md')}"
          + (" + " + ", ".join(made) if made else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
