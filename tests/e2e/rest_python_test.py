#!/usr/bin/env python3
"""An independent Open Inference Protocol HTTP/REST client against tensorops-server.

Written from the public texts alone (KServe's REST protocol, Triton's binary
tensor data extension; ../shared/api-rest.md), with Python's http.client and
NumPy: every op and datatype as JSON and as binary data (both directions, and
mixed), compared bit for bit with NumPy; the error battery (status code and
{"error"} body naming the field, the server staying up); keep-alive after
errors; chunked request bodies; the body limit; health, metadata, readiness,
statistics, system shared memory (register, infer in and out of a region,
status, unregister), repository index and the drain's 503.

Usage: rest_python_test.py TENSOROPS_SERVER
Exit status 0 when every check passed.
"""
import json
import re
import os
import signal
import socket
import struct
import sys
import tempfile
import threading
import unittest
import warnings
from multiprocessing import shared_memory

import numpy as np
from rest_server import RestServer
from oip_numpy import BF16, DATATYPE, NUMPY, datatype, from_raw, op_cases, raw_of, test_rng

SERVER = sys.argv[1]


def json_data(a):
    """Nested JSON data (the rows as the shape has them), numbers as Python gives them."""
    dt = datatype(a)
    if dt == "BYTES":
        return [x.decode("utf-8") for x in a.reshape(-1)]
    if dt == "BF16":
        f = (a.astype(np.uint32) << 16).view(np.float32)
        return f.astype(np.float64).tolist()
    if dt == "FP16":
        return a.astype(np.float64).tolist()
    return a.tolist()


def from_json(data, dt, shape):
    if dt == "BYTES":
        return np.array([x.encode("utf-8") for x in data], dtype=object).reshape(shape)
    if dt == "BF16":
        f = np.array(data, dtype=np.float32)
        return (f.view(np.uint32) >> 16).astype(np.uint16).reshape(shape)
    if dt == "FP16":
        return np.array(data, dtype=np.float64).astype(np.float16).reshape(shape)
    return np.array(data, dtype=NUMPY[dt]).reshape(shape)


def sample(rng, dt, shape):
    if dt == "BF16":
        # Finite bfloat16 values (exponent below all ones), both signs.
        bits = rng.integers(0, 0x7F80, shape, dtype=np.uint16) | (
            rng.integers(0, 2, shape, dtype=np.uint16) << 15)
        return bits.view(BF16)
    if dt is np.object_:
        # UTF-8 text: JSON carries BYTES as strings.
        return np.array(["".join(chr(int(c)) for c in rng.integers(0x20, 0x7F, rng.integers(0, 5)))
                         .encode() + "é".encode() for _ in range(int(np.prod(shape)))],
                        dtype=object).reshape(shape)
    if dt is np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dt, np.floating):
        return rng.standard_normal(shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)


def cases(rng):
    """(model, inputs, params, reference) for every op over every datatype."""
    return op_cases(lambda dt, shape: sample(rng, dt, shape), list(DATATYPE) + ["BF16"])


def infer_body(inputs, params=None, binary_in=(), binary_out=False, rid=None):
    """inputs: [(name, array)]; names in binary_in go as binary data. Returns (body, headers)."""
    req = {"inputs": []}
    if rid is not None:
        req["id"] = rid
    if params:
        req["parameters"] = dict(params)
    blocks = []
    for name, a in inputs:
        t = {"name": name, "shape": list(a.shape), "datatype": datatype(a)}
        if name in binary_in:
            raw = raw_of(a)
            t["parameters"] = {"binary_data_size": len(raw)}
            blocks.append(raw)
        else:
            t["data"] = json_data(a)
        req["inputs"].append(t)
    if binary_out:
        req.setdefault("parameters", {})["binary_data_output"] = True
    head = json.dumps(req).encode()
    headers = {"Content-Type": "application/json"}
    if blocks:
        headers["Inference-Header-Content-Length"] = str(len(head))
    return head + b"".join(blocks), headers


def Server(*args):
    return RestServer(SERVER, *args)


def call(conn, method, path, body=None, headers=None):
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()


