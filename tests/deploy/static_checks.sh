#!/usr/bin/env bash
# Static checks of the deployment files (no Docker engine needed):
#   - docker-compose config -q on deploy/docker-compose.yml (Debian's docker-compose)
#   - the committed compose configs equal deploy/render.sh's output (no drift
#     from the HAProxy and Prometheus templates)
#   - promtool check config (compose config, rules path pointed at the repo),
#     promtool check rules and promtool test rules (alert unit tests)
#   - haproxy -c on the compose HAProxy config (replica host names ->
#     127.0.0.1); it has both fronts (gRPC over HTTP/2, REST) and retries a
#     call whose replica failed before answering (retry-on, redispatch)
#   - YAML parse of every Kubernetes manifest, with the properties the
#     deployment relies on; Grafana dashboard JSON and provisioning parse and
#     use only metrics from docs/metrics.md
#   - Dockerfile: stages, non-root user, ports, HEALTHCHECK; its runtime
#     packages provide every shared library the built binaries need (dpkg -S);
#     its HEALTHCHECK command and server flags work against the real binaries
#     (gRPC health and the REST door's /v2/health/ready)
#
# usage: static_checks.sh REPO_ROOT SERVER CLI
set -euo pipefail
ROOT=$1 SERVER=$2 CLI=$3
D=$ROOT/deploy
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
for tool in docker-compose promtool haproxy python3 dpkg readelf; do
  command -v "$tool" >/dev/null || fail "$tool not found (bash tools/setup.sh installs it)"
done
python3 -c 'import yaml' 2>/dev/null || fail "python3-yaml not installed (bash tools/setup.sh installs it)"

W=$(mktemp -d "${TMPDIR:-/tmp}/tensorops-static.XXXXXX")
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$W"
}
trap cleanup EXIT

