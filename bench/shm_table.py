#!/usr/bin/env python3
"""The shared-memory grid (issue 30): 7 layouts x FP32/UINT8/FP16 at 256 MiB
through Triton-style system shared memory, against a one-thread memcpy
between the same two mappings.

Each case registers one POSIX shared-memory object holding the input (offset
0) and the output (the next 2 MiB boundary after it), then times ModelInfer
calls over gRPC whose data input and output live there (the messages carry a
few hundred bytes), and a NumPy copy of the input bytes onto the output bytes
in this process (np.copyto of two contiguous uint8 views: glibc's memcpy, one
thread), alternating the two so both see the same machine. The figure is
memcpy time / call time (higher is better; 1.0 = a call moves the tensor as
fast as one thread copies it). Every case's output is checked once against
NumPy (np.flip / np.roll / a per-batch reversal).

Usage:
  bench/shm_table.py [--server build/server/tensorops-server] [--mib 256]
                     [--rounds 5] [--cases REGEX] [--out FILE.md]
                     [--write-benchmarks BENCHMARKS.md]

The server is started here (127.0.0.1, a free port, --shared_memory=system,
its default threads) and stopped by PID. Python stubs are generated at run
time from proto/inference/grpc_service.proto (Debian's python3-grpc-tools).
"""
import argparse
import datetime
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing import shared_memory

import grpc
import numpy as np
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROTO_DIR = os.path.join(ROOT, "proto")

STUBS = tempfile.mkdtemp(prefix="shm-table-stubs-")
if protoc.main(["protoc", f"-I{PROTO_DIR}", f"--python_out={STUBS}", f"--grpc_python_out={STUBS}",
                os.path.join(PROTO_DIR, "inference", "grpc_service.proto")]) != 0:
    sys.exit("protoc failed on inference/grpc_service.proto")
sys.path.insert(0, STUBS)
from inference import grpc_service_pb2 as pb  # noqa: E402
from inference import grpc_service_pb2_grpc as pb_grpc  # noqa: E402

DTYPES = [("FP32", np.float32), ("UINT8", np.uint8), ("FP16", np.float16)]
ALIGN = 2 << 20


def layouts(shape):
    """(name, model, small inputs [(name, array)], params, reference(data))."""
    a, b, c = shape
    lengths = np.arange(a, dtype=np.int64) % (b + 1)  # batch-major: one per row of axis 0
    tlengths = np.arange(b, dtype=np.int64) % (a + 1)  # time-major: batch along axis 1

    def revseq(data, lens, batch_axis, seq_axis):
        out = data.copy()
        moved = np.moveaxis(out, (batch_axis, seq_axis), (0, 1))
        src = np.moveaxis(data, (batch_axis, seq_axis), (0, 1))
        for i, n in enumerate(lens):
            moved[i, :n] = src[i, :n][::-1]
        return out

    return [
        ("Reverse first axis", "Reverse", [("axis", np.array([0], np.int64))], {"mode": "index"},
         lambda d: np.flip(d, 0)),
        ("Reverse middle axis", "Reverse", [("axis", np.array([1], np.int64))], {"mode": "index"},
         lambda d: np.flip(d, 1)),
        ("Reverse last axis", "Reverse", [("axis", np.array([2], np.int64))], {"mode": "index"},
         lambda d: np.flip(d, 2)),
        ("ReverseSequence batch-major", "ReverseSequence", [("seq_lengths", lengths)],
         {"batch_axis": 0, "seq_axis": 1}, lambda d: revseq(d, lengths, 0, 1)),
        ("ReverseSequence time-major", "ReverseSequence", [("seq_lengths", tlengths)],
         {"batch_axis": 1, "seq_axis": 0}, lambda d: revseq(d, tlengths, 1, 0)),
        ("Roll 1 axis", "Roll",
         [("shift", np.array([-3], np.int64)), ("axes", np.array([1], np.int64))], {},
         lambda d: np.roll(d, -3, axis=1)),
        ("Roll 2 axes", "Roll",
         [("shift", np.array([5, -17], np.int64)), ("axes", np.array([0, 2], np.int64))], {},
         lambda d: np.roll(d, (5, -17), axis=(0, 2))),
    ]


