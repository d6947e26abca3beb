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
#   load_start NAME N WHAT ARGS...  the load driver ($DRIVER, with ARGS) in
#                      the background, its output in $W/driver-NAME.out;
#                      returns once N calls succeeded (DRIVER_PID set), fails
#                      if the driver ended first
#   load_end NAME WHY  tells that driver to finish ($W/stop-NAME), waits for
#                      it and prints its output; fails with WHY if a call failed
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

load_start() {
  local name=$1 n=$2 what=$3
  shift 3
  "$DRIVER" "$@" --marker "$W/marker-$name" --marker_after "$n" --stop_file "$W/stop-$name" \
    >"$W/driver-$name.out" 2>&1 &
  DRIVER_PID=$!
  PIDS+=("$DRIVER_PID")
  wait_for 60 "the first $n calls of $what" load_marked_or_ended "$name"
  [ -e "$W/marker-$name" ] || fail "$what: the load driver ended early: $(cat "$W/driver-$name.out")"
}
load_marked_or_ended() { [ -e "$W/marker-$1" ] || ! kill -0 "$DRIVER_PID"; }

load_end() {
  touch "$W/stop-$1"
  local rc=0
  wait "$DRIVER_PID" || rc=$?
  sed 's/^/  /' "$W/driver-$1.out"
  [ "$rc" -eq 0 ] || fail "$2"
}
