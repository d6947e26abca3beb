# Sourced by the shell-script tests (tests/deploy/local_stack_test.sh,
# tests/containers/compose_test.sh): logging, failing, waiting and stopping
# what the test started, written once.
#   T0         the test's start ($EPOCHREALTIME; set here when unset)
#   PIDS       the PIDs the test started (it appends to it); stop_pids stops
#              those and only those
#   log MSG...         prints MSG with the seconds since T0
#   fail MSG...        prints "FAIL: MSG" and exits 1 (the EXIT trap cleans up)
#   wait_for SECS WHAT CMD...  polls CMD every WAIT_FOR_POLL s (default 0.2)
#                      until it succeeds; fails after SECS naming WHAT
#   free_port          prints a free 127.0.0.1 TCP port
#   stop_pids          SIGTERM to every PID in PIDS, SIGKILL after 5 s
T0=${T0:-$EPOCHREALTIME}
PIDS=()

log() { awk -v t="$EPOCHREALTIME" -v t0="$T0" -v m="$*" 'BEGIN { printf "[%6.1fs] %s\n", t - t0, m }'; }
# FAIL_MESSAGE keeps the reason, for a summary line at the very end of a
# long output (CI shows its tail).
fail() {
  FAIL_MESSAGE="$*"
  echo "FAIL: $*" >&2
  exit 1
}

wait_for() {
  local secs=$1 what=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || fail "timed out after ${secs}s waiting for $what"
    sleep "${WAIT_FOR_POLL:-0.2}"
  done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

stop_pids() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
