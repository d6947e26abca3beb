#!/usr/bin/env python3
"""A call whose deadline passes ends once on the wire (raw HTTP/2, no gRPC client).

gRPC 1.51's server-side deadline timer answered such a call with a
trailers-only HEADERS (END_STREAM) and RST_STREAM, then sent the same pair
again on the closed stream; HAProxy 2.6 takes a frame after END_STREAM for a
connection error and drops every call on that backend connection
(GOAWAY(STREAM_CLOSED), docs/reliability.md). The server now runs without
gRPC's deadline timer (server/grpc/grpc_server.cc). Checked here, with
frames written by hand so that the client does only what the case needs:

- after the server's first frame that ends the stream (END_STREAM or
  RST_STREAM), no frame on that stream follows but one RST_STREAM after
  trailers, in each case;
- the request still arriving when its deadline passes (as HAProxy relays a
  4 MiB request): the client cancels at its deadline, as stock clients and
  HAProxy do;
- the request complete and its kernel held (--test_only_kernel_gate) until
  well past the deadline: the answer is DEADLINE_EXCEEDED, once, from the
  server's own check (the kernel did not run);
- the same with the client's cancel at its deadline before the kernel is let go;
- the connection is never closed (no GOAWAY) and serves a next call.

Usage: deadline_rst_python_test.py TENSOROPS_SERVER PROTO_DIR
Exit status 0 when every check passed.
"""
import os
import re
import socket
import struct
import sys
import tempfile
import time
import unittest

from grpc_tools import protoc
from rest_server import RestServer

SERVER, PROTO_DIR = sys.argv[1], sys.argv[2]
STUBS = tempfile.mkdtemp(prefix="deadline-rst-stubs-")
_WKT = os.path.join(os.path.dirname(protoc.__file__), "_proto")
if protoc.main(["protoc", f"-I{PROTO_DIR}", f"-I{_WKT}", f"--python_out={STUBS}",
                os.path.join(PROTO_DIR, "tensorops", "v1", "tensorops.proto")]) != 0:
    sys.exit("protoc failed on tensorops/v1")
sys.path.insert(0, STUBS)
from tensorops.v1 import tensorops_pb2 as pb  # noqa: E402

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
CANCEL = 0x8
NAMES = {DATA: "DATA", HEADERS: "HEADERS", RST_STREAM: "RST_STREAM", SETTINGS: "SETTINGS",
         PING: "PING", GOAWAY: "GOAWAY", 0x8: "WINDOW_UPDATE"}


def reverse_request():
    req = pb.ExecuteRequest(op="Reverse")
    req.attrs.update({"mode": "index"})
    req.inputs.add(dtype=pb.DATA_TYPE_UINT8, shape=[8], raw_data=b"abcdefgh")
    req.inputs.add(dtype=pb.DATA_TYPE_INT64, shape=[1], int64_data=[0])
    return req.SerializeToString()


class Frame:
    def __init__(self, ftype, flags, stream, payload, at):
        self.type, self.flags, self.stream, self.payload, self.at = ftype, flags, stream, payload, at

    def ends_stream(self):
        return self.type == RST_STREAM or (self.type in (DATA, HEADERS) and self.flags & END_STREAM)

    def grpc_status(self):
        """grpc-status of a HEADERS frame when written as a literal (gRPC writes it so
        the first time on a connection, and in its hand-rolled trailers), else None."""
        m = re.search(rb"grpc-status[\x01\x02](\d+)", self.payload)
        return int(m.group(1)) if m else None

    def __repr__(self):
        return (f"{NAMES.get(self.type, self.type)}(stream={self.stream} flags={self.flags:#x} "
                f"at={self.at * 1000:.0f}ms {self.payload[:60]!r})")


