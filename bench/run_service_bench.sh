#!/usr/bin/env bash
# Service benchmark: tensorops-server against a bare gRPC echo server
# (bench/echo_server.cc), run interleaved in the same script on 127.0.0.1,
# reported as ratios (tensorops / echo) of throughput and p99 latency, plus
# the peak server RSS under 64 concurrent 16 MiB requests. Each cell runs the
# same tensor and op as `Execute` (target tensorops) and as the Open
# Inference Protocol's `ModelInfer` (target oip, same server and port), each
# against the echo.
#
# Usage: bench/run_service_bench.sh [--quick] [--op=roll|reverse] [--rounds=N]
#                                   [--out=FILE.jsonl] [--tensorops_server=PATH]
#                                   [--tensorops_env=VAR=VALUE]... BUILD_DIR
# Builds nothing: BUILD_DIR must hold server/tensorops-server,
# bench/echo_server and bench/load_tool (cmake --build BUILD_DIR --target
# tensorops-server echo_server load_tool).
#
#   full grid: payloads 64 B, 4 KiB, 64 KiB, 1 MiB, 16 MiB x concurrency 1, 8,
#              64; each cell runs echo and tensorops alternately (AB BA AB BA
#              over --rounds=4), 0.7 s measured after 0.3 s warm-up per run
#              (16 MiB: half the rounds, 3 s after 1 s); about 3-4 minutes.
#   --quick:   a CI smoke of a few seconds (no thresholds): 64 B, 64 KiB and
#              1 MiB at concurrency 1 and 8, every reply verified.
#
# --tensorops_server and --tensorops_env (repeatable; e.g.
# --tensorops_env=GLIBC_TUNABLES=glibc.malloc.arena_max=1) try a patched build
# or allocator settings on tensorops-server only; echo stays the bare baseline.
#
# Exit status: non-zero if a load_tool run fails (cannot connect, a reply
# fails verification, or no call succeeds) or a server dies; the targets
# (>= 0.85x echo throughput, p99 <= 1.3x echo) are reported, not enforced.
set -u -o pipefail

QUICK=0
OP=roll
ROUNDS=""
OUT=""
BUILD=""
TENV=()
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --op=*) OP="${arg#--op=}" ;;
    --rounds=*) ROUNDS="${arg#--rounds=}" ;;
    --out=*) OUT="${arg#--out=}" ;;
    --tensorops_server=*) TENSOROPS_SERVER_OVERRIDE="${arg#--tensorops_server=}" ;;
    --tensorops_env=*) TENV+=("${arg#--tensorops_env=}") ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    -*) echo "run_service_bench.sh: unknown option $arg" >&2; exit 2 ;;
    *) BUILD="$arg" ;;
  esac
done
if [[ -z "$BUILD" ]]; then
  echo "usage: run_service_bench.sh [--quick] [--op=roll|reverse] [--rounds=N] [--out=FILE] BUILD_DIR" >&2
  exit 2
fi
TENSOROPS_SERVER="${TENSOROPS_SERVER_OVERRIDE:-$BUILD/server/tensorops-server}"
ECHO_SERVER="$BUILD/bench/echo_server"
LOAD_TOOL="$BUILD/bench/load_tool"
for bin in "$TENSOROPS_SERVER" "$ECHO_SERVER" "$LOAD_TOOL"; do
  if [[ ! -x "$bin" ]]; then
    echo "run_service_bench.sh: $bin is missing; build it first (this script builds nothing)" >&2
    exit 2
  fi
done

# Both servers and the client use the same message limit (tensorops' default).
MAX_MSG=285212672
MIB=1048576
if [[ $QUICK == 1 ]]; then
  PAYLOADS=(64 65536 1048576)
  CONCURRENCY=(1 8)
  ROUNDS=${ROUNDS:-1}
  MEM_PAYLOAD=$MIB
  MEM_CONC=8
else
  PAYLOADS=(64 4096 65536 1048576 16777216)
  CONCURRENCY=(1 8 64)
  ROUNDS=${ROUNDS:-4}
  MEM_PAYLOAD=$((16 * MIB))
  MEM_CONC=64
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/service_bench.XXXXXX")
RESULTS="${OUT:-$WORK/results.jsonl}"
: > "$RESULTS"
FAILED=0
# stop_pid, cleanup at exit (PIDS, WORK, OUT).
source "$(dirname "$0")/server_pids.sh"