def start_server(binary):
    log = tempfile.NamedTemporaryFile(prefix="shm-table-server-", suffix=".log", delete=False)
    proc = subprocess.Popen([binary, "--host=127.0.0.1", "--port=0", "--metrics_port=-1",
                             "--http_port=-1", "--shared_memory=system"],
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        with open(log.name) as fh:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", fh.read())
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    with open(log.name) as fh:
        sys.exit("server did not start:\n" + fh.read())


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def request(model, inputs, params, dtype_name, shape, nbytes, out_name, out_offset):
    r = pb.ModelInferRequest(model_name=model)
    for k, v in params.items():
        if isinstance(v, str):
            r.parameters[k].string_param = v
        else:
            r.parameters[k].int64_param = v
    t = r.inputs.add(name="data", datatype=dtype_name, shape=list(shape))
    t.parameters["shared_memory_region"].string_param = "grid"
    t.parameters["shared_memory_offset"].int64_param = 0
    t.parameters["shared_memory_byte_size"].int64_param = nbytes
    for name, arr in inputs:
        r.inputs.add(name=name, datatype="INT64", shape=list(arr.shape))
        r.raw_input_contents.append(arr.astype("<i8").tobytes())
    o = r.outputs.add(name=out_name)
    o.parameters["shared_memory_region"].string_param = "grid"
    o.parameters["shared_memory_offset"].int64_param = out_offset
    o.parameters["shared_memory_byte_size"].int64_param = nbytes
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default=os.path.join(ROOT, "build/server/tensorops-server"))
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--write-benchmarks", default="")
    args = ap.parse_args()

    load = os.getloadavg()[0]
    proc, port = start_server(args.server)
    rows = []
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        out_names = {}
        rng = np.random.default_rng(7)
        for dtype_name, dt in DTYPES:
            width = np.dtype(dt).itemsize
            n = (args.mib << 20) // width
            c = 256
            shape = (64, n // (64 * c), c)
            nbytes = int(np.prod(shape)) * width
            out_offset = (nbytes + ALIGN - 1) // ALIGN * ALIGN
            shm = shared_memory.SharedMemory(create=True, size=out_offset + nbytes)
            try:
                src = np.frombuffer(shm.buf, np.uint8, nbytes, 0)
                dst = np.frombuffer(shm.buf, np.uint8, nbytes, out_offset)
                src[:] = rng.integers(0, 256, nbytes, dtype=np.uint8)
                if dt == np.float16:  # no NaNs: the check compares values bit for bit anyway
                    src.view(np.uint16)[:] &= 0x7BFF
                dst[:] = 0  # both mappings touched before any timing
                data = src.view(dt).reshape(shape)
                out = dst.view(dt).reshape(shape)
                stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
                    name="grid", key="/" + shm.name.lstrip("/"), offset=0,
                    byte_size=out_offset + nbytes))
                for name, model, inputs, params, ref in layouts(shape):
                    if args.cases and not re.search(args.cases, name):
                        continue
                    if model not in out_names:
                        meta = stub.ModelMetadata(pb.ModelMetadataRequest(name=model))
                        out_names[model] = meta.outputs[0].name
                    req = request(model, inputs, params, dtype_name, shape, nbytes,
                                  out_names[model], out_offset)
                    stub.ModelInfer(req)  # warm-up, and the check
                    if not np.array_equal(out.view(np.uint8), np.ascontiguousarray(ref(data)).view(np.uint8)):
                        sys.exit(f"{name} {dtype_name}: wrong output")
                    copy_s, call_s = [], []
                    for _ in range(args.rounds):
                        t0 = time.perf_counter()
                        np.copyto(dst, src)
                        copy_s.append(time.perf_counter() - t0)
                        t0 = time.perf_counter()
                        stub.ModelInfer(req)
                        call_s.append(time.perf_counter() - t0)
                    copy_s.sort()
                    call_s.sort()
                    mid = len(copy_s) // 2
                    rows.append((name, dtype_name, copy_s[mid], call_s[mid]))
                    print(f"{name:30s} {dtype_name:5s} memcpy {copy_s[mid] * 1e3:7.1f} ms  "
                          f"call {call_s[mid] * 1e3:7.1f} ms  {copy_s[mid] / call_s[mid]:.2f}x",
                          flush=True)
                stub.SystemSharedMemoryUnregister(
                    pb.SystemSharedMemoryUnregisterRequest(name="grid"))
            finally:
                del src, dst, data, out
                shm.close()
                shm.unlink()
        channel.close()
    finally:
        stop_server(proc)

    ratios = sorted(m / c for _, _, m, c in rows)
    names = list(dict.fromkeys(r[0] for r in rows))
    cols = [d for d, _ in DTYPES if any(r[1] == d for r in rows)]
    by = {(r[0], r[1]): r for r in rows}
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"Measured {now} by `bench/shm_table.py --mib={args.mib} --rounds={args.rounds}`, "
        f"load average {load:.2f} at the start. {args.mib} MiB through system shared memory "
        "(ModelInfer over gRPC, input and output in one registered region), median of "
        f"{args.rounds}, x a one-thread memcpy between the same mappings (**bold**: below 0.85x); "
        "in brackets: ms per call.",
        "",
        "| case | " + " | ".join(cols) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    for name in names:
        cells = []
        for d in cols:
            r = by.get((name, d))
            if r is None:
                cells.append("")
                continue
            x = r[2] / r[3]
            cell = f"{x:.2f}"
            cells.append((f"**{cell}**" if x < 0.85 else cell) + f" ({r[3] * 1e3:.1f})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if ratios:
        median = ratios[len(ratios) // 2]
        under = sum(1 for x in ratios if x < 0.85)
        lines += ["", f"{len(ratios)} cells: median {median:.2f}x, min {ratios[0]:.2f}x, "
                  f"{under} below 0.85x."]
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    if args.write_benchmarks:
        subprocess.run([sys.executable, os.path.join(HERE, "replace_section.py"),
                        args.write_benchmarks, "shm"], input=text, text=True, check=True)


if __name__ == "__main__":
    main()
