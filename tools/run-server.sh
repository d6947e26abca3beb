#!/usr/bin/env bash
# Sets everything up, builds, and starts tensorops-server on 127.0.0.1:50051
# (extra arguments go to the server, e.g. --port=0).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target tensorops-server
exec "$BUILD_DIR/server/tensorops-server" "$@"
