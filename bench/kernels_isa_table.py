#!/usr/bin/env python3
"""Turns bench/kernels_isa.sh's runs (DIR/isa_<path>_<glibc>.json, Google
Benchmark aggregates of kernels_bench's one-thread 256 MiB cells) into the
BENCHMARKS.md table: median x_memcpy per cell and dispatch path, and per
path the minimum, the median, the cells below the goal and the speeds behind
the ratio (the kernel's GB/s does not move with glibc's memcpy; memcpy's does).

Usage: kernels_isa_table.py DIR > table.md
Only the standard library.
"""
import glob
import json
import os
import re
import statistics
import sys

GOAL = 0.85
NAME = re.compile(r"^(.+)/256MiB/threads:1/real_time_median$")
ISA_ORDER = ["before", "avx2", "sse2", "scalar"]
GLIBC_ORDER = ["default", "ssse3", "sse2"]


def main():
    d = sys.argv[1]
    memcpy, tunables = {}, {}
    path = os.path.join(d, "isa_memcpy.txt")
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) >= 3:
                memcpy[parts[0]], tunables[parts[0]] = parts[1], parts[2]
    runs = {}
    for f in glob.glob(os.path.join(d, "isa_*_*.json")):
        m = re.match(r"isa_([a-z0-9]+)_([a-z0-9]+)\.json$", os.path.basename(f))
        if not m:
            continue
        doc = json.load(open(f))
        cells, rates, cpu = {}, [], {}
        for b in doc["benchmarks"]:
            n = NAME.match(b["name"])
            if n and "x_memcpy" in b:
                cells[n.group(1)] = b["x_memcpy"]
                cpu[n.group(1)] = b.get("x_memcpy_cpu", float("nan"))
                rates.append((b["bytes_per_second"], b["bytes_per_second"] / b["x_memcpy"]))
        runs[(m.group(1), m.group(2))] = (cells, rates, doc["context"].get("load_avg", [0])[0], cpu)
    cols = sorted(runs, key=lambda k: (GLIBC_ORDER.index(k[1]) if k[1] in GLIBC_ORDER else 9,
                                       ISA_ORDER.index(k[0]) if k[0] in ISA_ORDER else 9))
    if not cols:
        sys.exit("kernels_isa_table.py: no isa_*_*.json in " + d)
    names = list(runs[cols[0]][0])
    if memcpy:
        print("glibc's memcpy per column (the function `memcpy` resolved to, named by gdb):\n")
        for g in GLIBC_ORDER:
            if g in memcpy:
                print(f"- `{memcpy[g]}`: `GLIBC_TUNABLES={tunables[g]}`"
                      if tunables[g] != "(none)" else f"- `{memcpy[g]}`: glibc's own choice")
        print()
    head = [f"{isa} / {memcpy.get(g, g).replace('__memmove_', '')}" for isa, g in cols]
    print("x memcpy, one thread, 256 MiB, median of 3; column = kernels' instruction set "
          "(`before`: the kernels before this change, default dispatch) / glibc's memcpy variant "
          f"(**bold**: below {GOAL}x):\n")
    print("| cell | " + " | ".join(head) + " |")
    print("|---|" + "---|" * len(cols))
    for n in names:
        row = f"| {n} |"
        for c in cols:
            v = runs[c][0].get(n)
            row += " - |" if v is None else (f" **{v:.2f}** |" if v < GOAL else f" {v:.2f} |")
        print(row)
    def summary(label, fn):
        print(f"| {label} |" + "".join(f" {fn(runs[c])} |" for c in cols))
    summary("**min**", lambda r: f"{min(r[0].values()):.2f}")
    summary("**median**", lambda r: f"{statistics.median(r[0].values()):.2f}")
    summary(f"cells below {GOAL}x",
            lambda r: f"{sum(1 for v in r[0].values() if v < GOAL)} of {len(r[0])}")
    summary("8-op chains, min",
            lambda r: f"{min(v for k, v in r[0].items() if k.startswith('Chain/8_')):.2f}")
    summary("by CPU time (x_memcpy_cpu): min / median / below",
            lambda r: f"{min(r[3].values()):.2f} / {statistics.median(r[3].values()):.2f} / "
            f"{sum(1 for v in r[3].values() if v < GOAL)}")
    summary("kernel GB/s, median of cells",
            lambda r: f"{statistics.median(k for k, _ in r[1]) / 1e9:.1f}")
    summary("memcpy GB/s, median of cells",
            lambda r: f"{statistics.median(m for _, m in r[1]) / 1e9:.1f}")
    summary("load average at start", lambda r: f"{r[2]:.1f}")
    print()


if __name__ == "__main__":
    main()
