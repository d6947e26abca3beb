#!/usr/bin/env bash
# deploy/docker-compose.yml run for real: Podman + Buildah + Debian's
# docker-compose 1.29 through Podman's Docker API socket (no Docker engine and
# no image registry needed; tools/container_setup.sh prepares the machine).
# Checks, as a user of the stack would:
#   1. the image builds from ./Dockerfile; it holds no compiler or headers;
#   2. `docker-compose up` of three replicas, HAProxy and Prometheus (Grafana
#      has no Debian package and is left out of this run only); every replica
#      becomes healthy through the image's own HEALTHCHECK;
#  2p. SDK callers straight to the replicas through one name (the network
#      alias `tensorops`, resolved by the network's DNS): spread within 10%,
#      p50/p99 and CPU per call against the same load through HAProxy, a
#      rolling restart and a kill -9 under 1-4 MiB calls, no call lost
#      (tests/containers/proxyless_steps.sh says how);
#   3. each replica runs as uid 10001 with a read-only root filesystem;
#   4. health and verified Roll calls through HAProxy's published port reach all
#      three replicas (each one's own /metrics counts them); through HAProxy's
#      published REST port, GET /v2/health/ready answers 200 and JSON infers
#      (Open Inference Protocol) return the right tensors from every replica;
#   5. Prometheus's /api/v1/targets shows the three replicas up, and
#      /api/v1/rules holds every rule of deploy/prometheus/alerts.yml;
#   6. `docker-compose stop tensorops-2` while the load driver (SDK, retry on
#      UNAVAILABLE) keeps CONCURRENCY calls in flight through HAProxy: the
#      replica exits 0 within its stop_grace_period, replicas 1 and 3 carry the
#      load, `docker-compose start` brings it back to healthy and it serves
#      calls again, and no call fails (calls, failures and p99 printed);
#   7. kill -9 of tensorops-3's server process (as an OOM kill or a crash)
#      while the load driver with the SDK's defaults sends CONCURRENCY calls,
#      a quarter of them 1-4 MiB Rolls (bigger than HAProxy resends itself,
#      answered in many HTTP/2 frames): the replica comes back (its restart
#      policy, or `docker-compose start`) and no call fails;
#   8. the soak through the balancer (bench/stack_soak.py, STACK_SOAK_SECONDS,
#      90 by default): small, 1-4 MiB and 1-16 MiB Execute, streams,
#      ModelInfer, REST, cancels and expiring deadlines from a stock client
#      with gRPC core's retries off: no unexpected code (none forgiven), no
#      wrong answer; the replicas' RSS printed;
#  8b. a traced call (issue 40): tensorops-1 recreated with --access_log and
#      --otlp_endpoint pointing at a collector stand-in on the host
#      (tests/e2e/otlp_collector.py, on the network's gateway address);
#      calls with a traceparent through HAProxy: the balancer-facing reply
#      carries the same trace id, and for a call tensorops-1 served, its
#      access log line and the exported span (with queue and kernel child
#      spans, schema checked) have that trace id and the reply's span id;
#      the same for REST calls through HAProxy's REST front;
#   9. `docker-compose down -v` leaves no container, volume or network.
# Uses only 127.0.0.1 (free ports) and the project's own container network;
# removes what an earlier, interrupted run left behind before it starts, and
# everything it made (but the images, kept as a cache) on exit.
#
# usage: compose_test.sh CLI LOAD_DRIVER REPO_ROOT
#   CONCURRENCY (16) calls in flight during the restart.
#   COMPOSE_STEPS: "all" (default) runs 1-9; "image" runs step 1 only (the
#   build and the look inside the image); "stack" runs 2-9 on the image step 1
#   built. ctest runs them as two tests, containers_image and then
#   containers_compose (a fixture), so that the image build, which is mostly
#   ccache hits and packaging, shares the machine with the other tests and
#   only the stack's load steps run alone.
#   "proxyless" runs 2, 2p and 9 only (for working on step 2p).
#   REUSE_IMAGE=1 tests the tensorops:latest built earlier instead of building
#   this tree (for working on the test itself; CI never sets it).
set -euo pipefail
CLI=$1 DRIVER=$2 ROOT=$(cd "$3" && pwd)
CONCURRENCY=${CONCURRENCY:-16}
# Seconds from a restarted replica answering SERVING on its own address to its
# first call through HAProxy (steps 6 and 7): ~3 s for HAProxy to learn the
# container's new MAC (docker-compose.yml, "networks"), two checks 1 s apart.
# Without the stack's ARP sysctls a peer took 30-40 s.
ARP_REFRESH_BOUND=${ARP_REFRESH_BOUND:-12}
T0=$EPOCHREALTIME
PHASE_T0=$EPOCHREALTIME

