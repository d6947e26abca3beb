#!/usr/bin/env python3
"""The speed guard (ctest `speed_guard`, label `speed`): a few cells of
BENCHMARKS.md measured against their baselines in the same run, each figure
printed, failing when one falls below its floor.

Cells (the unary cells each the best of five interleaved runs of the cell
and of its baseline, the streamed cell the best of three calls of each):
  - unary Execute and ModelInfer of a Roll, 64 B and 1 MiB, one caller, as
    throughput over the bare gRPC callback echo's (bench/echo_server,
    bench/load_tool);
  - the SDK's 1 GiB streamed Roll (bench/sdk_stream_bench: Client::Roll of a
    Tensor::View, flowing) over a full-duplex gRPC echo stream of the same
    bytes (load_tool --mode=stream --target=echo), as call time;
  - a few one-thread kernel cells at 16 MiB against memcpy timed alternately
    in the same run (bench/kernels_bench's x_memcpy_best; the median of
    three runs, not the best).

A floor is the issue's goal x 0.85 (issue 44) where today's code meets that
on a quiet machine, else today's level x 0.85 (so the guard fails on a
regression, not on a goal not reached yet); FLOORS below says which, cell by
cell. Measuring needs a quiet machine: when the 1-minute load average at the
start is above 1.5 (after waiting up to --wait seconds for it to fall, as it
does after a build) the guard prints "skipped: load average X > 1.5" and
exits 77 (ctest SKIP_RETURN_CODE), and it says when the load rose during the
run.
Starts its servers on 127.0.0.1 (port 0) and stops them by PID.

Usage: bench/speed_guard.py BUILD_DIR [--max_load=1.5] [--wait=0] [--only=unary,stream,kernels]
                             [--stream_mib=1024] (less: to try the script, not a figure)
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20
MAX_MSG = 285212672  # tensorops-server's default --max_message_bytes
SKIP = 77

# cell -> (floor, why). Goals: issue 44 ("every cell >= 0.95x the echo;
# >= 1 MiB >= 1.4x"; "the SDK's flowing 1 GiB Roll >= 0.95x a full-duplex
# echo"; "every one-thread kernel cell >= 0.85x memcpy").
FLOORS = {
    # Goal 0.95x, not met on this machine: 0.75-0.93x in four quiet runs
    # (2026-11-29, load < 1.1; a 64 B call at one caller is scheduling-bound
    # and its ratio moves +-8% run to run), so today's 0.82x x 0.85.
    "Execute 64 B x1 / echo": (0.82 * 0.85, "today's 0.82x x 0.85 (goal 0.95x not met)"),
    "ModelInfer 64 B x1 / echo": (0.82 * 0.85, "today's 0.82x x 0.85 (goal 0.95x not met)"),
    # Goal 1.4x, met (1.83-2.66x in the same runs: the bare echo takes ~730
    # page faults per 1 MiB call, the server's buffer cache none): 1.4 x 0.85.
    "Execute 1 MiB x1 / echo": (1.4 * 0.85, "goal 1.4x x 0.85"),
    "ModelInfer 1 MiB x1 / echo": (1.4 * 0.85, "goal 1.4x x 0.85"),
    # Goal 0.95x, met or nearly since the SDK sink's huge-page advice comes
    # before its first touch (0.91-1.02x in four quiet runs; 0.67x at
    # f5ab076, issue 44): 0.95 x 0.85.
    "SDK 1 GiB streamed Roll / duplex echo": (0.95 * 0.85, "goal 0.95x x 0.85"),
}
# Kernel cells: memcpy-like patterns that meet 0.85x today (issue 44's slow
# cells, the last-axis Reverse, time-major ReverseSequence and the 8-op
# UINT8 chains, are not among them).
KERNEL_CELLS = [
    "Roll/1_axis/FLOAT32/16MiB/threads:1/real_time",
    "Reverse/first_axis/FLOAT32/16MiB/threads:1/real_time",
    "Reverse/middle_axis/UINT8/16MiB/threads:1/real_time",
]
for _cell in KERNEL_CELLS:
    FLOORS["kernel " + _cell.split("/16MiB")[0] + " / memcpy"] = (
        0.85 * 0.85, "goal 0.85x x 0.85")


def load_average():
    return os.getloadavg()[0]


class Server:
    """A server on 127.0.0.1 with port 0; its port read from its log."""

    def __init__(self, name, argv, workdir):
        self.name = name
        self.log_path = os.path.join(workdir, name + ".log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        self.port = None
        for _ in range(200):
            with open(self.log_path) as f:
                m = re.search(r"listening on 127\.0\.0\.1:(\d+)", f.read())
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        with open(self.log_path) as f:
            raise RuntimeError("%s did not start:\n%s" % (name, f.read()))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def run_json(argv, timeout):
    """Runs a tool that prints JSON lines; returns them parsed."""
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=timeout)
    lines = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError("%s failed (exit %d):\n%s%s" % (
            " ".join(argv), out.returncode, out.stdout, out.stderr))
    return lines


def unary_rps(build, target, port, payload):
    line = run_json([
        os.path.join(build, "bench", "load_tool"), "--target=" + target,
        "--address=127.0.0.1:%d" % port, "--payload_bytes=%d" % payload, "--concurrency=1",
        "--warmup_seconds=0.2", "--duration_seconds=0.6",
        "--max_message_bytes=%d" % MAX_MSG], 60)[-1]
    if line.get("errors", 0) or line.get("verify_failures", 0):
        raise RuntimeError("%s %d B: errors in %s" % (target, payload, line))
    return float(line["rps"])


def unary_cells(build, echo, tensorops):
    cells = {}
    for payload, label in ((64, "64 B"), (MIB, "1 MiB")):
        best = {"echo": 0.0, "tensorops": 0.0, "oip": 0.0}
        for _ in range(5):  # interleaved, so each sees the same machine
            for target in ("echo", "tensorops", "oip"):
                port = echo.port if target == "echo" else tensorops.port
                best[target] = max(best[target], unary_rps(build, target, port, payload))
        for target, name in (("tensorops", "Execute"), ("oip", "ModelInfer")):
            cells["%s %s x1 / echo" % (name, label)] = (
                best[target] / best["echo"],
                "%.0f / %.0f rps" % (best[target], best["echo"]))
    return cells


def stream_cell(build, echo, tensorops, size):
    echo_lines = run_json([
        os.path.join(build, "bench", "load_tool"), "--mode=stream", "--target=echo",
        "--address=127.0.0.1:%d" % echo.port, "--tensor_bytes=%d" % size, "--calls=3",
        "--max_message_bytes=%d" % MAX_MSG], 300)
    sdk_lines = run_json([
        os.path.join(build, "bench", "sdk_stream_bench"),
        "--address=127.0.0.1:%d" % tensorops.port, "--tensor_bytes=%d" % size, "--calls=3"], 300)
    for line in echo_lines + sdk_lines:
        if line.get("verified") is not True or line.get("error"):
            raise RuntimeError("streamed call failed: %s" % line)
    echo_s = min(l["seconds"] for l in echo_lines)
    sdk_s = min(l["seconds"] for l in sdk_lines)
    return {"SDK 1 GiB streamed Roll / duplex echo": (
        echo_s / sdk_s, "best of 3: %.3f s / %.3f s for %d MiB" % (sdk_s, echo_s, size >> 20))}


def kernel_cells(build):
    out = subprocess.run([
        os.path.join(build, "bench", "kernels_bench"),
        "--benchmark_filter=^(" + "|".join(re.escape(c) for c in KERNEL_CELLS) + ")$",
        "--benchmark_repetitions=3", "--benchmark_format=json", "--benchmark_min_time=0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError("kernels_bench failed:\n" + out.stderr)
    # x_memcpy_best: memcpy's best iteration over the kernel's best, both
    # timed alternately in one run; the median of the three runs (a ratio's
    # best would keep the run where memcpy alone was slowed).
    runs = {}
    for b in json.loads(out.stdout)["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        runs.setdefault(b.get("run_name", b["name"]), []).append(float(b["x_memcpy_best"]))
    cells = {}
    for c in KERNEL_CELLS:
        if len(runs.get(c, [])) != 3:
            raise RuntimeError("kernels_bench did not run %s three times" % c)
        ratios = sorted(runs[c])
        cells["kernel " + c.split("/16MiB")[0] + " / memcpy"] = (
            ratios[1], "median of 3 runs: %s" % ", ".join("%.2f" % r for r in ratios))
    return cells


def main(argv):
    build = None
    max_load = 1.5
    only = {"unary", "stream", "kernels"}
    stream_bytes = 1 << 30
    wait_seconds = 0
    for a in argv[1:]:
        if a.startswith("--max_load="):
            max_load = float(a.split("=", 1)[1])
        elif a.startswith("--stream_mib="):  # a quick check of the script itself
            stream_bytes = int(a.split("=", 1)[1]) << 20
        elif a.startswith("--wait="):
            wait_seconds = int(a.split("=", 1)[1])
        elif a.startswith("--only="):
            only = set(a.split("=", 1)[1].split(","))
        elif a.startswith("-"):
            print(__doc__)
            return 2
        else:
            build = a
    if build is None:
        print(__doc__)
        return 2
    start_load = load_average()
    waited = 0
    while start_load > max_load and waited < wait_seconds:
        time.sleep(5)  # the 1-minute average falls by about a tenth in 5 s
        waited += 5
        start_load = load_average()
    if start_load > max_load:
        print("speed_guard: skipped: load average %.2f > %.1f (measuring needs a quiet machine)"
              % (start_load, max_load))
        return SKIP
    t0 = time.time()
    cells = {}
    with tempfile.TemporaryDirectory(prefix="speed_guard.") as work:
        servers = []
        try:
            if only & {"unary", "stream"}:
                echo = Server("echo", [os.path.join(build, "bench", "echo_server"),
                                       "--host=127.0.0.1", "--port=0",
                                       "--max_message_bytes=%d" % MAX_MSG], work)
                servers.append(echo)
                tensorops = Server("tensorops", [
                    os.path.join(build, "server", "tensorops-server"), "--host=127.0.0.1",
                    "--port=0", "--metrics_port=0", "--http_port=-1", "--log_level=warning",
                    "--max_message_bytes=%d" % MAX_MSG], work)
                servers.append(tensorops)
                if "unary" in only:
                    cells.update(unary_cells(build, echo, tensorops))
                if "stream" in only:
                    cells.update(stream_cell(build, echo, tensorops, stream_bytes))
        finally:
            for s in servers:
                s.stop()
        if "kernels" in only:
            cells.update(kernel_cells(build))
    end_load = load_average()
    failed = 0
    print("%-46s %7s %7s  %-6s %s" % ("cell", "ratio", "floor", "result", "figures; floor"))
    for name, (ratio, figures) in cells.items():
        floor, why = FLOORS[name]
        ok = ratio >= floor
        failed += not ok
        print("%-46s %6.2fx %6.2fx  %-6s %s; floor: %s" % (
            name, ratio, floor, "ok" if ok else "FAILED", figures, why))
    print("speed_guard: %d of %d cells below their floor; %.0f s; load average %.2f at the start, "
          "%.2f at the end%s" % (failed, len(cells), time.time() - t0, start_load, end_load,
                                 " (rose during the run: figures are suspect)"
                                 if end_load > max_load else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
