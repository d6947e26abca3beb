# Step 2p of tests/containers/compose_test.sh (sourced there once the stack
# is up; issue 48): SDK callers straight to the replicas, no balancer in the
# way. The replicas share the network alias `tensorops`
# (deploy/docker-compose.yml); the callers' target is
#   dns://GATEWAY:53/tensorops:50051
# i.e. the name resolved by the network's own DNS server (aardvark-dns on the
# gateway address, which the host reaches), as a caller on that network
# resolves dns:///tensorops:50051. The SDK's defaults do the rest:
# round_robin over every address, client-side health checking
# (grpc.health.v1 Watch for tensorops.v1.TensorOps), reconnects capped at 2 s.
#   a. the same load (CONCURRENCY callers, a quarter of their calls 1-4 MiB,
#      PROXYLESS_BENCH_CALLS calls) through HAProxy and then straight: calls
#      spread within 10% of the mean over the three replicas (their /metrics);
#      p50/p99 and CPU per call (callers + replicas + HAProxy, from
#      /proc/PID/stat and the callers' rusage) of both, printed side by side
#      (BENCHMARKS.md, "Proxyless SDK vs HAProxy");
#   b. a rolling restart (docker-compose stop, then start, of each replica in
#      turn, the next once the last is healthy) under that load: no call
#      lost; each replica gets calls within PROXYLESS_REFIND_S (60 s) of
#      answering SERVING itself (on its own address; both times printed). A stopped container leaves the alias, so the SDK's channel,
#      which resolved the name again when the replica went away, has two
#      addresses; it resolves again when a connection ends, which the
#      replicas' --max_connection_age=30s (deploy/docker-compose.yml) bounds;
#      then the SDK's reconnect backoff (capped at 2 s) and the health check;
#   c. kill -9 of tensorops-1's server under that load: no call lost; it
#      gets calls again after its restart policy brings it back.
# Needs from compose_test.sh: CLI, DRIVER, W, CONCURRENCY, LB,
# TENSOROPS_SUBNET_PREFIX, PIDS, and cid, ip_of, roll_ok_at, serving_at, is_healthy,
# compose, log, fail, wait_for, phase.

DIRECT="dns://$TENSOROPS_SUBNET_PREFIX.1:53/tensorops:50051"
BENCH_CALLS=${PROXYLESS_BENCH_CALLS:-2000}
REFIND_S=${PROXYLESS_REFIND_S:-60}
CLK_TCK=$(getconf CLK_TCK)

# CPU seconds (user + system) the processes $@ (host PIDs) have used so far.
cpu_of() {
  local pid ticks=0
  for pid in "$@"; do ticks=$((ticks + $(awk '{ print $14 + $15 }' "/proc/$pid/stat"))); done
  awk -v t="$ticks" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }'
}
pid_of() { podman inspect --format '{{.State.Pid}}' "$(cid "$1")"; }
# Execute Roll calls replica $1 answered OK (its /metrics), on the address
# compose gives it for good (podman inspect, as roll_ok asks, takes seconds
# on a loaded machine).
declare -A IP=()
for i in 1 2 3; do IP[$i]=$(ip_of "tensorops-$i"); done
calls_of() { roll_ok_at "${IP[$1]}" 2>/dev/null || echo 0; }

# The load driver under python's rusage: the callers' own CPU seconds go to
# $W/$1.cpu. Arguments after the first go to the driver.
driver_timed() {
  local name=$1
  shift
  /usr/bin/python3 -c '
import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
u = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("%.2f\n" % (u.ru_utime + u.ru_stime))
sys.exit(rc)' "$W/$name.cpu" "$DRIVER" "$@"
}

direct_health() { [ "$("$CLI" --target "$DIRECT" --deadline 2s health --service tensorops.v1.TensorOps)" = SERVING ]; }
wait_for 30 "SERVING through $DIRECT" direct_health
lb_health() { [ "$("$CLI" --target "$LB" --deadline 2s health --service tensorops.v1.TensorOps)" = SERVING ]; }
wait_for 30 "SERVING through HAProxy on $LB" lb_health