# log, fail, wait_for (every 0.5 s here), free_port, PIDS and stop_pids.
WAIT_FOR_POLL=0.5
source "$ROOT/tests/harness/script.sh"
# phase NAME: logs how long the phase that ends here took.
PHASES=()
phase() {
  local secs
  secs=$(awk -v a="$PHASE_T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  PHASES+=("$1 ${secs}s")
  log "phase done: $1 (${secs} s)"
  PHASE_T0=$EPOCHREALTIME
}
[ "$(id -u)" -eq 0 ] || fail "run as root (rootful Podman)"

export CONTAINERS_CONF=$ROOT/deploy/podman/containers.conf
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-tensorops-ctest}  # another name: a second stack beside a running one
export TENSOROPS_PUBLISH_ADDR=127.0.0.1
# Not the compose file's default subnet, which a developer's own stack may hold.
export TENSOROPS_SUBNET_PREFIX=${TENSOROPS_SUBNET_PREFIX:-172.29.52}
COMPOSE_FILE=$ROOT/deploy/docker-compose.yml
# Podman's IPAM option for compose's network check (the file says why).
PODMAN_FILE=$ROOT/deploy/podman/compose.podman.yml
DC_SHOWN="docker-compose -f deploy/docker-compose.yml -f deploy/podman/compose.podman.yml"
SERVICES=(tensorops-1 tensorops-2 tensorops-3 haproxy prometheus)
IMAGE=localhost/tensorops:latest

W=$(mktemp -d "${TMPDIR:-/tmp}/tensorops-containers.XXXXXX")
STACK_UP=0
compose() { docker-compose -f "$COMPOSE_FILE" -f "$PODMAN_FILE" "$@"; }

# Removes the project's containers, volumes and network, through compose if
# the API socket is up, then directly with podman (an earlier run may have
# died with its socket).
remove_project() {
  if [ -S "$W/podman.sock" ]; then
    compose down -v --remove-orphans --timeout 20 >>"$W/compose.log" 2>&1 || true
  fi
  local label="label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" ids
  ids=$(podman ps -aq --filter "$label")
  [ -z "$ids" ] || podman rm -f -t 20 $ids >/dev/null 2>&1 || true
  ids=$(podman volume ls -q --filter "$label")
  [ -z "$ids" ] || podman volume rm -f $ids >/dev/null 2>&1 || true
  ids=$(podman network ls -q --filter "$label")
  [ -z "$ids" ] || podman network rm -f $ids >/dev/null 2>&1 || true
}

cleanup() {
  local rc=$?
  if [ $rc -ne 0 ] && [ "$STACK_UP" = 1 ]; then
    # podman rather than compose: this must work whatever state compose is in.
    local label="label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" c
    podman ps -a --filter "$label" 2>&1 || true
    for c in $(podman ps -aq --filter "$label" 2>/dev/null); do
      echo "--- $(podman inspect --format '{{.Name}}' "$c") (last log lines)"
      podman logs --tail 15 "$c" 2>&1 || true
    done
    # HAProxy logs only errors, retried requests and server state changes.
    for c in $(podman ps -aq --filter "$label" --filter "name=haproxy" 2>/dev/null); do
      echo "--- haproxy log (last 20)"
      podman logs "$c" 2>&1 | tail -n 20 || true
    done
  fi
  if [ $rc -ne 0 ]; then
    for f in "$W"/driver*.out "$W"/podman-service.log "$W"/compose.log; do
      [ -s "$f" ] && { echo "--- $f (last lines)"; tail -n 20 "$f"; }
    done
  fi
  remove_project
  stop_pids
  rm -rf "$W"
  # Last, after every log tail above: what failed, where (CI shows the end).
  if [ $rc -ne 0 ]; then
    echo "compose_test: FAILED (exit $rc) after phases [${PHASES[*]:-none}]:" \
      "${FAIL_MESSAGE:-a command failed: $FAILED_COMMAND}" >&2
  fi
  exit $rc
}
FAILED_COMMAND="(unknown)"
trap 'FAILED_COMMAND="line $LINENO: $BASH_COMMAND (exit $?)"' ERR
trap cleanup EXIT
trap 'exit 1' INT TERM


# --- 1. machine setup, base image, stand-ins, the image ----------------------
for step in packages base standins; do
  bash "$ROOT/tools/container_setup.sh" "$step" >>"$W/setup.log" 2>&1 \
    || { tail -n 30 "$W/setup.log"; fail "tools/container_setup.sh $step"; }
done
phase "setup (packages, base image, stand-ins)"
STEPS=${COMPOSE_STEPS:-all}
case "$STEPS" in all | image | stack | proxyless) ;; *) fail "COMPOSE_STEPS=$STEPS: all, image, stack or proxyless" ;; esac
if [ "$STEPS" = stack ] || [ "$STEPS" = proxyless ]; then
  podman image exists "$IMAGE" || fail "COMPOSE_STEPS=stack: no $IMAGE (containers_image builds it)"
  log "COMPOSE_STEPS=stack: testing $IMAGE, built by the image step"
