#!/usr/bin/env bash
# Configures and builds everything into ./build (override with BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# BUILD_ARGS: extra cmake arguments, e.g. "-DTENSOROPS_BUILD_TESTS=OFF -DTENSOROPS_BUILD_BENCH=OFF"
# (the Dockerfile's build stage); empty by default.
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${BUILD_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-2}"
