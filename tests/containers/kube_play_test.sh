#!/usr/bin/env bash
# deploy/k8s/ run for real with `podman kube play` (Podman 4.3, no cluster):
#   1. what Podman cannot take is shown with its own output: the manifests
#      other than the Deployment (Namespace, Services, HPA, PDB, the
#      kustomization) are refused as "not any supported kube kind";
#   2. deploy/k8s/deployment.yaml, rendered for Podman by `deploy/render.sh
#      kube-play` (deploy/podman/kube_play.py says what changes and why), is
#      played on a network of this test's own, every pod also named
#      `tensorops-headless` there (what the headless Service gives in a
#      cluster): as many pods as `replicas:`, none publishing a host port;
#   3. each pod keeps the manifest's uid, read-only root, CPU and memory
#      limits and restart policy, and its liveness probe answers (`podman
#      healthcheck run`);
#   4. SDK callers with target dns://GATEWAY:53/tensorops-headless:50051
#      (the network's DNS, as dns:///tensorops-headless...:50051 in a
#      cluster) reach every pod (each one's /metrics counts calls);
#   5. kill -9 of one pod's server under that load: Podman restarts it (the
#      pod's restartPolicy, Always), no call fails, and it serves again;
#   6. `podman kube down` leaves no pod; the network and volume go too.
# Talks only to its own network's addresses. Needs the image
# localhost/tensorops:latest (containers_image builds it).
#
# usage: kube_play_test.sh CLI LOAD_DRIVER REPO_ROOT
#   TENSOROPS_KUBE_SUBNET_PREFIX (172.29.53): the test network's /24.
set -euo pipefail
CLI=$1 DRIVER=$2 ROOT=$(cd "$3" && pwd)
T0=$EPOCHREALTIME
source "$ROOT/tests/harness/script.sh"
[ "$(id -u)" -eq 0 ] || fail "run as root (rootful Podman)"
export CONTAINERS_CONF=$ROOT/deploy/podman/containers.conf
IMAGE=localhost/tensorops:latest
PREFIX=${TENSOROPS_KUBE_SUBNET_PREFIX:-172.29.53}
NET=tensorops-kube-$$
VOLUME=tensorops-tmp
W=$(mktemp -d "${TMPDIR:-/tmp}/tensorops-kube.XXXXXX")
PLAYED=0
cleanup() {
  local rc=$?
  if [ $rc -ne 0 ] && [ "$PLAYED" = 1 ]; then
    podman pod ps 2>&1 || true
    for c in $(podman ps -aq --filter "network=$NET" 2>/dev/null); do
      echo "--- $(podman inspect --format '{{.Name}}' "$c") (last log lines)"
      podman logs --tail 10 "$c" 2>&1 || true
    done
    for f in "$W"/*.out; do [ -s "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done
  fi
  stop_pids
  [ "$PLAYED" = 0 ] || podman kube down "$W/kube.yaml" >/dev/null 2>&1 || true
  podman network rm -f "$NET" >/dev/null 2>&1 || true
  [ "$PLAYED" = 0 ] || podman volume rm -f "$VOLUME" >/dev/null 2>&1 || true
  rm -rf "$W"
  exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

bash "$ROOT/tools/container_setup.sh" packages >"$W/setup.log" 2>&1 \
  || { tail -n 20 "$W/setup.log"; fail "tools/container_setup.sh packages"; }
podman image exists "$IMAGE" || fail "no $IMAGE (containers_image, or tools/container_setup.sh image, builds it)"
! podman volume exists "$VOLUME" || fail "volume $VOLUME exists: another kube play of deploy/k8s is running, or an earlier one left it"

# --- 1. what Podman does not take --------------------------------------------
for f in namespace service hpa pdb kustomization; do
  if out=$(podman kube play --start=false "$ROOT/deploy/k8s/$f.yaml" 2>&1); then
    fail "podman kube play deploy/k8s/$f.yaml was accepted (update deploy/k8s/README.md): $out"
  fi
  case "$out" in *"does not contain any supported kube kind"*) ;; *) fail "kube play $f.yaml: $out" ;; esac
  log "podman kube play deploy/k8s/$f.yaml: $out"
done

# --- 2. the Deployment's pods ---------------------------------------------------
bash "$ROOT/deploy/render.sh" kube-play --image "$IMAGE" >"$W/kube.yaml"
REPLICAS=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["spec"]["replicas"])' "$ROOT/deploy/k8s/deployment.yaml")
podman network create --subnet "$PREFIX.0/24" "$NET" >/dev/null
PLAYED=1
podman kube play --network "$NET:alias=tensorops-headless" "$W/kube.yaml" >"$W/play.out" 2>&1 \
  || { cat "$W/play.out"; fail "podman kube play (rendered deployment.yaml)"; }
mapfile -t PODS < <(podman pod ps --filter "network=$NET" --format '{{.Name}}' | sort)
[ "${#PODS[@]}" = "$REPLICAS" ] || fail "${#PODS[@]} pods (${PODS[*]}), want replicas: $REPLICAS"
ctr_of() { echo "$1-tensorops"; }
ip_of() {
  podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' \
    "$(podman pod inspect --format '{{.InfraContainerID}}' "$1")"
}
for p in "${PODS[@]}"; do
  infra=$(podman pod inspect --format '{{.InfraContainerID}}' "$p")
  ports=$(podman port "$infra")
  [ -z "$ports" ] || fail "$p publishes host ports: $ports"
done
log "podman kube play --network $NET:alias=tensorops-headless: ${PODS[*]} ($REPLICAS, as replicas:), no host port"

# --- 3. what each pod keeps of the manifest ---------------------------------------
read -r WANT_MEM WANT_CPU <<<"$(python3 - "$ROOT/deploy/k8s/deployment.yaml" <<'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
units = {"Gi": 1 << 30, "Mi": 1 << 20}
mem = int(c["memory"][:-2]) * units[c["memory"][-2:]]
print(mem, int(float(c["cpu"]) * 1e9))
PY
)"
for p in "${PODS[@]}"; do
  c=$(ctr_of "$p")
  got=$(podman inspect --format '{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} {{.HostConfig.RestartPolicy.Name}}' "$c")
  [ "$got" = "10001:10001 true $WANT_MEM $WANT_CPU always" ] \
    || fail "$c: user, read-only, memory, CPU, restart = $got; want 10001:10001 true $WANT_MEM $WANT_CPU always"
done
log "each pod: uid 10001, read-only root, memory $WANT_MEM, NanoCpus $WANT_CPU, restart always"
probe_ok() { podman healthcheck run "$1"; }
for p in "${PODS[@]}"; do
  wait_for 60 "$p's liveness probe" probe_ok "$(ctr_of "$p")"
done
log "liveness probes (exec: $(podman inspect --format '{{join .Config.Healthcheck.Test " "}}' "$(ctr_of "${PODS[0]}")")) answer in every pod"

# --- 4. proxyless calls reach every pod -------------------------------------------
TARGET="dns://$PREFIX.1:53/tensorops-headless:50051"
serving() { [ "$("$CLI" --target "$TARGET" --deadline 2s health --service tensorops.v1.TensorOps)" = SERVING ]; }
wait_for 60 "SERVING through $TARGET" serving
roll_ok() {
  curl -sf --max-time 3 "http://$(ip_of "$1"):9464/metrics" \
    | awk '/^tensorops_requests_total\{/ && /method="Execute"/ && /op="Roll"/ && /code="OK"/ { n += $NF } END { printf "%d\n", n }'
}
"$DRIVER" --target "$TARGET" --threads 8 --sleep_us 0 --max_calls 600 --max_seconds 120 >"$W/spread.out" 2>&1 \
  || { cat "$W/spread.out"; fail "load driver through $TARGET"; }
counts=()
for p in "${PODS[@]}"; do
  n=$(roll_ok "$p")
  [ "$n" -gt 0 ] || fail "$p served no call through $TARGET"
  counts+=("$n")
done
log "600 calls through $TARGET: pods served ${counts[*]}"

# --- 5. kill -9 of a pod's server under load ------------------------------------------
victim=${PODS[0]}
c=$(ctr_of "$victim")
pid=$(podman inspect --format '{{.State.Pid}}' "$c")
load_start kill 200 "the load" --target "$TARGET" --threads 8 --sleep_us 0 --big_every 4 \
  --calls_after 200 --max_seconds 240
kill -KILL "$pid"
log "kill -9 of $victim's server (pid $pid)"
restarted() { local q; q=$(podman inspect --format '{{.State.Pid}}' "$c") && [ "${q:-0}" -gt 0 ] && [ "$q" != "$pid" ]; }
wait_for 60 "Podman to restart $c" restarted
served_again() { [ "$(roll_ok "$victim")" -gt 0 ]; }   # a new process counts from 0
wait_for 60 "$victim to serve calls again" served_again
load_end kill "a call failed across the kill -9 of $victim"
log "$c restarted by Podman (restarts: $(podman inspect --format '{{.RestartCount}}' "$c")); no call failed; it serves again"

# --- 6. down ------------------------------------------------------------------------
podman kube down "$W/kube.yaml" >"$W/down.out" 2>&1 || { cat "$W/down.out"; fail "podman kube down"; }
left=$(podman pod ps -q --filter "network=$NET")
[ -z "$left" ] || fail "pods left after kube down: $left"
log "PASS (podman kube down: no pod left)"