# start_server NAME CMD... : sets SERVER_PID and SERVER_PORT from the
# "listening on HOST:PORT" line.
STARTS=0
start_server() {
  local name=$1; shift
  STARTS=$((STARTS + 1))
  local log="$WORK/$name.$STARTS.out" i  # a new file per start: never read a stale port
  "$@" > "$log" 2> "$WORK/$name.err" &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  SERVER_PORT=""
  for ((i = 0; i < 100; i++)); do
    SERVER_PORT=$(sed -n 's/.* listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$log" 2>/dev/null | head -n1)
    [[ -n "$SERVER_PORT" ]] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "run_service_bench.sh: $name did not start:" >&2
  cat "$WORK/$name.err" >&2
  exit 1
}

start_servers() {
  start_server tensorops env ${TENV[@]+"${TENV[@]}"} "$TENSOROPS_SERVER" --host=127.0.0.1 --port=0 --metrics_port=0 --http_port=-1 \
    --max_message_bytes=$MAX_MSG --log_level=warning
  T_PID=$SERVER_PID T_PORT=$SERVER_PORT
  start_server echo "$ECHO_SERVER" --host=127.0.0.1 --port=0 --max_message_bytes=$MAX_MSG
  E_PID=$SERVER_PID E_PORT=$SERVER_PORT
}

stop_servers() {
  stop_pid "$T_PID"
  stop_pid "$E_PID"
  PIDS=()
}

# run_cell TARGET PAYLOAD CONCURRENCY EXTRA_ARGS...
run_cell() {
  local target=$1 payload=$2 conc=$3; shift 3
  local port pid
  if [[ $target == echo ]]; then port=$E_PORT pid=$E_PID; else port=$T_PORT pid=$T_PID; fi
  local tname=$target
  [[ $target == oip ]] && tname=tensorops
  local line cpu0 cpu1 flt0 flt1
  read -r cpu0 flt0 < <(proc_stat "$pid")
  line=$("$LOAD_TOOL" --target="$target" --op="$OP" --address="127.0.0.1:$port" \
    --payload_bytes="$payload" --concurrency="$conc" --max_message_bytes=$MAX_MSG "$@")
  local rc=$?
  read -r cpu1 flt1 < <(proc_stat "$pid")
  if [[ -n "$line" ]]; then
    # Add the server's CPU time and minor page faults per call (warm-up included).
    line=$(awk -v line="$line" -v cpu=$((cpu1 - cpu0)) -v flt=$((flt1 - flt0)) -v hz="$CLK_TCK" 'BEGIN {
      n = 0
      if (match(line, /"warmup_calls":[0-9]+/)) n += substr(line, RSTART + 15, RLENGTH - 15)
      if (match(line, /"calls":[0-9]+/)) n += substr(line, RSTART + 8, RLENGTH - 8)
      if (n < 1) n = 1
      sub(/}$/, sprintf(",\"server_cpu_us_per_call\":%.1f,\"server_faults_per_call\":%.1f}", cpu * 1e6 / hz / n, flt / n), line)
      print line
    }')
    echo "$line" >> "$RESULTS"
  fi
  if [[ $rc != 0 ]]; then
    echo "run_service_bench.sh: load_tool failed ($rc): $target payload=$payload c=$conc" >&2
    FAILED=1
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "run_service_bench.sh: the $tname server died" >&2
    cat "$WORK/$tname.err" >&2
    exit 1
  fi
}

CLK_TCK=$(getconf CLK_TCK)
proc_stat() {  # proc_stat PID -> "utime+stime ticks" "minor faults"
  awk '{print $14 + $15, $10}' "/proc/$1/stat"
}

vm_kib() {  # vm_kib PID FIELD -> KiB
  awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"
}

echo "# service benchmark: op=$OP rounds=$ROUNDS quick=$QUICK max_message_bytes=$MAX_MSG"
echo "# host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
start_servers
echo "# tensorops-server pid $T_PID port $T_PORT; echo_server pid $E_PID port $E_PORT"

cell=0
for payload in "${PAYLOADS[@]}"; do
  for conc in "${CONCURRENCY[@]}"; do
    cell_rounds=$ROUNDS
    if [[ $QUICK == 1 ]]; then
      args=(--warmup_seconds=0.05 --duration_seconds=0.25 --verify_every=1)
    elif [[ $payload -ge $((16 * MIB)) ]]; then
      args=(--warmup_seconds=1 --duration_seconds=3 --verify_every=4)
      cell_rounds=$(((ROUNDS + 1) / 2))
    else
      args=(--warmup_seconds=0.3 --duration_seconds=0.7 --verify_every=16)
    fi
    for ((r = 0; r < cell_rounds; r++)); do
      # Rotate the three targets so that none always runs first or last.
      case $(((cell + r) % 3)) in
        0) order=(echo tensorops oip) ;;
        1) order=(tensorops oip echo) ;;
        *) order=(oip echo tensorops) ;;
      esac
      for target in "${order[@]}"; do run_cell "$target" "$payload" "$conc" "${args[@]}"; done
    done
    cell=$((cell + 1))
  done
done

