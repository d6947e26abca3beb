#!/usr/bin/env python3
"""Captures what both doors of a tensorops-server send back for a fixed set
of requests, as text, so that two builds can be compared byte for byte:

    tools/wire_capture.py OLD_BINARY proto > old.txt
    tools/wire_capture.py NEW_BINARY proto > new.txt
    diff old.txt new.txt      # empty: the wire output did not change

A restructuring that must not change behaviour (issue 39: the doors split,
the gRPC server extracted) is checked this way. Per request it writes the
gRPC status code, message, trailing metadata (binary values in hex) and the
reply's serialized bytes in hex, or the HTTP status, headers and body.
Values that change from run to run are left out or masked: Date headers,
durations in statistics, ports; and the headers `traceparent` and
`server-timing`, which are per call by design.

The server runs with --port=0 --http_port=0 on 127.0.0.1 and is stopped by
its PID. With --config=NAME, extra flags: "token" (a bearer token file),
"pool" (every kernel on the pool), "limits" (small request limits).

usage: wire_capture.py SERVER_BINARY PROTO_DIR [--config=plain|token|pool|limits]
"""
import http.client
import json
import os
import re
import struct
import sys
import tempfile

import grpc
from grpc_tools import protoc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from rest_server import RestServer  # noqa: E402

SERVER, PROTO_DIR = sys.argv[1], sys.argv[2]
CONFIG = next((a.split("=", 1)[1] for a in sys.argv[3:] if a.startswith("--config=")), "plain")
STUBS = tempfile.mkdtemp(prefix="wire-capture-stubs-")
_WKT = os.path.join(os.path.dirname(protoc.__file__), "_proto")
if protoc.main(["protoc", f"-I{PROTO_DIR}", f"-I{_WKT}", f"--python_out={STUBS}",
                os.path.join(PROTO_DIR, "tensorops", "v1", "tensorops.proto"),
                os.path.join(PROTO_DIR, "inference", "grpc_service.proto")]) != 0:
    sys.exit("protoc failed")
sys.path.insert(0, STUBS)
from google.protobuf import struct_pb2  # noqa: E402
from inference import grpc_service_pb2 as ipb  # noqa: E402
from tensorops.v1 import tensorops_pb2 as pb  # noqa: E402

MASKED_HEADERS = {"date", "traceparent", "tracestate", "server-timing"}
TOKEN = "capture-token"


def tensor(dtype, shape, raw):
    return pb.Tensor(dtype=pb.DataType.Value("DATA_TYPE_" + dtype), shape=shape, raw_data=raw)


def i64(*values):
    return struct.pack(f"<{len(values)}q", *values)


def attrs(**kv):
    s = struct_pb2.Struct()
    s.update(kv)
    return s


def execute_cases():
    """(name, ExecuteRequest) pairs: every op, chains, and invalid ones."""
    data = bytes(range(24))
    cases = [
        ("roll", pb.ExecuteRequest(op="Roll", inputs=[
            tensor("UINT8", [4, 6], data), tensor("INT64", [1], i64(1)),
            tensor("INT64", [1], i64(0))])),
        ("reverse index", pb.ExecuteRequest(op="Reverse", attrs=attrs(mode="index"), inputs=[
            tensor("INT16", [3, 4], data), tensor("INT64", [1], i64(1))])),
        ("reverse mask", pb.ExecuteRequest(op="Reverse-1", attrs=attrs(mode="mask"), inputs=[
            tensor("UINT8", [2, 12], data), tensor("BOOL", [2], b"\x01\x00")])),
        ("reverse sequence", pb.ExecuteRequest(
            op="ReverseSequence", attrs=attrs(batch_axis=0, seq_axis=1), inputs=[
                tensor("FLOAT32", [2, 3], data), tensor("INT64", [2], i64(2, 3))])),
        ("onnx reverse sequence", pb.ExecuteRequest(
            op="onnx.ReverseSequence", attrs=attrs(batch_axis=1, time_axis=0), inputs=[
                tensor("INT32", [3, 2], data), tensor("INT64", [2], i64(3, 1))])),
        ("typed float_data", pb.ExecuteRequest(op="Roll", inputs=[
            pb.Tensor(dtype=pb.DataType.Value("DATA_TYPE_FLOAT32"), shape=[3], float_data=[1, 2, 3]),
            tensor("INT64", [], i64(1)), tensor("INT64", [], i64(0))])),
        ("chain", pb.ExecuteRequest(op="Reverse", attrs=attrs(mode="index"), inputs=[
            tensor("UINT8", [4, 6], data), tensor("INT64", [1], i64(0))], then=[
                pb.Step(op="Roll", inputs=[tensor("INT64", [1], i64(2)),
                                           tensor("INT64", [1], i64(1))])])),
        ("unknown op", pb.ExecuteRequest(op="Transpose")),
        ("no inputs", pb.ExecuteRequest(op="Roll")),
        ("bad axis", pb.ExecuteRequest(op="Roll", inputs=[
            tensor("UINT8", [4, 6], data), tensor("INT64", [1], i64(1)),
            tensor("INT64", [1], i64(5))])),
        ("short raw_data", pb.ExecuteRequest(op="Roll", inputs=[
            tensor("UINT8", [4, 7], data), tensor("INT64", [1], i64(1)),
            tensor("INT64", [1], i64(0))])),
        ("unknown attr", pb.ExecuteRequest(op="Roll", attrs=attrs(speed=3), inputs=[
            tensor("UINT8", [4, 6], data), tensor("INT64", [1], i64(1)),
            tensor("INT64", [1], i64(0))])),
        ("bad chain step", pb.ExecuteRequest(op="Roll", inputs=[
            tensor("UINT8", [4, 6], data), tensor("INT64", [1], i64(1)),
            tensor("INT64", [1], i64(0))], then=[pb.Step(op="Reverse")])),
        ("negative dim", pb.ExecuteRequest(op="Roll", inputs=[
            tensor("UINT8", [-1], b""), tensor("INT64", [1], i64(1)),
            tensor("INT64", [1], i64(0))])),
    ]
    return cases