def exchange(port, raw):
    """Sends `raw` on a new connection; every byte answered until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk


def decode_answer(status, headers, body):
    """(json, [arrays]) of a 200 infer answer."""
    if "inference-header-content-length" in headers:
        n = int(headers["inference-header-content-length"])
        head, rest = json.loads(body[:n]), body[n:]
    else:
        head, rest = json.loads(body), b""
    arrays, pos = [], 0
    for out in head["outputs"]:
        size = out.get("parameters", {}).get("binary_data_size")
        if size is not None:
            arrays.append(from_raw(rest[pos:pos + size], out["datatype"], out["shape"]))
            pos += size
        else:
            arrays.append(from_json(out["data"], out["datatype"], out["shape"]))
    assert pos == len(rest), "binary bytes left over"
    return head, arrays


class RestClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Three event loops: connections land on different loops.
        cls.server = Server("--max_message_bytes=1048576", "--http_threads=3")
        cls.conn = cls.server.conn()
        cls.cases = cases(test_rng(22))

    @classmethod
    def tearDownClass(cls):
        cls.conn.close()
        assert cls.server.stop() == 0

    def check(self, got, want, what):
        self.assertEqual(list(got.shape), list(want.shape), what)
        if want.dtype == np.object_:
            self.assertEqual(got.tolist(), want.tolist(), what)
        else:
            # Bit-exact: data movement keeps every bit.
            self.assertEqual(np.ascontiguousarray(got).view(np.uint8).tobytes(),
                             np.ascontiguousarray(want).view(np.uint8).tobytes(), what)

    def infer(self, model, body, headers, conn=None):
        return call(conn or self.conn, "POST", f"/v2/models/{model}/infer", body, headers)

    def test_every_op_and_datatype_json_binary_mixed(self):
        n = 0
        for model, inputs, params, want in self.cases:
            data_name = inputs[0][0] if model != "Reverse" or inputs[0][0] == "data" else "data"
            for mode in ("json", "binary", "mixed"):
                binary_in = {"json": (), "binary": tuple(nm for nm, _ in inputs),
                             "mixed": (data_name,)}[mode]
                for binary_out in (False, True):
                    what = f"{model} {datatype(want)} {mode} binary_out={binary_out}"
                    body, headers = infer_body(inputs, params, binary_in, binary_out, rid="r1")
                    status, h, answer = self.infer(model, body, headers)
                    self.assertEqual(status, 200, f"{what}: {answer[:300]}")
                    self.assertEqual(h["content-type"], "application/octet-stream" if binary_out
                                     else "application/json", what)
                    head, arrays = decode_answer(status, h, answer)
                    self.assertEqual(head["model_name"], model)
                    self.assertEqual(head["model_version"], "1")
                    self.assertEqual(head["id"], "r1")
                    self.assertEqual(head["outputs"][0]["datatype"], datatype(want), what)
                    got = arrays[0]
                    if datatype(want) == "BF16":
                        got = got.view(np.uint16)
                        want_cmp = want.view(np.ndarray)
                    else:
                        want_cmp = want
                    self.check(got, want_cmp, what)
                    n += 1
        self.assertEqual(n, len(self.cases) * 6)

    def test_versions_path_and_flat_data(self):
        a = np.arange(6, dtype=np.int32).reshape(2, 3)
        req = {"inputs": [{"name": "data", "shape": [2, 3], "datatype": "INT32",
                           "data": a.reshape(-1).tolist()},
                          {"name": "axis", "shape": [1], "datatype": "INT64", "data": [1]}],
               "parameters": {"mode": "index"}}
        status, h, body = call(self.conn, "POST", "/v2/models/Reverse/versions/1/infer",
                               json.dumps(req))
        self.assertEqual(status, 200, body)
        out = json.loads(body)["outputs"][0]
        self.assertEqual(out["data"], np.flip(a, 1).reshape(-1).tolist())
        self.assertNotIn("id", json.loads(body))

    def test_special_floats_and_integer_extremes(self):
        f = np.array([np.nan, np.inf, -np.inf, -0.0, 0.1, 3.4028235e38, 1e-45], np.float32)
        d = np.array([np.nan, -0.0, 0.1, 1.7976931348623157e308, 5e-324], np.float64)
        i = np.array([-2**63, 2**63 - 1, 0, -1], np.int64)
        u = np.array([2**64 - 1, 0, 2**63], np.uint64)
        for a in (f, d, i, u):
            req = {"inputs": [{"name": "data", "shape": [len(a)], "datatype": datatype(a),
                               "data": a.tolist()},
                              {"name": "shift", "shape": [1], "datatype": "INT64", "data": [1]},
                              {"name": "axes", "shape": [1], "datatype": "INT64", "data": [0]}]}
            status, h, body = self.infer("Roll", json.dumps(req), {})
            self.assertEqual(status, 200, body)
            _, arrays = decode_answer(status, h, body)
            self.check(arrays[0], np.roll(a, 1), datatype(a))

    def test_rounding_into_narrow_types(self):
        # Read as the nearest double, then rounded to nearest even into the type.
        values = [1e300, -1e300, 3.4028235677973366e38, 70000.0, 1.00048828125, 1e-50,
                  0.1, 2.0**-149 * 0.5, 2.0**-149 * 0.75]
        for dt, want in (("FP32", np.array(values).astype(np.float32)),
                         ("FP16", np.array(values).astype(np.float16))):
            req = {"inputs": [{"name": "data", "shape": [len(values)], "datatype": dt,
                               "data": values},
                              {"name": "shift", "shape": [1], "datatype": "INT64", "data": [0]},
                              {"name": "axes", "shape": [1], "datatype": "INT64", "data": [0]}],
                   "parameters": {"binary_data_output": True}}
            status, h, body = self.infer("Roll", json.dumps(req), {})
            self.assertEqual(status, 200, body)
            self.check(decode_answer(status, h, body)[1][0], want, dt)

    def test_metadata_health_ready_index(self):
        self.assertEqual(call(self.conn, "GET", "/v2/health/live")[0], 200)
        status, _, body = call(self.conn, "GET", "/v2/health/ready")
        self.assertEqual((status, json.loads(body)), (200, {"ready": True}))
        status, _, body = call(self.conn, "GET", "/v2")
        meta = json.loads(body)
        self.assertEqual(meta["name"], "tensorops")
        self.assertIn("binary_tensor_data", meta["extensions"])
        for model in ("Roll", "Reverse", "ReverseSequence", "onnx.ReverseSequence"):
            for suffix in ("", "/versions/1"):
                status, _, body = call(self.conn, "GET", f"/v2/models/{model}{suffix}")
                self.assertEqual(status, 200, body)
                m = json.loads(body)
                self.assertEqual((m["name"], m["versions"]), (model, ["1"]))
                self.assertTrue(all({"name", "datatype", "shape"} <= set(t) for t in m["inputs"]))
                status, _, body = call(self.conn, "GET", f"/v2/models/{model}{suffix}/ready")
                self.assertEqual((status, json.loads(body)["ready"]), (200, True))
        status, _, body = call(self.conn, "POST", "/v2/repository/index", "")
        self.assertEqual(status, 200)
        self.assertEqual(sorted(m["name"] for m in json.loads(body)),
                         ["Reverse", "ReverseSequence", "Roll", "onnx.ReverseSequence"])
        self.assertTrue(all(m["state"] == "READY" for m in json.loads(body)))

    def test_error_battery_keep_alive(self):
        conn = self.server.conn()
        roll_ok = [{"name": "shift", "shape": [1], "datatype": "INT64", "data": [1]},
                   {"name": "axes", "shape": [1], "datatype": "INT64", "data": [0]}]

        def body(data_input, **extra):
            return json.dumps(dict({"inputs": [data_input] + roll_ok}, **extra))
        rows = [
            # (what, method, path, body, headers, status, text in the error)
            ("malformed JSON", "POST", "/v2/models/Roll/infer", b"{bad", {}, 400, "JSON"),
            ("not an object", "POST", "/v2/models/Roll/infer", b"[1]", {}, 400, "object"),
            ("not UTF-8", "POST", "/v2/models/Roll/infer", b'{"id":"\xff"}', {}, 400, "JSON"),
            ("deep nesting", "POST", "/v2/models/Roll/infer", b"[" * 100000, {}, 400, "JSON"),
            ("unknown datatype", "POST", "/v2/models/Roll/infer",
             body({"name": "data", "shape": [1], "datatype": "FP128", "data": [1]}), {}, 400,
             "FP128"),
            ("count mismatch", "POST", "/v2/models/Roll/infer",
             body({"name": "data", "shape": [3], "datatype": "FP32", "data": [1, 2]}), {}, 400,
             "input 'data'"),
            ("negative shape", "POST", "/v2/models/Roll/infer",
             body({"name": "data", "shape": [-1], "datatype": "FP32", "data": []}), {}, 400,
             "shape"),
            ("wrong element type", "POST", "/v2/models/Roll/infer",
             body({"name": "data", "shape": [1], "datatype": "INT32", "data": ["x"]}), {}, 400,
             "input 'data'"),
            ("out of range", "POST", "/v2/models/Roll/infer",
             body({"name": "data", "shape": [1], "datatype": "INT8", "data": [128]}), {}, 400,
             "out of range"),
            ("non-integer", "POST", "/v2/models/Roll/infer",
             body({"name": "data", "shape": [1], "datatype": "INT32", "data": [1.5]}), {}, 400,
             "integer"),
            ("unknown input", "POST", "/v2/models/Roll/infer",
             body({"name": "dat", "shape": [1], "datatype": "FP32", "data": [1]}), {}, 400,
             "'dat'"),
            ("missing input", "POST", "/v2/models/Roll/infer",
             json.dumps({"inputs": roll_ok}), {}, 400, "data"),
            ("bad parameter", "POST", "/v2/models/Roll/infer",
             body({"name": "data", "shape": [1], "datatype": "FP32", "data": [1]},
                  parameters={"bogus": 1}), {}, 400, "bogus"),
            ("header length beyond body", "POST", "/v2/models/Roll/infer", body(
                {"name": "data", "shape": [1], "datatype": "FP32", "data": [1]}),
             {"Inference-Header-Content-Length": "100000"}, 400,
             "Inference-Header-Content-Length"),
            ("header length zero", "POST", "/v2/models/Roll/infer", b"{}",
             {"Inference-Header-Content-Length": "0"}, 400, "Inference-Header-Content-Length"),
            ("binary size beyond body", "POST", "/v2/models/Roll/infer", None, None, 400,
             "binary_data_size"),
            ("unknown model", "POST", "/v2/models/Nope/infer", b"{}", {}, 404, "Nope"),
            ("unknown version", "GET", "/v2/models/Roll/versions/2", None, {}, 404, "2"),
            ("unknown model metadata", "GET", "/v2/models/Nope", None, {}, 404, "Nope"),
            ("unknown path", "GET", "/v3/x", None, {}, 404, "/v3/x"),
            ("wrong method", "GET", "/v2/models/Roll/infer", None, {}, 405, "POST"),
            ("gzip", "POST", "/v2/models/Roll/infer", b"{}", {"Content-Encoding": "gzip"}, 415,
             "gzip"),
            ("load", "POST", "/v2/repository/models/Roll/load", b"", {}, 501, "Roll"),
        ]
        for what, method, path, b, headers, want, text in rows:
            with self.subTest(what):
                if b is None and method == "POST":
                    head = body({"name": "data", "shape": [2], "datatype": "FP32",
                                 "parameters": {"binary_data_size": 8}}).encode()
                    b = head + b"\0\0\0\0"
                    headers = {"Inference-Header-Content-Length": str(len(head))}
                status, h, answer = call(conn, method, path, b, headers)
                self.assertEqual(status, want, f"{what}: {answer[:200]}")
                self.assertEqual(h["content-type"], "application/json", what)
                err = json.loads(answer)["error"]
                self.assertIn(text, err, what)
        # The same connection still works (keep-alive after 4xx).
        status, _, _ = call(conn, "GET", "/v2/health/live")
        self.assertEqual(status, 200)
        # A BYTES output that is not UTF-8 cannot be JSON: 400 naming it; binary works.
        raw = struct.pack("<I", 1) + b"\xff"
        req = {"inputs": [{"name": "data", "shape": [1], "datatype": "BYTES",
                           "parameters": {"binary_data_size": len(raw)}}] + roll_ok}
        head = json.dumps(req).encode()
        status, _, answer = self.infer("Roll", head + raw,
                                       {"Inference-Header-Content-Length": str(len(head))}, conn)
        self.assertEqual(status, 400)
        self.assertIn("output 'output'", json.loads(answer)["error"])
        req["outputs"] = [{"name": "output", "parameters": {"binary_data": True}}]
        head = json.dumps(req).encode()
        status, h, answer = self.infer("Roll", head + raw,
                                       {"Inference-Header-Content-Length": str(len(head))}, conn)
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer[int(h["inference-header-content-length"]):], raw)
        conn.close()

    def test_body_over_limit_then_server_up(self):
        # 413 from Content-Length alone, before any of the body is sent.
        with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10) as s:
            s.sendall(b"POST /v2/models/Roll/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 2097152\r\n\r\n")
            head = s.recv(4096)
        self.assertTrue(head.startswith(b"HTTP/1.1 413"), head[:100])
        self.assertEqual(call(self.server.conn(), "GET", "/v2/health/live")[0], 200)

    def test_chunked_body(self):
        a = np.arange(1000, dtype=np.float32)
        body, headers = infer_body([("data", a), ("shift", np.array([3], np.int64)),
                                    ("axes", np.array([0], np.int64))], binary_in=("data",),
                                   binary_out=True)
        pieces = [body[i:i + 777] for i in range(0, len(body), 777)]
        conn = self.server.conn()
        for _ in range(2):  # twice on one connection
            conn.request("POST", "/v2/models/Roll/infer", body=iter(pieces), headers=headers,
                         encode_chunked=True)
            r = conn.getresponse()
            answer = r.read()
            self.assertEqual(r.status, 200, answer)
            _, arrays = decode_answer(r.status, dict((k.lower(), v) for k, v in r.getheaders()),
                                      answer)
            self.check(arrays[0], np.roll(a, 3), "chunked")
        conn.close()

    def test_large_bodies_whole_and_chunked(self):
        # A body of many socket reads (just under this server's 1 MiB limit):
        # with Content-Length it is read straight into one buffer, chunked
        # it goes through the HTTP parser; both on one connection, in turn.
        a = test_rng(5).integers(0, 256, 1000000, dtype=np.uint8)
        body, headers = infer_body([("data", a), ("shift", np.array([12345], np.int64)),
                                    ("axes", np.array([0], np.int64))], binary_in=("data",),
                                   binary_out=True)
        self.assertLess(len(body), 1 << 20)
        conn = self.server.conn()
        for chunked in (False, True, False):
            if chunked:
                pieces = [body[i:i + 100003] for i in range(0, len(body), 100003)]
                conn.request("POST", "/v2/models/Roll/infer", body=iter(pieces),
                             headers=headers, encode_chunked=True)
            else:
                conn.request("POST", "/v2/models/Roll/infer", body=body, headers=headers)
            r = conn.getresponse()
            answer = r.read()
            self.assertEqual(r.status, 200, answer[:200])
            _, arrays = decode_answer(r.status, dict((k.lower(), v) for k, v in r.getheaders()),
                                      answer)
            self.check(arrays[0], np.roll(a, 12345), f"chunked={chunked}")
        conn.close()

    def test_transport_errors_are_json(self):
        # What the HTTP parser refuses gets the same {"error"} body as the
        # protocol's own errors, then the connection closes.
        rows = [
            (b"GARBAGE\r\n\r\n", 400, "malformed HTTP request"),
            (b"GET /v2 HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 70000 + b"\r\n\r\n", 431,
             "header"),
            (b"POST /v2/models/Roll/infer HTTP/1.1\r\nHost: x\r\n"
             b"Content-Length: 99999999999\r\n\r\n", 413, "--max_message_bytes"),
            # A chunk declared past the limit: refused before its bytes come.
            (b"POST /v2/models/Roll/infer HTTP/1.1\r\nHost: x\r\n"
             b"Transfer-Encoding: chunked\r\n\r\n200000\r\n", 413, "--max_message_bytes"),
            (b"POST /v2/models/Roll/infer HTTP/1.1\r\nHost: x\r\n"
             b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "malformed HTTP request"),
        ]
        for raw, want, text in rows:
            with self.subTest(raw[:40]):
                data = exchange(self.server.http_port, raw)
                head, _, body = data.partition(b"\r\n\r\n")
                self.assertTrue(head.startswith(b"HTTP/1.1 %d " % want), data[:200])
                self.assertIn(b"\r\nContent-Type: application/json", head)
                self.assertIn(text, json.loads(body)["error"])
        self.assertEqual(call(self.server.conn(), "GET", "/v2/health/live")[0], 200)

    def test_statistics(self):
        a = np.arange(4, dtype=np.int32)
        body, headers = infer_body([("data", a), ("shift", np.array([1], np.int64)),
                                    ("axes", np.array([0], np.int64))])
        self.assertEqual(self.infer("Roll", body, headers)[0], 200)
        status, _, answer = call(self.conn, "GET", "/v2/models/Roll/versions/1/stats")
        self.assertEqual(status, 200, answer)
        s = json.loads(answer)["model_stats"]
        self.assertEqual([m["name"] for m in s], ["Roll"])
        self.assertGreaterEqual(s[0]["inference_count"], 1)
        self.assertGreaterEqual(s[0]["inference_stats"]["success"]["count"], 1)
        self.assertGreater(s[0]["last_inference"], 0)
        status, _, answer = call(self.conn, "GET", "/v2/models/stats")
        self.assertEqual(len(json.loads(answer)["model_stats"]), 4)
        self.assertEqual(call(self.conn, "GET", "/v2/models/Nope/stats")[0], 404)

    def test_shared_memory_off(self):
        status, _, answer = call(self.conn, "POST", "/v2/systemsharedmemory/region/r/register",
                                 json.dumps({"key": "/x", "offset": 0, "byte_size": 8}))
        self.assertEqual(status, 501, answer)
        self.assertEqual(call(self.conn, "GET", "/v2/systemsharedmemory/status")[2], b"[]")

    def test_shared_memory(self):
        server = Server("--shared_memory=system")
        conn = server.conn()
        try:
            a = np.arange(12, dtype=np.float32).reshape(3, 4)
            shm = shared_memory.SharedMemory(create=True, size=2 * a.nbytes)
            try:
                np.ndarray(a.shape, a.dtype, buffer=shm.buf)[:] = a
                key = "/" + shm.name.lstrip("/")
                status, _, answer = call(conn, "POST", "/v2/systemsharedmemory/region/r1/register",
                                         json.dumps({"key": key, "offset": 0,
                                                     "byte_size": 2 * a.nbytes}))
                self.assertEqual(status, 200, answer)
                # The name again: a conflict (409, as ALREADY_EXISTS over gRPC), not a 500.
                status, h, answer = call(conn, "POST", "/v2/systemsharedmemory/region/r1/register",
                                         json.dumps({"key": key, "offset": 0, "byte_size": 8}))
                self.assertEqual(status, 409, answer)
                self.assertEqual(h["content-type"], "application/json")
                self.assertIn("'r1' is already registered", json.loads(answer)["error"])
                # Other inputs the registry refuses: 4xx each, never 500.
                for body, want in [("{", 400), (json.dumps({"key": key}), 400),
                                   (json.dumps({"key": "no-slash", "byte_size": 8}), 400),
                                   (json.dumps({"key": "/tensorops-none", "byte_size": 8}), 404),
                                   (json.dumps({"key": key, "offset": 2 * a.nbytes,
                                                "byte_size": 8}), 400)]:
                    status, _, answer = call(conn, "POST",
                                             "/v2/systemsharedmemory/region/r2/register", body)
                    self.assertEqual(status, want, (body, answer))
                    self.assertIn("error", json.loads(answer))
                status, _, answer = call(conn, "POST", "/v2/systemsharedmemory/region/r9/unregister")
                self.assertEqual(status, 404, answer)
                status, _, answer = call(conn, "GET", "/v2/systemsharedmemory/region/r1/status")
                self.assertEqual(json.loads(answer), [{"name": "r1", "key": key, "offset": 0,
                                                       "byte_size": 2 * a.nbytes}])
                req = {"inputs": [
                    {"name": "data", "shape": [3, 4], "datatype": "FP32",
                     "parameters": {"shared_memory_region": "r1",
                                    "shared_memory_byte_size": a.nbytes}},
                    {"name": "shift", "shape": [1], "datatype": "INT64", "data": [1]},
                    {"name": "axes", "shape": [1], "datatype": "INT64", "data": [1]}],
                    "outputs": [{"name": "output", "parameters": {
                        "shared_memory_region": "r1", "shared_memory_offset": a.nbytes,
                        "shared_memory_byte_size": a.nbytes}}]}
                status, _, answer = call(conn, "POST", "/v2/models/Roll/infer", json.dumps(req))
                self.assertEqual(status, 200, answer)
                out = json.loads(answer)["outputs"][0]
                self.assertNotIn("data", out)
                got = np.ndarray(a.shape, a.dtype, buffer=shm.buf, offset=a.nbytes).copy()
                self.check(got, np.roll(a, 1, axis=1), "shm output")
                req["inputs"][0]["parameters"]["shared_memory_region"] = "nope"
                status, _, answer = call(conn, "POST", "/v2/models/Roll/infer", json.dumps(req))
                self.assertEqual(status, 404, answer)
                self.assertIn("nope", json.loads(answer)["error"])
                status, _, _ = call(conn, "POST", "/v2/systemsharedmemory/region/r1/unregister")
                self.assertEqual(status, 200)
                self.assertEqual(call(conn, "GET", "/v2/systemsharedmemory/status")[2], b"[]")
            finally:
                shm.close()
                shm.unlink()
        finally:
            conn.close()
            self.assertEqual(server.stop(), 0)

    def test_bearer_token(self):
        with tempfile.NamedTemporaryFile("w", suffix=".token") as f:
            f.write("s3cret\n")
            f.flush()
            server = Server(f"--auth_token_file={f.name}")
        conn = server.conn()
        try:
            self.assertEqual(call(conn, "GET", "/v2/health/ready")[0], 200)  # open
            status, _, answer = call(conn, "GET", "/v2/models/Roll")
            self.assertEqual(status, 401, answer)
            self.assertIn("Bearer", json.loads(answer)["error"])
            status, _, _ = call(conn, "GET", "/v2/models/Roll", None,
                                {"Authorization": "Bearer wrong"})
            self.assertEqual(status, 401)
            body, headers = infer_body([("data", np.arange(3, dtype=np.int8)),
                                        ("shift", np.array([1], np.int64)),
                                        ("axes", np.array([0], np.int64))])
            self.assertEqual(self.infer("Roll", body, headers, conn)[0], 401)
            headers["Authorization"] = "Bearer s3cret"
            status, h, answer = self.infer("Roll", body, headers, conn)
            self.assertEqual(status, 200, answer)
            self.check(decode_answer(status, h, answer)[1][0], np.array([2, 0, 1], np.int8), "token")
        finally:
            conn.close()
            self.assertEqual(server.stop(), 0)

    def test_percent_encoded_path_segments(self):
        # Triton's HTTP client quotes model names in paths: /v2/models/R%6Fll is Roll.
        status, _, body = call(self.conn, "GET", "/v2/models/R%6Fll/versions/%31")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["name"], "Roll")
        status, _, body = call(self.conn, "GET", "/v2/models/No%2FSuch")
        self.assertEqual(status, 404, body)
        self.assertIn("'No/Such'", json.loads(body)["error"])

    def test_concurrent_connections_over_event_loops(self):
        # Eight keep-alive connections at once, each checking its own answers.
        errors = []

        def client(k):
            conn = self.server.conn()
            try:
                for j in range(25):
                    a = np.arange(64 * (k + 1), dtype=np.float32) + j
                    body, headers = infer_body([("data", a), ("shift", np.array([k + j], np.int64)),
                                                ("axes", np.array([0], np.int64))],
                                               binary_in=("data",), binary_out=(j % 2 == 0))
                    status, h, answer = self.infer("Roll", body, headers, conn)
                    if status != 200:
                        errors.append(f"client {k} call {j}: {status} {answer[:200]}")
                        return
                    got = decode_answer(status, h, answer)[1][0]
                    if not np.array_equal(got, np.roll(a, k + j)):
                        errors.append(f"client {k} call {j}: wrong answer")
                        return
            finally:
                conn.close()

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_timeout_parameter(self):
        # The kernel gate (a test-only flag) holds every kernel while its file
        # exists: the call below waits in the server past its 100 ms timeout.
        fd, gate = tempfile.mkstemp(prefix="tensorops_kernel_gate.")
        os.close(fd)
        server = Server(f"--test_only_kernel_gate={gate}")
        conn = server.conn()
        opener = threading.Timer(1.5, os.unlink, (gate,))
        try:
            inputs = [("data", np.arange(6, dtype=np.float32)),
                      ("shift", np.array([2], np.int64)), ("axes", np.array([0], np.int64))]
            body, headers = infer_body(inputs, {"timeout": 100000})
            opener.start()
            status, h, answer = self.infer("Roll", body, headers, conn)
            opener.join()
            self.assertEqual(status, 504, answer)
            self.assertEqual(h["content-type"], "application/json")
            self.assertIn("timeout", json.loads(answer)["error"])
            # Gate open: a generous timeout and 0 (none) run; a negative one is 400.
            for t in (60000000, 0):
                body, headers = infer_body(inputs, {"timeout": t})
                status, h, answer = self.infer("Roll", body, headers, conn)
                self.assertEqual(status, 200, answer)
                self.check(decode_answer(status, h, answer)[1][0],
                           np.roll(np.arange(6, dtype=np.float32), 2), f"timeout {t}")
            body, headers = infer_body(inputs, {"timeout": -5})
            status, _, answer = self.infer("Roll", body, headers, conn)
            self.assertEqual(status, 400, answer)
            self.assertIn("'timeout'", json.loads(answer)["error"])
        finally:
            opener.cancel()
            if os.path.exists(gate):
                os.unlink(gate)
            conn.close()
            self.assertEqual(server.stop(), 0)

    def test_pipelined_and_expect_continue(self):
        data = exchange(self.server.http_port,
                        b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
                        b"GET /v2/models/Nope HTTP/1.1\r\nHost: x\r\n\r\n"
                        b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        statuses = re.findall(rb"HTTP/1.1 (\d+)", data)
        self.assertEqual(statuses, [b"200", b"404", b"200"], data)
        body = b'{"inputs":[]}'
        with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10) as s:
            s.sendall(b"POST /v2/models/Roll/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body))
            self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 100"))
            s.sendall(body)
            answer = s.recv(65536)
        self.assertTrue(answer.startswith(b"HTTP/1.1 400"), answer)

    def test_zz_drain(self):
        server = Server()
        conn = server.conn()
        self.assertEqual(call(conn, "GET", "/v2/health/ready")[0], 200)
        server.proc.send_signal(signal.SIGTERM)
        # While draining (at least the announce period): ready and new calls get 503.
        seen_503 = False
        for _ in range(50):
            try:
                status, _, body = call(server.conn(), "GET", "/v2/health/ready")
            except OSError:
                break
            if status == 503:
                seen_503 = True
                status, _, body = call(server.conn(), "GET", "/v2")
                self.assertEqual(status, 503, body)
                self.assertIn("shutting down", json.loads(body)["error"])
                break
        self.assertTrue(seen_503)
        self.assertEqual(server.proc.wait(timeout=30), 0)


if __name__ == "__main__":
    warnings.simplefilter("ignore", ResourceWarning)
    unittest.main(argv=sys.argv[:1], verbosity=1, warnings="ignore")
