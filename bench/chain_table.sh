#!/usr/bin/env bash
# Starts tensorops-server on a free 127.0.0.1 port with default flags, runs
# build/bench/chain_bench against it (one chain of 8 ops vs 8 calls vs one op
# call, 64 MiB by default), stops the server by PID. Run on a quiet machine
# (load average < 1); it prints the load average first.
#   bench/chain_table.sh [--mib=64] [--rounds=7]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/chain_bench.XXXXXX") OUT=""
source bench/server_pids.sh
"$BUILD_DIR/server/tensorops-server" --host=127.0.0.1 --port=0 --metrics_port=0 --http_port=-1 \
  >"$WORK/server.log" 2>&1 &
PIDS+=($!)
await_port "$WORK/server.log"
"$BUILD_DIR/bench/chain_bench" --target="127.0.0.1:$PORT" "$@"