# --- a. the same load through HAProxy and straight ------------------------------
declare -A BENCH=()
bench_run() {  # bench_run NAME TARGET
  local name=$1 target=$2 before=() after=() i replicas haproxy r0 r1 h0 h1 line
  replicas=$(for i in 1 2 3; do pid_of "tensorops-$i"; done)
  haproxy=$(pid_of haproxy)
  for i in 1 2 3; do before[$i]=$(calls_of "$i"); done
  r0=$(cpu_of $replicas) h0=$(cpu_of "$haproxy")
  driver_timed "bench-$name" --target "$target" --threads "$CONCURRENCY" --sleep_us 0 --big_every 4 \
    --max_calls "$BENCH_CALLS" --max_seconds 300 >"$W/driver-bench-$name.out" 2>&1 \
    || { cat "$W/driver-bench-$name.out"; fail "load driver ($name, $target): a call failed"; }
  r1=$(cpu_of $replicas) h1=$(cpu_of "$haproxy")
  for i in 1 2 3; do after[$i]=$(calls_of "$i"); done
  sed 's/^/  /' "$W/driver-bench-$name.out"
  line=$(sed -n 's/^load_driver: all: //p' "$W/driver-bench-$name.out")
  BENCH[$name]=$(awk -v s="$line" -v dc="$(cat "$W/bench-$name.cpu")" -v r="$r0 $r1" -v h="$h0 $h1" \
    'BEGIN { split(s, a, /[ ,]+/); n = a[1]; split(r, rr, " "); split(h, hh, " ")
      for (k in a) { if (a[k] == "p50") p50 = a[k + 1]; if (a[k] == "p99") p99 = a[k + 1] }
      rc = rr[2] - rr[1]; hc = hh[2] - hh[1]
      printf "%d calls, p50 %s ms, p99 %s ms; CPU ms per call %.2f (callers %.2f, replicas %.2f, HAProxy %.2f)",
        n, p50, p99, (dc + rc + hc) * 1000 / n, dc * 1000 / n, rc * 1000 / n, hc * 1000 / n }')
  SPREAD=()
  for i in 1 2 3; do SPREAD+=($((after[$i] - before[$i]))); done
}
bench_run haproxy "$LB"
log "through HAProxy: replicas served ${SPREAD[*]} Roll calls"
bench_run direct "$DIRECT"
awk -v a="${SPREAD[0]}" -v b="${SPREAD[1]}" -v c="${SPREAD[2]}" 'BEGIN { m = (a + b + c) / 3
    for (i = 1; i <= 3; i++) { x = (i == 1 ? a : i == 2 ? b : c); if (x < 0.9 * m || x > 1.1 * m) exit 1 } }' \
  || fail "proxyless calls not spread within 10% of the mean over the replicas: ${SPREAD[*]}"
log "proxyless ($DIRECT): replicas served ${SPREAD[*]} Roll calls (within 10% of the mean)"
log "same load ($CONCURRENCY callers, $BENCH_CALLS calls, a quarter 1-4 MiB; figures under whatever else loads the machine):"
log "  through HAProxy: ${BENCH[haproxy]}"
log "  proxyless SDK:   ${BENCH[direct]}"
phase "proxyless: spread, and the same load through HAProxy"

# --- b. rolling restart under proxyless load ------------------------------------
load_start rolling 300 "the proxyless load" --target "$DIRECT" --threads "$CONCURRENCY" \
  --sleep_us 0 --big_every 4 --calls_after 300 --max_seconds 600
