#!/usr/bin/env bash
# Flowing ExecuteStream (StreamHeader.flow) against the bare gRPC stream and
# the non-flowing ExecuteStream: a UINT8 Roll of 64 MiB - 1 GiB (default
# sizes) driven by `load_tool --mode=stream` in 1 MiB chunks. The bare stream
# is echo_server's EchoStream, which sends each chunk back as it arrives (full
# duplex: the limit for a bidi stream on this machine). Per size: one call of
# the flowing Roll on a freshly started server (first call), then --calls
# rounds of echo, flowing and non-flowing (order rotated each round) on warm
# servers. Prints a Markdown table of median GB/s (tensor bytes / call
# seconds; every byte also comes back), the ratios to echo, and the first
# call against the warm median; every reply is verified byte for byte (and
# each flowing chunk's CRC-32). With --write, replaces the "flowing" section
# of BENCHMARKS.md with the table and its command.
#
# Usage: bench/flow_table.sh [--calls=3] [--sizes=MiB,...] [--write] BUILD_DIR
#   BUILD_DIR holds server/tensorops-server, bench/echo_server, bench/load_tool
set -u -o pipefail
cd "$(dirname "$0")/.."

CALLS=3
SIZES="64,256,1024"
WRITE=0
BUILD=""
for arg in "$@"; do
  case "$arg" in
    --calls=*) CALLS="${arg#--calls=}" ;;
    --sizes=*) SIZES="${arg#--sizes=}" ;;
    --write) WRITE=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "flow_table.sh: unknown option $arg" >&2; exit 2 ;;
    *) BUILD="$arg" ;;
  esac
done
[[ -n "$BUILD" ]] || { echo "usage: flow_table.sh [--calls=N] [--sizes=MiB,...] [--write] BUILD_DIR" >&2; exit 2; }
for bin in server/tensorops-server bench/echo_server bench/load_tool; do
  [[ -x "$BUILD/$bin" ]] || { echo "flow_table.sh: $BUILD/$bin missing (build it first)" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/flow_bench.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_server() {  # start_server NAME CMD... -> sets PORT and PID
  local name=$1 i; shift
  "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
  PID=$!
  PIDS+=("$PID")
  for ((i = 0; i < 100; i++)); do
    PORT=$(sed -n 's/.* listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$WORK/$name.out" | head -n1)
    [[ -n "$PORT" ]] && return 0
    sleep 0.1
  done
  echo "flow_table.sh: $name did not start:" >&2
  cat "$WORK/$name.err" >&2
  exit 1
}
tensorops_server() { start_server "$1" "$BUILD/server/tensorops-server" --host=127.0.0.1 --port=0 \
  --metrics_port=0 --http_port=-1 --log_level=warning; }

RESULTS="$WORK/results.jsonl"
run() {  # run LABEL TARGET PORT BYTES [--flow=true]
  local label=$1 target=$2 port=$3 bytes=$4; shift 4
  if ! "$BUILD/bench/load_tool" --mode=stream --target="$target" --address="127.0.0.1:$port" \
      --tensor_bytes="$bytes" --calls=1 --deadline_seconds=600 "$@" \
      | sed "s/^{/{\"label\":\"$label\",/" >> "$RESULTS"; then
    echo "flow_table.sh: load_tool failed: $label $bytes bytes" >&2
    exit 1
  fi
}

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
start_server echo "$BUILD/bench/echo_server" --host=127.0.0.1 --port=0
E_PORT=$PORT
tensorops_server warm
T_PORT=$PORT
IFS=, read -r -a sizes <<< "$SIZES"
run warmup echo "$E_PORT" $((sizes[0] << 20))
run warmup tensorops "$T_PORT" $((sizes[0] << 20)) --flow=true
run warmup tensorops "$T_PORT" $((sizes[0] << 20))
for mib in "${sizes[@]}"; do
  bytes=$((mib << 20))
  # First call: a server that has served nothing yet.
  tensorops_server "fresh$mib"
  run first tensorops "$PORT" "$bytes" --flow=true
  kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  for ((r = 0; r < CALLS; r++)); do
    for k in 0 1 2; do
      case $(((k + r) % 3)) in
        0) run echo echo "$E_PORT" "$bytes" ;;
        1) run flow tensorops "$T_PORT" "$bytes" --flow=true ;;
        2) run plain tensorops "$T_PORT" "$bytes" ;;
      esac
    done
  done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

table=$(python3 - "$RESULTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault((r["tensor_bytes"], r["label"]), []).append(r)
sizes = sorted({k[0] for k in by if k[1] != "warmup"})
print("| tensor | echo (full duplex) GB/s | flowing GB/s | flowing / echo | non-flowing GB/s | non-flowing / echo | flowing first call s | warm s (median) | first / warm |")
print("|---|---|---|---|---|---|---|---|---|")
for b in sizes:
    med = lambda label, key="gb_per_s": statistics.median(r[key] for r in by[(b, label)])
    e, f, p = med("echo"), med("flow"), med("plain")
    first, warm = by[(b, "first")][0]["seconds"], med("flow", "seconds")
    size = f"{b >> 30} GiB" if b >= 1 << 30 else f"{b >> 20} MiB"
    print(f"| {size} | {e:.3f} | {f:.3f} | {f / e:.2f}x | {p:.3f} | {p / e:.2f}x | {first:.2f} | {warm:.2f} | {first / warm:.2f}x |")
PY
)
echo "$table"
echo "# load average: $LOAD_START at the start, $LOAD_END at the end" >&2
[[ $WRITE == 1 ]] || exit 0
{
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') at commit $(git rev-parse --short HEAD), load"
  echo "average $LOAD_START at the start and $LOAD_END at the end, $CALLS warm calls of each per"
  echo "size. Generated by \`bench/flow_table.sh --write $BUILD\`."
  echo
  echo "$table"
} | python3 bench/replace_section.py BENCHMARKS.md flowing
echo "flow_table.sh: wrote BENCHMARKS.md (section flowing)" >&2
