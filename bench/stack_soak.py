#!/usr/bin/env python3
"""Soak through a balancer: mixed traffic against a deployed stack (the compose
stack's HAProxy, or tests/deploy/local_stack_test.sh's) for a while, every
answer checked, the replicas' resident memory sampled (issue 36).

  /usr/bin/python3 bench/stack_soak.py --grpc 127.0.0.1:8080 --rest 127.0.0.1:8000 \
      --seconds 600 [--pid tensorops-1=PID ...] [--csv rss.csv] [--proto-dir proto] \
      [--threads KIND=N,...] [--retries off|on] [--bdp-probe on|off] [--one-channel]
      [--rss-interval 60] [--rss-rise-max 10]

Traffic, each kind on its own threads (each with a channel, so a connection,
of its own unless --one-channel), one call at a time per thread, from a stock client (Python grpcio,
http.client) with no retry policy and, by default, gRPC core's retries off
(--retries off: grpc.enable_retries 0, not even the transparent resend of a
stream the server never saw), so every failure a balancer or a replica causes
is seen here as it is:
  small      Execute Reverse of 16 B-4 KiB (raw UINT8)
  big        Execute Reverse of 1-4 MiB (raw UINT8)
  large      Execute Reverse of 1-16 MiB (raw UINT8)
  stream     ExecuteStream Reverse of 16-64 MiB in 1 MiB chunks
  infer      ModelInfer Roll of an INT32 [1..64, 1..64] (raw)
  rest       POST /v2/models/Roll/infer, JSON and binary alternately
  cancel     Execute of 4 MiB cancelled by the client after 0-3 ms
  deadline   Execute of 4 MiB with a 1-5 ms deadline
Allowed: OK everywhere; CANCELLED for cancel; DEADLINE_EXCEEDED for deadline.
Nothing else, whatever the balancer: an earlier version forgave deadline calls
ending CANCELLED (RST_STREAM 8) and, for cancel and deadline, the next call
of a channel ending UNAVAILABLE "GOAWAY received" after gRPC core reset a
stream it never opened (docs/reliability.md says what became of both).
Anything else is unexpected, and a wrong answer is wrong: either fails the
run (exit 1). With --pid, each replica's VmRSS (/proc/PID/status) is sampled
every 5 s; its level per --rss-interval (60 s) is the floor of that
interval's samples (what stays held, not a call's bytes passing through),
and a least-squares line through the levels after the first (warm-up) may
rise by at most --rss-rise-max (10%) of its start over the run, or the run
fails (exit 1) as it does for a wrong answer.
"""
import argparse
import http.client
import json
import os
import random
import sys
import tempfile
import threading
import time
import zlib

import grpc
import numpy as np
from grpc_tools import protoc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20


def load_stubs(proto_dir):
    out = tempfile.mkdtemp(prefix="stack-soak-stubs-")
    wkt = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    if protoc.main(["protoc", f"-I{proto_dir}", f"-I{wkt}", f"--python_out={out}",
                    f"--grpc_python_out={out}",
                    os.path.join(proto_dir, "tensorops", "v1", "tensorops.proto"),
                    os.path.join(proto_dir, "inference", "grpc_service.proto")]) != 0:
        sys.exit("stack_soak: protoc failed")
    sys.path.insert(0, out)
    global pb, pb_grpc, ipb, ipb_grpc
    from tensorops.v1 import tensorops_pb2 as pb
    from tensorops.v1 import tensorops_pb2_grpc as pb_grpc
    from inference import grpc_service_pb2 as ipb
    from inference import grpc_service_pb2_grpc as ipb_grpc


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.codes = {}  # (kind, code) -> calls
        self.problems = []
        self.unexpected = 0
        self.wrong = 0
        self.latency = {}  # kind -> [seconds of each OK call]

    def count(self, kind, code, allowed=("OK",), detail="", seconds=None):
        with self.lock:
            self.codes[(kind, code)] = self.codes.get((kind, code), 0) + 1
            if code == "OK" and seconds is not None:
                self.latency.setdefault(kind, []).append(seconds)
            if code == "WRONG":
                self.wrong += 1
            elif code not in allowed:
                self.unexpected += 1
            else:
                return
            if len(self.problems) < 20:
                self.problems.append("%.1f s %s: %s %s" % (time.time() - START, kind, code,
                                                            detail[:300]))


