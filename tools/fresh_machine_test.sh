#!/usr/bin/env bash
# Runs the README's test command (`bash tools/test.sh`) as root on a bare
# Debian 12 root: the bookworm minbase tree that debian:bookworm-slim is made
# from (tools/container_setup.sh rootfs, made once and cached), unpacked
# afresh, with a clean checkout of the repository's HEAD (git archive: only
# committed files) at /work/tensorops and ../shared next to it. Everything
# the tests need has to come from tools/setup.sh and
# tools/container_setup.sh. Prints how long it took; the exit status is
# test.sh's.
#
#   tools/fresh_machine_test.sh [REPO]      # REPO: default this checkout
#   KEEP_FRESH=1 ...                        # keep the root afterwards (for a look)
#   FRESH_COMMAND=run-server ...            # the README's other command instead:
#       `bash tools/run-server.sh --port=0 --http_port=0 --metrics_port=0`,
#       timed until the server says it started and the CLI's `health`
#       answers SERVING; then the server is stopped by its PID
#
# chroot rather than `podman run`: the suite itself runs Podman (label
# "container"), which inside a container would need --privileged, its own
# storage volume and nested cgroups; in a chroot it uses the host kernel's
# cgroups and network like on a real machine. The chroot runs in its own
# mount namespace, so its /proc, /sys, /dev and every mount Podman makes
# inside vanish with it. It shares the host's network (apt, npm, 127.0.0.1).
# Takes about as long as tools/test.sh on a new machine: all packages are
# downloaded and the project is compiled twice (build/ and the image).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
REPO=$(cd "${1:-$HERE}" && pwd)
SHARED=$(cd "$REPO/.." && pwd)/shared
fail() { echo "fresh_machine_test.sh: $*" >&2; exit 1; }
say() { echo "fresh_machine_test.sh: [$(date +%T)] $*"; }
[ "$(id -u)" -eq 0 ] || fail "run as root (debootstrap, chroot, mounts)"
git -C "$REPO" rev-parse --verify -q HEAD >/dev/null || fail "$REPO is not a git checkout"
[ -d "$SHARED" ] || fail "no $SHARED (the repository's ../shared)"
command -v unshare >/dev/null && command -v chroot >/dev/null || fail "needs unshare and chroot (util-linux, coreutils)"

TAR=$(bash "$HERE/tools/container_setup.sh" rootfs)
FRESH=$(mktemp -d "${TENSOROPS_FRESH_DIR:-/var/tmp}/tensorops-fresh.XXXXXX")
cleanup() {
  local rc=$?
  if [ "${KEEP_FRESH:-0}" = 1 ]; then
    say "kept $FRESH"
  else
    rm -rf --one-file-system "$FRESH"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

tar -C "$FRESH" -xf "$TAR"
mkdir -p "$FRESH/work/tensorops"
git -C "$REPO" archive HEAD | tar -C "$FRESH/work/tensorops" -x
cp -a "$SHARED" "$FRESH/work/shared"
cp -L /etc/resolv.conf "$FRESH/etc/resolv.conf"
# A minbase root has no /etc/hosts (a container runtime or the installer
# writes one): without it "localhost" does not resolve (SecurityTest's
# localhost:PORT call failed in the fresh root). Give it the host's, as Docker
# and Podman do.
[ -f "$FRESH/etc/hosts" ] || cp -L /etc/hosts "$FRESH/etc/hosts"
# The network's own CA certificates (e.g. an egress proxy in front of the npm
# registry) belong to the network as resolv.conf does, not to the machine:
# carry them over; the ca-certificates package that tools/setup.sh installs
# adds them to the root's bundle.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$FRESH/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$FRESH/usr/local/share/ca-certificates/"
fi
say "fresh root $FRESH: $(sed -n 's/^PRETTY_NAME=//p' "$FRESH/etc/os-release"), $(git -C "$REPO" rev-parse --short HEAD) of $REPO"

case "${FRESH_COMMAND:-test}" in
  test)
    WHAT="bash tools/test.sh"
    INNER="bash tools/test.sh"
    ;;
  run-server)
    WHAT="bash tools/run-server.sh (until the CLI's health answers SERVING)"
    # In the background, its log watched for the start line; the CLI then
    # asks the server's health on the port it printed; the server is
    # stopped by its PID either way.
    INNER='bash tools/run-server.sh --port=0 --http_port=0 --metrics_port=0 > /tmp/run-server.log 2>&1 &
      pid=$!
      port=""
      for _ in $(seq 1 3600); do
        port=$(sed -n "s/.*started: grpc 127.0.0.1:\([0-9]*\).*/\1/p" /tmp/run-server.log | head -1)
        [ -n "$port" ] && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.5
      done
      tail -3 /tmp/run-server.log
      rc=1
      [ -n "$port" ] && build/client/tensorops --target=127.0.0.1:$port health && rc=0
      kill $pid 2>/dev/null; wait $pid 2>/dev/null
      exit $rc'
    ;;
  *) fail "FRESH_COMMAND must be test or run-server" ;;
esac
start=$SECONDS
rc=0
unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
  F=$1
  # The root is a mount of its own, as on a machine: Podman storage
  # remounts "/" private, which fails on a plain directory ("remount /,
  # flags: 0x44000: invalid argument" when the container tests import an image).
  mount --bind "$F" "$F"
  mount -t proc proc "$F/proc"
  mount --rbind /sys "$F/sys"
  mount --rbind /dev "$F/dev"
  mount -t tmpfs tmpfs "$F/run"
  mount -t tmpfs tmpfs "$F/tmp"
  exec chroot "$F" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /work/tensorops || exit 1; $2"
' fresh "$FRESH" "$INNER" || rc=$?
secs=$((SECONDS - start))
say "$WHAT in the fresh root: exit status $rc after $((secs / 60)) min $((secs % 60)) s"
exit $rc
