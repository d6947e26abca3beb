#!/usr/bin/env bash
# Sets everything up, builds, and runs every test (ctest). Exit status is
# non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
# stamp: each stage's end and the time since the start, so that a CI log
# shows where the minutes went.
T0=$SECONDS
stamp() { echo "test.sh: $* ($(date +%T), $(((SECONDS - T0) / 60)) min $(((SECONDS - T0) % 60)) s in)"; }
bash tools/setup.sh
stamp "packages installed"
BUILD_DIR=${BUILD_DIR:-build}
export BUILD_DIR
bash tools/build.sh
stamp "built"
# grpcurl-lite (the grpcurl stand-in from ../shared) for the README cookbook test.
GL_SRC=../shared/tools/grpcurl-lite
if [ -d "$GL_SRC" ]; then
  mkdir -p "$BUILD_DIR/grpcurl-lite"
  cp "$GL_SRC/grpcurl.js" "$GL_SRC/package.json" "$BUILD_DIR/grpcurl-lite/"
  if [ ! -d "$BUILD_DIR/grpcurl-lite/node_modules/@grpc/grpc-js" ]; then
    (cd "$BUILD_DIR/grpcurl-lite" && npm install --no-audit --no-fund --loglevel=error)
  fi
fi
# OpenTelemetry's own OTLP .proto files (npm) for the trace test's collector
# stand-in, which decodes the server's http/protobuf spans with them; in the
# source tree (ignored by git), so that every build directory's test finds them.
if [ ! -d tests/e2e/otlp_schema/node_modules/@opentelemetry/otlp-proto-exporter-base/build/protos ]; then
  (cd tests/e2e/otlp_schema && npm install --no-audit --no-fund --loglevel=error --ignore-scripts --no-package-lock)
fi
cd "$BUILD_DIR"
rc=0
# The speed guard (label speed) first and alone, while the machine is quiet
# after the build; it skips itself on a busy machine (docs/development.md).
ctest --output-on-failure -L speed --timeout 600 || rc=$?
stamp "speed guard done (exit $rc)"
ctest --output-on-failure -j "${JOBS:-2}" --timeout 600 -LE '^speed$' || rc=$?
stamp "ctest done (exit $rc)"
exit $rc
