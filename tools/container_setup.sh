#!/usr/bin/env bash
# Prepares this machine to build and run the tensorops containers with
# Debian's Podman, Buildah and docker-compose (no Docker engine and no image
# registry needed; see ../shared/toolchain.md "Containers" and README
# "Deployment"). Idempotent; run as root.
#
#   tools/container_setup.sh packages   # apt-get installs what is missing
#   tools/container_setup.sh rootfs     # prints the path of the bookworm minbase tarball (made once)
#   tools/container_setup.sh base       # debian:bookworm-slim from that tarball (skipped if present)
#   tools/container_setup.sh standins   # the balancer image (deploy/haproxy/Dockerfile) and a local
#                                       # prom/prometheus, named as in the compose file
#   tools/container_setup.sh image      # buildah bud of ./Dockerfile -> tensorops:latest
#   tools/container_setup.sh all        # all of the above, in that order
#
# Podman and Buildah read deploy/podman/containers.conf (CONTAINERS_CONF) for
# the settings this kind of VM needs; callers should export the same.
# TENSOROPS_CONTAINER_CACHE (default /var/tmp/tensorops-containers) keeps the
# minbase tarball, which tools/fresh_machine_test.sh reuses as a bare machine.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$ROOT/deploy/podman/containers.conf}
CACHE=${TENSOROPS_CONTAINER_CACHE:-/var/tmp/tensorops-containers}
BASE_IMAGE=docker.io/library/debian:bookworm-slim
IMAGE=${TENSOROPS_IMAGE:-localhost/tensorops:latest}

fail() { echo "container_setup.sh: $*" >&2; exit 1; }
say() { echo "container_setup.sh: $*" >&2; }
[ "$(id -u)" -eq 0 ] || fail "run as root (rootful Podman; debootstrap)"

packages() {
  # uidmap/slirp4netns are not needed: everything runs rootful.
  # catatonit: the init of the pause image `podman kube play` builds for its
  # pods (tests/containers/kube_play_test.sh).
  local want=(podman buildah runc netavark aardvark-dns iptables docker-compose debootstrap
              python3-yaml curl catatonit) missing=() p
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

# The Debian mirror this machine uses (the base image is made from it).
mirror() {
  local m=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    m=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
    m=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}

# A bookworm minbase root as a tarball: what debian:bookworm-slim holds
# (apt, dpkg, bash, coreutils; no documentation pruning), with this
# machine's apt sources (bookworm, -updates, -security) instead of
# debootstrap's single line. Written once, to a temporary name first, so an
# interrupted run leaves no half tarball behind.
rootfs() {
  local tar=$CACHE/bookworm-minbase.tar
  if [ ! -s "$tar" ]; then
    packages
    mkdir -p "$CACHE"
    local dir
    dir=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    say "debootstrap --variant=minbase bookworm from $(mirror) (a few minutes)"
    debootstrap --variant=minbase bookworm "$dir" "$(mirror)" >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -n 20 "$CACHE/debootstrap.log" >&2; rm -rf "$dir"; fail "debootstrap failed (log above)"; }
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      cp /etc/apt/sources.list.d/debian.sources "$dir/etc/apt/sources.list.d/debian.sources"
      rm -f "$dir/etc/apt/sources.list"
    fi
    rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/archives/*.deb
    tar -C "$dir" --numeric-owner -cf "$tar.tmp" .
    mv "$tar.tmp" "$tar"
    rm -rf "$dir"
  fi
  echo "$tar"
}

base() {
  packages
  if podman image exists "$BASE_IMAGE"; then
    say "$BASE_IMAGE present"
    return
  fi
  local tar
  tar=$(rootfs)
  podman import --quiet "$tar" "$BASE_IMAGE" >/dev/null
  say "imported $tar as $BASE_IMAGE"
}

# "haproxy:2.6" -> docker.io/library/haproxy:2.6, "prom/prometheus:v2.42.0" ->
# docker.io/prom/prometheus:v2.42.0: the names Podman resolves the compose
# file's short names to.
qualify() {
  case "$1" in
    */*/*) echo "$1" ;;
    */*) echo "docker.io/$1" ;;
    *) echo "docker.io/library/$1" ;;
  esac
}

