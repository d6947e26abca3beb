#!/usr/bin/env bash
# The balancer, chosen by measurement (issue 45): three local replicas behind
# one HTTP/2 proxy, from a cold start, under one client for S seconds:
#   stock  bench/stack_soak.py: Python grpcio, gRPC core's retries off
#          (grpc.enable_retries 0: no transparent resend either), 12 callers
#          of 16 B-4 KiB and 4 of 1-4 MiB Execute Reverse, one channel each;
#   sdk    tests/deploy/load_driver.cc: the SDK's defaults (its retry policy),
#          16 callers, a quarter of the calls 1-4 MiB Rolls;
#   cancel bench/stack_soak.py as stock, but 2 callers of 4 MiB calls each
#          cancelled after 0-3 ms, 2 with a 1-5 ms deadline, 2 small, 2 big:
#          what the proxy does when gRPC core resets a stream it never
#          opened (the client connection errors it answered are counted).
# Proxies (Debian 12's packages; configurations written here, the HAProxy one
# rendered from deploy/haproxy/haproxy.cfg.in as shipped):
#   haproxy  HAProxy 2.6
#   nghttpx  nghttpx 1.52 (nghttp2-proxy), h2c to h2c
#   caddy    Caddy 2.6 reverse_proxy, h2c to h2c
# With --kill, replica 3 gets kill -9 at +KILL_AT s (20) and is restarted 2 s
# later on the same port. Prints one line per run: calls, lost calls (codes),
# p50/p99, the calls each replica served (its own /metrics), the proxy's CPU
# time and peak RSS, and the client's output.
#
#   bash bench/balancer_compare.sh BUILD_DIR [--seconds 60] [--kill]
#        [--proxies "haproxy nghttpx caddy"] [--clients "stock sdk"]
# HAPROXY_SED: a sed script applied to the rendered HAProxy config (a setting
# to try), e.g. 's/tune.bufsize 65536/tune.bufsize 262144/'.
# SOAK_ARGS: more bench/stack_soak.py arguments for the stock and cancel
# clients (e.g. "--bdp-probe off --one-channel").
# Every process runs on 127.0.0.1 and is stopped by PID at the end of its run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$1" && pwd); shift
SECS=60 KILL=0 KILL_AT=${KILL_AT:-20} PROXIES="haproxy nghttpx caddy" CLIENTS="stock sdk"
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECS=$2; shift 2 ;;
    --kill) KILL=1; shift ;;
    --proxies) PROXIES=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
source "$ROOT/tests/harness/script.sh"
for p in $PROXIES; do
  command -v "$p" >/dev/null || fail "$p not found (Debian: apt-get install haproxy nghttp2-proxy caddy)"
done
SERVER=$BUILD/server/tensorops-server DRIVER=$BUILD/tests/deploy/deploy_load_driver
W=$(mktemp -d "${TMPDIR:-/tmp}/balancer-compare.XXXXXX")
trap 'stop_pids; rm -rf "$W"' EXIT

start_replica() {  # $1: index, $2: gRPC port, $3: metrics port (0: any)
  "$SERVER" --host=127.0.0.1 --port="$2" --metrics_port="$3" --http_port=-1 \
    >"$W/server$1.out" 2>>"$W/server$1.err" &
  REPLICA_PIDS[$1]=$!; PIDS+=($!)
}

