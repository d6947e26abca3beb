#!/usr/bin/env bash
# The streaming table of BENCHMARKS.md and its plot: ExecuteStream of a
# UINT8 Roll (tensorops-server) against a bare gRPC bidi stream that sends the
# same bytes back (echo_server's EchoStream), both driven by
# `load_tool --mode=stream` in 1 MiB chunks, tensors of 64 MiB - 2 GiB.
# Each size runs echo and tensorops alternately (--calls rounds, the order
# flipped every round) after one warm-up call of each; the table gives the
# median GB/s (tensor bytes / seconds of the call; every byte also comes back)
# and the ratio. Rewrites the "streaming" section of BENCHMARKS.md and
# bench/plots/streaming.svg.
#
# Usage: bench/stream_table.sh [--quick] [--calls=3] [--sizes=MiB,...] BUILD_DIR
#   BUILD_DIR  holds server/tensorops-server, bench/echo_server, bench/load_tool
#              (a Release build: cmake --build build-bench --target tensorops-server echo_server load_tool)
#   --quick    a smoke run for CI: 8 MiB, one call each, every byte verified;
#              BENCHMARKS.md and the plot are left alone
# Every reply is compared byte for byte with the expected output; a mismatch
# or an RPC error fails the script. About 3-6 minutes on the shared VM.
# Needs gnuplot unless --quick (Debian: apt-get install -y gnuplot-nox).
set -u -o pipefail
cd "$(dirname "$0")/.."

QUICK=0
CALLS=3
SIZES="64,256,1024,2048"
BUILD=""
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --calls=*) CALLS="${arg#--calls=}" ;;
    --sizes=*) SIZES="${arg#--sizes=}" ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) echo "stream_table.sh: unknown option $arg" >&2; exit 2 ;;
    *) BUILD="$arg" ;;
  esac
done
[[ -n "$BUILD" ]] || { echo "usage: stream_table.sh [--quick] [--calls=N] [--sizes=MiB,...] BUILD_DIR" >&2; exit 2; }
for bin in server/tensorops-server bench/echo_server bench/load_tool; do
  [[ -x "$BUILD/$bin" ]] || { echo "stream_table.sh: $BUILD/$bin missing (build it first)" >&2; exit 2; }
done
if [[ $QUICK == 1 ]]; then
  SIZES=8 CALLS=1