elif [ "${REUSE_IMAGE:-0}" = 1 ] && podman image exists "$IMAGE"; then
  log "REUSE_IMAGE=1: testing the existing $IMAGE, not a build of this tree"
else
  TENSOROPS_IMAGE=$IMAGE bash "$ROOT/tools/container_setup.sh" image >"$W/image.log" 2>&1 \
    || { tail -n 40 "$W/image.log"; fail "image build (buildah bud of $ROOT/Dockerfile)"; }
fi
phase "image build"

SIZE=$(podman image inspect --format '{{.Size}}' "$IMAGE")
# Anything a compiler or a -dev package would have left: compilers, cc1plus,
# headers, static libraries, CMake package files.
# (As root inside, so no directory is unreadable; no health check for this one.)
FOUND=$(podman run --rm --network none --no-healthcheck --user 0 --entrypoint /bin/sh "$IMAGE" -c \
  'for d in /usr/bin /usr/local/bin; do ls "$d" | grep -E "^(cc|c\+\+|gcc|g\+\+|clang|clang\+\+|cpp|ld|as|cmake|ninja|protoc)(-[0-9.]+)?$" | sed "s|^|$d/|"; done
   find / -xdev \( -name "*.h" -o -name "*.hpp" -o -name "*.a" -o -name cc1plus -o -name "*Config.cmake" \) -print' \
  2>"$W/find.err") || fail "could not list the image's files: $(cat "$W/find.err")"
[ -z "$FOUND" ] || fail "the image holds build tools or headers:
$(echo "$FOUND" | head -n 20)"
log "image $IMAGE: $((SIZE / 1000000)) MB, no compiler, headers, static libraries or CMake files"
if [ "$STEPS" = image ]; then
  log "COMPOSE_STEPS=image: done (phases: ${PHASES[*]})"
  exit 0
fi

# --- 2. the stack -------------------------------------------------------------
podman system service --time=0 "unix://$W/podman.sock" >"$W/podman-service.log" 2>&1 &
PIDS+=($!)
export DOCKER_HOST=unix://$W/podman.sock
wait_for 20 "podman system service on $W/podman.sock" test -S "$W/podman.sock"
remove_project    # whatever an interrupted run left behind
bash "$ROOT/tools/podman_healthchecks.sh" "$COMPOSE_PROJECT_NAME" &
PIDS+=($!)

TENSOROPS_GRPC_PORT=$(free_port)
TENSOROPS_HTTP_PORT=$(free_port)
TENSOROPS_PROMETHEUS_PORT=$(free_port)
export TENSOROPS_GRPC_PORT TENSOROPS_HTTP_PORT TENSOROPS_PROMETHEUS_PORT
STACK_UP=1
log "$DC_SHOWN up -d --no-build ${SERVICES[*]} (gRPC on 127.0.0.1:$TENSOROPS_GRPC_PORT, REST on 127.0.0.1:$TENSOROPS_HTTP_PORT, Prometheus on 127.0.0.1:$TENSOROPS_PROMETHEUS_PORT)"
# compose waits for the replicas' health before it creates HAProxy.
timeout 180 docker-compose -f "$COMPOSE_FILE" -f "$PODMAN_FILE" up -d --no-build "${SERVICES[@]}" >"$W/up.log" 2>&1 \
  || { cat "$W/up.log"; fail "docker-compose up"; }

# Container ids, asked of compose once (a container keeps its id across
# stop/start, and each `compose ps` costs about a second under load).
declare -A CIDS=()
cid() {
  [ -n "${CIDS[$1]:-}" ] || CIDS[$1]=$(compose ps -q "$1")
  [ -n "${CIDS[$1]}" ] || { echo "compose has no container for $1" >&2; return 1; }
  echo "${CIDS[$1]}"
}
health_of() { podman inspect --format '{{.State.Health.Status}}' "$(cid "$1")"; }
is_healthy() { [ "$(health_of "$1")" = healthy ]; }
for i in 1 2 3; do
  wait_for 60 "tensorops-$i healthy" is_healthy "tensorops-$i"
done
log "tensorops-1..3: healthy (HEALTHCHECK: $(podman inspect --format '{{join .Config.Healthcheck.Test " "}}' "$(cid tensorops-1)"))"
# This host calls the replicas by address too (the proxyless callers, the
# /metrics reads), so its side of the network's bridge gets the ARP settings
# HAProxy's container has (docker-compose.yml, x-arp-refresh, "networks"):
# a restarted replica's new MAC is learnt in ~3 s, not ~40. The bridge and its
# settings go away at `down -v`.
# Where /proc/sys is read-only (a test run inside a container) the host keeps
# its defaults: only the proxyless figures grow (by up to ~40 s, within
# PROXYLESS_REFIND_S); HAProxy's bound (steps 6, 7) does not depend on it.
BRIDGE=$(podman network inspect --format '{{.NetworkInterface}}' "${COMPOSE_PROJECT_NAME}_default")
while read -r key value; do
  echo "$value" 2>/dev/null >"/proc/sys/net/ipv4/neigh/$BRIDGE/$key" \
    || log "could not set net.ipv4.neigh.$BRIDGE.$key: the host keeps its ARP defaults"
done < <(python3 - "$COMPOSE_FILE" <<'PY'
import sys, yaml
for k, v in yaml.safe_load(open(sys.argv[1]))["x-arp-refresh"].items():
    print(k.rsplit(".", 1)[1], v)
PY
)
log "host bridge $BRIDGE: $(cd "/proc/sys/net/ipv4/neigh/$BRIDGE" && for f in base_reachable_time_ms delay_first_probe_time ucast_solicit mcast_resolicit; do printf '%s=%s ' "$f" "$(cat "$f")"; done)"
phase "compose up until all replicas healthy"

# The address of a replica on the project's network (it may change on restart).
ip_of() {
  podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$(cid "$1")" | awk '{print $1}'
}
# Roll calls that the replica at address $1 answered OK, from its own
# /metrics; $2 is the method label (Execute: gRPC; REST: the HTTP door).
roll_ok_at() {
  local metrics method=${2:-Execute}
  metrics=$(curl -sf --max-time 3 "http://$1:9464/metrics") \
    || { echo "no /metrics from $1:9464" >&2; return 1; }
  awk -v m="method=\"$method\"" '/^tensorops_requests_total\{/ && index($0, m) && /op="Roll"/ && /code="OK"/ { n += $NF }
       END { printf "%d\n", n }' <<<"$metrics"
}
# The same for replica $1 (1..3), at the address it has now.
roll_ok() {
  local ip
  ip=$(ip_of "tensorops-$1") && [ -n "$ip" ] || { echo "tensorops-$1 has no address" >&2; return 1; }
  roll_ok_at "$ip" "${2:-Execute}"
}
# True when the replica at address $1 answers SERVING itself.
serving_at() {
  [ "$("$CLI" --target "$1:50051" --deadline 1s health --service tensorops.v1.TensorOps 2>/dev/null)" = SERVING ]
}

# --- 2p. SDK callers straight to the replicas (issue 48) -----------------------
LB=127.0.0.1:$TENSOROPS_GRPC_PORT
# COMPOSE_PROXYLESS_STEP=0 skips it (when working on the other steps).
if [ "${COMPOSE_PROXYLESS_STEP:-1}" = 1 ]; then
  source "$ROOT/tests/containers/proxyless_steps.sh"
else
  log "step 2p (SDK callers straight to the replicas) skipped: COMPOSE_PROXYLESS_STEP=0"
fi

if [ "$STEPS" != proxyless ]; then
# --- 3. non-root, read-only root filesystem ----------------------------------
for i in 1 2 3; do
  c=$(cid "tensorops-$i")
  uid=$(podman exec "$c" id -u)
  [ "$uid" = 10001 ] || fail "tensorops-$i runs as uid $uid, not 10001"
  [ "$(podman inspect --format '{{.HostConfig.ReadonlyRootfs}}' "$c")" = true ] \
    || fail "tensorops-$i: root filesystem is not read-only"
  if out=$(podman exec "$c" touch /opt/tensorops/probe 2>&1); then
    fail "tensorops-$i: wrote to /opt/tensorops on its read-only root filesystem"
  fi
  case "$out" in *"Read-only file system"*) ;; *) fail "tensorops-$i: unexpected error writing to its root: $out" ;; esac