# Calls replica $1 answered (Execute, any op and code), from its /metrics.
served() {
  curl -sf --max-time 2 "http://127.0.0.1:${MPORTS[$1]}/metrics" | awk '
    /^tensorops_requests_total\{/ && /method="Execute"/ { n += $NF } END { printf "%d\n", n }'
}

write_config() {  # $1: proxy, $2: listen port; upstreams in PORTS
  local i
  case "$1" in
    haproxy)
      bash "$ROOT/deploy/render.sh" haproxy --listen "127.0.0.1:$2" --run-dir "$W" \
        "${PORTS[@]/#/127.0.0.1:}" | sed -e "${HAPROXY_SED:-}" >"$W/proxy.conf"
      haproxy -c -q -f "$W/proxy.conf" ;;
    nghttpx)
      # One worker as HAProxy's one thread; fall/rise: a replica that
      # refuses a connection is out until it takes one again.
      { echo "frontend=127.0.0.1,$2;no-tls"
        for i in 1 2 3; do echo "backend=127.0.0.1,${PORTS[$i]};;proto=h2;no-tls;fall=1;rise=1"; done
        echo "workers=1"
        echo "single-process=yes"
        echo "backend-connect-timeout=500ms"
        echo "accesslog-file=$W/proxy.access"
        echo "errorlog-file=$W/proxy.err"
        # INFO has the GOAWAYs nghttpx sends, and a dozen lines per call.
        if [ "$CLIENT" = cancel ]; then echo "log-level=INFO"; fi
      } >"$W/proxy.conf" ;;
    caddy)
      # lb_try_duration: a call whose replica refused the connection is sent
      # to another one for up to 2 s. No passive health checks
      # (fail_duration): Caddy 2.6 counts a client's cancel as a failure of
      # the upstream, and with cancelling callers all three replicas were
      # out within 4 s (every call 503).
      cat >"$W/proxy.conf" <<EOF
{
	admin off
	auto_https off
	servers {
		protocols h1 h2c
	}
}
http://127.0.0.1:$2 {
	reverse_proxy h2c://127.0.0.1:${PORTS[1]} h2c://127.0.0.1:${PORTS[2]} h2c://127.0.0.1:${PORTS[3]} {
		lb_policy round_robin
		lb_try_duration 2s
		flush_interval -1
		transport http {
			versions h2c 2
			dial_timeout 500ms
		}
	}
}
EOF
      caddy validate --adapter caddyfile --config "$W/proxy.conf" >/dev/null 2>&1 ;;
  esac
}

start_proxy() {  # $1: proxy
  case "$1" in
    haproxy) haproxy -db -f "$W/proxy.conf" >"$W/proxy.log" 2>&1 & ;;
    nghttpx) nghttpx --conf="$W/proxy.conf" >"$W/proxy.log" 2>&1 & ;;
    caddy) HOME=$W XDG_DATA_HOME=$W XDG_CONFIG_HOME=$W caddy run --adapter caddyfile \
             --config "$W/proxy.conf" >"$W/proxy.log" 2>&1 & ;;
  esac
  PROXY_PID=$!; PIDS+=($!)
}

# Client connections the proxy ended for a protocol error, from its own log:
# HAProxy's "PR--" lines (a <BADREQ> in state PR: GOAWAY PROTOCOL_ERROR),
# nghttpx's error log, Caddy's (Go's http2 server: "connection error").
conn_errors() {
  case "$1" in
    haproxy) grep -c ' PR-- ' "$W/proxy.log" || true ;;
    nghttpx) cat "$W/proxy.err" "$W/proxy.log" 2>/dev/null | grep -c 'Sending GOAWAY: .*error_code=[1-9]' || true ;;
    caddy) grep -ci 'connection error\|PROTOCOL_ERROR' "$W/proxy.log" || true ;;
  esac
}

# CPU seconds (user + system) of process $1 and its threads so far.
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f\n", ($14 + $15) / hz }' "/proc/$1/stat"; }