else
  command -v gnuplot > /dev/null || { echo "stream_table.sh: needs gnuplot (apt-get install -y gnuplot-nox)" >&2; exit 2; }
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/stream_bench.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_server() {  # start_server NAME CMD... -> sets PORT from "listening on HOST:PORT"
  local name=$1 i; shift
  "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
  PIDS+=($!)
  for ((i = 0; i < 100; i++)); do
    PORT=$(sed -n 's/.* listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$WORK/$name.out" | head -n1)
    [[ -n "$PORT" ]] && return 0
    sleep 0.1
  done
  echo "stream_table.sh: $name did not start:" >&2
  cat "$WORK/$name.err" >&2
  exit 1
}
start_server tensorops "$BUILD/server/tensorops-server" --host=127.0.0.1 --port=0 --metrics_port=0 --http_port=-1 --log_level=warning
T_PORT=$PORT
start_server echo "$BUILD/bench/echo_server" --host=127.0.0.1 --port=0
E_PORT=$PORT

RESULTS="$WORK/results.jsonl"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
run() {  # run TARGET BYTES CALLS
  local port=$E_PORT
  [[ $1 == tensorops ]] && port=$T_PORT
  if ! "$BUILD/bench/load_tool" --mode=stream --target="$1" --address="127.0.0.1:$port" \
      --tensor_bytes="$2" --calls="$3" --deadline_seconds=600 >> "$RESULTS"; then
    echo "stream_table.sh: load_tool failed: $1 $2 bytes" >&2
    exit 1
  fi
}
IFS=, read -r -a sizes <<< "$SIZES"
# Warm-up: the first call of a fresh server pays for its lazily started
# threads and first-touch memory; not counted.
run echo $((sizes[0] << 20)) 1
run tensorops $((sizes[0] << 20)) 1
: > "$RESULTS"
for mib in "${sizes[@]}"; do
  for ((r = 0; r < CALLS; r++)); do
    if ((r % 2 == 0)); then order=(echo tensorops); else order=(tensorops echo); fi
    for t in "${order[@]}"; do run "$t" $((mib << 20)) 1; done
  done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# Median GB/s per target and size; ratio tensorops / echo.
table=$(python3 - "$RESULTS" "$WORK/streaming.dat" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault((r["tensor_bytes"], r["target"]), []).append(r)
sizes = sorted({k[0] for k in by})
print("| tensor | echo GB/s (median) | tensorops GB/s (median) | ratio | echo s per call | tensorops s per call | tensorops client CRC s | calls each |")
print("|---|---|---|---|---|---|---|---|")
with open(sys.argv[2], "w") as dat:
    dat.write("# MiB echo_gbps tensorops_gbps ratio\n")
    for b in sizes:
        e, t = by.get((b, "echo"), []), by.get((b, "tensorops"), [])
        eg = statistics.median(r["gb_per_s"] for r in e)
        tg = statistics.median(r["gb_per_s"] for r in t)
        es = ", ".join(f'{r["seconds"]:.2f}' for r in e)
        ts = ", ".join(f'{r["seconds"]:.2f}' for r in t)
        crc = statistics.median(r["crc_seconds"] for r in t)
        size = f"{b >> 30} GiB" if b >= 1 << 30 else f"{b >> 20} MiB"
        print(f"| {size} | {eg:.3f} | {tg:.3f} | {tg / eg:.2f}x | {es} | {ts} | {crc:.2f} | {len(e)} / {len(t)} |")
        dat.write(f"{b >> 20} {eg:.4f} {tg:.4f} {tg / eg:.4f}\n")
PY
)
echo "$table"
echo "# load average: $LOAD_START at the start, $LOAD_END at the end" >&2
[[ $QUICK == 1 ]] && exit 0

mkdir -p bench/plots
cp "$WORK/streaming.dat" bench/results/streaming.dat 2>/dev/null || { mkdir -p bench/results && cp "$WORK/streaming.dat" bench/results/streaming.dat; }
{
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') at commit $(git rev-parse --short HEAD), load"
  echo "average $LOAD_START at the start and $LOAD_END at the end. Generated by"
  echo "\`bench/stream_table.sh $BUILD\`; plot: \`bench/plots/streaming.svg\`."
  echo
  echo "$table"
  echo
  echo "![GB/s by tensor size, ExecuteStream vs bare stream](bench/plots/streaming.svg)"
} | python3 bench/replace_section.py BENCHMARKS.md streaming
gnuplot <<GP
set terminal svg size 900,480 font 'sans,11' background rgb 'white'
set output 'bench/plots/streaming.svg'
set title 'Streaming a tensor up and back, 1 MiB chunks (median of $CALLS calls)'
set xlabel 'tensor size (MiB)'
set ylabel 'GB/s (tensor bytes / call seconds)'
set logscale x 2
set yrange [0:*]
set y2label 'tensorops / echo'
set y2range [0:1.2]
set y2tics 0.2
set ytics nomirror
set grid
set key top left
plot 'bench/results/streaming.dat' using 1:2 with linespoints lw 2 pt 7 title 'bare gRPC bidi echo', \
     '' using 1:3 with linespoints lw 2 pt 5 title 'tensorops ExecuteStream (UINT8 Roll)', \
     '' using 1:4 axes x1y2 with linespoints dt 2 pt 4 title 'ratio (right axis)', \
     0.8 axes x1y2 with lines dt 3 lc rgb 'red' title 'goal 0.8x (right axis)'
GP
echo "stream_table.sh: wrote BENCHMARKS.md (section streaming) and bench/plots/streaming.svg" >&2