class RawH2:
    """One client connection; frames written whole, header blocks as HPACK
    literals without indexing (no dynamic table, no Huffman)."""

    def __init__(self, port):
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        self.frames = []
        self.t0 = time.monotonic()
        self.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        self.frame(SETTINGS, 0, 0)

    def send(self, data):
        self.sock.sendall(data)

    def frame(self, ftype, flags, stream, payload=b""):
        self.send(struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) +
                  struct.pack(">I", stream) + payload)

    def request_headers(self, stream, timeout):
        def lit(name, value):
            n, v = name.encode(), value.encode()
            return bytes([0, len(n)]) + n + bytes([len(v)]) + v
        block = b"".join(lit(k, v) for k, v in [
            (":method", "POST"), (":scheme", "http"), (":path", "/tensorops.v1.TensorOps/Execute"),
            (":authority", f"127.0.0.1:{self.port}"), ("content-type", "application/grpc"),
            ("te", "trailers"), ("grpc-timeout", timeout)])
        self.frame(HEADERS, END_HEADERS, stream, block)

    def message(self, stream, body, announced=None, end=True):
        """A gRPC message on `stream`: its 5-byte prefix (length `announced`,
        default len(body)), then `body`."""
        n = len(body) if announced is None else announced
        self.frame(DATA, END_STREAM if end else 0, stream, b"\0" + struct.pack(">I", n) + body)

    def cancel(self, stream):
        self.frame(RST_STREAM, 0, stream, struct.pack(">I", CANCEL))

    def read_for(self, seconds):
        """Reads frames for `seconds` (answering SETTINGS and PINGs as a live client)."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 16)
            except socket.timeout:
                return
            if not data:
                self.frames.append(Frame(-1, 0, 0, b"EOF", time.monotonic() - self.t0))
                return
            self.buf += data
            while len(self.buf) >= 9:
                length = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + length:
                    break
                f = Frame(self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7fffffff,
                          self.buf[9:9 + length], time.monotonic() - self.t0)
                self.buf = self.buf[9 + length:]
                self.frames.append(f)
                if f.type == SETTINGS and not f.flags & ACK:
                    self.frame(SETTINGS, ACK, 0)
                elif f.type == PING and not f.flags & ACK:
                    self.frame(PING, ACK, 0, f.payload)

    def on(self, stream):
        return [f for f in self.frames if f.stream == stream]

    def close(self):
        self.sock.close()


class DeadlineEndsOnceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        fd, cls.gate = tempfile.mkstemp(prefix="deadline-rst-gate-")
        os.close(fd)
        os.unlink(cls.gate)  # open: kernels run
        cls.server = RestServer(SERVER, f"--test_only_kernel_gate={cls.gate}")

    @classmethod
    def tearDownClass(cls):
        if os.path.exists(cls.gate):
            os.unlink(cls.gate)
        alive = cls.server.alive()
        cls.server.stop()
        if not alive:
            raise AssertionError("the server died (its stderr is above)")

    def setUp(self):
        self.h2 = RawH2(self.server.grpc_port)

    def tearDown(self):
        self.h2.close()

    def assert_ends_once(self, stream):
        frames = self.h2.on(stream)
        ends = [i for i, f in enumerate(frames) if f.ends_stream()]
        self.assertTrue(ends, f"the server never ended stream {stream}: {frames}")
        # RFC 9113 section 5.1: nothing but PRIORITY after a frame that closed the
        # stream. A second trailers HEADERS is what HAProxy 2.6 drops the
        # whole connection for.
        # One RST_STREAM may follow trailers (RFC 9113 section 8.1: the server
        # asks the client to stop sending the rest of the request).
        after = frames[ends[0] + 1:]
        if frames[ends[0]].type != RST_STREAM and after and after[0].type == RST_STREAM:
            after = after[1:]
        self.assertFalse(after, f"frames after the server ended stream {stream}: {frames}")

    def assert_connection_serves(self, stream):
        """No GOAWAY, and a next call on the same connection answers OK."""
        self.assertFalse([f for f in self.h2.frames if f.type in (GOAWAY, -1)], self.h2.frames)
        self.h2.request_headers(stream, "10S")
        self.h2.message(stream, reverse_request())
        deadline = time.monotonic() + 10
        while not any(f.ends_stream() for f in self.h2.on(stream)) and time.monotonic() < deadline:
            self.h2.read_for(0.1)
        # The reply message (grpc-status may be HPACK-indexed by now: not read).
        self.assertTrue([f for f in self.h2.on(stream) if f.type == DATA and len(f.payload) > 5],
                        self.h2.on(stream))
        self.assert_ends_once(stream)

    def test_request_still_arriving(self):
        # 16 KB of a 4 MiB message: the deadline (50 ms) passes while the
        # request is incomplete, as HAProxy relays a big request.
        self.h2.request_headers(1, "50m")
        self.h2.message(1, b"\0" * 16000, announced=4 << 20, end=False)
        self.h2.read_for(0.3)
        self.h2.cancel(1)  # the client's deadline: it cancels, as HAProxy does for it
        self.h2.read_for(0.5)
        self.assertFalse([f for f in self.h2.on(1) if f.type in (DATA, HEADERS)][1:],
                         self.h2.on(1))
        if any(f.ends_stream() for f in self.h2.on(1)):
            self.assert_ends_once(1)
        self.assert_connection_serves(3)

    def test_kernel_held_past_deadline(self):
        open(self.gate, "w").close()  # shut: the kernel waits
        try:
            self.h2.request_headers(1, "50m")
            self.h2.message(1, reverse_request())
            self.h2.read_for(0.4)
        finally:
            os.unlink(self.gate)
        self.h2.read_for(0.6)
        self.assert_ends_once(1)
        statuses = [f.grpc_status() for f in self.h2.on(1) if f.type == HEADERS]
        self.assertEqual(statuses, [4], self.h2.on(1))  # DEADLINE_EXCEEDED, once
        self.assert_connection_serves(3)

    def test_kernel_held_client_cancels_at_deadline(self):
        open(self.gate, "w").close()
        try:
            self.h2.request_headers(1, "50m")
            self.h2.message(1, reverse_request())
            self.h2.read_for(0.2)
            self.h2.cancel(1)
            self.h2.read_for(0.2)
        finally:
            os.unlink(self.gate)
        self.h2.read_for(0.6)
        if any(f.ends_stream() for f in self.h2.on(1)):
            self.assert_ends_once(1)
        self.assert_connection_serves(3)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