def infer_cases():
    def inp(name, dtype, shape, raw=None, **contents):
        t = ipb.ModelInferRequest.InferInputTensor(name=name, datatype=dtype, shape=shape)
        for k, v in contents.items():
            getattr(t.contents, k).extend(v)
        return t, raw

    def req(model, inputs, **params):
        r = ipb.ModelInferRequest(model_name=model, id="capture")
        for t, raw in inputs:
            r.inputs.append(t)
            if raw is not None:
                r.raw_input_contents.append(raw)
        for k, v in params.items():
            r.parameters[k].string_param = v
        return r

    roll = [inp("data", "UINT8", [2, 3], bytes(range(6))), inp("shift", "INT64", [1], i64(1)),
            inp("axes", "INT64", [1], i64(1))]
    return [
        ("infer roll", req("Roll", roll)),
        ("infer typed", req("Roll", [inp("data", "INT32", [3], int_contents=[1, 2, 3]),
                                     inp("shift", "INT64", [1], int64_contents=[1]),
                                     inp("axes", "INT64", [1], int64_contents=[0])])),
        ("infer unknown model", req("Nope", roll)),
        ("infer missing input", req("Roll", roll[:2])),
        ("infer bad then", req("Roll", roll, then="[{")),
    ]


def grpc_calls(channel, metadata):
    """(method, request bytes) for every unary RPC of both services."""
    calls = [(f"/tensorops.v1.TensorOps/Execute [{n}]", r.SerializeToString())
             for n, r in execute_cases()]
    calls.append(("/tensorops.v1.TensorOps/ListOps", pb.ListOpsRequest().SerializeToString()))
    calls.append(("/tensorops.v1.TensorOps/Execute [garbage bytes]", b"\xff\xff\xff"))
    svc = "/inference.GRPCInferenceService/"
    calls += [(f"{svc}ModelInfer [{n}]", r.SerializeToString()) for n, r in infer_cases()]
    for method, request in [
            ("ServerLive", ipb.ServerLiveRequest()), ("ServerReady", ipb.ServerReadyRequest()),
            ("ModelReady", ipb.ModelReadyRequest(name="Roll")),
            ("ModelReady", ipb.ModelReadyRequest(name="Nope")),
            ("ServerMetadata", ipb.ServerMetadataRequest()),
            ("ModelMetadata", ipb.ModelMetadataRequest(name="ReverseSequence")),
            ("ModelMetadata", ipb.ModelMetadataRequest(name="Roll", version="2")),
            ("RepositoryIndex", ipb.RepositoryIndexRequest()),
            ("SystemSharedMemoryStatus", ipb.SystemSharedMemoryStatusRequest()),
            ("SystemSharedMemoryRegister", ipb.SystemSharedMemoryRegisterRequest(
                name="r", key="/nope", byte_size=64)),
            ("SystemSharedMemoryUnregister", ipb.SystemSharedMemoryUnregisterRequest(name="r"))]:
        calls.append((svc + method, request.SerializeToString()))
    calls.append(("/grpc.health.v1.Health/Check", b""))
    calls.append(("/grpc.health.v1.Health/Check [tensorops]", b"\x0a\x16tensorops.v1.TensorOps"))
    out = []
    for label, request in calls:
        method = label.split(" [")[0]
        rpc = channel.unary_unary(method)  # bytes in, bytes out
        try:
            reply, call = rpc.with_call(request, metadata=metadata, timeout=20)
            out.append(f"grpc {label}: OK {reply.hex()}")
            trailing = call.trailing_metadata()
        except grpc.RpcError as e:
            out.append(f"grpc {label}: {e.code().name} {e.details()!r}")
            trailing = e.trailing_metadata()
        for key, value in sorted(trailing or ()):
            if key in MASKED_HEADERS:
                continue
            out.append(f"  trailer {key}: {value.hex() if isinstance(value, bytes) else value}")
    return out


