#!/usr/bin/env python3
"""HTTPS and mutual TLS on tensorops-server's HTTP/REST door, with an independent client.

Python's http.client and ssl (OpenSSL through Python, not the server's code)
against the real binary on 127.0.0.1, with throwaway certificates from
tests/client/make_test_certs.sh (the ones the gRPC security tests use):
health and an infer over HTTPS, the server certificate verified against the
test CA; a plaintext request to the HTTPS port gets no HTTP answer; with
--tls_client_ca a client without a certificate, or with one from another CA,
is refused and one with a certificate from that CA is served; the bearer
token is enforced over HTTPS; the server stays up after every refused
handshake.

Usage: rest_tls_test.py TENSOROPS_SERVER MAKE_TEST_CERTS_SH
Exit status 0 when every check passed.
"""
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import unittest

from rest_server import RestServer

SERVER, MAKE_CERTS = sys.argv[1], sys.argv[2]
TOKEN = "https-s3cret"

# Roll of [1, 2, 3, 4] by 1 along axis 0, in KServe v2 JSON.
ROLL_BODY = json.dumps({"inputs": [
    {"name": "data", "shape": [4], "datatype": "INT32", "data": [1, 2, 3, 4]},
    {"name": "shift", "shape": [1], "datatype": "INT64", "data": [1]},
    {"name": "axes", "shape": [1], "datatype": "INT64", "data": [0]},
]})
ROLL_EXPECTED = [4, 1, 2, 3]


def Server(*args):
    return RestServer(SERVER, *args)


def call(conn, method, path, body=None, headers=None):
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    return r.status, r.read()


class RestTlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tensorops_rest_tls_test.")
        subprocess.run(["bash", MAKE_CERTS, cls.dir], check=True, stdout=subprocess.DEVNULL)
        with open(cls.path("token"), "w") as f:
            f.write(TOKEN + "\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    def tls_flags(self, client_ca=None):
        flags = [f"--tls_cert={self.path('server.pem')}", f"--tls_key={self.path('server.key')}"]
        if client_ca:
            flags.append(f"--tls_client_ca={self.path(client_ca + '.pem')}")
        return flags

    def start(self, *args):
        server = Server(*args)
        self.addCleanup(server.stop)
        return server

    def context(self, client=None):
        """Trusts the test CA only and checks the name (127.0.0.1 is in the certificate)."""
        ctx = ssl.create_default_context(cafile=self.path("ca.pem"))
        if client:
            ctx.load_cert_chain(self.path(client + ".pem"), self.path(client + ".key"))
        return ctx

    def https(self, server, client=None):
        conn = http.client.HTTPSConnection("127.0.0.1", server.http_port, timeout=10,
                                           context=self.context(client))
        self.addCleanup(conn.close)
        return conn

    def check_served(self, conn, headers=None):
        """Health and a Roll over `conn`, with the expected answers."""
        status, body = call(conn, "GET", "/v2/health/ready")
        self.assertEqual((status, json.loads(body)), (200, {"ready": True}))
        status, body = call(conn, "POST", "/v2/models/Roll/infer", ROLL_BODY,
                            dict({"Content-Type": "application/json"}, **(headers or {})))
        self.assertEqual(status, 200, body)
        out = json.loads(body)["outputs"][0]
        self.assertEqual((out["datatype"], out["shape"], out["data"]),
                         ("INT32", [4], ROLL_EXPECTED))

    def assert_refused(self, server, client=None):
        """The handshake (or, with TLS 1.3, the first read after it) fails: no status at all."""
        conn = self.https(server, client)
        with self.assertRaises((ssl.SSLError, ConnectionError, http.client.HTTPException)) as cm:
            call(conn, "GET", "/v2/health/ready")
        # A refusal, not a dead server.
        self.assertTrue(server.alive(), cm.exception)

    def test_https_serves_health_and_infer(self):
        server = self.start(*self.tls_flags())
        self.assertEqual(server.scheme, "https")
        conn = self.https(server)
        self.check_served(conn)
        self.check_served(conn)  # keep-alive: the same TLS connection again
        self.assertIn(conn.sock.version(), ("TLSv1.2", "TLSv1.3"))
        # A client that does not trust the issuer gives up in its handshake.
        conn = http.client.HTTPSConnection(
            "127.0.0.1", server.http_port, timeout=10,
            context=ssl.create_default_context(cafile=self.path("other_ca.pem")))
        self.addCleanup(conn.close)
        with self.assertRaises(ssl.SSLCertVerificationError):
            call(conn, "GET", "/v2/health/ready")

    def test_plaintext_to_https_port_gets_no_answer(self):
        server = self.start(*self.tls_flags())
        # Raw bytes: whatever comes back (a TLS alert, or nothing) is no HTTP answer.
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as s:
            s.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            try:
                while chunk := s.recv(65536):
                    data += chunk
            except ConnectionResetError:
                pass
        self.assertNotIn(b"HTTP/", data)
        self.assertNotIn(b"ready", data)
        # Python's plaintext client fails the same way.
        conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
        self.addCleanup(conn.close)
        with self.assertRaises((ConnectionError, http.client.HTTPException)):
            call(conn, "POST", "/v2/models/Roll/infer", ROLL_BODY)
        # The failed handshakes closed their connections only.
        self.assertTrue(server.alive())
        self.check_served(self.https(server))

    def test_plain_server_prints_http(self):
        server = self.start()
        self.assertEqual(server.scheme, "http")
        conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
        self.addCleanup(conn.close)
        self.check_served(conn)

    def test_mutual_tls(self):
        server = self.start(*self.tls_flags(client_ca="ca"))
        self.assertEqual(server.scheme, "https")
        self.assert_refused(server)  # no client certificate
        self.assert_refused(server, "other_client")  # signed by another CA
        self.check_served(self.https(server, "client"))

    def test_bearer_token_over_https(self):
        server = self.start(*self.tls_flags(client_ca="ca"),
                            f"--auth_token_file={self.path('token')}")
        conn = self.https(server, "client")
        self.assertEqual(call(conn, "GET", "/v2/health/live")[0], 200)  # open
        status, body = call(conn, "GET", "/v2/models/Roll")
        self.assertEqual(status, 401, body)
        self.assertIn("Bearer", json.loads(body)["error"])
        self.assertEqual(call(conn, "POST", "/v2/models/Roll/infer", ROLL_BODY,
                              {"Authorization": "Bearer wrong"})[0], 401)
        self.check_served(conn, {"Authorization": "Bearer " + TOKEN})


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
