#!/usr/bin/env bash
# Installs what tensorops needs to build and test, from Debian 12's packages
# (and grpcurl-lite's npm packages for the cookbook tests). Idempotent; run as
# root (or with sudo available). Nothing is downloaded at build time.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null && SUDO="sudo" || { echo "setup.sh: run as root" >&2; exit 1; }
fi

# SETUP_PROFILE=image: only what building the server, CLI and SDK without
# tests and benchmarks needs (the Dockerfile's build stage); this skips clang,
# Node.js, HAProxy and Prometheus, a few hundred packages the image never uses.
PROFILE=${SETUP_PROFILE:-full}
PACKAGES=(
  # toolchain
  g++ cmake ninja-build pkg-config ca-certificates
  # compiler cache (tools/build.sh): the image's build stage reuses the host's
  # objects in the container test
  ccache
  # libraries (see ../shared/toolchain.md)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  prometheus-cpp-dev grpc-proto
  # CRC-32 of streamed tensors: ISA-L computes it, zlib combines parts (and is
  # the tests' independent reference; libgrpc-dev pulls it in too)
  libisal-dev zlib1g-dev
  # the Open Inference Protocol over HTTP (server/http/): Boost.Beast and
  # Boost.Asio (header-only), OpenSSL and RapidJSON (header-only)
  libboost1.74-dev libssl-dev rapidjson-dev
)
case "$PROFILE" in
  image) ;;
  full)
    PACKAGES+=(
      # tests and benchmarks; clang-format: the formatting check
      # (tools/check_format.sh, the ctest test clang_format_check)
      libgtest-dev libgmock-dev libbenchmark-dev clang-format
      # fuzzers and sanitizer builds (fuzz/, tools/sanitizer_tests.sh); llvm-14 holds
      # llvm-symbolizer: without it sanitizer stacks are <null> frames, so
      # tools/tsan.supp (matched by function name) stops matching
      clang libclang-rt-14-dev llvm-14
      # deployment tests (tests/deploy): load balancer, scraper, compose and YAML checks
      haproxy prometheus docker-compose curl python3-yaml
      # h2load: bench/h2load_grpc_vs_rest.sh drives both doors with one client
      nghttp2-client
      # GNU time: CliTest.StreamedNpyToNpyRunsInConstantMemory reads the CLI's
      # peak RSS with /usr/bin/time -f %M (not in a minimal Debian root)
      time
      # security tests: throwaway CA, server and client certificates
      openssl
      # the Open Inference Protocol's independent client test (tests/e2e/oip_python_test.py)
      python3-grpcio python3-grpc-tools python3-numpy
    )
    # Node.js runs grpcurl-lite (the grpcurl stand-in) in the cookbook test. Keep
    # a Node that is already there (some machines carry a newer one with its own npm).
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
      PACKAGES+=(nodejs npm)
    fi
    ;;
  *) echo "setup.sh: SETUP_PROFILE must be full or image, not '$PROFILE'" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