done
log "replicas run as uid 10001; writing to the root filesystem fails (read-only)"

# --- 4. calls through HAProxy reach every replica -------------------------------
LB=127.0.0.1:$TENSOROPS_GRPC_PORT
health() { [ "$("$CLI" --target "$LB" --deadline 2s health --service tensorops.v1.TensorOps)" = SERVING ]; }
wait_for 30 "SERVING through HAProxy on $LB" health
out=$("$CLI" --target "$LB" run Roll --input '[[1,2,3],[4,5,6]]' --input 1 --input 1 2>&1) \
  || fail "tensorops run Roll through HAProxy: $out"
log "through HAProxy: health SERVING; tensorops run Roll -> $out"

declare -A before=()
for i in 1 2 3; do before[$i]=$(roll_ok $i); done
"$DRIVER" --target "$LB" --threads "$CONCURRENCY" --sleep_us 0 --max_calls 1500 --max_seconds 60 \
  >"$W/driver-spread.out" 2>&1 || { cat "$W/driver-spread.out"; fail "load driver through HAProxy"; }
sed 's/^/  /' "$W/driver-spread.out"
for i in 1 2 3; do
  n=$(roll_ok $i)
  [ "$n" -gt "${before[$i]}" ] || fail "tensorops-$i served no Roll call through HAProxy (its /metrics: $n)"
  log "tensorops-$i /metrics: $((n - before[$i])) of the driver's Roll calls"
done

