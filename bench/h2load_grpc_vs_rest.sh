#!/usr/bin/env bash
# gRPC ModelInfer against REST binary infer on one tensorops-server, both
# driven by the same load generator, h2load (Debian's nghttp2-client): the
# Open Inference Protocol's Roll of a 1-D FP32 tensor (shift 1, axis 0) at
# 64 KiB, 1 MiB and 16 MiB with 1 and 8 clients (one connection each, one
# call in flight per connection), printing req/s per door and the ratio
# gRPC / REST (goal: >= 1 at >= 64 KiB, issue 44), and the load average at
# the start and the end: a figure taken while the load is above 1 counts for
# nothing.
#
#   gRPC: POST /inference.GRPCInferenceService/ModelInfer over h2c with
#         content-type: application/grpc and te: trailers, the body a
#         prebuilt length-prefixed ModelInferRequest (raw_input_contents);
#   REST: POST /v2/models/Roll/infer over HTTP/1.1 (h2load --h1), the binary
#         tensor extension: a JSON header (Inference-Header-Content-Length)
#         followed by the tensors' bytes, binary_data_output on.
# Each body is sent once first and its reply checked (gRPC: grpc-status 0 and
# the reply's size; REST: HTTP 200 and the size), since h2load counts a gRPC
# error (HTTP 200 with grpc-status in the trailers) as a success.
#
# Usage: bench/h2load_grpc_vs_rest.sh BUILD_DIR [SECONDS]
#   SECONDS per cell (default 5, after 1 s of warm-up). About 2 minutes.
#   SERVER_FLAGS: more tensorops-server flags (bench/grpc_transport_ab.sh
#   passes --test_only_grpc_channel_args); SIZES: the payloads (default
#   "65536 1048576 16777216"); CLIENTS: the client counts (default "1 8").
# Needs h2load, curl and python3 (tools/setup.sh installs them). Starts the
# server on 127.0.0.1 (free ports) and stops it by PID.
set -euo pipefail
BUILD=${1:?usage: h2load_grpc_vs_rest.sh BUILD_DIR [SECONDS]}
SECONDS_PER_CELL=${2:-5}
SERVER="$BUILD/server/tensorops-server"
[[ -x $SERVER ]] || { echo "h2load_grpc_vs_rest.sh: $SERVER is missing; build it first" >&2; exit 2; }
for tool in h2load curl python3; do
  command -v $tool > /dev/null || { echo "h2load_grpc_vs_rest.sh: $tool is missing (tools/setup.sh)" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/h2load_bench.XXXXXX")
SERVER_PID=""
cleanup() {
  [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2> /dev/null && wait "$SERVER_PID" 2> /dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
"$SERVER" --host=127.0.0.1 --port=0 --http_port=0 --metrics_port=-1 --log_level=warning \
  ${SERVER_FLAGS:-} > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 200); do
  grep -q "http on http://" "$WORK/server.log" 2> /dev/null && break
  sleep 0.1
done
GRPC_PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$WORK/server.log" | head -1)
HTTP_PORT=$(sed -n 's/.*http on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$WORK/server.log" | head -1)
[[ -n $GRPC_PORT && -n $HTTP_PORT ]] || { cat "$WORK/server.log"; echo "server did not start" >&2; exit 1; }

# The bodies: the same three tensors for both doors.
python3 - "$WORK" << 'PY'
import json, struct, sys
work = sys.argv[1]

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)

def field(number, payload):  # length-delimited
    return varint(number << 3 | 2) + varint(len(payload)) + payload

def tensor(name, datatype, shape):
    return (field(1, name.encode()) + field(2, datatype.encode()) +
            field(3, b"".join(varint(d) for d in shape)))

for size in (65536, 1048576, 16777216):
    data = bytes((i * 131) & 0xff for i in range(256)) * (size // 256)
    shift = struct.pack("<q", 1)
    axes = struct.pack("<q", 0)
    inputs = [("data", "FP32", [size // 4], data), ("shift", "INT64", [1], shift),
              ("axes", "INT64", [1], axes)]
    msg = field(1, b"Roll")
    msg += b"".join(field(5, tensor(n, t, s)) for n, t, s, _ in inputs)
    msg += b"".join(field(7, raw) for _, _, _, raw in inputs)
    with open(f"{work}/grpc_{size}.bin", "wb") as f:
        f.write(b"\0" + struct.pack(">I", len(msg)) + msg)
    header = json.dumps({
        "parameters": {"binary_data_output": True},
        "inputs": [{"name": n, "datatype": t, "shape": s,
                    "parameters": {"binary_data_size": len(raw)}} for n, t, s, raw in inputs],
    }, separators=(",", ":")).encode()
    with open(f"{work}/rest_{size}.bin", "wb") as f:
        f.write(header + data + shift + axes)
    with open(f"{work}/rest_{size}.len", "w") as f:
        f.write(str(len(header)))
PY

GRPC_URL="http://127.0.0.1:$GRPC_PORT/inference.GRPCInferenceService/ModelInfer"
REST_URL="http://127.0.0.1:$HTTP_PORT/v2/models/Roll/infer"

# One call per door and size, its reply checked.
check() {
  local size=$1
  curl -sS --http2-prior-knowledge -D "$WORK/grpc.h" -o "$WORK/grpc.out" \
    -H 'content-type: application/grpc' -H 'te: trailers' \
    --data-binary "@$WORK/grpc_$size.bin" "$GRPC_URL"
  grep -qi '^grpc-status: 0' "$WORK/grpc.h" ||
    { cat "$WORK/grpc.h"; echo "gRPC ModelInfer of $size B failed" >&2; exit 1; }
  (($(stat -c %s "$WORK/grpc.out") > size)) || { echo "gRPC reply of $size B too short" >&2; exit 1; }
  local code
  code=$(curl -sS -o "$WORK/rest.out" -w '%{http_code}' \
    -H 'content-type: application/octet-stream' \
    -H "Inference-Header-Content-Length: $(cat "$WORK/rest_$size.len")" \
    --data-binary "@$WORK/rest_$size.bin" "$REST_URL")
  [[ $code == 200 ]] || { head -c 300 "$WORK/rest.out"; echo; echo "REST infer of $size B: HTTP $code" >&2; exit 1; }
  (($(stat -c %s "$WORK/rest.out") > size)) || { echo "REST reply of $size B too short" >&2; exit 1; }
}

# req/s of one h2load run; fails unless every request succeeded.
rate() {
  local out
  out=$(h2load "$@" 2>&1) || { echo "$out" >&2; exit 1; }
  if ! grep -q ' 0 failed, 0 errored, 0 timeout' <<< "$out"; then
    echo "$out" | grep -E 'requests:|status codes:' >&2
    echo "h2load: some requests failed" >&2
    exit 1
  fi
  sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' <<< "$out"
}

printf '%-10s %3s %12s %12s %8s\n' size c grpc_req/s rest_req/s grpc/rest
for size in ${SIZES:-65536 1048576 16777216}; do
  check "$size"
  for c in ${CLIENTS:-1 8}; do
    common=(-c "$c" -m 1 -D "$SECONDS_PER_CELL" --warm-up-time=1)
    g=$(rate "${common[@]}" -d "$WORK/grpc_$size.bin" \
      -H 'content-type: application/grpc' -H 'te: trailers' "$GRPC_URL")
    r=$(rate --h1 "${common[@]}" -d "$WORK/rest_$size.bin" \
      -H 'content-type: application/octet-stream' \
      -H "Inference-Header-Content-Length: $(cat "$WORK/rest_$size.len")" "$REST_URL")
    printf '%-10s %3s %12s %12s %8s\n' "$size" "$c" "$g" "$r" \
      "$(python3 -c "print(f'{$g / $r:.2f}x' if $r > 0 else '-')")"
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