# --- compose ----------------------------------------------------------------
(cd "$D" && DOCKER_HOST=unix:///nonexistent docker-compose -f docker-compose.yml config -q) \
  || fail "docker-compose config -q"
(cd "$D" && DOCKER_HOST=unix:///nonexistent docker-compose -f docker-compose.yml \
  -f podman/compose.podman.yml config -q) || fail "docker-compose config -q with podman/compose.podman.yml"
ok "docker-compose config -q (and with podman/compose.podman.yml)"

bash "$D/render.sh" compose-haproxy | diff -u "$D/haproxy/haproxy.cfg" - \
  || fail "deploy/haproxy/haproxy.cfg differs from its template: run deploy/render.sh compose"
bash "$D/render.sh" compose-prometheus | diff -u "$D/prometheus/prometheus.yml" - \
  || fail "deploy/prometheus/prometheus.yml differs from its template: run deploy/render.sh compose"
ok "compose configs match deploy/render.sh compose"

# --- Prometheus ---------------------------------------------------------------
sed "s|/etc/prometheus/alerts.yml|$D/prometheus/alerts.yml|" "$D/prometheus/prometheus.yml" >"$W/prometheus.yml"
promtool check config "$W/prometheus.yml" || fail "promtool check config"
promtool check rules "$D/prometheus/alerts.yml" || fail "promtool check rules"
(cd "$D/prometheus" && promtool test rules alerts_test.yml) || fail "promtool test rules"
ok "promtool check config, check rules, test rules"

# --- HAProxy ------------------------------------------------------------------
sed -e "s|tensorops-\([0-9]\):50051|127.0.0.1:5005\1|" -e "s|tensorops-\([0-9]\):8000|127.0.0.1:800\1|" \
  -e "s| /tmp/haproxy.sock| $W/haproxy.sock|" "$D/haproxy/haproxy.cfg" >"$W/haproxy.cfg"
haproxy -c -q -f "$W/haproxy.cfg" || fail "haproxy -c"
# Both fronts: gRPC (HTTP/2) on 8080 and REST on 8000; a call whose replica
# failed before answering goes to another one.
for want in 'bind 0.0.0.0:8080 proto h2' 'server replica-3 tensorops-3:50051 proto h2' \
  'bind 0.0.0.0:8000' 'server replica-3 tensorops-3:8000' 'option httpchk GET /v2/health/ready' \
  'retry-on conn-failure empty-response' 'option redispatch 1' 'retries 3'; do
  grep -qF -- "$want" "$D/haproxy/haproxy.cfg" || fail "deploy/haproxy/haproxy.cfg lacks: $want"
done
ok "haproxy -c on the compose HAProxy config (gRPC and REST fronts, retries)"

# --- Kubernetes manifests, Grafana, compose content ---------------------------
python3 - "$ROOT" <<'PY' || fail "manifest checks"
import glob, json, os, re, sys, yaml
root = sys.argv[1]
d = os.path.join(root, "deploy")
errors = []
def check(cond, msg):
    if not cond:
        errors.append(msg)

docs = {}
files = sorted(glob.glob(os.path.join(d, "k8s", "*.yaml")))
check(files, "no deploy/k8s/*.yaml")
for f in files:
    for doc in yaml.safe_load_all(open(f)):
        if doc is None:
            continue
        name = os.path.basename(f)
        check(isinstance(doc, dict) and "kind" in doc and "apiVersion" in doc, f"{name}: no kind/apiVersion")
        if doc.get("kind") == "Kustomization":
            for r in doc.get("resources", []):
                check(os.path.exists(os.path.join(d, "k8s", r)), f"kustomization: {r} missing")
            continue
        check("name" in doc.get("metadata", {}), f"{name}: {doc.get('kind')} without metadata.name")
        docs.setdefault(doc["kind"], []).append(doc)
for kind in ["Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget"]:
    check(kind in docs, f"no {kind} manifest")
if "Deployment" in docs:
    dep = docs["Deployment"][0]
    pod = dep["spec"]["template"]["spec"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    check(dep["spec"]["selector"]["matchLabels"].items() <= labels.items(), "Deployment selector does not match its pod labels")
    check(pod.get("securityContext", {}).get("runAsNonRoot") is True, "pod securityContext.runAsNonRoot")
    c = pod["containers"][0]
    sc = c.get("securityContext", {})
    check(sc.get("readOnlyRootFilesystem") is True, "container readOnlyRootFilesystem")
    check(sc.get("allowPrivilegeEscalation") is False, "container allowPrivilegeEscalation: false")
    for p in ["readinessProbe", "livenessProbe"]:
        check(c.get(p, {}).get("grpc", {}).get("port") == 50051, f"{p} is not a native gRPC probe on 50051")
    for r in ["requests", "limits"]:
        check({"cpu", "memory"} <= set(c.get("resources", {}).get(r, {})), f"resources.{r} cpu/memory")
    args = c.get("args", [])
    check("--host=0.0.0.0" in args and "--metrics_host=0.0.0.0" in args, "server args --host/--metrics_host=0.0.0.0")
    check("--http_host=0.0.0.0" in args and "--http_port=8000" in args, "server args --http_host=0.0.0.0 --http_port=8000")
    ports = {p["containerPort"] for p in c.get("ports", [])}
    check({50051, 9464, 8000} <= ports, "container ports 50051, 9464 and 8000")
    check({"name": "http", "containerPort": 8000} in
          [{k: p.get(k) for k in ("name", "containerPort")} for p in c.get("ports", [])],
          "container port 8000 named http")
    sel = dep["spec"]["selector"]["matchLabels"]
    for s in docs.get("Service", []):
        check(s["spec"]["selector"] == sel, f"Service {s['metadata']['name']} selector")
        check(any(p.get("name") == "http" and p.get("port") == 8000 and p.get("targetPort") in ("http", 8000)
                  and p.get("appProtocol") == "http" for p in s["spec"].get("ports", [])),
              f"Service {s['metadata']['name']}: no http port 8000 (appProtocol http)")
    check(any(s["spec"].get("clusterIP") == "None" for s in docs.get("Service", [])), "no headless Service")
    for kind in ["PodDisruptionBudget"]:
        for x in docs.get(kind, []):
            check(x["spec"]["selector"]["matchLabels"] == sel, f"{kind} selector")
    for h in docs.get("HorizontalPodAutoscaler", []):
        t = h["spec"]["scaleTargetRef"]
        check(t["kind"] == "Deployment" and t["name"] == dep["metadata"]["name"], "HPA target")
        check(h["spec"]["minReplicas"] >= 2, "HPA minReplicas >= 2")
        # Not CPU alone (issue 48): per-pod metrics the server exports, with
        # the in-flight bytes target under the pods' --max_inflight_bytes.
        documented = set(re.findall(r"`(tensorops_[a-z_]+)`", open(os.path.join(root, "docs", "metrics.md")).read()))
        pods = {m["pods"]["metric"]["name"]: m["pods"]["target"] for m in h["spec"]["metrics"] if m["type"] == "Pods"}
        check("tensorops_inflight_bytes" in pods, "HPA: no tensorops_inflight_bytes Pods metric")
        for name in pods:
            check(name in documented, f"HPA metric {name} is not in docs/metrics.md")
        if "tensorops_inflight_bytes" in pods:
            units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
            v = str(pods["tensorops_inflight_bytes"]["averageValue"])
            target = int(v[:-2]) * units[v[-2:]] if v[-2:] in units else int(v)
            budget = [a for a in dep["spec"]["template"]["spec"]["containers"][0]["args"]
                      if a.startswith("--max_inflight_bytes=")]
            check(budget and target < int(budget[0].split("=", 1)[1]),
                  "HPA tensorops_inflight_bytes target not under the Deployment's --max_inflight_bytes")
check(os.path.exists(os.path.join(d, "k8s", "README.md")), "deploy/k8s/README.md")

# Grafana: provisioning parses; dashboard uses documented metrics only.
for f in glob.glob(os.path.join(d, "grafana", "provisioning", "*", "*.yml")):
    check(isinstance(yaml.safe_load(open(f)), dict), f"{f} does not parse")
metrics_doc = open(os.path.join(root, "docs", "metrics.md")).read()
known = set(re.findall(r"`(tensorops_[a-z_]+)`", metrics_doc))
dash_files = glob.glob(os.path.join(d, "grafana", "dashboards", "*.json"))
check(dash_files, "no Grafana dashboard JSON")
for f in dash_files:
    dash = json.load(open(f))
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    check(exprs, f"{f}: no queries")
    for e in exprs:
        for m in re.findall(r"\b(tensorops_[a-z_]+)", e):
            base = re.sub(r"_(bucket|sum|count)$", "", m)
            check(base in known, f"{os.path.basename(f)}: {m} is not in docs/metrics.md")
    text = " ".join(exprs)
    for need in ["tensorops_requests_total", "code!=\"OK\"", "histogram_quantile(0.5", "histogram_quantile(0.99",
                 "tensorops_inflight_requests", "tensorops_request_size_bytes"]:
        check(need in text, f"dashboard lacks {need}")

# Compose: three replicas, HAProxy, Prometheus, Grafana; mounts exist.
compose = yaml.safe_load(open(os.path.join(d, "docker-compose.yml")))
svcs = compose["services"]
check(len([s for s in svcs if s.startswith("tensorops-")]) >= 3, "compose: fewer than 3 replicas")
for s in ["haproxy", "prometheus", "grafana"]:
    check(s in svcs, f"compose: no {s}")
for name, s in svcs.items():
    for v in s.get("volumes", []):
        src = v.split(":")[0]
        if src.startswith("."):
            check(os.path.exists(os.path.join(d, src)), f"compose {name}: {src} missing")
# The Podman file (deploy/podman/compose.podman.yml) repeats the default
# network's subnet lines (compose replaces a network whole): they must agree.
podman = yaml.safe_load(open(os.path.join(d, "podman", "compose.podman.yml")))
check(podman["networks"]["default"]["ipam"]["config"] == compose["networks"]["default"]["ipam"]["config"],
      "podman/compose.podman.yml: the default network's ipam config differs from docker-compose.yml's")
check(podman["networks"]["default"]["ipam"].get("options") == {"driver": "host-local"},
      "podman/compose.podman.yml: ipam options are not {driver: host-local}")
lb_ports = [str(p) for p in svcs.get("haproxy", {}).get("ports", [])]
check(len(lb_ports) == 2, "compose: haproxy publishes two ports (gRPC, REST)")
check(any(p.endswith(":8080") for p in lb_ports) and any(p.endswith(":8000") for p in lb_ports),
      "compose: haproxy publishes 8080 (gRPC) and 8000 (REST)")
for name, s in svcs.items():
    if name.startswith("tensorops-"):
        check({"50051", "9464", "8000"} <= {str(p) for p in s.get("expose", [])}, f"compose {name}: expose 50051, 9464, 8000")
# The balancer ships as tested: built from deploy/haproxy/Dockerfile (Debian's
# HAProxy, the one the tests run), not pulled from a registry.
lb = svcs.get("haproxy", {})
build = lb.get("build", {})
check(isinstance(build, dict) and build.get("context") == "haproxy" and build.get("dockerfile", "Dockerfile") == "Dockerfile",
      "compose: haproxy must build from deploy/haproxy/Dockerfile (build: {context: haproxy})")
check(str(lb.get("image", "")).startswith("tensorops-haproxy:"),
      "compose: haproxy's image must be the locally built tensorops-haproxy:..., not a registry's")

if errors:
    print("\n".join("  " + e for e in errors))
    sys.exit(1)
print(f"ok: {len(files)} k8s manifest files, Grafana dashboard and provisioning, compose services")
PY

# --- Dockerfile ---------------------------------------------------------------
DF=$ROOT/Dockerfile
[ "$(grep -c '^FROM debian:bookworm-slim' "$DF")" -ge 2 ] || fail "Dockerfile: two debian:bookworm-slim stages"
grep -q 'bash tools/setup.sh' "$DF" && grep -q 'bash tools/build.sh' "$DF" || fail "Dockerfile: build stage must run tools/setup.sh and tools/build.sh"
grep -Eq '^USER [^0r]' "$DF" || fail "Dockerfile: runtime stage must set a non-root USER"
grep -Eq '^EXPOSE 50051 9464 8000$' "$DF" || fail "Dockerfile: EXPOSE 50051 9464 8000"
grep -q '^HEALTHCHECK' "$DF" || fail "Dockerfile: no HEALTHCHECK"
# The balancer's image: Debian's HAProxy at the version the tests run here.
HDF=$D/haproxy/Dockerfile
[ "$(grep -c '^FROM ' "$HDF")" = 1 ] && grep -q '^FROM debian:bookworm-slim$' "$HDF" \
  || fail "deploy/haproxy/Dockerfile: one debian:bookworm-slim stage"
tested=$(dpkg-query -W -f='${Version}' haproxy | sed 's/-.*//')
grep -qF "'haproxy=$tested-*'" "$HDF" \
  || fail "deploy/haproxy/Dockerfile does not pin haproxy=$tested-* (the HAProxy the tests run here is $tested)"
grep -Eq '^USER haproxy$' "$HDF" || fail "deploy/haproxy/Dockerfile: USER haproxy"
grep -q '^CMD \["haproxy", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"\]$' "$HDF" \
  || fail "deploy/haproxy/Dockerfile: CMD must read the config compose mounts"
ok "deploy/haproxy/Dockerfile: Debian's haproxy $tested, non-root, reads the mounted config"
grep -q '^\.git$' "$ROOT/.dockerignore" && grep -q '^build$' "$ROOT/.dockerignore" || fail ".dockerignore: .git and build"
# Runtime packages: the words of the apt-get install command after the last
# FROM that look like Debian package names (the command's own words, such as
# "install", come along and match no library's package).
RUNTIME_PKGS=$(awk '/^FROM/ {buf=""} {buf = buf "\n" $0} END {print buf}' "$DF" \
  | sed -n '/apt-get install/,/rm -rf/p' | tr ' \\' '\n\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' | sort -u)
CLIENT_LIB=$(ldd "$CLI" | awk '/libtensorops_client/ {print $3}')
[ -f "$CLIENT_LIB" ] || fail "cannot find libtensorops_client next to the CLI"
missing=""
for bin in "$SERVER" "$CLI" "$CLIENT_LIB"; do
  ldd "$bin" >"$W/ldd"
  for lib in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    case "$lib" in libtensorops_client.so* | ld-linux*) continue ;; esac   # ours; libc6
    path=$(awk -v l="$lib" '$1 == l {print $3}' "$W/ldd")
    [ -n "$path" ] || fail "ldd: $lib of $bin not found"
    pkg=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null \
          || dpkg -S "${path#/usr}" 2>/dev/null || dpkg -S "$(readlink -f "$path" | sed 's|^/usr||')" 2>/dev/null || true)
    pkg=${pkg%%:*}
    [ -n "$pkg" ] || fail "dpkg -S: no package owns $path"
    case " libc6 libgcc-s1 libstdc++6 " in *" $pkg "*) continue ;; esac   # in debian:bookworm-slim
    echo "$RUNTIME_PKGS" | grep -qx "$pkg" || missing+=" $pkg($lib)"
  done
