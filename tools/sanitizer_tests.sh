#!/usr/bin/env bash
# Sanitizer builds and runs, each in its own build directory (after
# tools/test.sh; needs clang + libclang-rt-14-dev from tools/setup.sh):
#   build-asan  clang++, RelWithDebInfo, -DTENSOROPS_FUZZ=ON: the whole build
#               with -fsanitize=address, the project's own code also with
#               UBSan and libFuzzer's coverage hooks (CMakeLists.txt; the
#               same tree also holds the fuzzers); runs the
#               whole ctest suite with leak detection and UBSan halting on
#               the first report, then fuzz/run_fuzzers.sh if FUZZ_SECONDS > 0.
#   build-tsan  clang++, -fsanitize=thread: builds only the server and the
#               test binaries of the tests where threads meet (TSAN_TARGETS)
#               and runs those tests (TSAN_TESTS) with tools/tsan.supp.
# Env: ASAN_DIR, TSAN_DIR (build dirs), FUZZ_SECONDS (default 60; 0 skips),
#      SANITIZERS ("asan tsan" by default), JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
JOBS=${JOBS:-2}
ASAN_DIR=${ASAN_DIR:-build-asan}
TSAN_DIR=${TSAN_DIR:-build-tsan}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
SANITIZERS=${SANITIZERS:-asan tsan}
GL_SRC=../shared/tools/grpcurl-lite

stamp() { echo "sanitizer_tests: $* ($(date +%T))"; }

