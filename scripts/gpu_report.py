#!/usr/bin/env python3
"""scripts/gpu_report.py — turns one GPU check (scripts/gpu_check.sh) into
docs/bench/gpu-<device>.json and .md: every figure of vulkan_gpu_bench beside the device's
peak, the Vulkan suite's result, and the GPU issue's acceptance lines.

Peaks: compute from the table below (keyed by a substring of the Vulkan device name, with
its source); memory from the check's own copy benchmark (bytes read + written per second),
beside the data-sheet bandwidth for reference. An unknown device gets no compute shares.
"""
import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

# Dense (no sparsity) peaks in TFLOP/s (int8: TOP/s) and HBM GB/s, from the vendors' data
# sheets; the sheets print tensor figures "with sparsity", twice the dense ones below.
PEAKS = [
    ("H200", {"f16": 989.4, "bf16": 989.4, "tf32": 494.7, "f32": 66.9, "int8": 1978.9, "hbm_gbs": 4800,
              "source": "NVIDIA H200 Tensor Core GPU data sheet (SXM): FP16/BF16 1,979 TFLOPS and INT8 3,958 TOPS "
                        "with sparsity, FP32 67 TFLOPS, 4.8 TB/s"}),
    ("H100 PCIe", {"f16": 756.5, "bf16": 756.5, "tf32": 378.0, "f32": 51.2, "int8": 1513.0, "hbm_gbs": 2000,
                   "source": "NVIDIA H100 Tensor Core GPU data sheet (PCIe): FP16/BF16 1,513 TFLOPS with sparsity, "
                             "FP32 51 TFLOPS, 2 TB/s"}),
    ("H100 NVL", {"f16": 835.5, "bf16": 835.5, "tf32": 417.5, "f32": 60.0, "int8": 1671.0, "hbm_gbs": 3900,
                  "source": "NVIDIA H100 Tensor Core GPU data sheet (NVL): FP16/BF16 1,671 TFLOPS with sparsity, "
                            "FP32 60 TFLOPS, 3.9 TB/s"}),
    ("H100", {"f16": 989.4, "bf16": 989.4, "tf32": 494.7, "f32": 66.9, "int8": 1978.9, "hbm_gbs": 3350,
              "source": "NVIDIA H100 Tensor Core GPU data sheet (SXM): FP16/BF16 1,979 TFLOPS and INT8 3,958 TOPS "
                        "with sparsity, FP32 67 TFLOPS, 3.35 TB/s"}),
]


def peaks_for(device):
    for key, p in PEAKS:
        if key.lower() in device.lower():
            return p
    return None


