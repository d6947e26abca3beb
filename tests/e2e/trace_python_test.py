#!/usr/bin/env python3
"""Traces a caller can follow (issue 40), from an independent Python client.

Against the real binary, over both doors, written from the public texts (W3C
Trace Context, W3C Server Timing):

- a call with a valid traceparent gets back (gRPC initial metadata, HTTP
  response header) a traceparent of the same trace id and flags, with the
  server's own span id; the access log line of that call, and its failure
  line, name the trace id and that span id;
- a malformed traceparent is ignored (the call succeeds) and a new trace id
  is made, as when none is sent;
- server-timing (gRPC trailing metadata, HTTP Server-Timing) lists queue,
  kernel and total with durations in ms;
- --trace_headers=false sends neither; by default (auto) only a call that
  arrived with a sampled traceparent gets them;
- two traceparent headers start a new trace (the W3C test suite);
- a REST error's access line counts the bytes of the error sent;
- --otlp_endpoint: a collector stand-in (a small HTTP server here, which
  decodes every http/protobuf body with OpenTelemetry's own schema, and
  checks JSON ones against OTLP/HTTP JSON's) receives the call's
  span (the caller's trace id, the caller's span as parent, the server's
  span id as sent back) with its queue and kernel stages as child spans,
  for both doors, named and attributed as OpenTelemetry's RPC and HTTP
  semantic conventions say, with service.name (OTEL_SERVICE_NAME) and a
  per-replica service.instance.id; OTEL_EXPORTER_OTLP_ENDPOINT gets
  /v1/traces appended; a parent-based ratio sampler of 0 records callers'
  sampled traces only; with the collector gone calls go on as fast and the
  drops are counted in tensorops_spans_dropped_total.

Usage: trace_python_test.py TENSOROPS_SERVER PROTO_DIR
Exit status 0 when every check passed.
"""
import json
import os
import re
import socket
import sys
import tempfile
import time
import unittest
import urllib.request

import grpc
from grpc_tools import protoc
from otlp_collector import Collector
from rest_server import RestServer

SERVER, PROTO_DIR = sys.argv[1], sys.argv[2]
STUBS = tempfile.mkdtemp(prefix="trace-stubs-")
_WKT = os.path.join(os.path.dirname(protoc.__file__), "_proto")
if protoc.main(["protoc", f"-I{PROTO_DIR}", f"-I{_WKT}", f"--python_out={STUBS}",
                f"--grpc_python_out={STUBS}",
                os.path.join(PROTO_DIR, "tensorops", "v1", "tensorops.proto")]) != 0:
    sys.exit("protoc failed on tensorops/v1")
sys.path.insert(0, STUBS)
from tensorops.v1 import tensorops_pb2 as pb  # noqa: E402
from tensorops.v1 import tensorops_pb2_grpc as pb_grpc  # noqa: E402

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$")
TIMING = re.compile(r"^queue;dur=\d+\.\d{3}, kernel;dur=\d+\.\d{3}, total;dur=\d+\.\d{3}$")
MALFORMED = ["", "garbage", f"00-{TRACE_ID.upper()}-00f067aa0ba902b7-01",
             "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
             f"ff-{TRACE_ID}-00f067aa0ba902b7-01", f"00-{TRACE_ID}-00f067aa0ba902b7-01-"]


def roll_request(axis=0):
    return pb.ExecuteRequest(op="Roll", inputs=[
        pb.Tensor(dtype=pb.DATA_TYPE_INT32, shape=[2, 2], int32_data=[1, 2, 3, 4]),
        pb.Tensor(dtype=pb.DATA_TYPE_INT64, shape=[1], int64_data=[1]),
        pb.Tensor(dtype=pb.DATA_TYPE_INT64, shape=[1], int64_data=[axis])])


ROLL_JSON = {"inputs": [
    {"name": "data", "shape": [2, 2], "datatype": "INT32", "data": [1, 2, 3, 4]},
    {"name": "shift", "shape": [1], "datatype": "INT64", "data": [1]},
    {"name": "axes", "shape": [1], "datatype": "INT64", "data": [0]}]}


class TraceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.log = tempfile.NamedTemporaryFile(mode="w+", prefix="trace-stderr-", delete=False)
        cls.server = RestServer(SERVER, "--access_log", "--trace_headers=true", stderr=cls.log)
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.server.grpc_port}")
        cls.stub = pb_grpc.TensorOpsStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        assert cls.server.stop() == 0
        cls.log.close()
        os.unlink(cls.log.name)

    def log_lines(self, span_id):
        """The server's stderr lines naming `span_id` (waits a little for them)."""
        for _ in range(100):
            with open(self.log.name) as f:
                lines = [l for l in f if f"span_id={span_id}" in l]
            if lines:
                return lines
            time.sleep(0.05)
        return []

    def grpc_call(self, request, metadata):
        """(code, initial metadata dict, trailing metadata dict)."""
        try:
            _, call = self.stub.Execute.with_call(request, metadata=metadata, timeout=30)
        except grpc.RpcError as e:
            call = e
        return call.code(), dict(call.initial_metadata()), dict(call.trailing_metadata())

    def rest_call(self, headers):
        conn = self.server.conn()
        conn.request("POST", "/v2/models/Roll/infer", json.dumps(ROLL_JSON),
                     {"Content-Type": "application/json", **headers})
        res = conn.getresponse()
        res.read()
        conn.close()
        return res.status, res.getheader("traceparent"), res.getheader("Server-Timing")

    def test_grpc_continues_the_callers_trace(self):
        code, initial, trailing = self.grpc_call(
            roll_request(), [("traceparent", PARENT), ("tracestate", "congo=t61rcWkgMzE")])
        self.assertEqual(code, grpc.StatusCode.OK)
        m = TRACEPARENT.match(initial["traceparent"])
        self.assertIsNotNone(m, initial)
        self.assertEqual(m.group(1), TRACE_ID)
        self.assertNotEqual(m.group(2), "00f067aa0ba902b7")
        self.assertEqual(m.group(3), "01")
        self.assertRegex(trailing["server-timing"], TIMING)
        lines = self.log_lines(m.group(2))
        self.assertEqual(len(lines), 1, lines)
        self.assertIn(" access method=Execute op=Roll code=OK ", lines[0])
        self.assertIn(f"trace_id={TRACE_ID} span_id={m.group(2)}", lines[0])

    def test_grpc_failure_lines_carry_the_trace(self):
        parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
        code, initial, trailing = self.grpc_call(roll_request(axis=9), [("traceparent", parent)])
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        # A failure stays Trailers-Only (gRPC's retries need it): the
        # traceparent comes in the trailers.
        self.assertNotIn("traceparent", initial)
        m = TRACEPARENT.match(trailing["traceparent"])
        self.assertEqual(m.group(1), "0af7651916cd43dd8448eb211c80319c")
        self.assertEqual(m.group(3), "00")  # not sampled: passed on as such
        # Refused before a kernel ran: total only.
        self.assertRegex(trailing["server-timing"], r"^total;dur=\d+\.\d{3}$")
        lines = self.log_lines(m.group(2))
        self.assertTrue(any("access method=Execute" in l and "code=INVALID_ARGUMENT" in l
                            for l in lines), lines)
        # The first INVALID_ARGUMENT of the process is logged (rate-limited
        # after), with the same ids.
        self.assertTrue(any("request failed: INVALID_ARGUMENT op=Roll" in l for l in lines), lines)
        self.assertTrue(all("trace_id=0af7651916cd43dd8448eb211c80319c" in l for l in lines))

    def test_grpc_malformed_or_missing_makes_a_new_trace(self):
        seen = set()
        for sent in MALFORMED + [None]:
            with self.subTest(sent=sent):
                metadata = [] if sent is None else [("traceparent", sent)]
                code, initial, _ = self.grpc_call(roll_request(), metadata)
                self.assertEqual(code, grpc.StatusCode.OK)
                m = TRACEPARENT.match(initial["traceparent"])
                self.assertIsNotNone(m, initial)
                self.assertNotEqual(m.group(1), TRACE_ID)
                seen.add(m.group(1))
        self.assertEqual(len(seen), len(MALFORMED) + 1)

    def test_rest_continues_the_callers_trace(self):
        status, traceparent, timing = self.rest_call({"traceparent": PARENT})
        self.assertEqual(status, 200)
        m = TRACEPARENT.match(traceparent)
        self.assertIsNotNone(m, traceparent)
        self.assertEqual(m.group(1), TRACE_ID)
        self.assertRegex(timing, TIMING)
        lines = self.log_lines(m.group(2))
        self.assertEqual(len(lines), 1, lines)
        self.assertIn(" access method=REST op=Roll code=OK ", lines[0])
        self.assertIn(f"trace_id={TRACE_ID}", lines[0])
        # Two traceparents: neither is the parent (a new trace).
        conn = self.server.conn()
        conn.putrequest("POST", "/v2/models/Roll/infer")
        body = json.dumps(ROLL_JSON).encode()
        for h, v in [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                     ("traceparent", PARENT), ("traceparent", PARENT)]:
            conn.putheader(h, v)
        conn.endheaders(body)
        res = conn.getresponse()
        res.read()
        conn.close()
        self.assertEqual(res.status, 200)
        self.assertNotEqual(TRACEPARENT.match(res.getheader("traceparent")).group(1), TRACE_ID)
        for sent in MALFORMED:
            with self.subTest(sent=sent):
                status, traceparent, _ = self.rest_call({"traceparent": sent})
                self.assertEqual(status, 200)
                m = TRACEPARENT.match(traceparent)
                self.assertIsNotNone(m, traceparent)
                self.assertNotEqual(m.group(1), TRACE_ID)


    def test_rest_error_access_line_counts_the_bytes_sent(self):
        conn = self.server.conn()
        conn.request("POST", "/v2/models/Roll/infer", '{"inputs": [}',
                     {"Content-Type": "application/json", "traceparent": PARENT})
        res = conn.getresponse()
        body = res.read()
        conn.close()
        self.assertEqual(res.status, 400)
        span = TRACEPARENT.match(res.getheader("traceparent")).group(2)
        lines = self.log_lines(span)
        access = [l for l in lines if " access method=REST" in l]
        self.assertEqual(len(access), 1, lines)
        self.assertIn(f" response_bytes={len(body)} ", access[0])
        self.assertGreater(len(body), 0)