START = time.time()
# One pool of random bytes; a call takes a slice at a random offset.
POOL = np.random.default_rng(1).integers(0, 256, 80 * MIB, dtype=np.uint8)


def slice_of(rng, n):
    off = rng.randrange(0, len(POOL) - n)
    return POOL[off:off + n]


def execute_reverse(stub, data, timeout, cancel_after=None):
    """Execute Reverse (index mode, axis 0) of a 1-D UINT8 tensor: (code, ok)."""
    req = pb.ExecuteRequest(op="Reverse")
    req.attrs.update({"mode": "index"})
    req.inputs.add(dtype=pb.DATA_TYPE_UINT8, shape=[len(data)], raw_data=data.tobytes())
    req.inputs.add(dtype=pb.DATA_TYPE_INT64, shape=[1], int64_data=[0])
    fut = stub.Execute.future(req, timeout=timeout)
    if cancel_after is not None:
        time.sleep(cancel_after)
        fut.cancel()
    try:
        resp = fut.result()
    except grpc.FutureCancelledError:
        return "CANCELLED", True, ""
    except grpc.RpcError as e:
        return e.code().name, True, e.details() or ""
    out = np.frombuffer(resp.outputs[0].raw_data, dtype=np.uint8)
    return "OK", bool(np.array_equal(out, data[::-1])), ""


def stream_reverse(stub, data, chunk=MIB):
    raw = data.tobytes()
    shift = np.array([0], dtype=np.int64).tobytes()
    h = pb.StreamHeader(op="Reverse")
    h.attrs.update({"mode": "index"})
    h.inputs.add(dtype=pb.DATA_TYPE_UINT8, shape=[len(raw)], crc32=zlib.crc32(raw))
    h.inputs.add(dtype=pb.DATA_TYPE_INT64, shape=[1], crc32=zlib.crc32(shift))

    def messages():
        yield pb.ExecuteStreamRequest(header=h)
        yield pb.ExecuteStreamRequest(chunk=pb.TensorChunk(tensor=1, offset=0, data=shift))
        for off in range(0, len(raw), chunk):
            yield pb.ExecuteStreamRequest(
                chunk=pb.TensorChunk(tensor=0, offset=off, data=raw[off:off + chunk]))

    out = bytearray()
    try:
        for m in stub.ExecuteStream(messages(), timeout=120):
            if m.HasField("chunk"):
                if m.chunk.offset != len(out):
                    return "WRONG", False, "chunk at %d, want %d" % (m.chunk.offset, len(out))
                out += m.chunk.data
    except grpc.RpcError as e:
        return e.code().name, True, e.details() or ""
    got = np.frombuffer(bytes(out), dtype=np.uint8)
    return "OK", bool(np.array_equal(got, data[::-1])), ""


def infer_roll(stub, rng):
    rows, cols, shift = rng.randint(1, 64), rng.randint(1, 64), rng.randint(0, 99)
    data = slice_of(rng, rows * cols * 4).view(np.int32).reshape(rows, cols)
    req = ipb.ModelInferRequest(model_name="Roll")
    req.inputs.add(name="data", datatype="INT32", shape=[rows, cols])
    req.inputs.add(name="shift", datatype="INT64", shape=[1])
    req.inputs.add(name="axes", datatype="INT64", shape=[1])
    req.raw_input_contents.extend([data.tobytes(), np.int64(shift).tobytes(),
                                   np.int64(1).tobytes()])
    try:
        resp = stub.ModelInfer(req, timeout=60)
    except grpc.RpcError as e:
        return e.code().name, True, e.details() or ""
    out = np.frombuffer(resp.raw_output_contents[0], dtype=np.int32).reshape(rows, cols)
    return "OK", bool(np.array_equal(out, np.roll(data, shift, axis=1))), ""