# ccache as tools/build.sh uses it (a first build gains nothing; a second one,
# or another checkout of the same sources, does).
LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_C_COMPILER_LAUNCHER=)
if [ "${TENSOROPS_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT}
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  export LANG=C.UTF-8  # one locale in the keys (tools/build.sh says why)
  unset LC_ALL LC_CTYPE LC_MESSAGES
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi

# The sanitizers symbolize stacks with llvm-symbolizer. Without it every frame
# is <null>, the function-name suppressions of tools/tsan.supp and lsan.supp
# stop matching, and tests fail for reasons that have nothing to do with them:
# refuse to run instead (tools/setup.sh installs llvm-14).
SYMBOLIZER=$(command -v llvm-symbolizer || command -v llvm-symbolizer-14 ||
  { [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ] && echo /usr/lib/llvm-14/bin/llvm-symbolizer; } ||
  true)
if [ -z "$SYMBOLIZER" ]; then
  echo "sanitizer_tests: llvm-symbolizer not found (Debian package llvm-14; run tools/setup.sh):" \
    "sanitizer reports would have no function names and tools/*.supp would not match" >&2
  exit 2
fi
export ASAN_SYMBOLIZER_PATH=$SYMBOLIZER
export TSAN_SYMBOLIZER_PATH=$SYMBOLIZER

# grpcurl-lite for the README cookbook test (as tools/test.sh does).
grpcurl_lite() {
  if [ -d "$GL_SRC" ]; then
    mkdir -p "$1/grpcurl-lite"
    cp "$GL_SRC/grpcurl.js" "$GL_SRC/package.json" "$1/grpcurl-lite/"
    if [ ! -d "$1/grpcurl-lite/node_modules/@grpc/grpc-js" ]; then
      if [ -d "${BUILD_DIR:-build}/grpcurl-lite/node_modules" ]; then
        cp -r "${BUILD_DIR:-build}/grpcurl-lite/node_modules" "$1/grpcurl-lite/"
      else
        (cd "$1/grpcurl-lite" && npm install --no-audit --no-fund --loglevel=error)
      fi
    fi
  fi
}

# -O1 and line tables only (file:line in every report, no variable info): the
# usual flags for sanitizer builds, and ~25% less compile time than
# RelWithDebInfo's -O2 -g (server/http/http_server.cc under ASan: 239 s ->
# 179 s with clang 14), in two builds of CI.
SAN_FLAGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG")

if [[ " $SANITIZERS " == *" asan "* ]]; then
  stamp "ASan+UBSan: configure and build $ASAN_DIR"
  cmake -S . -B "$ASAN_DIR" -G Ninja -DCMAKE_CXX_COMPILER=clang++ "${LAUNCHER[@]}" \
    "${SAN_FLAGS[@]}" -DTENSOROPS_FUZZ=ON -DTENSOROPS_BUILD_BENCH=OFF >/dev/null
  cmake --build "$ASAN_DIR" -j "$JOBS"
  grpcurl_lite "$ASAN_DIR"
  stamp "ASan+UBSan: ctest (whole suite)"
  (
    cd "$ASAN_DIR"
    export ASAN_OPTIONS=external_symbolizer_path=$SYMBOLIZER:detect_leaks=1:abort_on_error=0:strict_string_checks=1
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    export LSAN_OPTIONS=suppressions=$ROOT/tools/lsan.supp
    # sdk_install_quickstart builds an outside project against the installed
    # SDK with plain flags, which cannot link an ASan-instrumented library;
    # deploy_static_checks compares the binaries' libraries with the runtime
    # image's, and ASan binaries link extra ones.
    # Label "large" (2.5 GiB tensors through every op) runs in the main suite
    # only: under ASan it would need twice the memory and ten times the time.
    # Label "container" too: it builds and runs the image from source with
    # the plain toolchain, so this build's instrumentation never reaches it.
    # Labels "memlimit" (a server in a 1 GiB memory cgroup) and "soak" (2
    # minutes, RSS checked): ASan's shadow memory and quarantine are not the
    # product's memory use, and the soak would add minutes for little.
    # The random differential test per forced ISA (kernels_random_compare_test
    # .isa_*, a minute each under ASan) runs here only at the machine's own
    # ISA: the forced ones' results are checked in the main suite, and their
    # memory accesses are those of the kernels' unit tests per ISA (kept).
    ctest --output-on-failure -j "$JOBS" --timeout 900 -LE '^(large|container|memlimit|soak|speed)$' \
      -E '^(sdk_install_quickstart|deploy_static_checks|kernels_random_compare_test\.isa_.*)$'
  )
  if [ "$FUZZ_SECONDS" -gt 0 ]; then
    stamp "fuzzers: ${FUZZ_SECONDS}s each"
    bash fuzz/run_fuzzers.sh "$ASAN_DIR" "$FUZZ_SECONDS"
  fi
fi

# The TSan stage: the tests where threads meet, and only the ninja targets
# they need (no CLI, no tests of one thread's logic: the build is most of the
# stage's time). By area:
#   kernel pool        kernels_thread_pool_test (ThreadPoolTest)
#   admission, calls   admission_test, call_test (the call lifecycle on the
#                      pool), overload_test, service_e2e_test (concurrent
#                      clients, queue and budget refusals, SIGTERM under load)
#   drain              drain_test (SIGTERM under unary and streamed load)
#   stream reactor     stream_protocol_test (StreamProtocol/Admission/Stall)
#   flowing streams    flow_stream_test (FlowStream/Admission/Drain/Quota),
#                      flow_python_client
#   SDK streams and    client_test (async calls from many threads, resends to
#   resends            a second server, refusal retries), retry_test,
#                      stream_client_test
#   HTTP transport     rest_admission_e2e_test, http_limits_e2e_test, http_flood
#   span exporter      span_export_test (calls' Export against the export
#                      thread; its queue on std::mutex, which TSan sees)
#   the OIP door       oip_e2e_test (calls racing Unregister), oip_python_client
TSAN_TARGETS=(tensorops-server kernels_thread_pool_test admission_test call_test
  overload_test service_e2e_test drain_test stream_protocol_test
  flow_stream_test client_test retry_test stream_client_test rest_admission_e2e_test
  http_limits_e2e_test oip_e2e_test span_export_test)
TSAN_SUITES="ThreadPoolTest|AdmissionTest|CallTest|OverloadTest|ServiceE2ETest"
TSAN_SUITES+="|DrainTest|StreamProtocolTest|StreamAdmissionTest|StreamStallTest|FlowStreamTest"
TSAN_SUITES+="|FlowAdmissionTest|FlowDrainTest|FlowQuotaTest|ClientTest|ClientOptionsTest"
TSAN_SUITES+="|TwoServersTest|RefusalRetryTest|RetryTest|StreamClientTest|StreamClientOptionsTest"
TSAN_SUITES+="|RestAdmissionE2ETest|HttpLimitsE2ETest|OipE2ETest|SpanExportTest"
TSAN_TESTS="^($TSAN_SUITES)\.|^(flow_python_client|oip_python_client|http_flood)\$"

if [[ " $SANITIZERS " == *" tsan "* ]]; then
  stamp "TSan: configure and build $TSAN_DIR"
  cmake -S . -B "$TSAN_DIR" -G Ninja -DCMAKE_CXX_COMPILER=clang++ "${LAUNCHER[@]}" \
    "${SAN_FLAGS[@]}" -DTENSOROPS_BUILD_BENCH=OFF \
    "-DCMAKE_CXX_FLAGS=-fsanitize=thread -fno-omit-frame-pointer" \
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread" \
    "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread" >/dev/null
  cmake --build "$TSAN_DIR" -j "$JOBS" --target "${TSAN_TARGETS[@]}"
  stamp "TSan: concurrency tests"
  (
    cd "$TSAN_DIR"
    export TSAN_OPTIONS="external_symbolizer_path=$SYMBOLIZER:suppressions=$ROOT/tools/tsan.supp:halt_on_error=1:second_deadlock_stack=1:history_size=4"
    ctest --output-on-failure -j "$JOBS" --timeout 900 -R "$TSAN_TESTS"
  )
fi
stamp "done"
