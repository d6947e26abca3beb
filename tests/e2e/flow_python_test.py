#!/usr/bin/env python3
"""Flowing ExecuteStream (../shared/api.md "Streams that flow") from an independent client.

Written from the public texts alone: Python stubs generated at test time
(grpc_tools.protoc) from proto/tensorops/v1, references in plain NumPy
(np.roll, np.flip, per-batch slicing). gRPC Python sends the request iterator
on a thread of its own while this one reads the replies, so the stream is
full duplex. Each rule is a case:

- random ops and chains (Roll, Reverse, ReverseSequence, onnx.ReverseSequence),
  element types and ranks: the output header comes first with CRC-32 0, every
  chunk carries the CRC-32 of its bytes, the chunks (shuffled here: a client
  may not rely on their order) cover each output byte exactly once, the
  trailer holds the output's CRC-32, and the bytes are NumPy's;
- without `flow` nothing changes: chunks in order, the header's CRC, no trailer;
- a chunk whose crc32 is wrong, or data whose whole CRC is wrong: DATA_LOSS.

Usage: flow_python_test.py TENSOROPS_SERVER PROTO_DIR
Environment: TENSOROPS_FLOW_SEED (default: a fresh one, printed).
Exit status 0 when every check passed.
"""
import os
import random
import sys
import tempfile
import unittest
import zlib

import grpc
import numpy as np
from grpc_tools import protoc
from oip_numpy import ref_reverse_sequence
from rest_server import RestServer

SERVER, PROTO_DIR = sys.argv[1], sys.argv[2]
STUBS = tempfile.mkdtemp(prefix="flow-stubs-")
_WKT = os.path.join(os.path.dirname(protoc.__file__), "_proto")  # struct.proto
if protoc.main(["protoc", f"-I{PROTO_DIR}", f"-I{_WKT}", f"--python_out={STUBS}",
                f"--grpc_python_out={STUBS}",
                os.path.join(PROTO_DIR, "tensorops", "v1", "tensorops.proto")]) != 0:
    sys.exit("protoc failed on tensorops/v1/tensorops.proto")
sys.path.insert(0, STUBS)
from tensorops.v1 import tensorops_pb2 as pb  # noqa: E402
from tensorops.v1 import tensorops_pb2_grpc as pb_grpc  # noqa: E402

SEED = int(os.environ.get("TENSOROPS_FLOW_SEED") or int.from_bytes(os.urandom(4), "little"))
CHUNK = 16384
TYPES = [(np.uint8, pb.DATA_TYPE_UINT8), (np.int16, pb.DATA_TYPE_INT16),
         (np.float32, pb.DATA_TYPE_FLOAT32), (np.float64, pb.DATA_TYPE_FLOAT64),
         (np.complex128, pb.DATA_TYPE_COMPLEX128), (np.uint64, pb.DATA_TYPE_UINT64)]


# At most this many elements per random tensor (8 MiB of INT64): a rank-4
# shape of extents up to 127 would ask for 260M elements (2 GiB, more than
# random.randbytes takes); dims are drawn again, smallest first, until the
# product fits.
MAX_ELEMENTS = 1 << 20


def random_shape(rng):
    """1-4 dims, each 1-6 or 8-127, with at most MAX_ELEMENTS elements."""
    dims = [rng.choice([1 + rng.randrange(6), 8 + rng.randrange(120)])
            for _ in range(1 + rng.randrange(4))]
    while int(np.prod(dims)) > MAX_ELEMENTS:
        i = dims.index(max(dims))
        dims[i] = 1 + rng.randrange(6)
    return tuple(dims)


def i64(values):
    a = np.array(values, np.int64)
    return pb.Tensor(dtype=pb.DATA_TYPE_INT64, shape=list(a.shape), raw_data=a.tobytes())


def random_op(rng, data):
    """(name, attrs, inputs after the data, NumPy reference of it applied to an array)."""
    rank, shape = data.ndim, data.shape
    kind = rng.randrange(4 if rank >= 2 else 2)
    if kind == 0:
        axes = [rng.randrange(rank) for _ in range(1 + rng.randrange(rank))]
        shifts = [rng.randrange(-1000, 1001) for _ in axes]
        return ("Roll", {}, [i64(shifts), i64(axes)],
                lambda a: np.roll(a, shifts, axis=axes))
    if kind == 1:
        axes = [a for a in range(rank) if rng.random() < 0.5]
        return ("Reverse-1", {"mode": "index"}, [i64(axes)],
                lambda a: np.flip(a, axis=tuple(axes)) if axes else a)
    if kind == 2:
        b = rng.randrange(rank)
        q = rng.choice([x for x in range(rank) if x != b])
        lengths = [rng.randrange(shape[q] + 1) for _ in range(shape[b])]
        return ("ReverseSequence", {"batch_axis": b, "seq_axis": q}, [i64(lengths)],
                lambda a: ref_reverse_sequence(a, lengths, b, q))
    b = rng.randrange(2)
    lengths = [rng.randrange(shape[1 - b] + 1) for _ in range(shape[b])]
    return ("onnx.ReverseSequence", {"batch_axis": b, "time_axis": 1 - b}, [i64(lengths)],
            lambda a: ref_reverse_sequence(a, lengths, b, 1 - b))