# REST (Open Inference Protocol, HTTP/1.1) through HAProxy's published port.
REST=http://127.0.0.1:$TENSOROPS_HTTP_PORT
rest_ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$REST/v2/health/ready")" = 200 ]; }
wait_for 30 "GET $REST/v2/health/ready: 200 through HAProxy" rest_ready
out=$(curl -sf --max-time 10 "$REST/v2/models/Roll/infer" -d '{"id":"c1","inputs":[
  {"name":"data","datatype":"INT32","shape":[4,3],"data":[[1,2,3],[4,5,6],[7,8,9],[10,11,12]]},
  {"name":"shift","datatype":"INT64","shape":[2],"data":[-1,2]},
  {"name":"axes","datatype":"INT64","shape":[2],"data":[0,1]}]}') || fail "REST infer through HAProxy ($REST)"
want='{"model_name":"Roll","model_version":"1","id":"c1","outputs":[{"name":"output","datatype":"INT32","shape":[4,3],"data":[5,6,4,8,9,7,11,12,10,2,3,1]}]}'
[ "$out" = "$want" ] || fail "REST infer through HAProxy answered $out, want $want"
log "through HAProxy's REST port: /v2/health/ready 200; POST /v2/models/Roll/infer -> $out"
# Six more on one keep-alive connection: HAProxy's round robin gives each
# replica two of them. (The stack is new, so the replicas' REST counters hold
# these seven infers only; each /metrics read costs seconds under load.)
python3 - "$TENSOROPS_HTTP_PORT" <<'PY' || fail "REST infers through HAProxy"
import http.client, json, sys
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
for i in range(6):
    body = json.dumps({"inputs": [
        {"name": "data", "datatype": "INT32", "shape": [3], "data": [i, i + 1, i + 2]},
        {"name": "shift", "datatype": "INT64", "shape": [1], "data": [1]},
        {"name": "axes", "datatype": "INT64", "shape": [1], "data": [0]}]})
    conn.request("POST", "/v2/models/Roll/infer", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    out = r.read()
    assert r.status == 200 and json.loads(out)["outputs"][0]["data"] == [i + 2, i, i + 1], (i, r.status, out[:300])
PY
rest=()
for i in 1 2 3; do
  rest+=("$(roll_ok $i REST)")
  [ "${rest[-1]}" -gt 0 ] || fail "tensorops-$i served no REST infer through HAProxy"
done
log "7 REST infers through HAProxy: tensorops-1..3 served ${rest[*]} (method=\"REST\" in their /metrics)"
phase "calls through HAProxy"

# --- 5. Prometheus: targets up, rules loaded ----------------------------------
PROM=http://127.0.0.1:$TENSOROPS_PROMETHEUS_PORT
wait_for 60 "Prometheus /-/ready" curl -sf --max-time 2 "$PROM/-/ready"
targets_up() {
  curl -sf --max-time 3 "$PROM/api/v1/targets" >"$W/targets.json" || return 1
  python3 - "$W/targets.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["data"]["activeTargets"]
up = sorted(x["labels"]["instance"] for x in t if x["labels"].get("job") == "tensorops" and x["health"] == "up")
want = ["tensorops-%d:9464" % i for i in (1, 2, 3)]
sys.exit(0 if up == want else 1)
PY
}
wait_for 60 "Prometheus /api/v1/targets: tensorops-1..3:9464 up" targets_up
curl -sf --max-time 3 "$PROM/api/v1/rules" >"$W/rules.json" || fail "Prometheus /api/v1/rules"
python3 - "$W/rules.json" "$ROOT/deploy/prometheus/alerts.yml" <<'PY' || fail "Prometheus did not load deploy/prometheus/alerts.yml"
import json, sys, yaml
loaded = {r["name"] for g in json.load(open(sys.argv[1]))["data"]["groups"] for r in g["rules"]}
want = {r.get("alert") or r.get("record") for g in yaml.safe_load(open(sys.argv[2]))["groups"] for r in g["rules"]}
missing = want - loaded
if missing:
    print("missing rules:", sorted(missing))
    sys.exit(1)
print("  Prometheus rules loaded: %d of %d (%s)" % (len(want & loaded), len(want),
      ", ".join(sorted(r for r in want if not r.startswith("tensorops:")))))
PY
log "Prometheus: tensorops-1..3:9464 up; every rule of alerts.yml loaded"
phase "Prometheus"

# --- 6. stop and start tensorops-2 under load ---------------------------------
# How soon HAProxy sends calls to restarted replica $1 (address $2): sets LB_BACK to "N.N s
# after it answered SERVING itself" once its new process's /metrics counts a call, and
# fails (the test) past ARP_REFRESH_BOUND. HAProxy takes a replica back after
# two passing checks 1 s apart, once its ARP entry has the container's new MAC.
lb_finds_again() {
  local i=$1 ip=$2 t_up="" n took
  for _ in $(seq 450); do   # 90 s
    [ -z "$t_up" ] && serving_at "$ip" && t_up=$EPOCHREALTIME
    n=$(roll_ok_at "$ip" 2>/dev/null || echo 0)
    if [ -n "$t_up" ] && [ "${n:-0}" -gt 0 ]; then
      took=$(awk -v a="$t_up" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
      awk -v t="$took" -v max="$ARP_REFRESH_BOUND" 'BEGIN { exit !(t <= max) }' \
        || fail "tensorops-$i got calls through HAProxy only $took s after it answered SERVING itself (bound $ARP_REFRESH_BOUND s): did HAProxy keep its old MAC? (docker-compose.yml, \"networks\")"
      LB_BACK="$took s after it answered SERVING itself"
      return 0
    fi
    sleep 0.2
  done
  return 1
}

GRACE=$(python3 - "$COMPOSE_FILE" <<'PY'
import sys, yaml
s = yaml.safe_load(open(sys.argv[1]))["services"]["tensorops-2"]["stop_grace_period"]
print(int(s.rstrip("s")))
PY
)
load_start restart 1000 "the load" --target "$LB" --threads "$CONCURRENCY" --sleep_us 0 \
  --calls_after 1500 --window_file "$W/window" --max_seconds 240

WINDOW_START=$EPOCHREALTIME
before1=$(roll_ok 1) before3=$(roll_ok 3) ip2=$(ip_of tensorops-2)
log "$DC_SHOWN stop tensorops-2 ($CONCURRENCY calls in flight)"
c2=$(cid tensorops-2)
s0=$(date +%s)
compose stop tensorops-2 >>"$W/compose.log" 2>&1 || fail "docker-compose stop tensorops-2"
took=$(($(date +%s) - s0))
state=$(podman inspect --format '{{.State.Status}} {{.State.ExitCode}} {{.State.FinishedAt.Unix}}' "$c2")
read -r status code finished <<<"$state"
[ "$status $code" = "exited 0" ] || fail "tensorops-2 after stop: $status, exit code $code (want exited 0)"
# The server's own exit, not compose's wall time (Podman's clean-up after the
# exit takes seconds more under load). Exit code 0 already rules out SIGKILL.
exited_after=$((finished - s0))
[ "$exited_after" -lt "$GRACE" ] \
  || fail "tensorops-2 exited ${exited_after}s after the stop (stop_grace_period ${GRACE}s)"
podman logs "$c2" 2>&1 | tail -n 3 | sed 's/^/  tensorops-2: /'
log "tensorops-2 exited 0 about ${exited_after}s after the stop (stop_grace_period ${GRACE}s; docker-compose stop returned after ${took}s)"

sleep 3   # load on the two others only
after1=$(roll_ok 1) after3=$(roll_ok 3)
[ "$after1" -gt "$before1" ] && [ "$after3" -gt "$before3" ] \
  || fail "replicas 1 and 3 did not both carry the load while 2 was stopped ($before1->$after1, $before3->$after3)"
kill -0 "$DRIVER_PID" 2>/dev/null || fail "load driver ended while tensorops-2 was stopped: $(cat "$W/driver-restart.out")"
log "while stopped: tensorops-1 +$((after1 - before1)), tensorops-3 +$((after3 - before3)) Roll calls"

log "$DC_SHOWN start tensorops-2"
start_t=$SECONDS
compose start tensorops-2 >>"$W/compose.log" 2>&1 || fail "docker-compose start tensorops-2"
[ "$(ip_of tensorops-2)" = "$ip2" ] \
  || fail "tensorops-2 came back on $(ip_of tensorops-2), not $ip2: HAProxy (which resolved the name at start) cannot reach it"
lb_finds_again 2 "$ip2" || fail "tensorops-2 served no call through HAProxy within 90 s of its start"
WINDOW_END=$EPOCHREALTIME
served_after=$((SECONDS - start_t))
wait_for 60 "tensorops-2 healthy again" is_healthy tensorops-2
log "tensorops-2 served through HAProxy ${served_after}s after the start, $LB_BACK; healthy (its HEALTHCHECK) after $((SECONDS - start_t))s"
echo "$WINDOW_START $WINDOW_END" >"$W/window"
load_end restart "load driver: not every call ended OK with a verified result during the restart"
log "restart under load: $(sed -n 's/^load_driver: window /window /p' "$W/driver-restart.out")"
phase "stop/start tensorops-2 under load"

# --- 7. kill -9 tensorops-3 under load with 1-4 MiB calls -----------------------
c3=$(cid tensorops-3)
pid3=$(podman inspect --format '{{.State.Pid}}' "$c3")
[ "${pid3:-0}" -gt 0 ] || fail "tensorops-3 has no process"
ip3=$(ip_of tensorops-3)
load_start kill 500 "the load" --target "$LB" --threads "$CONCURRENCY" --sleep_us 0 --big_every 4 \
  --calls_after 1000 --max_seconds 240
kill -KILL "$pid3"
kill_t=$SECONDS
log "kill -9 of tensorops-3's server (pid $pid3 on the host) under $CONCURRENCY callers, a quarter of their calls 1-4 MiB"
restarted3() { [ "$(podman inspect --format '{{.State.Pid}}' "$(cid tensorops-3)")" -gt 0 ] 2>/dev/null \
  && [ "$(podman inspect --format '{{.State.Pid}}' "$(cid tensorops-3)")" != "$pid3" ]; }
for _ in $(seq 15); do restarted3 && break; sleep 1; done
if ! restarted3; then
  log "tensorops-3 not restarted by its policy within 15 s: docker-compose start tensorops-3"
  compose start tensorops-3 >>"$W/compose.log" 2>&1 || fail "docker-compose start tensorops-3"
fi
lb_finds_again 3 "$ip3" || fail "tensorops-3 served no call through HAProxy within 90 s of its restart"
served_after=$((SECONDS - kill_t))
wait_for 60 "tensorops-3 healthy again" is_healthy tensorops-3
load_end kill "load driver (SDK defaults, 1-4 MiB calls): a call failed across the kill -9"
log "kill -9 under load: no call failed; tensorops-3 served through HAProxy ${served_after}s after the kill, $LB_BACK ($(roll_ok 3) Roll calls)"
phase "kill -9 tensorops-3 under load"

# --- 8. the soak through the balancer --------------------------------------------
SOAK_PIDS=()
for i in 1 2 3; do SOAK_PIDS+=(--pid "tensorops-$i=$(podman inspect --format '{{.State.Pid}}' "$(cid tensorops-$i)")"); done
/usr/bin/python3 "$ROOT/bench/stack_soak.py" --grpc "$LB" --rest "127.0.0.1:$TENSOROPS_HTTP_PORT" \
  --seconds "${STACK_SOAK_SECONDS:-90}" "${SOAK_PIDS[@]}" >"$W/stack-soak.out" 2>&1 \
  || { tail -n 40 "$W/stack-soak.out"; fail "the soak through HAProxy saw an unexpected code or a wrong answer"; }
sed -n '/calls in/,$p' "$W/stack-soak.out" | sed 's/^/  /'
phase "soak through HAProxy"

# --- 8b. a traced call through the stack (issue 40) ------------------------------
# COMPOSE_TRACE_STEP=0 skips it (when working on the other steps).
if [ "${COMPOSE_TRACE_STEP:-1}" = 1 ]; then
GATEWAY=$TENSOROPS_SUBNET_PREFIX.1
COLLECTOR_PORT=$(free_port)
# OTLP/HTTP JSON here (http/protobuf, the default, is decoded with
# OpenTelemetry's own schema in tests/e2e/trace_python_test.py).
/usr/bin/python3 "$ROOT/tests/e2e/otlp_collector.py" "$GATEWAY" "$COLLECTOR_PORT" application/json >"$W/collector.out" 2>&1 &
PIDS+=($!)
cat >"$W/trace.override.yml" <<YML
services:
  tensorops-1:
    command: ["--host=0.0.0.0", "--port=50051", "--metrics_host=0.0.0.0", "--metrics_port=9464",
              "--http_host=0.0.0.0", "--http_port=8000", "--access_log", "--trace_headers=true",
              "--otlp_endpoint=http://$GATEWAY:$COLLECTOR_PORT"]
    environment:
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: http/json
YML
ip1=$(ip_of tensorops-1)
docker-compose -f "$COMPOSE_FILE" -f "$PODMAN_FILE" -f "$W/trace.override.yml" up -d --no-deps --no-build tensorops-1 \
  >>"$W/compose.log" 2>&1 || fail "docker-compose up tensorops-1 with --access_log --otlp_endpoint"
unset 'CIDS[tensorops-1]'   # a new container
wait_for 60 "tensorops-1 (traced) healthy" is_healthy tensorops-1
[ "$(ip_of tensorops-1)" = "$ip1" ] || fail "tensorops-1 came back on $(ip_of tensorops-1), not $ip1"
# Nothing else calls now: three Rolls through HAProxy per look (round robin
# over three replicas) until the new tensorops-1's own /metrics counts one.
serving1() {
  local k
  for k in 1 2 3; do
    "$CLI" --target "$LB" --deadline 2s run Roll --input '[1,2,3]' --input 1 --input 0 >/dev/null 2>&1 || true
  done
  [ "$(roll_ok 1)" -gt 0 ]
}
wait_for 90 "tensorops-1 (traced) to serve calls through HAProxy" serving1
# Calls with a traceparent of our own through HAProxy until one lands on
# tensorops-1 (round robin: within a few); its reply through the balancer
# must carry our trace id, and its access line the reply's span id.
found=""
for n in $(seq 1 12); do
  trace=$(printf '%032x' $((0x7e57ab1e0000 + n)))
  parent="00-$trace-00f067aa0ba902b7-01"
  out=$("$CLI" --target "$LB" run Roll --verbose --traceparent "$parent" --input '[1,2,3]' \
        --input 1 --input 0 2>&1) || fail "traced Roll through HAProxy: $out"
  server_tp=$(sed -n 's/^tensorops: server traceparent //p' <<<"$out")
  # Every replica answers a sampled traceparent with its own (the default,
  # --trace_headers=auto); only tensorops-1 logs access lines.
  [ -n "$server_tp" ] || fail "no traceparent came back through HAProxy: $out"
  [[ "$server_tp" =~ ^00-$trace-([0-9a-f]{16})-01$ ]] \
    || fail "the reply through HAProxy carried traceparent '$server_tp', not trace $trace: $out"
  span=${BASH_REMATCH[1]}
  if podman logs "$(cid tensorops-1)" 2>&1 | grep -q "access method=Execute op=Roll code=OK .* trace_id=$trace span_id=$span"; then
    found="$trace $span"
    break
  fi
done
[ -n "$found" ] || fail "none of 12 traced calls through HAProxy shows in tensorops-1's access log"
read -r trace span <<<"$found"
log "traced call $trace: reply traceparent span $span through HAProxy; tensorops-1's access log: $(podman logs "$(cid tensorops-1)" 2>&1 | grep "span_id=$span" | head -n 1)"
exported() {
  grep -q "\"spanId\": \"$span\"" "$W/collector.out" \
    && [ "$(grep -c "\"parentSpanId\": \"$span\"" "$W/collector.out")" -ge 2 ]
}
wait_for 30 "tensorops-1's span $span (and its stages) at the collector stand-in" exported
! grep -q '^SCHEMA ERROR' "$W/collector.out" || fail "a body broke OTLP's schema: $(grep -m1 '^SCHEMA ERROR' "$W/collector.out")"
grep "\"spanId\": \"$span\"" "$W/collector.out" | grep -q "\"traceId\": \"$trace\"" \
  || fail "the exported span $span is not in trace $trace"
log "collector stand-in: span $span of trace $trace with $(grep -c "\"parentSpanId\": \"$span\"" "$W/collector.out") stage spans"
# The same through HAProxy's REST front: the reply's traceparent header has
# our trace id, and for a request tensorops-1 served, its access line and
# exported span (named by OpenTelemetry's HTTP conventions) the reply's span.
found=""
for n in $(seq 1 12); do
  trace=$(printf '%032x' $((0x7e57ab1e1000 + n)))
  headers=$(curl -sf --max-time 10 -D - -o /dev/null "$REST/v2/models/Roll/infer"     -H "traceparent: 00-$trace-00f067aa0ba902b7-01" -H 'Content-Type: application/json'     -d '{"inputs":[{"name":"data","shape":[3],"datatype":"INT32","data":[1,2,3]},{"name":"shift","shape":[1],"datatype":"INT64","data":[1]},{"name":"axes","shape":[1],"datatype":"INT64","data":[0]}]}')     || fail "traced REST Roll through HAProxy"
  server_tp=$(tr -d '\r' <<<"$headers" | sed -n 's/^[Tt]raceparent: //p')
  [[ "$server_tp" =~ ^00-$trace-([0-9a-f]{16})-01$ ]] \
    || fail "the REST reply through HAProxy carried traceparent '$server_tp', not trace $trace"
  tr -d '\r' <<<"$headers" | grep -qi '^server-timing: .*total;dur=' \
    || fail "the REST reply through HAProxy carried no Server-Timing: $headers"
  span=${BASH_REMATCH[1]}
  if podman logs "$(cid tensorops-1)" 2>&1 | grep -q "access method=REST op=Roll code=OK .* trace_id=$trace span_id=$span"; then
    found="$trace $span"
    break
  fi
done
[ -n "$found" ] || fail "none of 12 traced REST calls through HAProxy shows in tensorops-1's access log"
read -r trace span <<<"$found"
exported() {
  grep "\"spanId\": \"$span\"" "$W/collector.out" | grep -q '"name": "POST /v2/models/{model}/infer"'
}
wait_for 30 "tensorops-1's REST span $span at the collector stand-in" exported
log "traced REST call $trace: reply traceparent span $span through HAProxy, in tensorops-1's access log and at the collector"
phase "traced call through HAProxy"
else
  log "step 8b (a traced call through the stack) skipped: COMPOSE_TRACE_STEP=0"
fi

fi  # steps 3-8b: not with COMPOSE_STEPS=proxyless

# --- 9. down -v ---------------------------------------------------------------
log "$DC_SHOWN down -v"
compose down -v >>"$W/compose.log" 2>&1 || fail "docker-compose down -v"
STACK_UP=0
label="label=com.docker.compose.project=$COMPOSE_PROJECT_NAME"
left="$(podman ps -aq --filter "$label")$(podman volume ls -q --filter "$label")$(podman network ls -q --filter "$label")"
[ -z "$left" ] || fail "after down -v, left: $left"
log "down -v: no container, volume or network of the project left"
phase "down -v"

log "PASS; phases: $(IFS=';'; echo "${PHASES[*]}")"