def rest_roll(conn_box, host, port, rng, binary):
    rows, cols, shift = rng.randint(1, 32), rng.randint(1, 32), rng.randint(0, 99)
    data = slice_of(rng, rows * cols * 4).view(np.int32).reshape(rows, cols)
    want = np.roll(data, shift, axis=1)
    head = {"inputs": [
        {"name": "data", "datatype": "INT32", "shape": [rows, cols]},
        {"name": "shift", "datatype": "INT64", "shape": [1], "data": [shift]},
        {"name": "axes", "datatype": "INT64", "shape": [1], "data": [1]}]}
    headers = {"Content-Type": "application/json"}
    if binary:
        raw = data.tobytes()
        head["inputs"][0]["parameters"] = {"binary_data_size": len(raw)}
        head["parameters"] = {"binary_data_output": True}
        hb = json.dumps(head).encode()
        body = hb + raw
        headers = {"Inference-Header-Content-Length": str(len(hb))}
    else:
        head["inputs"][0]["data"] = data.ravel().tolist()
        body = json.dumps(head)
    try:
        if conn_box[0] is None:
            conn_box[0] = http.client.HTTPConnection(host, port, timeout=60)
        conn_box[0].request("POST", "/v2/models/Roll/infer", body, headers)
        r = conn_box[0].getresponse()
        text = r.read()
    except (OSError, http.client.HTTPException) as e:
        conn_box[0] = None
        return type(e).__name__, True, str(e)
    if r.status != 200:
        return "HTTP_%d" % r.status, True, text[:200].decode(errors="replace")
    if binary:
        n = int(r.getheader("Inference-Header-Content-Length"))
        out = np.frombuffer(text[n:], dtype=np.int32)
    else:
        out = np.array(json.loads(text)["outputs"][0]["data"], dtype=np.int32)
    return "OK", bool(np.array_equal(out.reshape(rows, cols), want)), ""


def channel_options(args):
    """A stock client's channel: gRPC's defaults but for message sizes, its
    own connection (no subchannel shared with the other threads) and, with
    --retries off, none of gRPC core's resends (transparent ones included)."""
    return [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1),
            ("grpc.use_local_subchannel_pool", 1),
            ("grpc.enable_retries", 1 if args.retries == "on" else 0),
            ("grpc.http2.bdp_probe", 1 if args.bdp_probe == "on" else 0)]


def one_shot(args, call):
    """One call on a channel (a connection) of its own, closed after it.

    The cancel and deadline kinds end calls early, and gRPC core 1.51 (the
    stock client) sometimes resets a stream whose HEADERS it never sent
    (grpc/grpc#19655): a connection error by RFC 9113 section 6.4, which
    HAProxy and nghttpx answer with GOAWAY, losing whichever call of that
    connection comes next (docs/reliability.md). That is the client's
    frame, not the balancer's or a replica's, and no setting of ours ends
    it; a channel per early-ended call keeps the soak's own traffic from
    tripping over it, while every outcome is still held to the rules (no
    exception in them: a GOAWAY that cut this call would fail the run)."""
    if args.shared_channel:
        return call(pb_grpc.TensorOpsStub(args.shared_channel))
    channel = grpc.insecure_channel(args.grpc, options=channel_options(args))
    try:
        return call(pb_grpc.TensorOpsStub(channel))
    finally:
        channel.close()