for T in tensorops oip; do
if [[ $T == tensorops ]]; then what="Execute"; else what="ModelInfer (Open Inference Protocol)"; fi
echo
echo "## Service: $what / echo (op=$OP; rps = calls / seconds over all rounds; p50, p99,"
echo "## server CPU (utime+stime) and minor page faults per call averaged over rounds)"
awk -v T="$T" '
  function num(key,   m) {
    if (match($0, "\"" key "\":[-0-9.e+]+")) return substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3) + 0
    return 0
  }
  function str(key) {
    if (match($0, "\"" key "\":\"[^\"]*\"")) return substr($0, RSTART + length(key) + 4, RLENGTH - length(key) - 5)
    return ""
  }
  function human(b) {
    if (b >= 1048576) return (b / 1048576) " MiB"
    if (b >= 1024) return (b / 1024) " KiB"
    return b " B"
  }
  {
    t = str("target"); k = num("payload_bytes") SUBSEP num("concurrency")
    if (!(k in seen)) { seen[k] = 1; order[++n] = k }
    calls[k, t] += num("calls"); secs[k, t] += num("seconds")
    p99[k, t] += num("p99_us"); p50[k, t] += num("p50_us"); runs[k, t]++
    errs[k, t] += num("errors")
    cpu[k, t] += num("server_cpu_us_per_call"); flt[k, t] += num("server_faults_per_call")
  }
  END {
    print "| payload | conc | echo rps | " T " rps | rps ratio | echo p50 us | " T " p50 us | echo p99 us | " T " p99 us | p99 ratio | server CPU us/call e/t | faults/call e/t | errors e/t | target met |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    misses = 0
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, kk, SUBSEP)
      er = secs[k, "echo"] > 0 ? calls[k, "echo"] / secs[k, "echo"] : 0
      tr = secs[k, T] > 0 ? calls[k, T] / secs[k, T] : 0
      ep = runs[k, "echo"] ? p99[k, "echo"] / runs[k, "echo"] : 0
      tp = runs[k, T] ? p99[k, T] / runs[k, T] : 0
      e5 = runs[k, "echo"] ? p50[k, "echo"] / runs[k, "echo"] : 0
      t5 = runs[k, T] ? p50[k, T] / runs[k, T] : 0
      ec = runs[k, "echo"] ? cpu[k, "echo"] / runs[k, "echo"] : 0
      tc = runs[k, T] ? cpu[k, T] / runs[k, T] : 0
      ef = runs[k, "echo"] ? flt[k, "echo"] / runs[k, "echo"] : 0
      tf = runs[k, T] ? flt[k, T] / runs[k, T] : 0
      rr = er > 0 ? tr / er : 0
      pr = ep > 0 ? tp / ep : 0
      met = "yes"
      if (rr < 0.85 && pr > 1.3) met = "NO: rps, p99"
      else if (rr < 0.85) met = "NO: rps"
      else if (pr > 1.3) met = "NO: p99"
      if (met != "yes") misses++
      printf "| %s | %d | %.0f | %.0f | %.2fx | %.0f | %.0f | %.0f | %.0f | %.2fx | %.0f / %.0f | %.0f / %.0f | %d/%d | %s |\n", \
        human(kk[1]), kk[2], er, tr, rr, e5, t5, ep, tp, pr, ec, tc, ef, tf, errs[k, "echo"], errs[k, T], met
    }
    printf "\ncells missing a target (>= 0.85x echo rps, p99 <= 1.3x echo): %d of %d\n", misses, n
  }' "$RESULTS"
done

# Memory: fresh servers, then MEM_CONC concurrent MEM_PAYLOAD requests; the
# peak RSS (VmHWM) against in-flight request + response bytes.
stop_servers
start_servers
T_IDLE=$(vm_kib "$T_PID" VmRSS) E_IDLE=$(vm_kib "$E_PID" VmRSS)
if [[ $QUICK == 1 ]]; then
  margs=(--warmup_seconds=0.05 --duration_seconds=0.5 --verify_every=1)
else
  margs=(--warmup_seconds=1 --duration_seconds=4 --verify_every=4)
fi
for target in tensorops echo; do
  run_cell "$target" "$MEM_PAYLOAD" "$MEM_CONC" "${margs[@]}"
done
T_HWM=$(vm_kib "$T_PID" VmHWM) E_HWM=$(vm_kib "$E_PID" VmHWM)
awk -v p="$MEM_PAYLOAD" -v c="$MEM_CONC" -v th="$T_HWM" -v eh="$E_HWM" -v ti="$T_IDLE" -v ei="$E_IDLE" 'BEGIN {
  mib = 1048576
  inflight = 2 * p * c / mib          # request + response bytes of all calls in flight
  limit = 2.5 * inflight + 64
  printf "\n## Memory: %d concurrent %.0f MiB requests (in flight: %.0f MiB request + response)\n", c, p / mib, inflight
  print "| server | idle RSS MiB | peak RSS (VmHWM) MiB | peak / (in-flight + 64 MiB) | limit 2.5x in-flight + 64 MiB | met |"
  print "|---|---|---|---|---|---|"
  printf "| tensorops | %.0f | %.0f | %.2fx | %.0f | %s |\n", ti / 1024, th / 1024, th / 1024 / (inflight + 64), limit, th / 1024 <= limit ? "yes" : "NO"
  printf "| echo | %.0f | %.0f | %.2fx | %.0f | %s |\n", ei / 1024, eh / 1024, eh / 1024 / (inflight + 64), limit, eh / 1024 <= limit ? "yes" : "NO"
}'
stop_servers
echo
echo "# raw results: $RESULTS$([[ -z "$OUT" ]] && echo ' (temporary; pass --out=FILE to keep)')"
if [[ $FAILED != 0 ]]; then
  echo "run_service_bench.sh: some load_tool runs failed (see above)" >&2
  exit 1
fi
exit 0
