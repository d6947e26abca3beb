#!/usr/bin/env bash
# Server instructions per lone small call, under valgrind's callgrind: a count
# that does not depend on what else the machine runs
# (docs/benchmarks-history.md, "Issue 19 session (2026-11-25): lone small
# calls"). Starts the server under callgrind on
# 127.0.0.1:PORT, warms up with 200 calls, zeroes the counters, sends
# --calls calls of --payload_bytes at concurrency 1 with bench/load_tool,
# dumps, and prints total instructions / calls. Stops the server by PID.
#
# Usage: bench/callgrind_per_call.sh BUILD_DIR tensorops|oip|echo [PORT] [CALLS] [PAYLOAD_BYTES]
#   tensorops: Execute of Roll; oip: ModelInfer of the same; echo: the bare
#   gRPC echo server (bench/echo_server) as the baseline. PAYLOAD_BYTES: the
#   tensor's size (64 by default; 65536 or 1048576 for the big-call cells,
#   where fewer CALLS, e.g. 200, keep a run near a minute).
# Needs valgrind. About a minute per run. SERVER_FLAGS: more tensorops-server
# flags (an A/B of one switch, e.g. SERVER_FLAGS=--trace_headers=false);
# LOAD_FLAGS: more load_tool flags (e.g. LOAD_FLAGS=--traceparent=00-<32 hex>-<16 hex>-01,
# a caller that traces).
# CALLGRIND_KEEP=FILE: keep the callgrind profile there (callgrind_annotate FILE).
set -euo pipefail
BUILD=${1:?usage: callgrind_per_call.sh BUILD_DIR tensorops|oip|echo [PORT] [CALLS] [PAYLOAD_BYTES]}
TARGET=${2:?target: tensorops, oip or echo}
PORT=${3:-50126}
CALLS=${4:-2000}
PAYLOAD=${5:-64}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/callgrind.XXXXXX")
if [[ $TARGET == echo ]]; then
  SERVER=("$BUILD/bench/echo_server" --host=127.0.0.1 --port="$PORT")
else
  SERVER=("$BUILD/server/tensorops-server" --host=127.0.0.1 --port="$PORT" --metrics_port=0
          --http_port=-1 --log_level=warning ${SERVER_FLAGS:-})
fi
valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.out" "${SERVER[@]}" > "$OUT/server.log" 2>&1 &
VP=$!
trap 'kill "$VP" 2>/dev/null; wait "$VP" 2>/dev/null; rm -rf "$OUT"' EXIT
LOAD=("$BUILD/bench/load_tool" --target="$TARGET" --address="127.0.0.1:$PORT" --payload_bytes="$PAYLOAD"
      --concurrency=1 --duration_seconds=600 ${LOAD_FLAGS:-})
for _ in $(seq 1 100); do
  "${LOAD[@]}" --warmup_seconds=0 --warmup_calls=0 --max_calls=200 > /dev/null 2>&1 && break
  sleep 0.2
done
callgrind_control -z "$VP" > /dev/null 2>&1
"${LOAD[@]}" --warmup_seconds=0.1 --warmup_calls=1 --max_calls="$CALLS" > "$OUT/load.json"
callgrind_control -d "$VP" > /dev/null 2>&1
total=$(callgrind_annotate "$OUT/cg.out.1" 2> /dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
grep -q '"verify_failures":0' "$OUT/load.json" || { echo "callgrind_per_call.sh: replies failed verification" >&2; exit 1; }
[[ -n ${CALLGRIND_KEEP:-} ]] && cp "$OUT/cg.out.1" "$CALLGRIND_KEEP"
echo "$TARGET: $((total / CALLS)) server instructions per call ($CALLS calls of $PAYLOAD B, c=1)"