done
[ -z "$missing" ] || fail "Dockerfile runtime stage lacks:$missing"
ok "Dockerfile runtime packages ($(echo $RUNTIME_PKGS)) cover every NEEDED library"

# The image's server flags and HEALTHCHECK command, run against the real
# binaries on 127.0.0.1 (ports 0 instead of 50051/9464).
python3 - "$DF" >"$W/docker_cmd" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read().replace("\\\n", " ")
hc = json.loads(re.search(r"^HEALTHCHECK .*?CMD (\[.*\])", text, re.M).group(1))
entry = json.loads(re.search(r"^ENTRYPOINT (\[.*\])", text, re.M).group(1))
cmd = json.loads(re.search(r"^CMD (\[.*\])", text, re.M).group(1))
print("\x1f".join(hc)); print("\x1f".join(entry + cmd))
PY
IFS=$'\x1f' read -r -a HC < <(sed -n 1p "$W/docker_cmd")
IFS=$'\x1f' read -r -a RUN < <(sed -n 2p "$W/docker_cmd")
[ "${HC[0]}" = tensorops ] && [ "${RUN[0]}" = tensorops-server ] || fail "HEALTHCHECK/ENTRYPOINT programs"
# --http_port=0 first: the image's HTTP door on a free port, not 8000.
args=(--http_port=0)
for a in "${RUN[@]:1}"; do
  case "$a" in
    --http_port=*) args+=(--http_port=0) ;;
    --host=0.0.0.0) args+=(--host=127.0.0.1) ;;
    --metrics_host=0.0.0.0) args+=(--metrics_host=127.0.0.1) ;;
    --http_host=0.0.0.0) args+=(--http_host=127.0.0.1) ;;
    --port=*) args+=(--port=0) ;;
    --metrics_port=*) args+=(--metrics_port=0) ;;
    *) args+=("$a") ;;
  esac
