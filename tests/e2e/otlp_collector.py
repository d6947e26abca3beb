#!/usr/bin/env python3
"""An OTLP/HTTP collector stand-in: takes POST /v1/traces and checks every body
against OTLP/HTTP JSON's schema (opentelemetry-proto's JSON mapping of
ExportTraceServiceRequest: lowerCamelCase fields, ids in hex, int64s as decimal
strings, enums as numbers), or, for application/x-protobuf (http/protobuf),
decodes it with OpenTelemetry's own schema: opentelemetry-proto's .proto files
as the npm package @opentelemetry/otlp-proto-exporter-base ships them
(OTLP_PROTO_DIR: under tests/e2e/otlp_schema/node_modules, installed by
tools/test.sh), compiled here by grpc_tools' protoc and parsed by Python's
protobuf runtime, none of it ours.

Used by trace_python_test.py (import: Collector) and by
tests/containers/compose_test.sh (as a script: one JSON line per span to
stdout, a line starting "SCHEMA ERROR" for a body that breaks the schema):

    otlp_collector.py HOST PORT [CONTENT_TYPE]   (default application/x-protobuf)
"""
import base64
import http.server
import json
import os
import re
import sys
import tempfile
import threading
import time

_SCHEMA = None


def otlp_schema():
    """ExportTraceServiceRequest compiled from OTLP_PROTO_DIR's official files."""
    global _SCHEMA
    if _SCHEMA is None:
        from grpc_tools import protoc
        proto_dir = os.environ["OTLP_PROTO_DIR"]
        out = tempfile.mkdtemp(prefix="otlp-schema-")
        wkt = os.path.join(os.path.dirname(protoc.__file__), "_proto")
        files = [os.path.join(proto_dir, "opentelemetry", "proto", *p) for p in (
            ("common", "v1", "common.proto"), ("resource", "v1", "resource.proto"),
            ("trace", "v1", "trace.proto"), ("collector", "trace", "v1", "trace_service.proto"))]
        if protoc.main(["protoc", f"-I{proto_dir}", f"-I{wkt}", f"--python_out={out}", *files]) != 0:
            raise RuntimeError(f"protoc failed on {proto_dir}")
        sys.path.insert(0, out)
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        _SCHEMA = trace_service_pb2.ExportTraceServiceRequest
    return _SCHEMA


def protobuf_to_json(body):
    """An http/protobuf body decoded with the official schema, then written in
    OTLP's JSON mapping (ids base64 -> hex) for check_otlp."""
    from google.protobuf import json_format
    request = otlp_schema()()
    request.ParseFromString(body)
    doc = json_format.MessageToDict(request, use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(doc)


HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
DECIMAL = re.compile(r"^[0-9]+$")


def check_any_value(v):
    """An OTLP AnyValue in JSON: exactly one typed field; int64s as strings."""
    assert isinstance(v, dict) and len(v) == 1, v
    (kind, x), = v.items()
    if kind == "stringValue":
        assert isinstance(x, str), v
    elif kind == "intValue":
        assert isinstance(x, str) and re.match(r"^-?[0-9]+$", x), v
    elif kind == "boolValue":
        assert isinstance(x, bool), v
    elif kind == "doubleValue":
        assert isinstance(x, (int, float)), v
    else:
        raise AssertionError(f"unexpected AnyValue {v}")


def check_attributes(attrs):
    assert isinstance(attrs, list), attrs
    for a in attrs:
        assert set(a) == {"key", "value"} and isinstance(a["key"], str), a
        check_any_value(a["value"])


def check_otlp(body):
    """ExportTraceServiceRequest in OTLP/HTTP JSON (opentelemetry-proto's JSON
    mapping: lowerCamelCase fields, hex ids, int64 as decimal strings, enums as
    numbers). Returns its spans, each with its resource's attributes under
    "resource"; raises AssertionError on anything else."""
    doc = json.loads(body)
    assert set(doc) == {"resourceSpans"}, doc.keys()
    spans = []
    for rs in doc["resourceSpans"]:
        assert set(rs) <= {"resource", "scopeSpans", "schemaUrl"}, rs.keys()
        check_attributes(rs["resource"]["attributes"])
        resource = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
        assert "stringValue" in resource["service.name"], resource
        for ss in rs["scopeSpans"]:
            assert set(ss) <= {"scope", "spans", "schemaUrl"}, ss.keys()
            assert isinstance(ss["scope"]["name"], str)
            for span in ss["spans"]:
                allowed = {"traceId", "spanId", "parentSpanId", "traceState", "name", "kind",
                           "startTimeUnixNano", "endTimeUnixNano", "attributes", "status",
                           "events", "links"}
                assert set(span) <= allowed, set(span) - allowed
                assert HEX32.match(span["traceId"]), span
                assert HEX16.match(span["spanId"]), span
                if "parentSpanId" in span:
                    assert HEX16.match(span["parentSpanId"]), span
                assert isinstance(span["name"], str) and span["name"], span
                assert span["kind"] in range(6), span
                assert DECIMAL.match(span["startTimeUnixNano"]), span
                assert DECIMAL.match(span["endTimeUnixNano"]), span
                assert int(span["startTimeUnixNano"]) <= int(span["endTimeUnixNano"]), span
                check_attributes(span.get("attributes", []))
                if "status" in span:
                    assert set(span["status"]) <= {"code", "message"}, span
                    assert span["status"]["code"] in (0, 1, 2), span
                spans.append(dict(span, resource=resource))
    return spans


class Collector:
    """An OTLP/HTTP collector stand-in: POST /v1/traces, bodies checked by
    check_otlp; the spans kept, schema failures recorded."""

    def __init__(self, host="127.0.0.1", port=0, path="/v1/traces",
                 content_type="application/x-protobuf"):
        """`content_type`: the encoding every body must have (the server's
        default, http/protobuf, or application/json)."""
        self.content_type = content_type
        self.spans = []
        self.errors = []
        self.lock = threading.Lock()
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                spans, error = [], None
                try:
                    assert self.path == path, self.path
                    content_type = self.headers["Content-Type"]
                    assert content_type == collector.content_type, content_type
                    if content_type == "application/x-protobuf":
                        body = protobuf_to_json(body)
                    spans = check_otlp(body)
                except Exception as e:  # noqa: BLE001 (a schema failure of any kind)
                    error = repr(e)
                collector.record(spans, error)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer((host, port), Handler)
        self.port = self.httpd.server_address[1]

    def start(self):
        """Serves on a thread of its own; returns self."""
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def record(self, spans, error):
        with self.lock:
            self.spans.extend(spans)
            if error:
                self.errors.append(error)

    def wait_for(self, span_id, timeout=10):
        """The span `span_id` and its children, once the server has sent them."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                mine = [s for s in self.spans if s["spanId"] == span_id]
                children = [s for s in self.spans if s.get("parentSpanId") == span_id]
            if mine and len(children) >= 2:
                return mine[0], children
            time.sleep(0.05)
        return None, []

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()



if __name__ == "__main__":
    host, port = sys.argv[1], int(sys.argv[2])
    content_type = sys.argv[3] if len(sys.argv) > 3 else "application/x-protobuf"
    out_lock = threading.Lock()

    class Printing(Collector):
        def record(self, spans, error):
            with out_lock:
                for span in spans:
                    print(json.dumps(span), flush=True)
                if error:
                    print(f"SCHEMA ERROR {error}", flush=True)

    Printing(host, port, content_type=content_type).httpd.serve_forever()