def parse_json_prefix(text):
    """Google Benchmark writes its JSON as it goes: a run ended by its timeout leaves the
    entries so far, unclosed. Keep those (the text up to the last complete entry)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    cut = text.rfind("\n    },")
    while cut > 0:
        try:
            return json.loads(text[:cut] + "\n    }\n  ]\n}\n")
        except ValueError:
            cut = text.rfind("\n    },", 0, cut)
    raise ValueError("no complete benchmark entry")


def load_bench(path):
    data = parse_json_prefix(Path(path).read_text())
    rows = {}
    for b in data.get("benchmarks", []):
        name = b.get("run_name", b["name"]).removesuffix("/real_time")
        if b.get("error_occurred"):
            rows[name] = {"error": b.get("error_message", "error")}
            continue
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        row = {"ms": b["real_time"] if b.get("time_unit") == "ms" else None, "label": b.get("label", "")}
        if row["ms"] is None:
            scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
            row["ms"] = b["real_time"] * scale
        for k in ("TFLOP/s", "GB/s", "tok/s", "flops", "bytes", "inner", "tokens"):
            if k in b:
                row[k] = b[k]
        row["ms"] /= row.get("inner", 1)  # one statement (an iteration records `inner`)
        rows[name] = row
    return data.get("context", {}), rows


def load_tests(paths):
    total = failed = skipped = 0
    failures = []
    for p in paths:
        if str(p).endswith(".log"):  # GoogleTest's console output
            for line in Path(p).read_text(errors="replace").splitlines():
                if line.startswith(("[       OK ]", "[  FAILED  ] ", "[  SKIPPED ] ")) and " ms)" in line:
                    total += 1
                    skipped += line.startswith("[  SKIPPED ]")
                    if line.startswith("[  FAILED  ]"):
                        failed += 1
                        failures.append(line[13:].strip())
            continue
        try:
            d = json.loads(Path(p).read_text())
        except (OSError, ValueError) as e:
            failures.append(f"{p}: no result ({e}) — the shard crashed or timed out")
            continue
        for suite in d.get("testsuites", []):
            for t in suite.get("testsuite", []):
                total += 1
                if t.get("result") == "SKIPPED" or t.get("status") == "NOTRUN":
                    skipped += 1
                if t.get("failures"):
                    failed += 1
                    msg = t["failures"][0].get("failure", "").splitlines()
                    failures.append(f"{suite['name']}.{t['name']}: {' / '.join(msg[:3])}")
    return {"tests": total, "failed": failed, "skipped": skipped, "failures": failures}


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


README_BEGIN = "<!-- gpu-table: scripts/gpu_report.py --readme README.md writes this table from docs/bench/gpu-*.json -->"
README_END = "<!-- gpu-table end -->"
README_ROWS = [  # (figure, label)
    ("gpu/copy/f32", "copy (GB/s, read + written)"),
    ("gpu/gemm/f32/4096", "GEMM f32 4096^3"),
    ("gpu/gemm/f16/4096", "GEMM f16 4096^3"),
    ("gpu/gemm/f16_tiled/4096", "GEMM f16 4096^3, scalar tiled kernel"),
    ("gpu/gemm/bf16/4096", "GEMM bf16 4096^3"),
    ("gpu/linear/f16/512x11008x4096", "x [512, 4096] @ w^T, w [11008, 4096], f16"),
    ("gpu/attention/f16/prefill/4096", "causal attention f16 B1 H32 S4096 D128"),
    ("gpu/attention/f16/decode/8192", "decode attention f16 H32 S8192 (GB/s of K, V)"),
    ("gpu/matvec/int8/4096", "int8 matvec 4096 (GB/s)"),
    ("gpu/matvec/ternary/4096", "ternary matvec 4096 (GB/s)"),
    ("gpu/llama/f16/decode", "1B-shape decode, f16 weights (GB/s of weights)"),
    ("gpu/llama/f16/prefill512", "1B-shape 512-token prefill, f16 (tok/s)"),
    ("gpu/llama/int8/decode", "1B-shape decode, int8 weights (GB/s of weights)"),
]


def readme_table(paths):
    reports = [json.loads(Path(p).read_text()) for p in sorted(paths)]
    reports = [r for r in reports if not r.get("quick")]
    head = "| figure | " + " | ".join(f"{r['device']} ({r['date'][:10]}, {r['commit']})" for r in reports) + " |"
    lines = [head, "|---|" + "---|" * len(reports)]
    for name, label in README_ROWS:
        cells = []
        for r in reports:
            f = next((x for x in r["figures"] if x["name"] == name), None)
            if not f or "error" in f:
                cells.append("—")
                continue
            if name.endswith("prefill512"):
                v, unit = f.get("tok/s"), " tok/s"
            elif "GB/s" in f:
                v, unit = f.get("GB/s"), " GB/s"
            else:
                v, unit = f.get("TFLOP/s"), " TFLOP/s"
            if v is None:
                cells.append("—")
                continue
            share = f.get("share")
            cells.append(f"{v:,.1f}{unit}" + (f" ({100 * share:.0f}% of {f['peak_of']})" if share else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_readme(readme, paths):
    text = Path(readme).read_text()
    if README_BEGIN not in text or README_END not in text:
        print(f"gpu_report: {readme} has no GPU table markers", file=sys.stderr)
        return 1
    a = text.index(README_BEGIN) + len(README_BEGIN)
    b = text.index(README_END)
    Path(readme).write_text(text[:a] + "\n" + readme_table(paths) + "\n" + text[b:])
    return 0


def read_clocks(path):
    """nvidia-smi's CSV (timestamp, SM MHz, memory MHz, W, C, throttle bitmask): ranges."""
    if not path:
        return None
    try:
        rows = [[c.strip() for c in line.split(",")] for line in Path(path).read_text().splitlines() if line.count(",") >= 5]
    except OSError:
        return None
    def nums(i):
        out = []
        for r in rows:
            try:
                out.append(float(r[i]))
            except ValueError:
                pass
        return sorted(out)
    sm, mem, power, temp = nums(1), nums(2), nums(3), nums(4)
    if not sm:
        return None
    names = {0x1: "idle", 0x2: "application clocks", 0x4: "power cap", 0x8: "hardware slowdown", 0x20: "sw thermal",
             0x40: "hw thermal", 0x80: "power brake", 0x100: "display clocks"}
    seen = set()
    for r in rows:
        try:
            mask = int(r[5], 16)
        except ValueError:
            continue
        seen |= {n for bit, n in names.items() if mask & bit}
    med = lambda v: v[len(v) // 2] if v else None
    return {"samples": len(sm), "sm_min": int(sm[0]), "sm_max": int(sm[-1]), "sm_median": int(med(sm)),
            "mem_median": int(med(mem)) if mem else None, "power_max": max(power) if power else None,
            "temp_max": int(max(temp)) if temp else None, "throttle": sorted(seen)}


SWEEPS = {"coopmat": ("gpu/gemm/f16/4096", "f16", "KILN_VULKAN_COOPMAT_TILE"),
          "tiled": ("gpu/gemm/f32/4096", "f32", "KILN_VULKAN_TILED_TILE")}


def read_sweep(paths, peak):
    """4096^3 under each tile setting; the kernel and tile from the file name
    sweep-<kernel>-<BMxBNxBK>_<AxB>.json (SWEEPS: which product and peak)."""
    out = []
    for path in paths:
        kernel, _, tile = Path(path).stem.removeprefix("sweep-").partition("-")
        if kernel not in SWEEPS:
            continue
        bench, dtype, env = SWEEPS[kernel]
        t = {"kernel": kernel, "tile": tile.replace("_", "/"), "env": env, "bench": bench}
        try:
            _, rows = load_bench(path)
        except (OSError, ValueError) as e:
            out.append(dict(t, error=str(e)))
            continue
        r = rows.get(bench)
        if not r or "error" in r:
            out.append(dict(t, error=(r or {}).get("error", "no figure")))
            continue
        t.update(r)
        if peak and r.get("TFLOP/s"):
            t["share"] = r["TFLOP/s"] / peak[dtype]
            t["peak_of"] = "dense f16 tensor TFLOP/s" if dtype == "f16" else "f32 FMA TFLOP/s"
        out.append(t)
    return out


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--readme":
        return write_readme(sys.argv[2], sys.argv[3:] or [str(p) for p in Path("docs/bench").glob("gpu-*.json")])
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", nargs="+", required=True)
    ap.add_argument("--tests", nargs="*", default=[])
    ap.add_argument("--out", default="docs/bench")
    ap.add_argument("--slug", default=None)
    ap.add_argument("--commit", default=None, help="the commit the binaries were built from (default: git HEAD)")
    ap.add_argument("--clocks", default=None, help="nvidia-smi's CSV log of the benchmarks (clocks, power, throttling)")
    ap.add_argument("--sweep", nargs="*", default=[], help="benchmark JSONs sweep-<kernel>-<tile>.json (read_sweep)")
    ap.add_argument("--tiles-from", default=None,
                    help="a report (gpu-*.json) whose GEMM tile table to keep, where this one's sweep did not run")
    a = ap.parse_args()

    ctx, rows = {}, {}
    for path in a.bench:  # a run cut off by its timeout leaves no JSON: its rows are missing
        try:
            c, r = load_bench(path)
            ctx = ctx or c
            rows.update(r)
        except (OSError, ValueError) as e:
            print(f"gpu_report: cannot read {path}: {e}", file=sys.stderr)
    device = ctx.get("kiln_device", "unknown")
    slug = a.slug or "".join(c if c.isalnum() else "-" for c in device.lower()).strip("-")
    peak = peaks_for(device)
    copy = rows.get("gpu/copy/f32", {}).get("GB/s")
    expected = ctx.get("kiln_benchmarks", "").split()
    for name in expected:  # registered but absent: cut off by a timeout
        rows.setdefault(name, {"error": "did not run (filtered out, or the run was cut off by its timeout)"})
    tests = load_tests(a.tests)

    def share(value, ref):
        return None if value is None or not ref else value / ref

    figures = []
    for name, r in rows.items():
        f = {"name": name, **r}
        parts = name.split("/")
        if "error" not in r:
            if parts[1] in ("gemm", "linear") and peak:
                t = parts[2].split("_")[0]
                f["peak"] = peak[t] if t in ("f16", "bf16") else peak["f32"]
                f["peak_of"] = "dense tensor TFLOP/s" if t in ("f16", "bf16") else "f32 FMA TFLOP/s"
                f["share"] = share(r.get("TFLOP/s"), f["peak"])
            elif parts[1] == "attention" and parts[3] == "prefill" and peak:
                f["peak"] = peak["f16"] if parts[2] == "f16" else peak["f32"]
                f["peak_of"] = "dense tensor TFLOP/s" if parts[2] == "f16" else "f32 FMA TFLOP/s"
                f["share"] = share(r.get("TFLOP/s"), f["peak"])
            elif "GB/s" in r and name != "gpu/copy/f32":
                f["peak"] = copy
                f["peak_of"] = "measured copy GB/s"
                f["share"] = share(r.get("GB/s"), copy)
            elif name == "gpu/copy/f32" and peak:
                f["peak"] = peak["hbm_gbs"]
                f["peak_of"] = "data-sheet HBM GB/s"
                f["share"] = share(r.get("GB/s"), peak["hbm_gbs"])
        figures.append(f)

    def val(name, key):
        return rows.get(name, {}).get(key)

    def fig(name):
        return next((f for f in figures if f["name"] == name), {})

    acceptance = []

    def accept(what, value, target, unit=""):
        ok = value is not None and value >= target
        acceptance.append({"what": what, "value": value, "target": target, "unit": unit, "met": ok})

    accept("f16 GEMM 4096^3, share of dense f16 tensor peak", fig("gpu/gemm/f16/4096").get("share"), 0.40)
    accept("bf16 GEMM 4096^3, share of dense bf16 tensor peak", fig("gpu/gemm/bf16/4096").get("share"), 0.40)
    accept("f32 GEMM 4096^3, share of f32 FMA peak", fig("gpu/gemm/f32/4096").get("share"), 0.60)
    accept("causal attention f16 B1 H32 S4096 D128, TFLOP/s", val("gpu/attention/f16/prefill/4096", "TFLOP/s"), 200.0,
           "TFLOP/s")
    accept("1B-shape decode, f16 weights, share of copy GB/s", fig("gpu/llama/f16/decode").get("share"), 0.70)
    f16p, f32p = val("gpu/llama/f16/prefill512", "tok/s"), val("gpu/llama/f32/prefill512", "tok/s")
    accept("512-token prefill, f16 weights over f32 weights (tok/s)", f16p / f32p if f16p and f32p else None, 10.0, "x")
    accept("int8 matvec 4096, share of copy GB/s", fig("gpu/matvec/int8/4096").get("share"), 0.70)
    accept("ternary matvec 4096, share of copy GB/s", fig("gpu/matvec/ternary/4096").get("share"), 0.70)

    report = {
        "clocks": read_clocks(a.clocks),
        "gemm_tiles": read_sweep(a.sweep, peak) or (json.loads(Path(a.tiles_from).read_text()).get("gemm_tiles", [])
                                                    if a.tiles_from else []),
        "device": device,
        "driver": ctx.get("kiln_driver"),
        "vulkan_api": ctx.get("kiln_api"),
        "subgroup_size": ctx.get("kiln_subgroup_size"),
        "cooperative_matrix": ctx.get("kiln_cooperative_matrix"),
        "cooperative_matrix_shapes": ctx.get("kiln_cooperative_matrix_shapes"),
        "quick": ctx.get("kiln_quick") == "1",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": a.commit or git_commit(),
        "host": {"cpus": ctx.get("num_cpus"), "mhz": ctx.get("mhz_per_cpu")},
        "peaks": peak,
        "copy_gbs": copy,
        "tests": tests,
        "figures": figures,
        "acceptance": acceptance,
    }
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"gpu-{slug}.json").write_text(json.dumps(report, indent=1) + "\n")

    def num(x, unit=""):
        if x is None:
            return "—"
        return f"{x:.3g}{unit}" if abs(x) < 1000 else f"{x:,.0f}{unit}"

    lines = [f"# GPU check: {device}", "",
             f"{report['date']}, commit {report['commit']}, driver {report['driver']}, Vulkan {report['vulkan_api']}, "
             f"subgroup {report['subgroup_size']}, cooperative matrix: {report['cooperative_matrix']} "
             f"(shapes the driver reports: {report['cooperative_matrix_shapes']}).",
             "Written by `scripts/gpu_check.sh` (`scripts/gpu_report.py`); medians of 3 repetitions.", ""]
    if peak:
        lines += [f"Peaks: {peak['source']}. Memory shares are against this run's copy "
                  f"({num(copy)} GB/s, bytes read + written).", ""]
    ck = report["clocks"]
    if ck:
        lines += [f"GPU clocks during the benchmarks (nvidia-smi, {ck['samples']} samples): SM {ck['sm_min']}-{ck['sm_max']} MHz "
                  f"(median {ck['sm_median']}), memory {ck['mem_median']} MHz, power up to {ck['power_max']} W, "
                  f"{ck['temp_max']} C; throttle reasons seen: {', '.join(ck['throttle']) or 'none'}.", ""]
    lines += ["## Vulkan test suite (validation layer on)", "",
              f"{tests['tests']} tests, {tests['failed']} failed, {tests['skipped']} skipped.", ""]
    for f in tests["failures"][:40]:
        lines.append(f"- FAILED {f}")
    lines += ["", "## Acceptance lines of the GPU issue", "", "| figure | value | target | met |", "|---|---|---|---|"]
    for r in acceptance:
        pct = r["unit"] == ""
        v = "—" if r["value"] is None else (f"{100 * r['value']:.1f}%" if pct else f"{num(r['value'])} {r['unit']}")
        t = f"{100 * r['target']:.0f}%" if pct else f"{num(r['target'])} {r['unit']}"
        lines.append(f"| {r['what']} | {v} | {t} | {'yes' if r['met'] else 'no'} |")
    lines += ["", "## Figures", "", "| benchmark | ms each | TFLOP/s | GB/s | tok/s | share | of | kernel |",
              "|---|---|---|---|---|---|---|---|"]
    for f in figures:
        if "error" in f:
            lines.append(f"| {f['name']} | error: {f['error']} | | | | | | |")
            continue
        s = f.get("share")
        lines.append(f"| {f['name']} | {num(f.get('ms'))} | {num(f.get('TFLOP/s'))} | {num(f.get('GB/s'))} | "
                     f"{num(f.get('tok/s'))} | {'—' if s is None else f'{100 * s:.1f}%'} | {f.get('peak_of', '')} | "
                     f"{f.get('label', '')} |")
    if report["gemm_tiles"]:
        lines += ["", "## GEMM tiles (4096^3; one setting for every product of the run)", "",
                  "| benchmark | setting | ms each | TFLOP/s | share | of | kernel |", "|---|---|---|---|---|---|---|"]
        for t in report["gemm_tiles"]:
            sh = t.get("share")
            lines.append(f"| {t['bench']} | {t['env']}={t['tile']} | {num(t.get('ms'))} | {num(t.get('TFLOP/s'))} | "
                         f"{'—' if sh is None else f'{100 * sh:.1f}%'} | {t.get('peak_of', '')} | "
                         f"{t.get('label', t.get('error', ''))} |")
    (out / f"gpu-{slug}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    missing = [f["name"] for f in figures if "error" in f]
    return 0 if rows and not missing and tests["failed"] == 0 and not tests["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
