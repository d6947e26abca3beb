#!/usr/bin/env python3
"""The HTTP/REST door's connection cap and deadlines over HTTPS.

As tests/e2e/http_limits_e2e_test.cc does for plaintext, with Python's ssl and
the throwaway certificates of tests/client/make_test_certs.sh: a connection
that never starts its handshake, and one that completes it and says nothing,
are closed at --http_header_timeout (counted from the accept); a header
trickled over TLS gets 408; a keep-alive connection waits --http_idle_timeout
(not the header's) for its next request; at the cap a new connection closes
the one idle longest (handshake done or not), and when none is idle it is
closed unanswered (a 503 would need a handshake first).

Usage: http_limits_tls_test.py TENSOROPS_SERVER MAKE_TEST_CERTS_SH
Exit status 0 when every check passed.
"""
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

from rest_server import RestServer

SERVER, MAKE_CERTS = sys.argv[1], sys.argv[2]
LIVE = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"


def wait_closed(s, timeout=5):
    """(seconds until the server closed `s`, what it sent before closing)."""
    s.settimeout(timeout)
    t = time.monotonic()
    got = b""
    try:
        while True:
            d = s.recv(4096)
            if not d:
                break
            got += d
    except (ssl.SSLError, ConnectionError):
        pass  # a close without close_notify, or a reset: closed all the same
    return time.monotonic() - t, got


class HttpLimitsTlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tensorops_http_limits_tls_test.")
        subprocess.run(["bash", MAKE_CERTS, cls.dir], check=True, stdout=subprocess.DEVNULL)
        cls.server = RestServer(
            SERVER, f"--tls_cert={cls.dir}/server.pem", f"--tls_key={cls.dir}/server.key",
            "--http_max_connections=3", "--http_header_timeout=1s", "--http_idle_timeout=3s")
        cls.ctx = ssl.create_default_context(cafile=f"{cls.dir}/ca.pem")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def raw(self):
        return socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5)

    def tls(self):
        return self.ctx.wrap_socket(self.raw(), server_hostname="127.0.0.1")

    def test_silent_connections_close_at_the_header_timeout(self):
        t = time.monotonic()
        plain = self.raw()  # never starts a handshake
        done = self.tls()  # handshake done, no request
        for s in (plain, done):
            took, got = wait_closed(s)
            s.close()
            self.assertEqual(got, b"")
        # Both from their accept: about 1 s, the handshake's time included.
        self.assertGreaterEqual(time.monotonic() - t, 0.9)
        self.assertLess(time.monotonic() - t, 2.5)

    def test_a_trickled_header_gets_408(self):
        s = self.tls()
        s.send(b"GET /v2/heal")
        took, got = wait_closed(s)
        s.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 408 "), got)
        self.assertIn(b"(--http_header_timeout)", got)
        self.assertLess(took, 2.5)

    def test_keep_alive_waits_the_idle_timeout(self):
        s = self.tls()
        s.sendall(LIVE)
        self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200 "))
        time.sleep(1.5)  # past the header timeout, within the idle one
        s.sendall(LIVE)
        self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200 "))
        took, got = wait_closed(s)
        s.close()
        self.assertEqual(got, b"")
        self.assertGreater(took, 2.5)
        self.assertLess(took, 4.5)

    def test_the_cap_closes_the_longest_idle_then_refuses(self):
        # Three idle: one before its handshake, two after it.
        idle = [self.raw(), self.tls(), self.tls()]
        time.sleep(0.2)
        fourth = self.tls()
        fourth.sendall(LIVE)
        self.assertTrue(fourth.recv(4096).startswith(b"HTTP/1.1 200 "))
        took, got = wait_closed(idle[0], timeout=2)
        self.assertLess(took, 1.0)
        for s in idle:
            s.close()
        fourth.close()
        time.sleep(0.2)
        # Three mid-request: none idle; a fourth is closed unanswered, at
        # once or during its handshake.
        busy = []
        for _ in range(3):
            b = self.tls()
            b.send(b"GET /")
            busy.append(b)
        time.sleep(0.2)
        try:
            refused = self.tls()
            took, got = wait_closed(refused, timeout=2)
            self.assertEqual(got, b"")
            self.assertLess(took, 1.0)
            refused.close()
        except (ssl.SSLError, ConnectionError):
            pass  # closed during the handshake
        # The busy ones are served when they finish.
        for b in busy:
            b.sendall(b"v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertTrue(b.recv(4096).startswith(b"HTTP/1.1 200 "))
            b.close()


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
