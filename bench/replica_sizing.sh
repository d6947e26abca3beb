#!/usr/bin/env bash
# How much one replica serves (issue 48; docs/deployment.md, "How many
# replicas"): one tensorops-server on 127.0.0.1 with the Kubernetes
# Deployment's settings (--threads 2), driven by the SDK's load driver
# (tests/deploy/load_driver.cc, every result verified) with
#   small  CALLS small Rolls (3x8 INT32), CONCURRENCY callers;
#   big    CALLS/10 Rolls of 1-4 MiB (uniform; answers as big), CONCURRENCY callers.
# Prints, per kind, calls/s and MiB/s (request + answer bytes) at wall clock,
# and the server's CPU seconds per call and per MiB (from /proc/PID/stat):
# the CPU figures hold on a loaded machine far better than the wall-clock
# ones, so a replica with C cores serves about C / (CPU s per call) calls/s
# when its CPU is the limit.
#
#   bash bench/replica_sizing.sh BUILD_DIR [CALLS (4000)] [CONCURRENCY (8)]
# Every process runs on 127.0.0.1 and is stopped by PID.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
CALLS=${2:-4000}
CONCURRENCY=${3:-8}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T0=$EPOCHREALTIME
source "$ROOT/tests/harness/script.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/tensorops-sizing.XXXXXX")
trap 'stop_pids; rm -rf "$W"' EXIT
PORT=$(free_port)
"$BUILD/server/tensorops-server" --host 127.0.0.1 --port "$PORT" --metrics_port 0 --http_port 0 \
  --threads 2 >"$W/server.log" 2>&1 &
SERVER=$!
PIDS+=($SERVER)
serving() { [ "$("$BUILD/client/tensorops" --target "127.0.0.1:$PORT" --deadline 2s health)" = SERVING ]; }
wait_for 30 "the server on 127.0.0.1:$PORT" serving
HZ=$(getconf CLK_TCK)
cpu() { awk -v hz="$HZ" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$SERVER/stat"; }

echo "| calls | callers | calls/s | MiB/s (in + out) | server CPU ms per call | server CPU ms per MiB |"
echo "|---|---|---|---|---|---|"
run() {  # run NAME N DRIVER_ARGS...
  local name=$1 n=$2 c0 c1 out calls secs mib
  shift 2
  c0=$(cpu)
  "$BUILD/tests/deploy/deploy_load_driver" --target "127.0.0.1:$PORT" --threads "$CONCURRENCY" \
    --sleep_us 0 --max_calls "$n" --max_seconds 600 "$@" >"$W/$name.out" 2>&1 \
    || { cat "$W/$name.out"; fail "load driver ($name)"; }
  c1=$(cpu)
  out=$(sed -n 's/^load_driver: \([0-9]*\) calls in \([0-9.]*\) s.*/\1 \2/p' "$W/$name.out")
  read -r calls secs <<<"$out"
  # Bytes per call: the 3x8 INT32 tensor (96 B) or the mean of 1-4 MiB (2.5
  # MiB), each way.
  case "$name" in small) mib=$(awk -v n="$calls" 'BEGIN { print n * 2 * 96 / 1048576 }') ;;
                  big) mib=$(awk -v n="$calls" 'BEGIN { print n * 2 * 2.5 }') ;; esac
  awk -v name="$name" -v n="$calls" -v s="$secs" -v mib="$mib" -v c="$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')" \
    -v conc="$CONCURRENCY" 'BEGIN {
      per_mib = name == "small" ? "-" : sprintf("%.3f", c * 1000 / mib)
      printf "| %d %s | %d | %.0f | %.1f | %.3f | %s |\n", n, name, conc, n / s, mib / s, c * 1000 / n, per_mib }'
}
run small "$CALLS"
run big $((CALLS / 10)) --big_every 1
echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); wall-clock columns are only valid on a quiet machine)"
