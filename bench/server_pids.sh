# Sourced by the service benchmarks (run_service_bench.sh, rest_table.sh):
# the servers they start are stopped by PID, and only those.
#   PIDS   the PIDs started (the caller appends to it)
#   WORK   the scratch directory, removed at exit unless OUT is set
#   OUT    the caller's --out file ("" when none)
# Sets the EXIT trap (cleanup) and turns INT/TERM into exit 130.
# await_port LOG: waits up to 10 s for "listening on 127.0.0.1:PORT" in LOG
# (a tensorops-server's or echo server's start line) and sets PORT.

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
await_port() {
  local log=$1 i
  for ((i = 0; i < 100; i++)); do
    PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$log" | head -n1)
    [[ -n "$PORT" ]] && return 0
    sleep 0.1
  done
  echo "server did not start:" >&2
  cat "$log" >&2
  return 1
}