run_one() {  # $1: proxy, $2: client
  local proxy=$1 client=$2 i lb
  CLIENT=$client
  REPLICA_PIDS=() PORTS=() MPORTS=()
  for i in 1 2 3; do : >"$W/server$i.err"; start_replica "$i" 0 0; done
  for i in 1 2 3; do
    wait_for 20 "replica $i" grep -q 'metrics on http://' "$W/server$i.out"
    PORTS[$i]=$(sed -n 's/^tensorops-server listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$W/server$i.out")
    MPORTS[$i]=$(sed -n 's|^tensorops-server metrics on http://127\.0\.0\.1:\([0-9]*\)/metrics$|\1|p' "$W/server$i.out")
  done
  lb=$(free_port)
  write_config "$proxy" "$lb"
  start_proxy "$proxy"
  # Cold: the first calls go out as soon as the proxy listens.
  # (Its listening socket, not a connect: an empty connection is an error
  # line in HAProxy's log.)
  wait_for 10 "$proxy listening on 127.0.0.1:$lb" bash -c "ss -Hltn 'sport = :$lb' | grep -q ."
  local cpu0; cpu0=$(cpu_seconds "$PROXY_PID")
  if [ "$client" = stock ]; then
    /usr/bin/python3 "$ROOT/bench/stack_soak.py" --grpc "127.0.0.1:$lb" --seconds "$SECS" \
      --threads small=12,big=4 --retries off ${SOAK_ARGS:-} >"$W/client.out" 2>&1 &
  elif [ "$client" = cancel ]; then
    /usr/bin/python3 "$ROOT/bench/stack_soak.py" --grpc "127.0.0.1:$lb" --seconds "$SECS" \
      --threads cancel=2,deadline=2,small=2,big=2 --retries off ${SOAK_ARGS:-} >"$W/client.out" 2>&1 &
  else
    "$DRIVER" --target "127.0.0.1:$lb" --threads 16 --sleep_us 0 --big_every 4 \
      --max_calls 100000000 --max_seconds "$SECS" >"$W/client.out" 2>"$W/client.err" &
  fi
  local cp=$! t=0 peak=0 rss
  while kill -0 "$cp" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$PROXY_PID/status" 2>/dev/null || echo 0)
    [ "${rss:-0}" -gt "$peak" ] && peak=$rss
    if [ "$KILL" = 1 ] && [ $t = $((KILL_AT * 10)) ]; then kill -KILL "${REPLICA_PIDS[3]}"; fi
    if [ "$KILL" = 1 ] && [ $t = $((KILL_AT * 10 + 20)) ]; then
      start_replica 3 "${PORTS[3]}" "${MPORTS[3]}"
    fi
    sleep 0.1; t=$((t + 1))
  done
  wait "$cp" || true
  local cpu1 calls lost codes lat spread=""
  cpu1=$(cpu_seconds "$PROXY_PID")
  for i in 1 2 3; do spread+="$(served $i || echo '?') "; done
  if [ "$client" != sdk ]; then
    calls=$(sed -n 's/^stack_soak: \([0-9]*\) calls in.*/\1/p' "$W/client.out")
    lost=$(sed -n 's/^stack_soak: .*: \([0-9]*\) unexpected.*/\1/p' "$W/client.out")
    codes=$(awk '$1 ~ /^(small|big|cancel|deadline)$/ && $2 != "OK" { printf "%s %s=%s ", $1, $2, $3 }' "$W/client.out")
    lat=$(sed -n 's/^  latency all *//p' "$W/client.out")
  else
    calls=$(sed -n 's/^load_driver: \([0-9]*\) calls.*/\1/p' "$W/client.out")
    lost=$(grep -c '^load_driver: call ' "$W/client.err" || true)
    codes=$(sed -n 's/.*final status: *//p' "$W/client.out" | tr '\n' ' ')
    lat=$(grep -o 'p50 [0-9.]* ms, p99 [0-9.]* ms' "$W/client.out" | head -1)
  fi
  echo "== $proxy, $client client$([ $KILL = 1 ] && echo ", kill -9 at +${KILL_AT}s"): ${calls:-?} calls, ${lost:-?} lost [$codes], $lat; served by replica: $spread; proxy CPU $(awk -v a="$cpu0" -v b="$cpu1" -v n="${calls:-0}" 'BEGIN { printf "%.1f s (%.0f us/call)", b - a, n ? 1e6 * (b - a) / n : 0 }'), peak RSS $((peak / 1024)) MiB"
  sed 's/^/   /' "$W/client.out" | grep -E 'problem|load_driver: call|final status|latency' | head -12 || true
  if [ -f "$W/client.err" ]; then
    { grep '^load_driver: call ' "$W/client.err" || true; } | head -5 | sed 's/^/   /'
  fi
  echo "   replicas' GOAWAY lines: $(cat "$W"/server*.err | grep -c 'Got goaway' || true); proxy's client connection errors: $(conn_errors "$proxy")"
  cp "$W/proxy.log" "${TMPDIR:-/tmp}/balancer-compare-$proxy-$client.log" 2>/dev/null || true
  stop_pids
  PIDS=()
  rm -f "$W/client.err"
}

for p in $PROXIES; do
  for c in $CLIENTS; do run_one "$p" "$c"; done
done
