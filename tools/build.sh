#!/usr/bin/env bash
# Configures and builds everything into ./build (override with BUILD_DIR);
# arguments go to `cmake --build`, e.g. --target tensorops-server.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# BUILD_ARGS: extra cmake arguments, e.g. "-DTENSOROPS_BUILD_TESTS=OFF -DTENSOROPS_BUILD_BENCH=OFF"
# (the Dockerfile's build stage); empty by default.
# ccache, when installed (tools/setup.sh installs it) and TENSOROPS_CCACHE is
# not 0. CCACHE_BASEDIR (the checkout, unless set) and CCACHE_NOHASHDIR make
# the cache's keys free of the checkout's path, so another checkout of the same
# sources hits the entries this one made: the Dockerfile's build stage at /src
# (tests/containers mounts the host's cache into it; build dir /src/build, as
# ./build here) compiles in a minute what took a quarter of an hour.
LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_C_COMPILER_LAUNCHER=)
if [ "${TENSOROPS_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)}
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  # ccache keys hold LANG and LC_* (they change the compiler's messages): one
  # locale for every build, so a machine with LANG=C.UTF-8 and an image with
  # no LANG share entries (they did not: 0 of 72 image objects hit).
  export LANG=C.UTF-8
  unset LC_ALL LC_CTYPE LC_MESSAGES
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
  "${LAUNCHER[@]}" ${BUILD_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" "$@"