serving() { [ "$(calls_of "$1")" -gt 0 ]; }   # its counters start at 0 in a new process
# The next replica is stopped once the last one is healthy (the image's
# HEALTHCHECK) and the callers have found it again (its /metrics counts a
# call), as a Deployment with minReadySeconds at the re-find bound does
# (docs/deployment.md): stopped on health alone, the third stop once came
# while the SDK still knew only the third replica (re-resolution happens
# when a connection ends, up to 33 s after a restart), and 16 of 42,005
# calls waited in the channel until their 10 s deadline (2026-11-29, a quiet
# machine).
# T_UP: when the replica first answered SERVING itself (asked on its own
# address), the start of what the SDK's re-find takes; T_FOUND: when its
# /metrics first counted a call.
declare -A T_START=() T_UP=() T_FOUND=()
up_itself() { serving_at "${IP[$1]}"; }
note_found() {
  local j
  for j in "${!T_START[@]}"; do
    [ -z "${T_UP[$j]:-}" ] && up_itself "$j" && T_UP[$j]=$EPOCHREALTIME
    [ -n "${T_UP[$j]:-}" ] && [ -z "${T_FOUND[$j]:-}" ] && serving "$j" && T_FOUND[$j]=$EPOCHREALTIME
  done
  return 0
}
healthy_noting() { note_found; is_healthy "tensorops-$1"; }
found_again() { note_found; [ -n "${T_FOUND[$1]:-}" ]; }
all_found() { note_found; [ "${#T_FOUND[@]}" -eq 3 ]; }
for i in 1 2 3; do
  compose stop "tensorops-$i" >>"$W/compose.log" 2>&1 || fail "docker-compose stop tensorops-$i"
  T_START[$i]=$EPOCHREALTIME
  compose start "tensorops-$i" >>"$W/compose.log" 2>&1 || fail "docker-compose start tensorops-$i"
  wait_for 90 "tensorops-$i healthy again" healthy_noting "$i"
  log "tensorops-$i stopped, started and healthy"
  wait_for "$REFIND_S" "proxyless callers to reach tensorops-$i again" found_again "$i"
  kill -0 "$DRIVER_PID" 2>/dev/null || fail "proxyless load driver ended during the rolling restart"
done
wait_for "$REFIND_S" "proxyless callers to reach every restarted replica" all_found
REFOUND=() STARTED=()
for i in 1 2 3; do
  STARTED+=("$(awk -v a="${T_START[$i]}" -v b="${T_UP[$i]}" 'BEGIN { printf "%.1f", b - a }')")
  REFOUND+=("$(awk -v a="${T_UP[$i]}" -v b="${T_FOUND[$i]}" 'BEGIN { printf "%.1f", b - a }')")
  awk -v t="${REFOUND[-1]}" -v max="$REFIND_S" 'BEGIN { exit !(t <= max) }' \
    || fail "tensorops-$i got calls only ${REFOUND[-1]} s after it answered SERVING (bound ${REFIND_S} s)"
done
load_end rolling "proxyless load driver: a call failed during the rolling restart"
log "rolling restart under proxyless load: no call lost; replicas SERVING ${STARTED[*]} s after docker-compose start, and got calls ${REFOUND[*]} s after that"
phase "proxyless: rolling restart under load"

# --- c. kill -9 under proxyless load --------------------------------------------
pid1=$(pid_of tensorops-1)
load_start pkill 300 "the proxyless load" --target "$DIRECT" --threads "$CONCURRENCY" \
  --sleep_us 0 --big_every 4 --calls_after 300 --max_seconds 300
kill -KILL "$pid1"
t_kill=$EPOCHREALTIME
log "kill -9 of tensorops-1's server (pid $pid1) under $CONCURRENCY proxyless callers"
restarted1() { local p; p=$(pid_of tensorops-1) && [ "${p:-0}" -gt 0 ] && [ "$p" != "$pid1" ]; }
for _ in $(seq 15); do restarted1 && break; sleep 1; done
restarted1 || compose start tensorops-1 >>"$W/compose.log" 2>&1 || fail "docker-compose start tensorops-1"
wait_for 120 "proxyless callers to reach tensorops-1 again" serving 1
back=$(awk -v a="$t_kill" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
load_end pkill "proxyless load driver: a call failed across the kill -9"
log "kill -9 under proxyless load: no call lost; tensorops-1 got calls again ${back} s after the kill"
wait_for 60 "tensorops-1 healthy again" is_healthy tensorops-1
phase "proxyless: kill -9 under load"