def rest_requests():
    roll = {"inputs": [
        {"name": "data", "datatype": "UINT8", "shape": [2, 3], "data": [0, 1, 2, 3, 4, 5]},
        {"name": "shift", "datatype": "INT64", "shape": [1], "data": [1]},
        {"name": "axes", "datatype": "INT64", "shape": [1], "data": [1]}]}
    header = json.dumps({"inputs": [
        {"name": "data", "datatype": "UINT8", "shape": [6],
         "parameters": {"binary_data_size": 6}},
        {"name": "shift", "datatype": "INT64", "shape": [1], "data": [2]},
        {"name": "axes", "datatype": "INT64", "shape": [1], "data": [0]}],
        "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()
    binary = header + bytes(range(6))
    return [
        ("GET", "/v2", None, {}), ("GET", "/v2/health/live", None, {}),
        ("GET", "/v2/health/ready", None, {}), ("GET", "/v2/models/Roll", None, {}),
        ("GET", "/v2/models/Roll/ready", None, {}), ("GET", "/v2/models/Nope", None, {}),
        ("GET", "/v2/models/Roll/versions/2", None, {}),
        ("POST", "/v2/repository/index", b"", {}),
        ("POST", "/v2/models/Roll/infer", json.dumps(roll).encode(), {}),
        ("POST", "/v2/models/Roll/infer", binary,
         {"Inference-Header-Content-Length": str(len(header))}),
        ("POST", "/v2/models/Roll/infer", b"{bad", {}),
        ("POST", "/v2/models/Roll/infer", b"[1]", {}),
        ("POST", "/v2/models/Nope/infer", b"{}", {}),
        ("GET", "/v2/models/Roll/infer", None, {}),
        ("POST", "/v2/models/Roll/infer", b"{}", {"Content-Encoding": "gzip"}),
        ("POST", "/v2/repository/models/Roll/load", b"", {}),
        ("GET", "/nowhere", None, {}),
        ("GET", "/v2/systemsharedmemory/status", None, {}),
        ("POST", "/v2/systemsharedmemory/region/r/register",
         json.dumps({"key": "/nope", "offset": 0, "byte_size": 64}).encode(), {}),
    ]


def rest_calls(server, token):
    out = []
    for method, path, body, headers in rest_requests():
        headers = dict(headers)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn = server.conn()
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        out.append(f"http {method} {path} [{len(body or b'')} B]: {r.status} {r.reason}")
        for key, value in r.getheaders():
            if key.lower() not in MASKED_HEADERS:
                out.append(f"  header {key}: {value}")
        out.append(f"  body {data!r}")
    return out


def main():
    args, token = [], ""
    if CONFIG == "token":
        fd, path = tempfile.mkstemp(prefix="wire-capture-token-")
        os.write(fd, (TOKEN + "\n").encode())
        os.close(fd)
        args, token = [f"--auth_token_file={path}"], TOKEN
    elif CONFIG == "pool":
        args = ["--inline_max_bytes=0", "--min_parallel_bytes=1"]
    elif CONFIG == "limits":
        args = ["--max_rank=2", "--max_tensor_elements=16", "--max_request_bytes=4096"]
    elif CONFIG != "plain":
        sys.exit(f"unknown --config={CONFIG}")
    server = RestServer(SERVER, *args)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        metadata = [("authorization", f"Bearer {token}")] if token else []
        lines = [f"# config {CONFIG}"] + grpc_calls(channel, metadata) + rest_calls(server, token)
        channel.close()
    finally:
        rc = server.stop()
    lines.append(f"# server exit status {rc}")
    text = "\n".join(lines) + "\n"
    # Ports and per-run numbers never belong to the comparison.
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
