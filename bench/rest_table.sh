#!/usr/bin/env bash
# HTTP/REST against gRPC on the same server (BENCHMARKS.md "HTTP/REST"):
#
#   1. Triton's binary tensor extension (load_tool --target=rest) against the
#      Open Inference Protocol's gRPC ModelInfer (--target=oip) for the same
#      Roll of a 1-D FP32 tensor, payload x concurrency, alternated per round
#      (AB BA ...) on one tensorops-server (gRPC and HTTP ports of the same
#      process). Goal: rest >= 0.8x the calls/s of ModelInfer.
#   2. JSON both ways (--target=rest_json) for a 16 MiB FP32 tensor at
#      concurrency 1 against a server with one kernel thread (--threads=1):
#      MB/s of JSON text received (request) and sent (reply). Goal: >= 100 MB/s
#      each way.
#
# Usage: bench/rest_table.sh [--quick] [--rounds=N] [--out=FILE.jsonl] BUILD_DIR
# BUILD_DIR holds server/tensorops-server and bench/load_tool; nothing is built.
#   full:    64 B, 4 KiB, 64 KiB, 1 MiB, 16 MiB x concurrency 1, 8, 64, 2
#            rounds (0.7 s after 0.3 s warm-up; 16 MiB 2 s after 0.5 s, at
#            concurrency 64 6 s after 2 s), then the JSON cell: about 3 minutes.
#   --quick: a CI smoke of a few seconds (no thresholds): 64 B and 64 KiB at
#            concurrency 1 and 8, JSON at 64 KiB, every reply verified.
# Exit status: non-zero if a load_tool run fails (cannot connect, a reply
# fails verification, no call succeeds) or the server dies; the goals are
# reported, not enforced.
set -u -o pipefail

QUICK=0
ROUNDS=""
OUT=""
BUILD=""
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --rounds=*) ROUNDS="${arg#--rounds=}" ;;
    --out=*) OUT="${arg#--out=}" ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    -*) echo "rest_table.sh: unknown option $arg" >&2; exit 2 ;;
    *) BUILD="$arg" ;;
  esac
done
[[ -n "$BUILD" ]] || { echo "usage: rest_table.sh [--quick] [--rounds=N] [--out=FILE] BUILD_DIR" >&2; exit 2; }
SERVER="$BUILD/server/tensorops-server"
LOAD_TOOL="$BUILD/bench/load_tool"
for bin in "$SERVER" "$LOAD_TOOL"; do
  [[ -x "$bin" ]] || { echo "rest_table.sh: $bin is missing; build it first" >&2; exit 2; }
done

MIB=1048576
if [[ $QUICK == 1 ]]; then
  PAYLOADS=(64 65536)
  CONCURRENCY=(1 8)
  ROUNDS=${ROUNDS:-1}
  JSON_PAYLOAD=65536
else
  PAYLOADS=(64 4096 65536 1048576 16777216)
  CONCURRENCY=(1 8 64)
  ROUNDS=${ROUNDS:-2}
  JSON_PAYLOAD=$((16 * MIB))
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rest_bench.XXXXXX")
RESULTS="${OUT:-$WORK/results.jsonl}"
: > "$RESULTS"
FAILED=0
# stop_pid, cleanup at exit (PIDS, WORK, OUT).
source "$(dirname "$0")/server_pids.sh"

# start_server ARGS... : sets PID, GRPC_PORT, HTTP_PORT from the start lines.
STARTS=0
start_server() {
  STARTS=$((STARTS + 1))
  local log="$WORK/server.$STARTS.out" i
  "$SERVER" --host=127.0.0.1 --port=0 --metrics_port=-1 --http_host=127.0.0.1 --http_port=0 \
    --log_level=warning "$@" > "$log" 2> "$WORK/server.err" &
  PID=$!
  PIDS+=("$PID")
  GRPC_PORT="" HTTP_PORT=""
  for ((i = 0; i < 100; i++)); do
    GRPC_PORT=$(sed -n 's/.* listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$log" | head -n1)
    HTTP_PORT=$(sed -n 's|.* http on http://127\.0\.0\.1:\([0-9][0-9]*\)$|\1|p' "$log" | head -n1)
    [[ -n "$GRPC_PORT" && -n "$HTTP_PORT" ]] && return 0
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "rest_table.sh: tensorops-server did not start:" >&2
  cat "$WORK/server.err" >&2
  exit 1
}

# run TARGET PAYLOAD CONCURRENCY LOAD_TOOL_ARGS...
run() {
  local target=$1 payload=$2 conc=$3; shift 3
  local port=$GRPC_PORT
  [[ $target == rest* ]] && port=$HTTP_PORT
  local line
  line=$("$LOAD_TOOL" --target="$target" --op=roll --address="127.0.0.1:$port" \
    --payload_bytes="$payload" --concurrency="$conc" "$@")
  local rc=$?
  [[ -n "$line" ]] && echo "$line" >> "$RESULTS"
  if [[ $rc != 0 ]]; then
    echo "rest_table.sh: load_tool failed ($rc): $target payload=$payload c=$conc" >&2
    FAILED=1
  fi
  kill -0 "$PID" 2>/dev/null || { echo "rest_table.sh: the server died" >&2; cat "$WORK/server.err" >&2; exit 1; }
}

# awk functions reading a field of a load_tool JSON line: num(key), str(key).
AWK_FIELDS='
  function num(key) {
    if (match($0, "\"" key "\":[-0-9.e+]+")) return substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3) + 0
    return 0
  }
  function str(key) {
    if (match($0, "\"" key "\":\"[^\"]*\"")) return substr($0, RSTART + length(key) + 4, RLENGTH - length(key) - 5)
    return ""
  }