def messages(op, attrs, data_bytes, dtype, shape, inputs, then, flow, corrupt=None):
    """The request messages: header, the small inputs, then the data in chunks."""
    header = pb.StreamHeader(op=op, flow=flow, then=then)
    header.attrs.update(attrs)
    header.inputs.add(dtype=dtype, shape=list(shape), crc32=zlib.crc32(data_bytes))
    for t in inputs:
        header.inputs.add(dtype=t.dtype, shape=list(t.shape), crc32=zlib.crc32(t.raw_data))
    if corrupt == "header":
        header.inputs[0].crc32 ^= 1
    out = [pb.ExecuteStreamRequest(header=header)]
    for i, t in enumerate(inputs, start=1):
        if t.raw_data:
            out.append(pb.ExecuteStreamRequest(chunk=pb.TensorChunk(tensor=i, data=t.raw_data)))
    for off in range(0, len(data_bytes), CHUNK):
        piece = data_bytes[off:off + CHUNK]
        crc = zlib.crc32(piece) ^ (1 if corrupt == "chunk" and off == CHUNK else 0)
        out.append(pb.ExecuteStreamRequest(chunk=pb.TensorChunk(tensor=0, offset=off, data=piece,
                                                                crc32=crc)))
    return out


class FlowPythonTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        print(f"flow_python_test: TENSOROPS_FLOW_SEED={SEED}", flush=True)
        cls.server = RestServer(SERVER, f"--stream_chunk_bytes={CHUNK}",
                                f"--stream_window_bytes={4 * CHUNK}")
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.server.grpc_port}")
        cls.stub = pb_grpc.TensorOpsStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()

    def call(self, msgs):
        """(replies, None) or (None, RpcError)."""
        try:
            return list(self.stub.ExecuteStream(iter(msgs), timeout=120)), None
        except grpc.RpcError as e:
            return None, e

    def check_flowing(self, replies, nbytes, rng):
        """The output placed from the shuffled chunks, after every rule's check."""
        self.assertTrue(replies[0].HasField("header"))
        self.assertEqual(replies[0].header.outputs[0].crc32, 0)
        self.assertTrue(replies[-1].HasField("trailer"))
        chunks = [r.chunk for r in replies[1:-1]]
        self.assertTrue(all(replies[i].HasField("chunk") for i in range(1, len(replies) - 1)))
        rng.shuffle(chunks)
        out = bytearray(nbytes)
        seen = np.zeros(nbytes, np.int32)
        for c in chunks:
            self.assertEqual(c.crc32, zlib.crc32(c.data))
            self.assertLessEqual(c.offset + len(c.data), nbytes)
            out[c.offset:c.offset + len(c.data)] = c.data
            seen[c.offset:c.offset + len(c.data)] += 1
        self.assertTrue((seen == 1).all(), "each output byte exactly once")
        self.assertEqual(list(replies[-1].trailer.crc32), [zlib.crc32(bytes(out))])
        return bytes(out)

    def test_random_ops_and_chains_equal_numpy(self):
        rng = random.Random(SEED)
        for case in range(40):
            np_type, dtype = TYPES[rng.randrange(len(TYPES))]
            shape = random_shape(rng)
            data = np.frombuffer(rng.randbytes(int(np.prod(shape)) * np.dtype(np_type).itemsize),
                                 np_type).reshape(shape)
            ops = [random_op(rng, data) for _ in range(1 + rng.randrange(3))]
            want = data
            for op in ops:
                want = op[3](want)
            then = []
            for name, attrs, inputs, _ in ops[1:]:
                step = pb.Step(op=name, inputs=inputs)
                step.attrs.update(attrs)
                then.append(step)
            name, attrs, inputs, _ = ops[0]
            with self.subTest(case=case, shape=shape, ops=[o[0] for o in ops]):
                replies, err = self.call(messages(name, attrs, data.tobytes(), dtype, shape,
                                                  inputs, then, True))
                self.assertIsNone(err, err and err.details())
                got = self.check_flowing(replies, data.nbytes, rng)
                self.assertEqual(got, np.ascontiguousarray(want).tobytes())

    def test_without_flow_nothing_changes(self):
        data = np.arange(50000, dtype=np.int32).reshape(500, 100)
        replies, err = self.call(messages("Roll", {}, data.tobytes(), pb.DATA_TYPE_INT32,
                                          data.shape, [i64([7]), i64([0])], [], False))
        self.assertIsNone(err, err and err.details())
        self.assertFalse(any(r.HasField("trailer") for r in replies))
        out = b"".join(r.chunk.data for r in replies[1:])
        self.assertEqual([r.chunk.offset for r in replies[1:]],
                         list(range(0, data.nbytes, CHUNK)))
        self.assertEqual(replies[0].header.outputs[0].crc32, zlib.crc32(out))
        self.assertEqual(out, np.roll(data, 7, axis=0).tobytes())

    def test_wrong_crcs_are_data_loss(self):
        data = np.arange(100000, dtype=np.uint8).reshape(100, 1000)
        for corrupt in ("chunk", "header"):
            with self.subTest(corrupt=corrupt):
                _, err = self.call(messages("Roll", {}, data.tobytes(), pb.DATA_TYPE_UINT8,
                                            data.shape, [i64([3]), i64([0])], [], True, corrupt))
                self.assertIsNotNone(err)
                self.assertEqual(err.code(), grpc.StatusCode.DATA_LOSS, err.details())
                self.assertIn("corrupt", err.details())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
