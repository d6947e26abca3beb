#!/usr/bin/env bash
# Runs every libFuzzer target of a -DTENSOROPS_FUZZ=ON build for SECONDS each,
# starting from the seed corpus in fuzz/corpus/<target>/ (never written to:
# new inputs go to a temporary directory). Builds nothing.
# Exit status is non-zero if any fuzzer crashes, leaks, times out, runs out of
# memory or any sanitizer reports (UBSan halts on the first report).
# Crash reproducers are kept in $FUZZ_ARTIFACTS (default BUILD_DIR/fuzz-artifacts).
# Usage: fuzz/run_fuzzers.sh BUILD_DIR SECONDS
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
BUILD_DIR=$(cd "$1" && pwd) || exit 2
SECONDS_EACH=$2
HERE=$(cd "$(dirname "$0")" && pwd)
ARTIFACTS=${FUZZ_ARTIFACTS:-$BUILD_DIR/fuzz-artifacts}
mkdir -p "$ARTIFACTS"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

status=0
for target in fuzz_execute_bytes fuzz_execute_structured fuzz_execute_stream fuzz_model_infer \
    fuzz_rest_infer; do
  bin=$BUILD_DIR/fuzz/$target
  if [ ! -x "$bin" ]; then
    echo "run_fuzzers: $bin is missing (configure with -DTENSOROPS_FUZZ=ON and build it)" >&2
    status=1
    continue
  fi
  work=$(mktemp -d)
  log=$ARTIFACTS/$target.log
  echo "run_fuzzers: $target for ${SECONDS_EACH}s"
  "$bin" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$ARTIFACTS/$target-" "$work" "$HERE/corpus/$target" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  echo "run_fuzzers: $target exit $rc, ${execs:-?} executions, corpus $(ls "$work" | wc -l) new units"
  if [ $rc -ne 0 ] || grep -qE "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:" "$log"; then
    echo "run_fuzzers: $target FAILED; last lines of $log:" >&2
    tail -60 "$log" >&2
    status=1
  fi
  rm -rf "$work"
done
exit $status
