#!/usr/bin/env bash
# Starts tensorops-server on a free 127.0.0.1 port, runs the README cookbook
# through grpcurl-lite, stops the server by PID.
#   cookbook_test.sh SERVER_BINARY README GRPCURL_LITE_DIR [EXTRA_SERVER_FLAGS...]
set -uo pipefail
server=$1 readme=$2 gl=$3
shift 3
if [ ! -f "$gl/node_modules/@grpc/grpc-js/package.json" ]; then
  echo "grpcurl-lite is not installed in $gl (tools/test.sh installs it)"
  # In CI a missing tool is a failure, not a skip.
  [ "${CI:-}" = "true" ] && exit 1
  exit 77
fi
log=$(mktemp)
"$server" --host=127.0.0.1 --port=0 --metrics_port=0 --http_port=-1 "$@" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "server did not start:"; cat "$log"; exit 1; }
node "$(dirname "$0")/cookbook.js" "$readme" "$gl" "127.0.0.1:$port"
