#!/usr/bin/env python3
"""An OTLP/HTTP collector stand-in: takes POST /v1/traces and checks every body
against OTLP/HTTP JSON's schema (opentelemetry-proto's JSON mapping of
ExportTraceServiceRequest: lowerCamelCase fields, ids in hex, int64s as decimal
strings, enums as numbers).

Used by trace_python_test.py (import: Collector) and by
tests/containers/compose_test.sh (as a script: one JSON line per span to
stdout, a line starting "SCHEMA ERROR" for a body that breaks the schema):

    otlp_collector.py HOST PORT
"""
import http.server
import json
import re
import sys
import threading
import time


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
    numbers). Returns its spans; raises AssertionError on anything else."""
    doc = json.loads(body)
    assert set(doc) == {"resourceSpans"}, doc.keys()
    spans = []
    for rs in doc["resourceSpans"]:
        assert set(rs) <= {"resource", "scopeSpans", "schemaUrl"}, rs.keys()
        check_attributes(rs["resource"]["attributes"])
        names = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
        assert names["service.name"] == {"stringValue": "tensorops-server"}, names
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
                spans.append(span)
    return spans


class Collector:
    """An OTLP/HTTP collector stand-in: POST /v1/traces, bodies checked by
    check_otlp; the spans kept, schema failures recorded."""

    def __init__(self, host="127.0.0.1", port=0):
        self.spans = []
        self.errors = []
        self.lock = threading.Lock()
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                spans, error = [], None
                try:
                    assert self.path == "/v1/traces", self.path
                    assert self.headers["Content-Type"] == "application/json"
                    spans = check_otlp(body)
                except (AssertionError, KeyError, ValueError) as e:
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
    out_lock = threading.Lock()

    class Printing(Collector):
        def record(self, spans, error):
            with out_lock:
                for span in spans:
                    print(json.dumps(span), flush=True)
                if error:
                    print(f"SCHEMA ERROR {error}", flush=True)

    Printing(host, port).httpd.serve_forever()
