#!/usr/bin/env python3
"""An independent Open Inference Protocol client against tensorops-server.

Written from the public protocol alone: Python stubs are generated at test
time (grpc_tools.protoc, Debian's python3-grpc-tools) from
proto/inference/grpc_service.proto, whose package, names and field numbers
are those of the public grpc_service.proto, so this is what a tritonclient-like
client sends. Every op runs through ModelInfer (raw and typed contents),
ModelStreamInfer (with a bad request in the middle) and system shared memory
(multiprocessing.shared_memory, as tritonclient.utils.shared_memory does),
over TCP and over a Unix socket, and each result is compared with NumPy's.

Usage: oip_python_test.py TENSOROPS_SERVER PROTO_DIR
Exit status 0 when every check passed.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import unittest
from multiprocessing import shared_memory

import grpc
import numpy as np
from oip_numpy import DATATYPE, datatype, from_raw, op_cases, raw_of, test_rng
from grpc_tools import protoc

SERVER, PROTO_DIR = sys.argv[1], sys.argv[2]
STUBS = tempfile.mkdtemp(prefix="oip-stubs-")
if protoc.main(["protoc", f"-I{PROTO_DIR}", f"--python_out={STUBS}", f"--grpc_python_out={STUBS}",
                os.path.join(PROTO_DIR, "inference", "grpc_service.proto")]) != 0:
    sys.exit("protoc failed on inference/grpc_service.proto")
sys.path.insert(0, STUBS)
from inference import grpc_service_pb2 as pb  # noqa: E402
from inference import grpc_service_pb2_grpc as pb_grpc  # noqa: E402


def typed_contents(t, a):
    flat = a.reshape(-1).tolist()
    c = t.contents
    dt = datatype(a)
    field = {"BOOL": c.bool_contents, "INT8": c.int_contents, "INT16": c.int_contents,
             "INT32": c.int_contents, "INT64": c.int64_contents, "UINT8": c.uint_contents,
             "UINT16": c.uint_contents, "UINT32": c.uint_contents, "UINT64": c.uint64_contents,
             "FP32": c.fp32_contents, "FP64": c.fp64_contents, "BYTES": c.bytes_contents}[dt]
    field.extend(flat)


def make_request(model, inputs, params=None, mode="raw", rid="", outputs=None):
    """inputs: [(name, ndarray)]; mode raw | typed."""
    r = pb.ModelInferRequest(model_name=model, id=rid)
    for k, v in (params or {}).items():
        if isinstance(v, str):
            r.parameters[k].string_param = v
        else:
            r.parameters[k].int64_param = v
    for name, a in inputs:
        t = r.inputs.add(name=name, datatype=datatype(a), shape=list(a.shape))
        if mode == "raw":
            r.raw_input_contents.append(raw_of(a))
        else:
            typed_contents(t, a)
    for o in outputs or []:
        r.outputs.add(name=o)
    return r


def result_of(resp):
    out = resp.outputs[0]
    return from_raw(resp.raw_output_contents[0], out.datatype, list(out.shape))


def cases(rng):
    """(model, inputs, params, reference) for every op over several dtypes."""
    def sample(dt, shape):
        if dt is np.object_:
            return np.array([bytes(rng.integers(0, 256, rng.integers(0, 5), dtype=np.uint8))
                             for _ in range(int(np.prod(shape)))], dtype=object).reshape(shape)
        if dt is np.bool_:
            return rng.integers(0, 2, shape).astype(bool)
        if np.issubdtype(dt, np.floating):
            return rng.standard_normal(shape).astype(dt)
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    return op_cases(sample, DATATYPE)


def has_typed(inputs):
    return all(datatype(a) not in ("FP16", "BF16") for _, a in inputs)


class Server:
    def __init__(self, *args):
        self.sock = os.path.join(tempfile.mkdtemp(prefix="oip-sock-"), "tensorops.sock")
        self.proc = subprocess.Popen(
            [SERVER, "--host=127.0.0.1", "--port=0", "--metrics_port=-1", "--http_port=-1",
             f"--listen=unix:{self.sock}", *args], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.stop()
            raise RuntimeError(f"server did not start: {line!r}")
        self.address = f"127.0.0.1:{m.group(1)}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        return self.proc.returncode


class OipClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--shared_memory=system")
        cls.channel = grpc.insecure_channel(cls.server.address)
        cls.stub = pb_grpc.GRPCInferenceServiceStub(cls.channel)
        cls.cases = cases(test_rng(16))

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        assert cls.server.stop() == 0

    def check(self, got, want, what):
        self.assertEqual(got.shape, want.shape, what)
        if want.dtype == np.object_:
            self.assertEqual(got.tolist(), want.tolist(), what)
        else:
            self.assertEqual(got.dtype, want.dtype, what)
            # Bit-exact: data movement keeps every bit.
            self.assertEqual(got.tobytes(), np.ascontiguousarray(want).tobytes(), what)

    def test_metadata_rpcs(self):
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest()).live)
        self.assertTrue(self.stub.ServerReady(pb.ServerReadyRequest()).ready)
        md = self.stub.ServerMetadata(pb.ServerMetadataRequest())
        self.assertEqual(md.name, "tensorops")
        self.assertIn("system_shared_memory", md.extensions)
        index = self.stub.RepositoryIndex(pb.RepositoryIndexRequest())
        self.assertEqual(sorted(m.name for m in index.models),
                         ["Reverse", "ReverseSequence", "Roll", "onnx.ReverseSequence"])
        self.assertTrue(all(m.state == "READY" and m.version == "1" for m in index.models))
        for m in index.models:
            self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name=m.name)).ready)
            meta = self.stub.ModelMetadata(pb.ModelMetadataRequest(name=m.name, version="1"))
            self.assertEqual(meta.versions, ["1"])
            self.assertGreaterEqual(len(meta.inputs), 2)
        with self.assertRaises(grpc.RpcError) as e:
            self.stub.ModelMetadata(pb.ModelMetadataRequest(name="Transpose"))
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertIn("Transpose", e.exception.details())
        self.assertIn("Roll", e.exception.details())

    def test_model_infer_raw_and_typed(self):
        for model, inputs, params, want in self.cases:
            for mode in ("raw", "typed"):
                if mode == "typed" and not has_typed(inputs):
                    continue
                what = f"{model} {datatype(want)} {mode}"
                resp = self.stub.ModelInfer(make_request(model, inputs, params, mode, rid=what))
                self.assertEqual(resp.id, what)
                self.assertEqual(resp.model_name, model)
                self.assertEqual(resp.outputs[0].datatype, datatype(want), what)
                self.check(result_of(resp), want, what)

    def test_stream_in_order_with_a_bad_request(self):
        requests = [make_request(m, i, p, rid=str(n)) for n, (m, i, p, _) in enumerate(self.cases)]
        bad_at = len(requests) // 2
        bad = make_request("Roll", [("data", np.zeros(3, np.int32)), ("shift", np.zeros(1, np.int64))],
                           rid="bad")
        requests.insert(bad_at, bad)
        responses = list(self.stub.ModelStreamInfer(iter(requests)))
        self.assertEqual(len(responses), len(requests))
        for n, r in enumerate(responses):
            if n == bad_at:
                self.assertIn("missing input 'axes'", r.error_message)
                continue
            self.assertEqual(r.error_message, "", n)
            k = n if n < bad_at else n - 1
            self.assertEqual(r.infer_response.id, str(k))
            self.check(result_of(r.infer_response), self.cases[k][3], f"stream {k}")

    def test_shared_memory(self):
        size = 1 << 16
        shm = shared_memory.SharedMemory(create=True, size=size)
        key = "/" + shm.name.lstrip("/")
        try:
            self.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
                name="py", key=key, offset=0, byte_size=size))
            status = self.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest())
            self.assertEqual(status.regions["py"].key, key)
            self.assertEqual(status.regions["py"].byte_size, size)
            for model, inputs, params, want in self.cases:
                if datatype(want) == "BYTES":
                    continue  # BYTES through shared memory: the C++ e2e test
                # Every input in shared memory back to back, the output after them.
                req = pb.ModelInferRequest(model_name=model)
                for k, v in params.items():
                    if isinstance(v, str):
                        req.parameters[k].string_param = v
                    else:
                        req.parameters[k].int64_param = v
                offset = 0
                for name, a in inputs:
                    raw = raw_of(a)
                    shm.buf[offset:offset + len(raw)] = raw
                    t = req.inputs.add(name=name, datatype=datatype(a), shape=list(a.shape))
                    t.parameters["shared_memory_region"].string_param = "py"
                    t.parameters["shared_memory_offset"].int64_param = offset
                    t.parameters["shared_memory_byte_size"].int64_param = len(raw)
                    offset += len(raw)
                out_offset, out_size = 4096, want.nbytes
                o = req.outputs.add(name=self.output_name(model))
                o.parameters["shared_memory_region"].string_param = "py"
                o.parameters["shared_memory_offset"].int64_param = out_offset
                o.parameters["shared_memory_byte_size"].int64_param = out_size
                resp = self.stub.ModelInfer(req)
                self.assertEqual(resp.raw_output_contents[0], b"")
                got = from_raw(bytes(shm.buf[out_offset:out_offset + out_size]),
                               resp.outputs[0].datatype, list(resp.outputs[0].shape))
                self.check(got, want, f"{model} {datatype(want)} shm")
            self.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name="py"))
            with self.assertRaises(grpc.RpcError) as e:
                self.stub.ModelInfer(req)
            self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
            self.assertIn("'py'", e.exception.details())
        finally:
            shm.close()
            shm.unlink()

    def output_name(self, model):
        meta = self.stub.ModelMetadata(pb.ModelMetadataRequest(name=model))
        return meta.outputs[0].name

    def test_unix_socket(self):
        with grpc.insecure_channel(f"unix:{self.server.sock}") as ch:
            stub = pb_grpc.GRPCInferenceServiceStub(ch)
            model, inputs, params, want = self.cases[0]
            self.check(result_of(stub.ModelInfer(make_request(model, inputs, params))), want, "unix")

    def test_errors(self):
        model, inputs, params, _ = self.cases[0]
        rows = [
            (make_request("Rolll", inputs, params), grpc.StatusCode.NOT_FOUND, "unknown model 'Rolll'"),
            (make_request(model, inputs + [("extra", np.zeros(1, np.int64))], params),
             grpc.StatusCode.INVALID_ARGUMENT, "unknown input 'extra'"),
            (make_request(model, inputs, {"mode": "index"}), grpc.StatusCode.INVALID_ARGUMENT, "mode"),
        ]
        r = make_request(model, inputs, params)
        r.model_version = "7"
        rows.append((r, grpc.StatusCode.NOT_FOUND, "no version '7'"))
        for req, code, text in rows:
            with self.assertRaises(grpc.RpcError) as e:
                self.stub.ModelInfer(req)
            self.assertEqual(e.exception.code(), code, text)
            self.assertIn(text, e.exception.details())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
