#!/usr/bin/env python3
"""Turns kernels_bench JSON (Google Benchmark, --benchmark_repetitions=3
--benchmark_report_aggregates_only=true) into the BENCHMARKS.md kernel tables
(median x_memcpy per case, dtype and thread count) and a gnuplot data file.

Usage: kernels_table.py OUT.dat RESULT.json... [--ordinary ORDINARY.json] > tables.md
  ORDINARY.json: a run with TENSOROPS_STREAMING_MIN_BYTES=1e18 (ordinary
  stores and the row-by-row time-major walk: the kernels before streaming
  stores), shown as its own table beside the default run.
Only the standard library: the benchmark machine has no NumPy.
"""
import json
import re
import sys

CASES = [
    ("Reverse/first_axis", "Reverse first axis"),
    ("Reverse/last_axis", "Reverse last axis"),
    ("Reverse/middle_axis", "Reverse middle axis"),
    ("Reverse/all_axes", "Reverse all axes"),
    ("Reverse/mask_0_1", "Reverse mask (axes 0, 1)"),
    ("ReverseSequence/batch_major", "ReverseSequence batch-major"),
    ("ReverseSequence/time_major", "ReverseSequence time-major"),
    ("Roll/1_axis", "Roll 1 axis"),
    ("Roll/2_axes", "Roll 2 axes"),
    ("Roll/3_axes_repeated", "Roll 3 axes, repeated"),
]
DTYPES = ["FLOAT32", "UINT8", "FLOAT16", "FLOAT64"]
GOAL = 0.85
NAME = re.compile(r"^(.+)/([A-Z0-9]+)/(\d+)MiB/threads:(\d)/real_time_median$")


def load(files):
    cells = {}  # (case, dtype, mib, threads) -> (median x_memcpy, median x_memcpy_cpu)
    loads = []
    for f in files:
        with open(f) as fh:
            doc = json.load(fh)
        loads.append(doc["context"].get("load_avg", [0])[0])
        for b in doc["benchmarks"]:
            m = NAME.match(b["name"])
            if m and "x_memcpy" in b:
                key = (m.group(1), m.group(2), int(m.group(3)), int(m.group(4)))
                cells[key] = (b["x_memcpy"], b.get("x_memcpy_cpu", float("nan")))
    return cells, loads


def table(cells, mib, which, title):
    vals = sorted(v[which] for k, v in cells.items() if k[2] == mib)
    if not vals:
        return
    print(f"{title} (1t = one thread, 2t = two threads; **bold**: below {GOAL}x):\n")
    print("| case |" + "".join(f" {d} 1t | {d} 2t |" for d in DTYPES))
    print("|---|" + "---|" * (2 * len(DTYPES)))
    for key, label in CASES:
        row = f"| {label} |"
        for d in DTYPES:
            for t in (1, 2):
                v = cells.get((key, d, mib, t))
                if v is None:
                    row += " - |"
                else:
                    x = v[which]
                    row += f" **{x:.2f}** |" if x < GOAL else f" {x:.2f} |"
        print(row)
    misses = sum(1 for v in vals if v < GOAL)
    print(f"\n{len(vals)} cells: median {vals[len(vals) // 2]:.2f}x, min {vals[0]:.2f}x, "
          f"{misses} below {GOAL}x.\n")


def main():
    args = sys.argv[1:]
    ordinary = None
    if "--ordinary" in args:
        i = args.index("--ordinary")
        ordinary = args[i + 1]
        del args[i : i + 2]
    out_dat, files = args[0], args[1:]
    cells, loads = load(files)
    sizes = sorted({k[2] for k in cells}, reverse=True)
    for mib in sizes:
        table(cells, mib, 0, f"{mib} MiB, median of 3 repetitions, x memcpy by wall time")
        table(cells, mib, 1, f"{mib} MiB, the same run, x memcpy by process CPU time")
    if ordinary:
        ocells, oloads = load([ordinary])
        for mib in sorted({k[2] for k in ocells}, reverse=True):
            table(ocells, mib, 0, f"{mib} MiB with ordinary stores only "
                  f"(TENSOROPS_STREAMING_MIN_BYTES=1e18: the kernels as before this change), "
                  f"median of 3, x memcpy by wall time")
            table(ocells, mib, 1, f"{mib} MiB with ordinary stores only, x memcpy by process "
                  f"CPU time")
        loads += oloads
    print(f"Load average when each kernels_bench run started: "
          f"{', '.join(f'{l:.1f}' for l in loads)}.\n")
    # gnuplot: one line per case x dtype; columns: ratio per (size, threads).
    cols = [(mib, t) for mib in sorted(sizes) for t in (1, 2)]
    with open(out_dat, "w") as fh:
        fh.write("# label " + " ".join(f"{mib}MiB_{t}t" for mib, t in cols) + "\n")
        for key, label in CASES:
            for d in DTYPES:
                vals = [cells.get((key, d, mib, t)) for mib, t in cols]
                fh.write(f'"{label}, {d}" '
                         + " ".join("NaN" if v is None else f"{v[0]:.4f}" for v in vals) + "\n")


if __name__ == "__main__":
    main()
