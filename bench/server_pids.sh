# Sourced by the service benchmarks (run_service_bench.sh, rest_table.sh):
# the servers they start are stopped by PID, and only those.
#   PIDS   the PIDs started (the caller appends to it)
#   WORK   the scratch directory, removed at exit unless OUT is set
#   OUT    the caller's --out file ("" when none)
# Sets the EXIT trap (cleanup) and turns INT/TERM into exit 130.

PIDS=()

stop_pid() {  # SIGTERM, then SIGKILL after 15 s; only the PIDs we started.
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 150; i++)); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  PIDS=()
  [[ -z "$OUT" ]] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
