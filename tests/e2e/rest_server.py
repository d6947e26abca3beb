"""tensorops-server as a child process for the HTTP/REST Python tests.

Shared by rest_python_test.py, rest_tls_test.py and chain_python_test.py. The
server listens on 127.0.0.1 with free ports (gRPC, HTTP) and is stopped by its
PID; its stderr goes to the test's own (ctest shows it on failure).
"""

import http.client
import os
import queue
import re
import signal
import subprocess
import threading


class RestServer:
    """`binary` with --http_port=0 and `args`; grpc_port, http_port and scheme from its
    start lines."""

    def __init__(self, binary, *args, stderr=None, env=None):
        """`stderr`: where the server's stderr goes (a file object; None: the test's own);
        `env`: variables added to the server's environment."""
        self.proc = subprocess.Popen(
            [binary, "--host=127.0.0.1", "--port=0", "--metrics_port=-1",
             "--http_host=127.0.0.1", "--http_port=0", *args],
            stdout=subprocess.PIPE, stderr=stderr, text=True,
            env=None if env is None else {**os.environ, **env})
        self.grpc_port = None
        self.http_port = None
        self.metrics_port = None  # with --metrics_port=0 among `args`
        self.scheme = None
        # The start lines come in one flush, then stdout stays open and
        # silent: read them on a thread so a missing http line fails, not hangs.
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in self.proc.stdout],
                         daemon=True).start()
        try:
            while self.http_port is None:
                line = lines.get(timeout=20)
                g = re.search(r"^tensorops-server listening on 127\.0\.0\.1:(\d+)$", line.strip())
                if g:
                    self.grpc_port = int(g.group(1))
                g = re.search(r"^tensorops-server metrics on http://[^ ]+:(\d+)/metrics$",
                              line.strip())
                if g:
                    self.metrics_port = int(g.group(1))
                m = re.search(r"^tensorops-server http on (https?)://127\.0\.0\.1:(\d+)$",
                              line.strip())
                if m:
                    self.scheme, self.http_port = m.group(1), int(m.group(2))
        except queue.Empty:
            self.stop()
            raise RuntimeError("server printed no http line (its stderr is above)")

    def conn(self):
        """A plain HTTP keep-alive connection to the server."""
        return http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=30)

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM, wait; the exit status (0 after a clean drain)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        return self.proc.returncode
