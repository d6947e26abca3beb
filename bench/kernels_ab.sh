#!/usr/bin/env bash
# A/B of two kernels_bench binaries (e.g. main and a change), run alternately
# in one session so that both see the same machine: A, B, A, B, ... for
# --rounds rounds, each a Google Benchmark run of the chosen cells. Prints one
# row per cell: the median over rounds of x_memcpy_best (the best kernel
# iteration against the best memcpy iteration of the same run; see
# kernels_bench.cc) for A and for B, and B / A.
#
# Usage: bench/kernels_ab.sh [--rounds=3] [--filter=REGEX] [--large] A_BUILD B_BUILD
#   A_BUILD, B_BUILD  build dirs holding bench/kernels_bench (Release builds)
#   --filter          Google Benchmark filter (default: the cells issue 19 names)
#   --large           also 256 MiB (TENSOROPS_BENCH_LARGE=1)
# Prints the load average before and after: on a machine whose load average is
# above 1 the figures say little (../shared/perf-notes.md).
set -eu -o pipefail
ROUNDS=3
FILTER='(last_axis|time_major|Roll/2_axes|Roll/3_axes|first_axis)'
LARGE=0
DIRS=()
for arg in "$@"; do
  case "$arg" in
    --rounds=*) ROUNDS="${arg#--rounds=}" ;;
    --filter=*) FILTER="${arg#--filter=}" ;;
    --large) LARGE=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "kernels_ab.sh: unknown option $arg" >&2; exit 2 ;;
    *) DIRS+=("$arg") ;;
  esac
done
[[ ${#DIRS[@]} == 2 ]] || { echo "usage: kernels_ab.sh [--rounds=N] [--filter=RE] [--large] A_BUILD B_BUILD" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kernels_ab.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < ROUNDS; r++)); do
  for side in A B; do
    dir=${DIRS[0]}; [[ $side == B ]] && dir=${DIRS[1]}
    if [[ $LARGE == 1 ]]; then export TENSOROPS_BENCH_LARGE=1; fi
    "$dir/bench/kernels_bench" --benchmark_filter="$FILTER" --benchmark_min_time=0.2 \
      --benchmark_format=json > "$WORK/$side.$r.json" 2> /dev/null
  done
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
vals = {}
for side in "AB":
    for r in range(rounds):
        for b in json.load(open(f"{work}/{side}.{r}.json"))["benchmarks"]:
            name = b["name"].replace("/real_time", "")
            vals.setdefault(name, {"A": [], "B": []})[side].append(b.get("x_memcpy_best", 0.0))
print("| case | A x memcpy | B x memcpy | B / A |")
print("|---|---|---|---|")
for name, v in vals.items():
    a, b = statistics.median(v["A"]), statistics.median(v["B"])
    print(f"| {name} | {a:.2f} | {b:.2f} | {b / a if a else 0:.2f} |")
PY