def worker(kind, index, args, tally, stop):
    rng = random.Random(hash((kind, index)))
    channel = args.shared_channel or grpc.insecure_channel(args.grpc, options=channel_options(args))
    stub, istub = pb_grpc.TensorOpsStub(channel), ipb_grpc.GRPCInferenceServiceStub(channel)
    host, port = args.rest.rsplit(":", 1) if args.rest else ("", "0")
    conn_box = [None]
    calls = 0
    while not stop.is_set():
        allowed = ("OK",)
        t0 = time.monotonic()
        if kind == "small":
            data = slice_of(rng, rng.randint(16, 4096))
            code, ok, detail = execute_reverse(stub, data, 60)
        elif kind == "big":
            data = slice_of(rng, rng.randint(MIB, 4 * MIB))
            code, ok, detail = execute_reverse(stub, data, 120)
        elif kind == "large":
            data = slice_of(rng, rng.randint(MIB, 16 * MIB))
            code, ok, detail = execute_reverse(stub, data, 120)
        elif kind == "stream":
            data = slice_of(rng, rng.randint(16 * MIB, 64 * MIB))
            code, ok, detail = stream_reverse(stub, data)
        elif kind == "infer":
            code, ok, detail = infer_roll(istub, rng)
        elif kind == "rest":
            code, ok, detail = rest_roll(conn_box, host, int(port), rng, calls % 2 == 1)
        elif kind == "cancel":
            allowed = ("OK", "CANCELLED")
            code, ok, detail = one_shot(args, lambda s: execute_reverse(
                s, slice_of(rng, 4 * MIB), 60, cancel_after=rng.uniform(0, 0.003)))
        else:  # deadline
            allowed = ("OK", "DEADLINE_EXCEEDED")
            code, ok, detail = one_shot(args, lambda s: execute_reverse(
                s, slice_of(rng, 4 * MIB), rng.uniform(0.001, 0.005)))
        tally.count(kind, code if ok else "WRONG", allowed, detail, time.monotonic() - t0)
        calls += 1
        if kind in ("cancel", "deadline"):
            time.sleep(0.02)  # as the one-server soak: these would swamp the rest
    if channel is not args.shared_channel:
        channel.close()


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grpc", required=True, help="HOST:PORT of the balancer's gRPC front")
    ap.add_argument("--rest", default="", help="HOST:PORT of its REST front (none: no REST)")
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--pid", action="append", default=[], help="NAME=PID of a replica")
    ap.add_argument("--csv", default="", help="write the RSS samples here")
    ap.add_argument("--rss-interval", type=int, default=60,
                    help="seconds per RSS level (the floor of the samples in it)")
    ap.add_argument("--rss-rise-max", type=float, default=10.0,
                    help="the most the line through the RSS levels after the first may rise "
                    "over the run, in %% of its start (per --pid); past it the run fails")
    ap.add_argument("--proto-dir", default=os.path.join(ROOT, "proto"))
    ap.add_argument("--retries", choices=("on", "off"), default="off",
                    help="gRPC core's retries, transparent ones included (grpc.enable_retries)")
    ap.add_argument("--threads", default="small=4,big=2,large=2,stream=1,infer=2,rest=2,cancel=1,"
                    "deadline=1", help="threads per kind")
    ap.add_argument("--bdp-probe", choices=("on", "off"), default="on",
                    help="off: the receive window stays at HTTP/2's initial 64 KiB, as every "
                    "gRPC client's does for its first round trips (a reader that the "
                    "balancer must hold answers for)")
    ap.add_argument("--one-channel", action="store_true",
                    help="every gRPC thread on one channel (one connection), as a "
                    "multi-threaded client with one channel; default: a channel each")
    args = ap.parse_args()
    load_stubs(args.proto_dir)
    args.shared_channel = None
    if args.one_channel:
        args.shared_channel = grpc.insecure_channel(args.grpc, options=channel_options(args))
    kinds = dict((k, int(n)) for k, n in (x.split("=") for x in args.threads.split(",")))
    if not args.rest:
        kinds.pop("rest", None)
    pids = dict((n, int(p)) for n, p in (x.split("=") for x in args.pid))
    tally, stop = Tally(), threading.Event()
    threads = [threading.Thread(target=worker, args=(k, i, args, tally, stop), daemon=True)
               for k, n in kinds.items() for i in range(n)]
    for t in threads:
        t.start()
    samples = []  # (t, {name: rss_kib})
    t0 = time.time()
    while time.time() - t0 < args.seconds:
        time.sleep(5)
        samples.append((time.time() - t0, {n: rss_kib(p) for n, p in pids.items()}))
        with tally.lock:
            done = sum(tally.codes.values())
        print("stack_soak: %4.0f s %7d calls, %d unexpected, %d wrong%s" % (
            samples[-1][0], done, tally.unexpected, tally.wrong,
            "".join(", %s %d MiB" % (n, v // 1024) for n, v in samples[-1][1].items())),
            flush=True)
    stop.set()
    for t in threads:
        t.join(timeout=180)
    rss_ok = report(args, tally, samples, pids)
    return 0 if tally.unexpected == 0 and tally.wrong == 0 and rss_ok else 1


def percentiles(secs):
    """p50 and p99 of OK calls' latencies, in ms."""
    if not secs:
        return "no OK call"
    secs = sorted(secs)
    at = lambda q: 1000.0 * secs[min(len(secs) - 1, int(q * len(secs)))]
    return "p50 %.1f ms, p99 %.1f ms (%d OK calls)" % (at(0.50), at(0.99), len(secs))


def report(args, tally, samples, pids):
    total = sum(tally.codes.values())
    print("stack_soak: %d calls in %d s through %s: %d unexpected, %d wrong" % (
        total, args.seconds, args.grpc, tally.unexpected, tally.wrong))
    for (kind, code), n in sorted(tally.codes.items()):
        print("  %-9s %-20s %d" % (kind, code, n))
    for p in tally.problems:
        print("  problem: " + p)
    every = []
    for kind, secs in sorted(tally.latency.items()):
        every += secs
        print("  latency %-9s %s" % (kind, percentiles(secs)))
    print("  latency %-9s %s" % ("all", percentiles(every)))
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("t," + ",".join(pids) + "\n")
            for t, v in samples:
                f.write("%.0f,%s\n" % (t, ",".join(str(v[n]) for n in pids)))
    rss_ok = True
    for name in pids:
        levels = minute_levels(samples, name, args.rss_interval)
        line = " ".join("%d" % (v // 1024) for v in levels)
        msg = "  %s RSS level per %d s (MiB): %s" % (name, args.rss_interval, line)
        # The first interval is warm-up (channels, pools, the heap's first
        # growth); the line goes through the levels after it.
        rise = line_rise(levels[1:])
        if rise is None:
            msg += "; too short for a line (needs 3 levels after warm-up)"
        else:
            verdict = "ok" if rise <= args.rss_rise_max else "FAIL"
            if rise > args.rss_rise_max:
                rss_ok = False
            msg += "; line through the levels after the first: %+.1f%% (at most %+.1f%%: %s)" % (
                rise, args.rss_rise_max, verdict)
        print(msg)
    return rss_ok


def minute_levels(samples, name, interval):
    """The floor (smallest sample) of each `interval` seconds of one replica's
    RSS: what stays held, not a call's bytes passing through. An interval with
    fewer than 6 samples (the run's last, partial one) is left out: one sample
    may be a big call's bytes."""
    floors, counts = {}, {}
    for t, v in samples:
        if v[name] > 0:
            m = int(t // interval)
            floors[m] = min(floors.get(m, v[name]), v[name])
            counts[m] = counts.get(m, 0) + 1
    return [floors[m] for m in sorted(floors) if counts[m] >= 6]


def line_rise(levels):
    """The least-squares line through `levels` (one a step): its rise from the
    first step to the last, in % of its value at the first; None for fewer
    than 3 levels. A leak or a creeping heap is a slope; one high level in the
    middle (a burst the allocator kept for a while) moves the line less than
    it moves a last-against-first comparison."""
    n = len(levels)
    if n < 3:
        return None
    mx, my = (n - 1) / 2.0, sum(levels) / float(n)
    slope = sum((i - mx) * (v - my) for i, v in enumerate(levels)) / sum(
        (i - mx) ** 2 for i in range(n))
    first = my - slope * mx
    return 100.0 * slope * (n - 1) / first

if __name__ == "__main__":
    sys.exit(main())
