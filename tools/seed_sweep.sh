#!/usr/bin/env bash
# Runs random tests over many seeds, to find the seed a test's bounds or the
# code do not survive (issue 45): each test once per seed FIRST..FIRST+N-1,
# stopping a test at its first failing seed (printed with the command that
# replays it). The C++ tests take TENSOROPS_TEST_SEED (tests/seed.h; the
# kernels' random differential test TENSOROPS_RANDOM_SEED), the Python ones
# their own variable.
#
#   bash tools/seed_sweep.sh [-b BUILD_DIR] [-n N] [-f FIRST] TEST...
#
# TEST is a test binary under the build directory with an optional gtest
# filter (tests/kernels/kernels_roll_test, or
# tests/e2e/flow_stream_test:FlowStreamTest.*), or one of the Python tests
# flow_python_client, chain_python_client, oip_python_client,
# rest_python_client. Prints "TEST: N seeds passed" or the failing seed.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=build
N=200
FIRST=1
while getopts "b:n:f:" o; do
  case $o in
    b) BUILD=$OPTARG ;;
    n) N=$OPTARG ;;
    f) FIRST=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
PY=/usr/bin/python3
SERVER=${SERVER:-$BUILD/server/tensorops-server}  # env SERVER: another binary

# The command of one test, and the variable its seed goes in.
command_of() {
  case $1 in
    flow_python_client) echo "TENSOROPS_FLOW_SEED $PY tests/e2e/flow_python_test.py $SERVER proto" ;;
    chain_python_client) echo "TENSOROPS_CHAIN_SEED $PY tests/e2e/chain_python_test.py $SERVER proto" ;;
    oip_python_client) echo "TENSOROPS_TEST_SEED $PY tests/e2e/oip_python_test.py $SERVER proto" ;;
    rest_python_client) echo "TENSOROPS_TEST_SEED $PY tests/e2e/rest_python_test.py $SERVER" ;;
    *)
      local var=TENSOROPS_TEST_SEED filter=
      [[ $1 == *random_compare_test* ]] && var=TENSOROPS_RANDOM_SEED
      [[ $1 == *:* ]] && filter="--gtest_filter=${1#*:}"
      echo "$var $BUILD/${1%%:*} $filter"
      ;;
  esac
}

status=0
for test in "$@"; do
  read -r var cmd <<<"$(command_of "$test")"
  passed=0
  t0=$SECONDS
  for ((seed = FIRST; seed < FIRST + N; seed++)); do
    if ! env "$var=$seed" $cmd >/tmp/seed_sweep.$$.log 2>&1; then
      echo "$test: FAILED at seed $seed after $passed seeds passed; replay: $var=$seed $cmd"
      tail -30 /tmp/seed_sweep.$$.log
      status=1
      break
    fi
    passed=$((passed + 1))
  done
  [ "$passed" -eq "$N" ] && echo "$test: $N seeds passed ($FIRST..$((FIRST + N - 1)), $((SECONDS - t0)) s)"
done
rm -f /tmp/seed_sweep.$$.log
exit $status