done
for want in --host=0.0.0.0 --metrics_host=0.0.0.0 --http_host=0.0.0.0 --http_port=8000; do
  printf '%s\n' "${RUN[@]:1}" | grep -qx -- "$want" || fail "image CMD must listen on 0.0.0.0 (--host, --metrics_host, --http_host): no $want"
done
"$SERVER" "${args[@]}" >"$W/server.out" 2>"$W/server.err" &
SERVER_PID=$!
for _ in $(seq 100); do grep -q 'http on' "$W/server.out" && break; kill -0 $SERVER_PID || break; sleep 0.2; done
PORT=$(sed -n 's/^tensorops-server listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$W/server.out")
HTTP_PORT=$(sed -n 's|^tensorops-server http on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$W/server.out")
[ -n "$PORT" ] && [ -n "$HTTP_PORT" ] || fail "server with the image's flags did not start: $(cat "$W/server.err")"
python3 - "$HTTP_PORT" <<'PY' || fail "GET /v2/health/ready on the image's HTTP door"
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=5)
c.request("GET", "/v2/health/ready")
sys.exit(0 if c.getresponse().status == 200 else 1)
PY
hc=("$CLI")
for a in "${HC[@]:1}"; do hc+=("${a/127.0.0.1:50051/127.0.0.1:$PORT}"); done
out=$("${hc[@]}") || fail "HEALTHCHECK command failed: ${hc[*]}"
[ "$out" = SERVING ] || fail "HEALTHCHECK printed '$out'"
kill -TERM $SERVER_PID; wait $SERVER_PID || fail "server exited non-zero after SIGTERM"; SERVER_PID=""
# Against a stopped server the probe must fail (exit 1, not a usage error).
rc=0; "${hc[@]}" >/dev/null 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "HEALTHCHECK against a stopped server exited $rc, want 1"
ok "image flags start the server (REST /v2/health/ready 200); HEALTHCHECK prints SERVING, exits 1 when it is down"
echo PASS
