#!/usr/bin/env bash
# The first run: installs only what building and running the server and the
# CLI needs (tools/setup.sh's SETUP_PROFILE=image: no test toolchain, no
# clang, Node.js, HAProxy or Prometheus), builds tensorops-server and the
# tensorops CLI, says where each is, and starts the server with its defaults:
# gRPC on 127.0.0.1:50051, HTTP/REST on 127.0.0.1:8000, /metrics on
# 127.0.0.1:9464. Extra arguments go to the server, e.g. --port=0.
#
# A build directory that already exists keeps its settings (a developer's
# build/ with tests stays as it is); a new one is configured without tests
# and benchmarks, which this install cannot build. BUILD_DIR, JOBS as
# tools/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
SETUP_PROFILE=${SETUP_PROFILE:-image} bash tools/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
CONFIGURE=()
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  CONFIGURE=(-DTENSOROPS_BUILD_TESTS=OFF -DTENSOROPS_BUILD_BENCH=OFF)
fi
BUILD_ARGS="${BUILD_ARGS:-} ${CONFIGURE[*]}" bash tools/build.sh --target tensorops-server tensorops
echo "run-server.sh: server  $BUILD_DIR/server/tensorops-server (--help lists every flag)"
echo "run-server.sh: CLI     $BUILD_DIR/client/tensorops (e.g. $BUILD_DIR/client/tensorops health)"
exec "$BUILD_DIR/server/tensorops-server" "$@"