'

echo "# REST benchmark: rounds=$ROUNDS quick=$QUICK"
echo "# host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
start_server
cell=0
for payload in "${PAYLOADS[@]}"; do
  for conc in "${CONCURRENCY[@]}"; do
    if [[ $QUICK == 1 ]]; then
      args=(--warmup_seconds=0.05 --duration_seconds=0.25 --verify_every=1)
    elif [[ $payload -ge $((16 * MIB)) && $conc -ge 64 ]]; then
      # 64 calls of 16 MiB in flight take 1-3 s each: a 2 s window measured
      # one or two of them (and the first rounds' fresh pages).
      args=(--warmup_seconds=2 --duration_seconds=6 --verify_every=4)
    elif [[ $payload -ge $((16 * MIB)) ]]; then
      args=(--warmup_seconds=0.5 --duration_seconds=2 --verify_every=4)
    else
      args=(--warmup_seconds=0.3 --duration_seconds=0.7 --verify_every=16)
    fi
    for ((r = 0; r < ROUNDS; r++)); do
      if (((cell + r) % 2 == 0)); then order=(oip rest); else order=(rest oip); fi
      for target in "${order[@]}"; do run "$target" "$payload" "$conc" "${args[@]}"; done
    done
    cell=$((cell + 1))
  done
done
stop_pid "$PID"

echo
echo "## REST (binary tensor extension) / gRPC ModelInfer, Roll of FP32, same server"
awk "$AWK_FIELDS"'
  function human(b) {
    if (b >= 1048576) return (b / 1048576) " MiB"
    if (b >= 1024) return (b / 1024) " KiB"
    return b " B"
  }
  str("target") == "rest" || str("target") == "oip" {
    t = str("target"); k = num("payload_bytes") SUBSEP num("concurrency")
    if (!(k in seen)) { seen[k] = 1; order[++n] = k }
    calls[k, t] += num("calls"); secs[k, t] += num("seconds")
    p50[k, t] += num("p50_us"); p99[k, t] += num("p99_us"); runs[k, t]++
    errs[k, t] += num("errors")
  }
  END {
    print "| payload | conc | gRPC rps | REST rps | REST / gRPC | gRPC p50 us | REST p50 us | gRPC p99 us | REST p99 us | errors g/r | >= 0.8x |"
    print "|---|---|---|---|---|---|---|---|---|---|---|"
    misses = 0
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, kk, SUBSEP)
      g = secs[k, "oip"] > 0 ? calls[k, "oip"] / secs[k, "oip"] : 0
      r = secs[k, "rest"] > 0 ? calls[k, "rest"] / secs[k, "rest"] : 0
      ratio = (g > 0 ? r / g : 0)
      met = ratio >= 0.8 ? "yes" : "NO"
      if (met != "yes") misses++
      printf "| %s | %d | %.0f | %.0f | %.2fx | %.0f | %.0f | %.0f | %.0f | %d/%d | %s |\n", human(kk[1]), kk[2], g, r, ratio,
        p50[k, "oip"] / runs[k, "oip"], p50[k, "rest"] / runs[k, "rest"],
        p99[k, "oip"] / runs[k, "oip"], p99[k, "rest"] / runs[k, "rest"], errs[k, "oip"], errs[k, "rest"], met
    }
    printf "\ncells under 0.8x: %d of %d\n", misses, n
  }' "$RESULTS"

# JSON: one kernel thread, concurrency 1.
start_server --threads=1
if [[ $QUICK == 1 ]]; then
  jargs=(--warmup_seconds=0.05 --duration_seconds=0.5 --verify_every=1)
else
  jargs=(--warmup_seconds=1 --duration_seconds=6 --verify_every=1000)
fi
run rest_json "$JSON_PAYLOAD" 1 "${jargs[@]}"
stop_pid "$PID"
echo
echo "## JSON both ways, FP32 Roll, concurrency 1, --threads=1"
awk "$AWK_FIELDS"'
  /"target":"rest_json"/ {
    rps = num("rps"); q = num("request_bytes"); a = num("reply_bytes")
    print "| tensor | request JSON MB | reply JSON MB | calls/s | ms/call | request MB/s | reply MB/s | >= 100 MB/s each way |"
    print "|---|---|---|---|---|---|---|---|"
    printf "| %g KiB FP32 | %.1f | %.1f | %.2f | %.0f | %.0f | %.0f | %s |\n", num("payload_bytes") / 1024, q / 1e6, a / 1e6, rps,
      (rps > 0 ? 1000 / rps : 0), q * rps / 1e6, a * rps / 1e6, (q * rps >= 1e8 && a * rps >= 1e8) ? "yes" : "NO"
  }' "$RESULTS"
echo
echo "# raw results: $RESULTS$([[ -z "$OUT" ]] && echo ' (temporary; pass --out=FILE to keep)')"
if [[ $FAILED != 0 ]]; then
  echo "rest_table.sh: some load_tool runs failed (see above)" >&2
  exit 1
fi
exit 0