class TraceHeadersAutoTest(unittest.TestCase):
    """The default: a caller that traces (a sampled traceparent) gets the call's
    traceparent and Server-Timing back; any other call gets neither."""

    def test_only_callers_that_trace_get_them(self):
        server = RestServer(SERVER)
        try:
            with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
                stub = pb_grpc.TensorOpsStub(channel)
                _, call = stub.Execute.with_call(roll_request(), metadata=[("traceparent", PARENT)],
                                                 timeout=30)
                m = TRACEPARENT.match(dict(call.initial_metadata())["traceparent"])
                self.assertEqual(m.group(1), TRACE_ID)
                self.assertRegex(dict(call.trailing_metadata())["server-timing"], TIMING)
                for metadata in ([], [("traceparent", PARENT[:-2] + "00")],
                                 [("traceparent", "garbage")]):
                    with self.subTest(metadata=metadata):
                        _, call = stub.Execute.with_call(roll_request(), metadata=metadata,
                                                         timeout=30)
                        self.assertNotIn("traceparent", dict(call.initial_metadata()))
                        self.assertNotIn("server-timing", dict(call.trailing_metadata()))
            for headers, sent_back in (({"traceparent": PARENT}, True), ({}, False),
                                       ({"traceparent": PARENT[:-2] + "00"}, False)):
                with self.subTest(headers=headers):
                    conn = server.conn()
                    conn.request("POST", "/v2/models/Roll/infer", json.dumps(ROLL_JSON), headers)
                    res = conn.getresponse()
                    res.read()
                    conn.close()
                    self.assertEqual(res.status, 200)
                    self.assertEqual(res.getheader("traceparent") is not None, sent_back)
                    self.assertEqual(res.getheader("Server-Timing") is not None, sent_back)
                    if sent_back:
                        self.assertRegex(res.getheader("Server-Timing"), TIMING)
        finally:
            self.assertEqual(server.stop(), 0)