compose_image() {  # the image: of compose service $1
  python3 - "$ROOT/deploy/docker-compose.yml" "$1" <<'PY'
import sys, yaml
print(yaml.safe_load(open(sys.argv[1]))["services"][sys.argv[2]]["image"])
PY
}

# The balancer's image, built from the repository (deploy/haproxy/Dockerfile:
# Debian's HAProxy, as the compose file builds it) under the name the compose
# file gives it; rebuilt every time (a cached layer keeps it quick), so a
# changed Dockerfile is what runs. Stand-ins for the images the compose file
# takes from Docker Hub, built from Debian's packages
# (tests/containers/standins/*.Dockerfile) under exactly the names the
# compose file uses, so it runs unchanged. Grafana has no Debian package and
# gets none.
standins() {
  base
  local name file ref
  ref=localhost/$(compose_image haproxy)
  say "building the balancer image $ref from deploy/haproxy/Dockerfile"
  buildah bud --quiet --isolation=chroot --pull=never --format docker --layers -t "$ref" \
    -f "$ROOT/deploy/haproxy/Dockerfile" "$ROOT/deploy/haproxy" >/dev/null
  for name in prometheus; do
    ref=$(qualify "$(compose_image "$name")")
    file=$ROOT/tests/containers/standins/$name.Dockerfile
    if podman image exists "$ref"; then
      say "$ref present (stand-in)"
      continue
    fi
    say "building stand-in $ref from $file"
    buildah bud --quiet --isolation=chroot --pull=never --format docker -t "$ref" \
      -f "$file" "$ROOT/tests/containers/standins" >/dev/null
  done
}

# --format docker: the OCI image format has no HEALTHCHECK, and Buildah drops
# it (with only a warning); the compose file's HAProxy waits for it.
# --layers keeps each step as a cached image, so the build stage's packages
# are installed once; the build stage is tagged (BUILD_CACHE) to keep that
# cache, and the build stage and image the new build replaces are removed
# (about 1 GB per changed build otherwise).
BUILD_CACHE=localhost/tensorops-build:cache
image() {
  base
  local old_cache old_image
  old_cache=$(podman image inspect --format '{{.Id}}' "$BUILD_CACHE" 2>/dev/null || true)
  old_image=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
  # The host's compiler cache, mounted into the build stage (the Dockerfile's
  # CCACHE_DIR): after the host's tools/build.sh it holds this tree's objects,
  # so the image's compile mostly hits it. TENSOROPS_CCACHE=0: a plain compile.
  local cache_args=()
  if [ "${TENSOROPS_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
    local dir
    dir=$(ccache -k cache_dir)
    mkdir -p "$dir"
    cache_args=(--volume "$dir:/ccache:rw" --build-arg CCACHE_DIR=/ccache)
    say "compiler cache: $dir ($(ccache -s 2>/dev/null | grep -m1 -i 'cache size' | tr -s ' ' || true))"
  fi
  say "buildah bud -t $IMAGE (compiles the project: 1-2 minutes with a warm compiler cache, 10-16 without)"
  buildah bud --isolation=chroot --pull=never --format docker --layers --target build \
    "${cache_args[@]}" -t "$BUILD_CACHE" -f "$ROOT/Dockerfile" "$ROOT"
  buildah bud --isolation=chroot --pull=never --format docker --layers -t "$IMAGE" \
    "${cache_args[@]}" -f "$ROOT/Dockerfile" "$ROOT"
  local id old
  for old in "$old_cache" "$old_image"; do
    [ -n "$old" ] || continue
    id=$(podman image inspect --format '{{.Id}}' "$old" 2>/dev/null || true)
    # Still used (by a container, or as a tag): podman refuses, and it stays.
    if [ -n "$id" ] && [ -z "$(podman image inspect --format '{{.RepoTags}}' "$old" | tr -d '[]')" ]; then
      podman rmi "$old" >/dev/null 2>&1 && say "removed the replaced image ${old:0:12}" || true
    fi
  done
}

case "${1:-}" in
  packages) packages ;;
  rootfs) rootfs ;;
  base) base ;;
  standins) standins ;;
  image) image ;;
  all) packages; base; standins; image ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
