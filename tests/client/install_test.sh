#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds the outside example
# project examples/sdk_quickstart against it with find_package(tensorops), and
# runs it against a live server on 127.0.0.1.
# usage: install_test.sh BUILD_DIR EXAMPLE_DIR SERVER_BINARY
set -euo pipefail
build_dir=$1 example_dir=$2 server=$3
work=$(mktemp -d /tmp/tensorops_install_test.XXXXXX)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cmake --install "$build_dir" --prefix "$work/prefix" >"$work/install.log"
test -f "$work/prefix/lib/cmake/tensorops/tensoropsConfig.cmake" ||
  test -n "$(find "$work/prefix" -name tensoropsConfig.cmake)"
# No generated protobuf or kernel header is installed.
if find "$work/prefix/include" -name '*.pb.h' | grep -q .; then
  echo "installed a generated protobuf header" >&2; exit 1
fi

start=$(date +%s)
cmake -S "$example_dir" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log"
cmake --build "$work/build" -j2 >"$work/build.log"
echo "example configured and built in $(( $(date +%s) - start )) s"

"$server" --host=127.0.0.1 --port=0 --metrics_port=0 --http_port=-1 >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
port=
for _ in $(seq 200); do
  port=$(sed -n 's/^tensorops-server listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/server.out")
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || { echo "server did not start: $(cat "$work/server.err")" >&2; exit 1; }

out=$("$work/build/sdk_quickstart" "127.0.0.1:$port")
echo "$out"
grep -q '5 6 4 8 9 7 11 12 10 2 3 1' <<<"$out"
# The installed CLI runs from the prefix (RPATH $ORIGIN/../lib).
"$work/prefix/bin/tensorops" --target "127.0.0.1:$port" health | grep -qx SERVING
# A bad target fails with a non-zero status.
if "$work/build/sdk_quickstart" 127.0.0.1:1 >/dev/null 2>&1; then
  echo "quickstart succeeded against a closed port" >&2; exit 1
fi
echo PASS