class TraceHeadersOffTest(unittest.TestCase):
    def test_nothing_sent_back(self):
        server = RestServer(SERVER, "--trace_headers=false")
        try:
            with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
                _, call = pb_grpc.TensorOpsStub(channel).Execute.with_call(
                    roll_request(), metadata=[("traceparent", PARENT)], timeout=30)
                self.assertNotIn("traceparent", dict(call.initial_metadata()))
                self.assertNotIn("server-timing", dict(call.trailing_metadata()))
            conn = server.conn()
            conn.request("POST", "/v2/models/Roll/infer", json.dumps(ROLL_JSON))
            res = conn.getresponse()
            res.read()
            self.assertEqual(res.status, 200)
            self.assertIsNone(res.getheader("traceparent"))
            self.assertIsNone(res.getheader("Server-Timing"))
            conn.close()
        finally:
            self.assertEqual(server.stop(), 0)


class OtlpExportTest(unittest.TestCase):
    def check_call_span(self, collector, traceparent, method):
        m = TRACEPARENT.match(traceparent)
        span, children = collector.wait_for(m.group(2))
        self.assertIsNotNone(span, f"no span {m.group(2)} at the collector")
        self.assertEqual(collector.errors, [])
        self.assertEqual(span["traceId"], TRACE_ID)
        self.assertEqual(span["parentSpanId"], "00f067aa0ba902b7")
        self.assertEqual(span["name"], method)
        self.assertEqual(span["kind"], 2)
        attrs = {a["key"]: a["value"] for a in span["attributes"]}
        self.assertEqual(attrs["tensorops.op"], {"stringValue": "Roll"})
        if method.startswith("POST "):
            self.assertEqual(attrs["http.request.method"], {"stringValue": "POST"})
            self.assertEqual(attrs["http.route"], {"stringValue": "/v2/models/{model}/infer"})
            self.assertEqual(attrs["http.response.status_code"], {"intValue": "200"})
        else:
            self.assertEqual(attrs["rpc.system"], {"stringValue": "grpc"})
            self.assertEqual(attrs["rpc.service"], {"stringValue": "tensorops.v1.TensorOps"})
            self.assertEqual(attrs["rpc.method"], {"stringValue": "Execute"})
            self.assertEqual(attrs["rpc.grpc.status_code"], {"intValue": "0"})
        self.assertEqual(span["resource"]["service.name"], {"stringValue": collector.service})
        self.assertRegex(span["resource"]["service.instance.id"]["stringValue"],
                         r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
        self.assertEqual(sorted(c["name"] for c in children), ["kernel", "queue"])
        for c in children:
            self.assertEqual(c["traceId"], TRACE_ID)
            self.assertGreaterEqual(int(c["startTimeUnixNano"]), int(span["startTimeUnixNano"]))
            self.assertLessEqual(int(c["endTimeUnixNano"]), int(span["endTimeUnixNano"]))

    def test_spans_reach_the_collector(self):
        collector = Collector().start()
        collector.service = "tensorops-server"
        server = RestServer(SERVER, "--trace_headers=true", f"--otlp_endpoint=http://127.0.0.1:{collector.port}")
        try:
            with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
                _, call = pb_grpc.TensorOpsStub(channel).Execute.with_call(
                    roll_request(), metadata=[("traceparent", PARENT)], timeout=30)
                self.check_call_span(collector, dict(call.initial_metadata())["traceparent"],
                                     "tensorops.v1.TensorOps/Execute")
            conn = server.conn()
            conn.request("POST", "/v2/models/Roll/infer", json.dumps(ROLL_JSON),
                         {"traceparent": PARENT})
            res = conn.getresponse()
            res.read()
            self.assertEqual(res.status, 200)
            self.check_call_span(collector, res.getheader("traceparent"),
                                 "POST /v2/models/{model}/infer")
            conn.close()
            # Not sampled by the caller: not exported.
            with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
                _, call = pb_grpc.TensorOpsStub(channel).Execute.with_call(
                    roll_request(), metadata=[("traceparent", PARENT[:-2] + "00")], timeout=30)
                quiet = TRACEPARENT.match(dict(call.initial_metadata())["traceparent"]).group(2)
            time.sleep(1.5)  # the exporter's interval is 1 s
            with collector.lock:
                self.assertFalse(any(s["spanId"] == quiet for s in collector.spans))
        finally:
            self.assertEqual(server.stop(), 0)
            collector.close()

    def test_opentelemetry_environment(self):
        """OTEL_EXPORTER_OTLP_ENDPOINT (a base: /v1/traces appended to its path),
        OTEL_EXPORTER_OTLP_PROTOCOL=http/json,
        OTEL_SERVICE_NAME, and a parent-based ratio of 0: new traces are not
        recorded, callers' sampled ones are; two replicas, two instance ids."""
        collector = Collector(path="/otel/v1/traces", content_type="application/json").start()
        collector.service = "tensorops-test"
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}/otel/",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
               "OTEL_SERVICE_NAME": "tensorops-test",
               "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}
        servers = [RestServer(SERVER, "--trace_headers=true", env=env) for _ in range(2)]
        try:
            for server in servers:
                with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
                    stub = pb_grpc.TensorOpsStub(channel)
                    _, call = stub.Execute.with_call(roll_request(),
                                                     metadata=[("traceparent", PARENT)], timeout=30)
                    self.check_call_span(collector, dict(call.initial_metadata())["traceparent"],
                                         "tensorops.v1.TensorOps/Execute")
                    _, call = stub.Execute.with_call(roll_request(), timeout=30)
                    root = TRACEPARENT.match(dict(call.initial_metadata())["traceparent"])
                    self.assertEqual(root.group(3), "00")  # the sampler's no, sent on
            time.sleep(1.5)  # the exporter's interval is 1 s
            with collector.lock:
                self.assertEqual(collector.errors, [])
                self.assertFalse(any(s["traceId"] != TRACE_ID for s in collector.spans))
                instances = {s["resource"]["service.instance.id"]["stringValue"]
                             for s in collector.spans}
            self.assertEqual(len(instances), 2)
        finally:
            for server in servers:
                self.assertEqual(server.stop(), 0)
            collector.close()

    def test_gone_collector_drops_and_counts(self):
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = RestServer(SERVER, "--trace_headers=true", f"--otlp_endpoint=http://127.0.0.1:{port}",
                            "--metrics_port=0", "--metrics_host=127.0.0.1")
        try:
            with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
                stub = pb_grpc.TensorOpsStub(channel)
                start = time.time()
                for _ in range(50):
                    stub.Execute(roll_request(), timeout=30)
                # The calls never wait for the collector.
                self.assertLess(time.time() - start, 10)
            dropped = 0
            for _ in range(100):
                text = urllib.request.urlopen(
                    f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()
                m = re.search(r'^tensorops_spans_dropped_total\{reason="export_failed"\} (\S+)$',
                              text, re.M)
                dropped = float(m.group(1)) if m else 0
                if dropped >= 50:
                    break
                time.sleep(0.1)
            self.assertEqual(dropped, 50)
            self.assertIn("tensorops_spans_exported_total 0", text)
        finally:
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
