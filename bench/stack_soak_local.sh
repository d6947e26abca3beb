#!/usr/bin/env bash
# The soak through the balancer (bench/stack_soak.py) against the compose
# stack's topology run as local processes: 3 replicas on 127.0.0.1 behind
# HAProxy rendered from deploy/haproxy/haproxy.cfg.in (gRPC and REST fronts),
# as tests/deploy/local_stack_test.sh runs them. For the compose stack
# itself, tests/containers/compose_test.sh runs stack_soak.py (step 8).
#
#   bash bench/stack_soak_local.sh BUILD_DIR [SECONDS (600)] [stack_soak.py args...]
#
# Prints stack_soak.py's report, then HAProxy's error lines by termination
# state and the GOAWAY lines the replicas logged. Exit status: stack_soak.py's.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$1" && pwd)
SECS=${2:-600}
shift $(($# >= 2 ? 2 : 1))
source "$ROOT/tests/harness/script.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/stack-soak.XXXXXX")
trap 'stop_pids; rm -rf "$W"' EXIT

GRPC=() HTTP=() SOAK_PIDS=()
for i in 1 2 3; do
  "$BUILD/server/tensorops-server" --host=127.0.0.1 --port=0 --metrics_port=-1 --http_port=0 ${SERVER_FLAGS:-} \
    >"$W/server$i.out" 2>"$W/server$i.err" &
  PIDS+=($!); SOAK_PIDS+=(--pid "replica-$i=$!")
done
for i in 1 2 3; do
  wait_for 20 "replica $i" grep -q 'http on http://' "$W/server$i.out"
  GRPC+=("127.0.0.1:$(sed -n 's/^tensorops-server listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$W/server$i.out")")
  HTTP+=(--http-upstream "127.0.0.1:$(sed -n 's|^tensorops-server http on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$W/server$i.out")")
done
LB=$(free_port) LB_HTTP=$(free_port)
bash "$ROOT/deploy/render.sh" haproxy --listen "127.0.0.1:$LB" --run-dir "$W" \
  --http-listen "127.0.0.1:$LB_HTTP" "${HTTP[@]}" "${GRPC[@]}" >"$W/haproxy.cfg"
haproxy -db -f "$W/haproxy.cfg" >"$W/haproxy.log" 2>&1 &
PIDS+=($!)
sleep 1
rc=0
/usr/bin/python3 "$ROOT/bench/stack_soak.py" --grpc "127.0.0.1:$LB" --rest "127.0.0.1:$LB_HTTP" \
  --seconds "$SECS" "${SOAK_PIDS[@]}" "$@" || rc=$?
echo "HAProxy error lines by termination state: $(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[A-Za-z-][A-Za-z-][A-Za-z-][A-Za-z-]$/ && $i ~ /[-]/) { n[$i]++; break } } END { for (s in n) printf "%s=%d ", s, n[s] }' "$W/haproxy.log")"
echo "replicas' GOAWAY lines: $(cat "$W"/server*.err | grep -c 'Got goaway' || true)"
cat "$W"/server*.err | grep 'Got goaway' | sed 's/.*Got goaway \[\([0-9]*\)\].*/GOAWAY error code \1/' | sort | uniq -c || true
grep -h 'SD--' "$W/haproxy.log" | head -3 || true
exit $rc
