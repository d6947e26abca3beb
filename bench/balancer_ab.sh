#!/usr/bin/env bash
# Calls lost behind HAProxy, per setting of its buffers (issue 36): N local
# replicas behind the balancer rendered from deploy/haproxy/haproxy.cfg.in,
# with the template's tune.* lines replaced by the ones given, and the load
# driver (tests/deploy/load_driver.cc: SDK defaults, a quarter of the calls
# 1-4 MiB Rolls) for S seconds. Prints, per setting: calls, failed calls and
# their codes, HAProxy's error log lines by termination state (SD--: the
# server side aborted), its peak RSS, and the GOAWAYs the replicas logged.
#
#   bash bench/balancer_ab.sh BUILD_DIR [--replicas 2] [--seconds 40] [--threads 16]
#        [--retries on|off] [--big_every 4] [--drivers 1] [--kill] -- 'SETTING' ['SETTING' ...]
#   SETTING: tune lines separated by ';', or 'default' for none, e.g.
#     bash bench/balancer_ab.sh build -- default 'tune.bufsize 65536' \
#          'tune.h2.max-frame-size 8192'
# --kill: kill -9 the last replica at +8 s and restart it 2 s later.
# --drivers K: K driver processes (K client connections to HAProxy), the
# threads split between them.
# Every process runs on 127.0.0.1 and is stopped by PID at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$1" && pwd); shift
REPLICAS=2 SECONDS_RUN=40 THREADS=16 RETRIES=on BIG_EVERY=4 KILL=0 DRIVERS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) REPLICAS=$2; shift 2 ;;
    --seconds) SECONDS_RUN=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --retries) RETRIES=$2; shift 2 ;;
    --big_every) BIG_EVERY=$2; shift 2 ;;
    --kill) KILL=1; shift ;;
    --drivers) DRIVERS=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || set -- default
source "$ROOT/tests/harness/script.sh"
SERVER=$BUILD/server/tensorops-server DRIVER=$BUILD/tests/deploy/deploy_load_driver
W=$(mktemp -d "${TMPDIR:-/tmp}/balancer-ab.XXXXXX")
trap 'stop_pids; rm -rf "$W"' EXIT

start_replica() {  # $1: index, $2: port (0: any)
  "$SERVER" --host=127.0.0.1 --port="$2" --metrics_port=-1 --http_port=-1 --threads=1 \
    >"$W/server$1.out" 2>>"$W/server$1.err" &
  REPLICA_PIDS[$1]=$!; PIDS+=($!)
}

run_setting() {
  local setting=$1 i
  REPLICA_PIDS=() PORTS=()
  for i in $(seq 1 "$REPLICAS"); do
    : >"$W/server$i.err"
    start_replica "$i" 0
  done
  for i in $(seq 1 "$REPLICAS"); do
    wait_for 20 "replica $i" grep -q 'listening on' "$W/server$i.out"
    PORTS[$i]=$(sed -n 's/^tensorops-server listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$W/server$i.out")
  done
  local lb; lb=$(free_port)
  local upstreams=()
  for i in $(seq 1 "$REPLICAS"); do upstreams+=("127.0.0.1:${PORTS[$i]}"); done
  bash "$ROOT/deploy/render.sh" haproxy --listen "127.0.0.1:$lb" --run-dir "$W" "${upstreams[@]}" \
    | grep -v '^ *tune\.' >"$W/haproxy.cfg"
  if [ "$setting" != default ]; then
    local lines; lines=$(tr ';' '\n' <<<"$setting" | sed 's/^ */  /')
    awk -v add="$lines" '{ print } /^global$/ { print add }' "$W/haproxy.cfg" >"$W/h.cfg"
    mv "$W/h.cfg" "$W/haproxy.cfg"
  fi
  haproxy -c -q -f "$W/haproxy.cfg"
  haproxy -db -f "$W/haproxy.cfg" >"$W/haproxy.log" 2>&1 &
  local hp=$!; PIDS+=($hp)
  sleep 1
  local dps=() d
  for d in $(seq 1 "$DRIVERS"); do
    env ${DRIVER_ENV:-} "$DRIVER" --target "127.0.0.1:$lb" --threads $((THREADS / DRIVERS)) --sleep_us 0 \
      --big_every "$BIG_EVERY" --max_calls 100000000 --max_seconds "$SECONDS_RUN" \
      --retries "$RETRIES" >"$W/driver$d.out" 2>"$W/driver$d.err" &
    dps+=($!)
  done
  local peak=0 t=0 rss
  while kill -0 "${dps[0]}" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$hp/status" 2>/dev/null || echo 0)
    [ "${rss:-0}" -gt "$peak" ] && peak=$rss
    if [ "$KILL" = 1 ] && [ $t = 80 ]; then
      kill -KILL "${REPLICA_PIDS[$REPLICAS]}"
    fi
    if [ "$KILL" = 1 ] && [ $t = 100 ]; then
      : >"$W/server$REPLICAS.out"
      start_replica "$REPLICAS" "${PORTS[$REPLICAS]}"
    fi
    sleep 0.1; t=$((t + 1))
  done
  for d in "${dps[@]}"; do wait "$d" || true; done
  cat "$W"/driver[0-9]*.err >"$W/driver.err"
  local calls failed
  calls=$(sed -n 's/^load_driver: \([0-9]*\) calls.*/\1/p' "$W"/driver[0-9]*.out | awk '{ n += $1 } END { print n + 0 }')
  failed=$(grep -c '^load_driver: call ' "$W/driver.err" || true)
  echo "== $setting: $calls calls, $failed failed ($(sed -n 's/.*final status: *//p' "$W"/driver[0-9]*.out | tr '\n' ' ')), HAProxy peak RSS $((peak / 1024)) MiB"
  echo "   HAProxy error lines by termination state: $(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[A-Za-z-][A-Za-z-][A-Za-z-][A-Za-z-]$/ && $i ~ /[-]/) { n[$i]++; break } } END { for (s in n) printf "%s=%d ", s, n[s] }' "$W/haproxy.log")"
  echo "   replicas' GOAWAY lines: $(cat "$W"/server*.err | grep -c 'Got goaway' || true)"
  { grep '^load_driver: call ' "$W/driver.err" || true; } | head -5 | sed 's/^/   /'
  cp "$W/haproxy.log" "$W/driver.err" "$W"/server*.err "${TMPDIR:-/tmp}/" 2>/dev/null || true
  stop_pids
  PIDS=()
}

for s in "$@"; do run_setting "$s"; done
