#!/usr/bin/env python3
"""Chains (ExecuteRequest.then, ../shared/api.md "Chains") from an independent client.

Written from the public texts alone: Python stubs are generated at test time
(grpc_tools.protoc, Debian's python3-grpc-tools) from proto/tensorops/v1 and
proto/inference, and every reference is plain NumPy (np.flip, np.roll,
per-batch slicing) on the elements' bits. Each sentence of the Chains section
is a case:

- random chains of 1-8 ops (seeded; the seed is printed) over every op, alias,
  attribute form, element type, both encodings, ranks 0-5 and zero-size dims:
  the reply is byte for byte the reply of calling the ops one by one, and
  NumPy's result in the data input's encoding; half of them on a server that
  runs every kernel on its pool and splits small tensors;
- an invalid step at every position: INVALID_ARGUMENT `then[i] (Op): ` and the
  single call's message, UNIMPLEMENTED naming then[i] for an unknown op, the
  single call's own message for a bad first op;
- 64 steps after the first run (and are right), 65 are refused;
- ExecuteStream with the steps in its header: the chain's bytes and CRC-32;
- the Open Inference Protocol binding: request parameter "then", a JSON array
  of tensorops.v1.Step (proto3 JSON), over gRPC ModelInfer and REST; the
  model's output name; a malformed "then" names the parameter.

Usage: chain_python_test.py TENSOROPS_SERVER PROTO_DIR
Environment: TENSOROPS_CHAIN_SEED (default: a fresh one, printed),
TENSOROPS_CHAIN_CASES (random chains, default 1000).
Exit status 0 when every check passed.
"""
import json
import os
import struct
import sys
import tempfile
import time
import unittest
import warnings
import zlib

import grpc
import numpy as np
from google.protobuf import json_format
from grpc_tools import protoc
from oip_numpy import ref_reverse_mask, ref_reverse_sequence
from rest_server import RestServer

SERVER, PROTO_DIR = sys.argv[1], sys.argv[2]
STUBS = tempfile.mkdtemp(prefix="chain-stubs-")
_WKT = os.path.join(os.path.dirname(protoc.__file__), "_proto")  # struct.proto
if protoc.main(["protoc", f"-I{PROTO_DIR}", f"-I{_WKT}", f"--python_out={STUBS}",
                f"--grpc_python_out={STUBS}",
                os.path.join(PROTO_DIR, "tensorops", "v1", "tensorops.proto"),
                os.path.join(PROTO_DIR, "inference", "grpc_service.proto")]) != 0:
    sys.exit("protoc failed on tensorops/v1/tensorops.proto or inference/grpc_service.proto")
sys.path.insert(0, STUBS)
from tensorops.v1 import tensorops_pb2 as pb  # noqa: E402
from tensorops.v1 import tensorops_pb2_grpc as pb_grpc  # noqa: E402
from inference import grpc_service_pb2 as ipb  # noqa: E402
from inference import grpc_service_pb2_grpc as ipb_grpc  # noqa: E402

SEED = int(os.environ.get("TENSOROPS_CHAIN_SEED") or int.from_bytes(os.urandom(4), "little"))
CASES = int(os.environ.get("TENSOROPS_CHAIN_CASES") or 1000)
MAX_STEPS = 64  # after the first op
INV, UNIMPL = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED

# ---------------------------------------------------------------------------
# Element types: every tensor is held as an array of its elements' bits
# (uint8..uint64, V16 for COMPLEX128, bytes objects for STRING); the typed
# fields are derived from the bits exactly.

SIGNED = {"INT8": "<i1", "INT16": "<i2", "INT32": "<i4", "INT64": "<i8"}
UNSIGNED = {"UINT8": "<u1", "UINT16": "<u2", "UINT32": "<u4", "UINT64": "<u8"}
WIDTH = {"FLOAT32": 4, "FLOAT64": 8, "FLOAT16": 2, "BFLOAT16": 2, "FLOAT8_E4M3": 1,
         "FLOAT8_E5M2": 1, "INT8": 1, "INT16": 2, "INT32": 4, "INT64": 8, "UINT8": 1,
         "UINT16": 2, "UINT32": 4, "UINT64": 8, "BOOL": 1, "COMPLEX64": 8, "COMPLEX128": 16}
DTYPES = list(WIDTH) + ["STRING"]
BITS = {1: np.dtype("u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8"),
        16: np.dtype("V16")}
FIELD = {"FLOAT32": "float_data", "FLOAT16": "float_data", "BFLOAT16": "float_data",
         "FLOAT8_E4M3": "float_data", "FLOAT8_E5M2": "float_data", "COMPLEX64": "float_data",
         "FLOAT64": "double_data", "COMPLEX128": "double_data", "INT8": "int32_data",
         "INT16": "int32_data", "INT32": "int32_data", "INT64": "int64_data",
         "UINT8": "uint32_data", "UINT16": "uint32_data", "UINT32": "uint32_data",
         "UINT64": "uint64_data", "BOOL": "bool_data", "STRING": "string_data"}
FIELD_NP = {"float_data": np.float32, "double_data": np.float64, "int32_data": np.int32,
            "int64_data": np.int64, "uint32_data": np.uint32, "uint64_data": np.uint64,
            "bool_data": np.bool_}
DATA_FIELDS = ["raw_data"] + sorted(set(FIELD.values()))
FLOATISH = {"FLOAT32", "FLOAT64", "FLOAT16", "BFLOAT16", "FLOAT8_E4M3", "FLOAT8_E5M2",
            "COMPLEX64", "COMPLEX128"}
OIP_NAME = {"FLOAT32": "FP32", "FLOAT64": "FP64", "FLOAT16": "FP16", "BFLOAT16": "BF16",
            "INT8": "INT8", "INT16": "INT16", "INT32": "INT32", "INT64": "INT64",
            "UINT8": "UINT8", "UINT16": "UINT16", "UINT32": "UINT32", "UINT64": "UINT64",
            "BOOL": "BOOL", "STRING": "BYTES"}
INT_TYPES = list(SIGNED) + list(UNSIGNED)
FLOAT_TYPES = ["FLOAT32", "FLOAT64", "FLOAT16", "BFLOAT16", "FLOAT8_E4M3", "FLOAT8_E5M2"]


def _e4m3(b):
    """OCP E4M3FN: bias 7, no infinities, S.1111.111 is NaN."""
    s, e, m = b >> 7, (b >> 3) & 15, b & 7
    if e == 15 and m == 7:
        return np.nan
    v = m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if s else v


E4M3 = np.array([_e4m3(b) for b in range(256)], np.float32)
E4M3_CODE = {}
for _b in range(255, -1, -1):  # +0 wins over -0
    if not np.isnan(E4M3[_b]):
        E4M3_CODE[float(E4M3[_b])] = _b


def dt_enum(dt):
    return pb.DataType.Value("DATA_TYPE_" + dt)


def dt_name(enum):
    return pb.DataType.Name(enum)[len("DATA_TYPE_"):]


def typed_values(dt, bits):
    """The typed field's values (flat) of an array of bits."""
    if dt == "STRING":
        return list(bits.reshape(-1))
    flat = np.ascontiguousarray(bits).reshape(-1)
    if dt in ("FLOAT32", "COMPLEX64"):
        return flat.view("<f4")
    if dt == "FLOAT64":
        return flat.view("<f8")
    if dt == "COMPLEX128":
        return np.frombuffer(flat.tobytes(), "<f8")
    if dt == "FLOAT16":
        return flat.view("<f2").astype(np.float32)
    if dt == "BFLOAT16":
        return (flat.astype("<u4") << 16).view("<f4")
    if dt == "FLOAT8_E4M3":
        return E4M3[flat]
    if dt == "FLOAT8_E5M2":
        return (flat.astype("<u2") << 8).view("<f2").astype(np.float32)
    if dt in SIGNED:
        return flat.view(SIGNED[dt]).astype(FIELD_NP[FIELD[dt]])
    if dt in UNSIGNED:
        return flat.astype(FIELD_NP[FIELD[dt]])
    if dt == "BOOL":
        return flat.astype(bool)
    raise ValueError(dt)


def bits_of(dt, values, shape=None):
    """Bits of numbers (small inputs: axes, shifts, lengths) in `dt`."""
    v = np.asarray(values)
    shape = [len(values)] if shape is None else shape
    if dt in SIGNED:
        b = v.astype(SIGNED[dt]).view(BITS[WIDTH[dt]])
    elif dt in UNSIGNED:
        b = v.astype(UNSIGNED[dt])
    elif dt == "FLOAT32":
        b = v.astype("<f4").view("<u4")
    elif dt == "FLOAT64":
        b = v.astype("<f8").view("<u8")
    elif dt == "FLOAT16":
        b = v.astype("<f2").view("<u2")
    elif dt == "BFLOAT16":
        b = (v.astype("<f4").view("<u4") >> 16).astype("<u2")
    elif dt == "FLOAT8_E4M3":
        b = np.array([E4M3_CODE[float(x)] for x in v.reshape(-1)], "u1")
    elif dt == "FLOAT8_E5M2":
        b = (v.astype("<f2").view("<u2") >> 8).astype("u1")
    elif dt == "BOOL":
        b = v.astype(bool).astype("u1")
    else:
        raise ValueError(dt)
    return np.ascontiguousarray(b).reshape(shape)


def exact_in(dt, x):
    """Whether the whole number x travels exactly in dt."""
    if dt in SIGNED or dt in UNSIGNED:
        info = np.iinfo(SIGNED.get(dt) or UNSIGNED[dt])
        return info.min <= x <= info.max
    if dt == "FLOAT8_E4M3":
        return float(x) in E4M3_CODE
    return float(typed_values(dt, bits_of(dt, [x]))[0]) == float(x)


def random_bits(rng, dt, shape, typed):
    n = int(np.prod(shape, dtype=np.int64))
    if dt == "STRING":
        # Arbitrary bytes, empty ones and NULs included.
        return np.array([bytes(rng.integers(0, 256, rng.integers(0, 7), dtype=np.uint8))
                         for _ in range(n)], dtype=object).reshape(shape)
    if dt == "BOOL":
        return rng.integers(0, 2, shape).astype("u1")
    w = WIDTH[dt]
    bits = np.frombuffer(rng.integers(0, 256, n * w, dtype=np.uint8).tobytes(),
                         BITS[w]).copy().reshape(shape)
    if typed and dt in FLOATISH:
        # Typed fields carry values, not bits: no NaNs there (raw data keeps them).
        per = 2 if dt.startswith("COMPLEX") else 1
        nan = np.isnan(typed_values(dt, bits)).reshape(-1, per).any(axis=1)
        flat = bits.reshape(-1)
        flat[nan] = np.zeros(int(nan.sum()), BITS[w])
    return bits


def tensor(dt, bits, mode):
    """A tensorops.v1.Tensor of `bits` in raw_data ("raw") or its typed field ("typed")."""
    t = pb.Tensor(dtype=dt_enum(dt), shape=[int(d) for d in bits.shape])
    if dt == "STRING":
        t.string_data.extend(list(bits.reshape(-1)))
    elif mode == "raw":
        t.raw_data = np.ascontiguousarray(bits).tobytes()
    else:
        getattr(t, FIELD[dt]).extend(typed_values(dt, bits).tolist())
    return t


def canon(t):
    """(dtype, shape, the one data field present, its bytes) of a reply tensor."""
    present = [f for f in DATA_FIELDS if len(getattr(t, f))]
    if not present:
        return (dt_name(t.dtype), tuple(t.shape), "empty", b"")
    if len(present) > 1:
        return (dt_name(t.dtype), tuple(t.shape), "mixed " + ",".join(present), None)
    f = present[0]
    if f == "raw_data":
        payload = bytes(t.raw_data)
    elif f == "string_data":
        payload = tuple(t.string_data)
    else:
        payload = np.array(list(getattr(t, f)), FIELD_NP[f]).tobytes()
    return (dt_name(t.dtype), tuple(t.shape), f, payload)


def expected(dt, bits, mode):
    """canon() of the tensor the server should answer with: `bits` in `mode`."""
    shape = tuple(int(d) for d in bits.shape)
    if bits.size == 0:
        return (dt, shape, "empty", b"")
    if dt == "STRING":
        return (dt, shape, "string_data", tuple(bits.reshape(-1)))
    if mode == "raw":
        return (dt, shape, "raw_data", np.ascontiguousarray(bits).tobytes())
    f = FIELD[dt]
    return (dt, shape, f, np.asarray(typed_values(dt, bits), FIELD_NP[f]).tobytes())


def raw_oip(dt, bits):
    """OIP raw contents: BYTES as 4-byte length + bytes, the rest packed."""
    if dt == "STRING":
        return b"".join(struct.pack("<I", len(x)) + x for x in bits.reshape(-1))
    return np.ascontiguousarray(bits).tobytes()


def v1_as_oip_raw(t):
    """A v1 reply tensor's elements in OIP raw layout."""
    if t.dtype == pb.DATA_TYPE_STRING:
        return b"".join(struct.pack("<I", len(x)) + x for x in t.string_data)
    return bytes(t.raw_data)


# ---------------------------------------------------------------------------
# NumPy references (on arrays of bits)

def norm(a, rank):
    return int(a) + rank if int(a) < 0 else int(a)


def ref_reverse_index(x, axes):
    axes = sorted({norm(a, x.ndim) for a in axes})
    return np.flip(x, axis=tuple(axes)) if axes else x


def ref_roll(x, shifts, axes):
    if x.size == 0 or not len(axes):
        return x
    shifts = list(shifts) * len(axes) if len(shifts) == 1 else list(shifts)
    for s, a in zip(shifts, axes):
        a = norm(a, x.ndim)
        x = np.roll(x, int(s) % x.shape[a], axis=a)  # Python's % of the int64: no overflow
    return x


class Step:
    """One op of a chain: its name as sent, attributes, inputs after the data
    [(dtype, bits, mode)] and its NumPy reference."""

    def __init__(self, op, canonical, attrs, inputs, ref, names=None):
        self.op, self.canonical, self.attrs, self.inputs = op, canonical, attrs, inputs
        self.ref = ref
        self.names = names  # OIP input names after the data's

    def tensors(self):
        return [tensor(dt, b, m) for dt, b, m in self.inputs]

    def message(self):
        s = pb.Step(op=self.op, inputs=self.tensors())
        s.attrs.update(self.attrs)
        return s

    def __repr__(self):
        def values(dt, b):
            v = typed_values(dt, b).tolist()
            return str(v) if len(v) <= 12 else f"{str(v[:12])[:-1]}, ... ({len(v)} values)]"
        ins = ", ".join(f"{dt}{list(b.shape)}={values(dt, b)}" for dt, b, _ in self.inputs)
        return f"{self.op}{json.dumps(self.attrs) if self.attrs else ''}({ins})"


def pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


def small_mode(rng, oip):
    return "raw" if oip or rng.random() < 0.5 else "typed"


def gen_reverse(rng, shape, oip=False):
    r = len(shape)
    op = "Reverse-1" if rng.random() < 0.3 else "Reverse"
    if rng.random() < 0.5:
        mask = rng.integers(0, 2, r).astype(bool)
        return Step(op, "Reverse", {"mode": "mask"},
                    [("BOOL", bits_of("BOOL", mask, [r]), small_mode(rng, oip))],
                    lambda x: ref_reverse_mask(x, mask), ["axis"])
    dt = pick(rng, INT_TYPES)
    k = 0 if r == 0 else int(rng.integers(0, r + 3))  # duplicates too
    lo = -r if dt in SIGNED else 0
    axes = [int(a) for a in rng.integers(lo, r, k)] if k else []
    return Step(op, "Reverse", {"mode": "index"}, [(dt, bits_of(dt, axes), small_mode(rng, oip))],
                lambda x: ref_reverse_index(x, axes), ["axis"])


def gen_roll(rng, shape, oip=False):
    r = len(shape)
    op = "Roll-7" if rng.random() < 0.3 else "Roll"
    k = 0 if r == 0 else int(rng.integers(0, r + 2))
    axes = [int(a) for a in rng.integers(-r, r, k)] if k else []
    n_shift = k if k == 0 else pick(rng, [1, 1, k])  # broadcast or one per axis
    shifts = []
    for _ in range(n_shift):
        shifts.append(int(rng.integers(-12, 13)) if rng.random() < 0.85 else None)
    sdt, adt = pick(rng, ["INT32", "INT64"]), pick(rng, ["INT32", "INT64"])
    for i, s in enumerate(shifts):  # big ones: wrap modulo the dimension
        if s is None:
            shifts[i] = (pick(rng, [-2**31, 2**31 - 1, -7777777]) if sdt == "INT32"
                         else pick(rng, [-2**63, 2**63 - 1, 2**40 + 3, -(2**35) - 1]))
    sshape = [] if n_shift == 1 and rng.random() < 0.4 else [n_shift]
    ashape = [] if k == 1 and rng.random() < 0.4 else [k]
    return Step(op, "Roll", {}, [(sdt, bits_of(sdt, shifts, sshape), small_mode(rng, oip)),
                                 (adt, bits_of(adt, axes, ashape), small_mode(rng, oip))],
                lambda x: ref_roll(x, shifts, axes), ["shift", "axes"])


def gen_lengths(rng, dt, count, limit):
    out = []
    for _ in range(count):
        v = int(rng.integers(0, limit + 1))
        while not exact_in(dt, v):
            v -= 1
        out.append(v)
    return out


def gen_reverse_sequence(rng, shape, oip=False):
    r = len(shape)
    op = "ReverseSequence-1" if rng.random() < 0.3 else "ReverseSequence"
    b, s = (int(a) for a in rng.choice(r, 2, replace=False))
    attrs = {}
    if b != 0 or rng.random() < 0.5:
        attrs["batch_axis"] = b - r if rng.random() < 0.4 else b
    if s != 1 or rng.random() < 0.5:
        attrs["seq_axis"] = s - r if rng.random() < 0.4 else s
    types = [t for t in INT_TYPES + FLOAT_TYPES if not oip or t in OIP_NAME]
    dt = pick(rng, types)
    lengths = gen_lengths(rng, dt, shape[b], shape[s])
    return Step(op, "ReverseSequence", attrs,
                [(dt, bits_of(dt, lengths), small_mode(rng, oip))],
                lambda x: ref_reverse_sequence(x, lengths, b, s), ["seq_lengths"])


def gen_onnx_reverse_sequence(rng, shape, oip=False):
    b, t = pick(rng, [(1, 0), (0, 1)])
    if (b, t) == (1, 0):  # the defaults: any of them may be left out
        attrs = pick(rng, [{}, {"batch_axis": 1}, {"time_axis": 0},
                           {"batch_axis": 1, "time_axis": 0}])
    else:
        attrs = {"time_axis": 1, "batch_axis": 0}
    dt = pick(rng, ["INT64", "INT32"])
    lengths = gen_lengths(rng, dt, shape[b], shape[t])
    return Step("onnx.ReverseSequence", "onnx.ReverseSequence", attrs,
                [(dt, bits_of(dt, lengths), small_mode(rng, oip))],
                lambda x: ref_reverse_sequence(x, lengths, b, t), ["sequence_lens"])


def gen_step(rng, shape, oip=False):
    gens = [gen_reverse, gen_roll]
    if len(shape) >= 2:
        gens += [gen_reverse_sequence, gen_onnx_reverse_sequence]
    return pick(rng, gens)(rng, shape, oip)


def gen_shape(rng, dt, size):
    """small: ranks 0-5, dims 0-6; medium: long trailing dims (rows of tens to thousands of
    bytes: fused ReverseSequence walks and the passes below their threshold); big: up to
    600 kB (split across the pool)."""
    w = WIDTH.get(dt, 16)
    if size == "big":
        r = int(rng.integers(1, 5))
        shape = [int(rng.integers(2, {1: 60000, 2: 400, 3: 50, 4: 18}[r] + 1)) for _ in range(r)]
        while np.prod(shape) * w > 600_000:
            shape[int(np.argmax(shape))] //= 2
        return shape
    if size == "medium":
        r = int(rng.integers(2, 6))
        shape = [0 if rng.random() < 0.03 else int(rng.integers(1, 6)) for _ in range(r)]
        for k in range(1, int(rng.integers(1, 3)) + 1):
            shape[-k] = int(rng.integers(8, 300))
        while np.prod(shape) * w > 96_000:
            shape[int(np.argmax(shape))] //= 2
        return shape
    r = int(pick(rng, [0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 5, 5]))
    shape = [0 if rng.random() < 0.06 else int(rng.integers(1, 7)) for _ in range(r)]
    while np.prod(shape) > 600:
        shape[int(np.argmax(shape))] //= 2
    return shape


def apply_refs(bits, steps):
    for s in steps:
        bits = s.ref(bits)
    return bits


def chain_request(dt, bits, mode, steps):
    req = pb.ExecuteRequest(op=steps[0].op, inputs=[tensor(dt, bits, mode)] + steps[0].tensors())
    req.attrs.update(steps[0].attrs)
    for s in steps[1:]:
        req.then.append(s.message())
    return req


def single_request(op, attrs, inputs):
    req = pb.ExecuteRequest(op=op, inputs=inputs)
    req.attrs.update(attrs)
    return req


def describe(dt, bits, mode, steps):
    return (f"{dt} {mode} shape {list(bits.shape)}: " + " -> ".join(repr(s) for s in steps))


def status_of(fn, req):
    """(code, details, reply). A refusal of the in-flight budget while the previous call's
    bytes are still held ("retry later": they are released just after its reply) is
    retried; one for the call's own size stays."""
    for attempt in range(50):
        try:
            return grpc.StatusCode.OK, "", fn(req, timeout=60)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or "retry later" not in e.details() \
                    or attempt == 49:
                return e.code(), e.details(), None
            time.sleep(0.01)


# ---------------------------------------------------------------------------

class ChainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        print(f"chain_python_test: TENSOROPS_CHAIN_SEED={SEED} TENSOROPS_CHAIN_CASES={CASES}",
              flush=True)
        cls.servers = [RestServer(SERVER, "--shared_memory=system")]
        try:
            # Every kernel on the pool, split from 4 KiB on.
            cls.servers.append(RestServer(SERVER, "--inline_max_bytes=0",
                                          "--min_parallel_bytes=4096"))
        except BaseException:
            cls.servers[0].stop()
            raise
        cls.channels = [grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}") for s in cls.servers]
        cls.stubs = [pb_grpc.TensorOpsStub(c) for c in cls.channels]
        cls.stub = cls.stubs[0]
        cls.oip = ipb_grpc.GRPCInferenceServiceStub(cls.channels[0])

    @classmethod
    def tearDownClass(cls):
        for c in cls.channels:
            c.close()
        codes = [s.stop() for s in cls.servers]
        assert codes == [0, 0], codes

    def setUp(self):
        self.t0 = time.monotonic()

    def tearDown(self):
        print(f"  {self.id().split('.')[-1]}: {time.monotonic() - self.t0:.1f} s", flush=True)

    # -- one chain, three ways ----------------------------------------------

    def mismatch(self, stub, dt, bits, mode, steps, stream=False):
        """None, or what differs between the chain, the ops one by one and NumPy."""
        code, details, reply = status_of(stub.Execute, chain_request(dt, bits, mode, steps))
        if code != grpc.StatusCode.OK:
            return f"chain failed: {code.name}: {details}"
        if len(reply.outputs) != 1:
            return f"chain answered {len(reply.outputs)} outputs"
        got = reply.outputs[0]
        prev = tensor(dt, bits, mode)
        for i, s in enumerate(steps):
            code, details, r = status_of(stub.Execute,
                                         single_request(s.op, s.attrs, [prev] + s.tensors()))
            if code != grpc.StatusCode.OK:
                return f"op {i} alone failed: {code.name}: {details}"
            prev = r.outputs[0]
        want = expected(dt, apply_refs(bits, steps), mode)
        if canon(prev) != want:
            return f"the ops one by one differ from NumPy (a single op or this test's " \
                   f"reference is wrong): {canon(prev)[:3]} vs {want[:3]}"
        if got.SerializeToString(deterministic=True) != prev.SerializeToString(deterministic=True):
            c = canon(got)
            return f"chain reply differs from the ops one by one: chain {c[:3]}, " \
                   f"one by one {canon(prev)[:3]}; equal to NumPy: {c == want}"
        if stream and dt != "STRING":
            diff = self.stream_mismatch(stub, dt, bits, steps, bytes(got.raw_data))
            if diff:
                return diff
        return None

    def shrink(self, stub, dt, bits, mode, steps, stream):
        """The shortest chain (steps dropped one at a time) that still fails."""
        changed = True
        while changed and len(steps) > 1:
            changed = False
            for i in range(len(steps)):
                fewer = steps[:i] + steps[i + 1:]
                if self.mismatch(stub, dt, bits, mode, fewer, stream):
                    steps, changed = fewer, True
                    break
        return steps

    def test_random_chains(self):
        rng = np.random.default_rng(SEED)
        failures, counts = [], {"ops": {}, "dtypes": set(), "modes": set(), "ranks": set()}
        streamed = 0
        for case in range(CASES):
            dt = pick(rng, DTYPES)
            u = rng.random()
            size = "small" if u < 0.6 else "medium" if u < 0.92 or dt == "STRING" else "big"
            shape = gen_shape(rng, dt, size)
            mode = "typed" if dt == "STRING" else (
                "raw" if np.prod(shape) > 5000 else pick(rng, ["raw", "typed"]))
            bits = random_bits(rng, dt, shape, mode == "typed")
            steps = [gen_step(rng, shape) for _ in range(int(rng.integers(1, 9)))]
            stream = mode == "raw" and case % 3 == 0
            streamed += stream and dt != "STRING"
            stub = self.stubs[case % 2]
            for s in steps:
                counts["ops"][s.op] = counts["ops"].get(s.op, 0) + 1
            counts["dtypes"].add(dt)
            counts["modes"].add(mode)
            counts["ranks"].add(len(shape))
            diff = self.mismatch(stub, dt, bits, mode, steps, stream)
            if diff:
                small = self.shrink(stub, dt, bits, mode, steps, stream)
                failures.append(f"case {case} (server {case % 2}): "
                                f"{self.mismatch(stub, dt, bits, mode, small, stream)}\n"
                                f"    minimal chain: {describe(dt, bits, mode, small)}")
        print(f"  {CASES} random chains ({streamed} also streamed); ops {counts['ops']}; "
              f"ranks {sorted(counts['ranks'])}; modes {sorted(counts['modes'])}; "
              f"{len(counts['dtypes'])} dtypes", flush=True)
        if failures:
            self.fail(f"{len(failures)} of {CASES} chains wrong (seed {SEED}):\n" +
                      "\n".join(failures[:8]))

    def test_every_dtype_encoding_and_op_once(self):
        """Deterministic coverage: each type x encoding through every op (rank 3)."""
        rng = np.random.default_rng(7)
        failures = []
        for dt in DTYPES:
            for mode in (["typed"] if dt == "STRING" else ["raw", "typed"]):
                for shape in ([2, 3, 4], [3, 0, 2]):
                    bits = random_bits(rng, dt, shape, mode == "typed")
                    steps = [gen_reverse(rng, shape), gen_roll(rng, shape),
                             gen_reverse_sequence(rng, shape),
                             gen_onnx_reverse_sequence(rng, shape),
                             gen_reverse(rng, shape), gen_roll(rng, shape)]
                    diff = self.mismatch(self.stub, dt, bits, mode, steps, stream=mode == "raw")
                    if diff:
                        failures.append(f"{diff}\n    {describe(dt, bits, mode, steps)}")
        self.assertEqual(failures, [], "\n".join(failures[:6]))

    def test_concurrent_chains_on_the_pool(self):
        """Chains at once on the server that splits every kernel across its pool."""
        from concurrent.futures import ThreadPoolExecutor
        rng = np.random.default_rng(SEED + 2)
        work = []
        for _ in range(96):
            dt = pick(rng, [d for d in DTYPES if d != "STRING"])
            shape = gen_shape(rng, dt, pick(rng, ["medium", "medium", "big"]))
            bits = random_bits(rng, dt, shape, False)
            steps = [gen_step(rng, shape) for _ in range(int(rng.integers(2, 9)))]
            work.append((dt, bits, steps, expected(dt, apply_refs(bits, steps), "raw")))

        def run(item):
            dt, bits, steps, want = item
            code, msg, reply = status_of(self.stubs[1].Execute,
                                         chain_request(dt, bits, "raw", steps))
            if code != grpc.StatusCode.OK:
                return f"{code.name} {msg}: {describe(dt, bits, 'raw', steps)}"
            if canon(reply.outputs[0]) != want:
                return f"differs from NumPy: {describe(dt, bits, 'raw', steps)}"
            return None
        with ThreadPoolExecutor(8) as pool:
            failures = [f for f in pool.map(run, work) if f]
        self.assertEqual(failures, [], "\n".join(failures[:5]))

    def test_chain_of_one_is_the_op(self):
        rng = np.random.default_rng(1)
        for dt in ("INT32", "STRING", "COMPLEX128"):
            mode = "typed" if dt == "STRING" else "raw"
            bits = random_bits(rng, dt, [3, 4], False)
            for gen in (gen_reverse, gen_roll, gen_reverse_sequence, gen_onnx_reverse_sequence):
                s = gen(rng, [3, 4])
                one = self.stub.Execute(chain_request(dt, bits, mode, [s]))
                self.assertEqual(canon(one.outputs[0]), expected(dt, s.ref(bits), mode), repr(s))

    # -- 64 steps -------------------------------------------------------------

    def test_64_steps_run_and_65_are_refused(self):
        rng = np.random.default_rng(SEED + 64)
        for dt, mode, shape in (("INT32", "raw", [3, 4, 2]), ("FLOAT16", "typed", [5, 2]),
                                ("STRING", "typed", [2, 3]), ("FLOAT32", "raw", [3, 5, 80]),
                                ("UINT8", "raw", [4, 700])):
            bits = random_bits(rng, dt, shape, mode == "typed")
            steps = [gen_step(rng, shape) for _ in range(1 + MAX_STEPS)]
            diff = self.mismatch(self.stub, dt, bits, mode, steps, stream=mode == "raw")
            self.assertIsNone(diff, f"64 steps: {diff}")
            steps.append(gen_step(rng, shape))
            req = chain_request(dt, bits, mode, steps)
            self.assertEqual(len(req.then), MAX_STEPS + 1)
            code, details, _ = status_of(self.stub.Execute, req)
            self.assertEqual(code, INV, f"65 steps: {code} {details}")
            self.assertIn("64", details)
        # Through the stream header too.
        bits = random_bits(rng, "INT32", [3, 4], False)
        steps = [gen_step(rng, [3, 4]) for _ in range(2 + MAX_STEPS)]
        code, details, _, _ = self.stream(self.stub, "INT32", bits, steps)
        self.assertEqual(code, INV, f"65 streamed steps: {code} {details}")

    # -- invalid steps --------------------------------------------------------

    @staticmethod
    def bad_steps(shape):
        """(what, op, attrs, inputs after the data, code, a word the message names)."""
        r = len(shape)
        i64 = lambda v, m="raw": ("INT64", bits_of("INT64", v), m)  # noqa: E731
        ok_axis = [0] if r else []
        rows = [
            ("bad mode", "Reverse", {"mode": "flip"}, [i64(ok_axis)], INV, "mode"),
            ("missing mode", "Reverse", {}, [i64(ok_axis)], INV, "mode"),
            ("mode not a string", "Reverse", {"mode": 1}, [i64(ok_axis)], INV, "mode"),
            ("axis out of range", "Reverse", {"mode": "index"}, [i64([r], "typed")], INV, "axis"),
            ("negative axis out of range", "Reverse-1", {"mode": "index"}, [i64([-r - 1])], INV,
             "axis"),
            ("mask one too long", "Reverse", {"mode": "mask"},
             [("BOOL", bits_of("BOOL", [True] * (r + 1)), "typed")], INV, "axis"),
            ("float axis", "Reverse", {"mode": "index"},
             [("FLOAT32", bits_of("FLOAT32", ok_axis), "raw")], INV, "axis"),
            ("Reverse with an extra input", "Reverse", {"mode": "index"}, [i64([]), i64([])], INV,
             ""),
            ("Reverse without its axis", "Reverse", {"mode": "index"}, [], INV, ""),
            ("unknown attribute", "Reverse", {"mode": "index", "bogus": 1}, [i64([])], INV,
             "bogus"),
            ("roll axes out of range", "Roll", {}, [i64([1]), i64([r])], INV, "axes"),
            ("roll negative axis out of range", "Roll-7", {}, [i64([1]), i64([-r - 1], "typed")],
             INV, "axes"),
            ("Roll without axes", "Roll", {}, [i64([1])], INV, ""),
            ("Roll with an extra input", "Roll", {}, [i64([]), i64([]), i64([])], INV, ""),
            ("float shift", "Roll", {}, [("FLOAT32", bits_of("FLOAT32", [1.0]), "raw"),
                                         i64(ok_axis)], INV, "shift"),
            ("Roll attribute", "Roll", {"mode": "index"}, [i64([]), i64([])], INV, "mode"),
            ("unknown op", "Transpose", {}, [i64([0])], UNIMPL, "Transpose"),
        ]
        if r >= 1:
            rows.append(("shift and axes lengths differ", "Roll", {},
                         [i64([1, 2]), i64([0, 0, 0])], INV, "shift"))
        if r >= 2:
            b, s = shape[0], shape[1]
            lens = lambda v, dt="INT64": (dt, bits_of(dt, v), "raw")  # noqa: E731
            ok = [0] * b
            rows += [
                ("batch_axis == seq_axis", "ReverseSequence", {"batch_axis": 0, "seq_axis": 0},
                 [lens(ok)], INV, "axis"),
                ("seq_axis out of range", "ReverseSequence", {"seq_axis": r}, [lens(ok)], INV,
                 "seq_axis"),
                ("batch_axis 1.5", "ReverseSequence-1", {"batch_axis": 1.5}, [lens(ok)], INV,
                 "batch_axis"),
                ("batch_axis a string", "ReverseSequence", {"batch_axis": "0"}, [lens(ok)], INV,
                 "batch_axis"),
                ("seq_lengths one too many", "ReverseSequence", {}, [lens(ok + [0])], INV,
                 "seq_lengths"),
                ("seq_lengths BOOL", "ReverseSequence", {}, [lens(ok, "BOOL")], INV,
                 "seq_lengths"),
                ("time_axis on OpenVINO's op", "ReverseSequence", {"time_axis": 1}, [lens(ok)],
                 INV, "time_axis"),
                ("onnx batch_axis 2", "onnx.ReverseSequence", {"batch_axis": 2, "time_axis": 0},
                 [lens([0] * s)], INV, "batch_axis"),
                ("onnx batch_axis == time_axis (default)", "onnx.ReverseSequence",
                 {"batch_axis": 0}, [lens(ok)], INV, "axis"),
                ("onnx seq_axis", "onnx.ReverseSequence", {"seq_axis": 1}, [lens([0] * s)], INV,
                 "seq_axis"),
                ("onnx sequence_lens INT8", "onnx.ReverseSequence", {},
                 [lens([0] * s, "INT8")], INV, "sequence_lens"),
                ("onnx sequence_lens one too few", "onnx.ReverseSequence", {},
                 [lens([0] * max(s - 1, 0) if s else [0])], INV, "sequence_lens"),
            ]
            if b:
                rows += [
                    ("seq_length too large", "ReverseSequence", {}, [lens([s + 1] + ok[1:])],
                     INV, "seq_lengths"),
                    ("negative seq_length", "ReverseSequence", {}, [lens(ok[1:] + [-1])], INV,
                     "seq_lengths"),
                    ("fractional seq_length", "ReverseSequence", {},
                     [lens([0.5] + ok[1:], "FLOAT32")], INV, "seq_lengths"),
                ]
            if s:
                rows.append(("onnx sequence_lens too large", "onnx.ReverseSequence", {},
                             [lens([b + 1] * s)], INV, "sequence_lens"))
        return rows

    @staticmethod
    def strip_op(msg, names):
        for n in names:
            if msg.startswith(n + ": "):
                return msg[len(n) + 2:]
        return msg

    def test_invalid_step_at_every_position(self):
        rng = np.random.default_rng(SEED + 1)
        canonical = {"Reverse-1": "Reverse", "Roll-7": "Roll",
                     "ReverseSequence-1": "ReverseSequence"}
        failures, n = [], 0
        for dt, mode, shape in (("INT32", "raw", [3, 4]), ("FLOAT16", "typed", [2, 3, 4]),
                                ("STRING", "typed", [5]), ("BFLOAT16", "raw", [0, 3]),
                                ("COMPLEX64", "raw", [])):
            bits = random_bits(rng, dt, shape, mode == "typed")
            for what, op, attrs, ins, code, word in self.bad_steps(shape):
                bad_inputs = [tensor(*x) for x in ins]
                for pos in sorted({0, 1, 2, 4}):
                    steps = [gen_step(rng, shape) for _ in range(5)]
                    before = apply_refs(bits, steps[:pos])
                    single = single_request(op, attrs, [tensor(dt, before, mode)] + bad_inputs)
                    s_code, s_msg, _ = status_of(self.stub.Execute, single)
                    bad = Step(op, op, attrs, ins, None)
                    req = chain_request(dt, bits, mode, steps[:pos] + [bad] + steps[pos + 1:])
                    c_code, c_msg, _ = status_of(self.stub.Execute, req)
                    n += 1
                    where = f"{what} at {'op' if pos == 0 else f'then[{pos - 1}]'} " \
                            f"({dt} {shape} {mode})"
                    if s_code != code:
                        failures.append(f"{where}: the single call gave {s_code.name} "
                                        f"({s_msg!r}), expected {code.name}")
                        continue
                    if c_code != code:
                        failures.append(f"{where}: {c_code.name} ({c_msg!r}), "
                                        f"expected {code.name}")
                        continue
                    if word and word not in s_msg:
                        failures.append(f"{where}: single call message {s_msg!r} lacks {word!r}")
                    if pos == 0:
                        if c_msg != s_msg:
                            failures.append(f"{where}: {c_msg!r}, the single call says {s_msg!r}")
                        continue
                    i = pos - 1
                    if code == UNIMPL:
                        if f"then[{i}]" not in c_msg or op not in c_msg:
                            failures.append(f"{where}: {c_msg!r} names no then[{i}] / {op}")
                        continue
                    names = [op, canonical.get(op, op)]
                    prefixes = [f"then[{i}] ({nm}): " for nm in names]
                    hit = [p for p in prefixes if c_msg.startswith(p)]
                    if not hit:
                        failures.append(f"{where}: {c_msg!r} does not start with {prefixes[-1]!r}")
                        continue
                    rest = c_msg[len(hit[0]):]
                    if self.strip_op(rest, names) != self.strip_op(s_msg, names):
                        failures.append(f"{where}: after the prefix {rest!r}, the single call "
                                        f"says {s_msg!r}")
        print(f"  {n} invalid chains", flush=True)
        self.assertEqual(failures, [], f"{len(failures)} wrong:\n" + "\n".join(failures[:25]))

    def test_empty_step_op_name(self):
        bits = bits_of("INT32", [1, 2, 3])
        roll = Step("Roll", "Roll", {}, [("INT64", bits_of("INT64", [1]), "raw"),
                                         ("INT64", bits_of("INT64", [0]), "raw")], None)
        req = chain_request("INT32", bits, "raw", [roll, roll])
        req.then.append(pb.Step(op=""))
        code, msg, _ = status_of(self.stub.Execute, req)
        self.assertEqual(code, INV, msg)
        self.assertTrue(msg.startswith("then[1]"), msg)

    # -- ExecuteStream --------------------------------------------------------

    @staticmethod
    def stream(stub, dt, bits, steps, chunk=4096):
        """ExecuteStream with the steps in the header: (code, details, header, bytes)."""
        first = steps[0]
        inputs = [(dt, bits)] + [(d, b) for d, b, _ in first.inputs]
        datas = [np.ascontiguousarray(b).tobytes() for _, b in inputs]
        h = pb.StreamHeader(op=first.op)
        h.attrs.update(first.attrs)
        for (d, b), raw in zip(inputs, datas):
            h.inputs.add(dtype=dt_enum(d), shape=[int(x) for x in b.shape], crc32=zlib.crc32(raw))
        for s in steps[1:]:
            h.then.append(s.message())
        msgs = [pb.ExecuteStreamRequest(header=h)]
        for i, raw in enumerate(datas):
            for off in range(0, len(raw), chunk):
                msgs.append(pb.ExecuteStreamRequest(chunk=pb.TensorChunk(
                    tensor=i, offset=off, data=raw[off:off + chunk])))
        for attempt in range(50):  # "retry later": as status_of
            header, out = None, bytearray()
            try:
                for m in stub.ExecuteStream(iter(msgs), timeout=60):
                    if m.HasField("header"):
                        header = m.header
                    else:
                        assert m.chunk.tensor == 0 and m.chunk.offset == len(out), m.chunk
                        out += m.chunk.data
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and \
                        "retry later" in e.details() and attempt < 49:
                    time.sleep(0.01)
                    continue
                return e.code(), e.details(), header, bytes(out)
            return grpc.StatusCode.OK, "", header, bytes(out)

    def stream_mismatch(self, stub, dt, bits, steps, unary_raw):
        size = bits.size * WIDTH[dt]
        chunk = max(pick(np.random.default_rng(size), [7, 100, 4096, 65536]), -(-size // 200))
        code, details, header, out = self.stream(stub, dt, bits, steps, chunk)
        if code != grpc.StatusCode.OK:
            return f"streamed chain failed: {code.name}: {details}"
        o = header.outputs[0]
        if (dt_name(o.dtype), list(o.shape)) != (dt, list(bits.shape)):
            return f"streamed chain's header {o}"
        if out != unary_raw:
            return "streamed chain's bytes differ from the unary chain's"
        if o.crc32 != zlib.crc32(out):
            return f"streamed chain's CRC-32 {o.crc32} is not its bytes' {zlib.crc32(out)}"
        return None

    def test_stream_step_error_names_the_step(self):
        rng = np.random.default_rng(3)
        bits = random_bits(rng, "FLOAT64", [3, 4], False)
        steps = [gen_roll(rng, [3, 4]), gen_reverse(rng, [3, 4]),
                 Step("Roll", "Roll", {}, [("INT64", bits_of("INT64", [1]), "raw"),
                                           ("INT64", bits_of("INT64", [5]), "raw")], None)]
        code, msg, _, _ = self.stream(self.stub, "FLOAT64", bits, steps)
        self.assertEqual(code, INV, msg)
        self.assertTrue(msg.startswith("then[1] (Roll): "), msg)
        steps[2] = Step("Nope", "Nope", {}, [], None)
        code, msg, _, _ = self.stream(self.stub, "FLOAT64", bits, steps)
        self.assertEqual(code, UNIMPL, msg)
        self.assertIn("then[1]", msg)

    # -- limits -------------------------------------------------------------------

    def test_limits_count_the_chains_real_memory(self):
        """--max_request_bytes, --max_stream_bytes and the in-flight budget: inputs +
        output (+ one scratch tensor when run in passes), not a tensor per step."""
        limit = 2 * 65536 + 16384
        server = RestServer(SERVER, f"--max_request_bytes={limit}",
                            f"--max_stream_bytes={limit}", f"--max_inflight_bytes={limit}")
        try:
            with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as ch:
                stub = pb_grpc.TensorOpsStub(ch)
                rng = np.random.default_rng(SEED + 9)
                # Reverses and Rolls compose into one pass: input + output.
                shape = [64, 256]
                bits = random_bits(rng, "INT32", shape, False)
                steps = [pick(rng, [gen_reverse, gen_roll])(rng, shape) for _ in range(65)]
                diff = self.mismatch(stub, "INT32", bits, "raw", steps, stream=True)
                self.assertIsNone(diff, f"65 fused ops within 2x the tensor: {diff}")
                # Any chain: at most one tensor more (40000 B x 3 fits, x 17 would not).
                shape = [20, 20, 25]  # small seq_lengths: 17 of them stay small
                bits = random_bits(rng, "INT32", shape, False)
                for _ in range(4):
                    steps = [gen_step(rng, shape) for _ in range(17)]
                    diff = self.mismatch(stub, "INT32", bits, "raw", steps, stream=True)
                    self.assertIsNone(diff, f"17 ops within 3x the tensor: {diff}")
                # Past the limit: refused as the op alone is.
                bits = random_bits(rng, "INT32", [20000], False)
                steps = [gen_roll(rng, [20000]), gen_reverse(rng, [20000])]
                for chain in (steps[:1], steps):
                    code, msg, _ = status_of(stub.Execute,
                                             chain_request("INT32", bits, "raw", chain))
                    self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED, msg)
                    self.assertRegex(msg, "max_request_bytes|max_inflight_bytes")
                    code, msg, _, _ = self.stream(stub, "INT32", bits, chain)
                    self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED, msg)
                    self.assertRegex(msg, "max_stream_bytes|max_inflight_bytes")
        finally:
            self.assertEqual(server.stop(), 0)
        # A streamed chain uses its input as the scratch (docs/cookbook.md, "Chains"):
        # input + output, whatever it is, also the chains run in passes.
        shapes = ([20, 20, 25], [400, 25], [25, 400], [5, 8, 250])  # time- and batch-major
        limit = 2 * 40000 + 8192
        server = RestServer(SERVER, f"--max_stream_bytes={limit}")
        try:
            with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as ch:
                stub = pb_grpc.TensorOpsStub(ch)
                rng = np.random.default_rng(SEED + 10)
                for base in shapes:
                    for dt in ("INT32", "UINT8"):  # 40000 bytes each
                        shape = base if dt == "INT32" else [base[0] * 4] + base[1:]
                        bits = random_bits(rng, dt, shape, False)
                        while True:  # the steps' own inputs small (they count too)
                            steps = [gen_step(rng, shape) for _ in range(9)]
                            if sum(b.nbytes for st in steps for _, b, _ in st.inputs) <= 4096:
                                break
                        diff = self.mismatch(stub, dt, bits, "raw", steps, stream=True)
                        self.assertIsNone(diff, f"streamed in 2x the tensor: {diff}\n"
                                          f"{describe(dt, bits, 'raw', steps)}")
        finally:
            self.assertEqual(server.stop(), 0)

    # -- the Open Inference Protocol ------------------------------------------

    def oip_names(self, model):
        md = self.oip.ModelMetadata(ipb.ModelMetadataRequest(name=model))
        return [t.name for t in md.inputs], md.outputs[0].name

    @staticmethod
    def then_json(steps, style):
        """The "then" parameter: proto3 JSON of the Steps, in one of its spellings."""
        if style == "camel":  # json_format's own: lowerCamelCase, int64 as strings
            return "[" + ",".join(json_format.MessageToJson(s.message(), indent=None)
                                  for s in steps) + "]"

        def numbers(x):  # original field names, int64 and enums as JSON numbers
            if isinstance(x, dict):
                return {k: ([int(v) for v in x[k]] if k in ("shape", "int64_data", "uint64_data")
                            else pb.DataType.Value(x[k]) if k == "dtype" else numbers(x[k]))
                        for k in x}
            if isinstance(x, list):
                return [numbers(v) for v in x]
            return x
        return json.dumps([numbers(json_format.MessageToDict(s.message(),
                                                             preserving_proto_field_name=True))
                           for s in steps])

    def oip_request(self, dt, bits, steps, style):
        first = steps[0]
        names, _ = self.oip_names(first.canonical)
        r = ipb.ModelInferRequest(model_name=first.canonical, id="chain")
        for k, v in first.attrs.items():
            if isinstance(v, str):
                r.parameters[k].string_param = v
            else:
                r.parameters[k].int64_param = v
        if len(steps) > 1 or style == "empty":
            r.parameters["then"].string_param = "[]" if style == "empty" else \
                self.then_json(steps[1:], style)
        for name, (d, b) in zip(names, [(dt, bits)] + [(d, b) for d, b, _ in first.inputs]):
            r.inputs.add(name=name, datatype=OIP_NAME[d], shape=[int(x) for x in b.shape])
            r.raw_input_contents.append(raw_oip(d, b))
        return r

    def oip_chains(self):
        rng = np.random.default_rng(SEED + 5)
        out = []
        for k, dt in enumerate(["INT32", "FLOAT32", "FLOAT16", "BFLOAT16", "STRING", "BOOL",
                                "UINT8", "INT64", "FLOAT64", "INT16"]):
            shape = [[3, 4], [2, 3, 2], [4, 0], [5, 2, 2, 1]][k % 4]
            bits = random_bits(rng, dt, shape, False)
            first = [gen_reverse, gen_roll, gen_reverse_sequence, gen_onnx_reverse_sequence][k % 4]
            steps = [first(rng, shape, oip=True)] + [gen_step(rng, shape)
                                                     for _ in range(int(rng.integers(1, 5)))]
            steps[0].op = steps[0].canonical
            out.append((dt, bits, steps))
        return out

    def test_oip_grpc_then(self):
        failures = []
        for n, (dt, bits, steps) in enumerate(self.oip_chains()):
            v1 = self.stub.Execute(chain_request(dt, bits, "typed" if dt == "STRING" else "raw",
                                                 steps)).outputs[0]
            want = expected(dt, apply_refs(bits, steps), "typed" if dt == "STRING" else "raw")
            self.assertEqual(canon(v1), want, describe(dt, bits, "raw", steps))
            _, out_name = self.oip_names(steps[0].canonical)
            for style in ("camel", "numbers"):
                req = self.oip_request(dt, bits, steps, style)
                code, msg, resp = status_of(self.oip.ModelInfer, req)
                where = f"ModelInfer {style}: {describe(dt, bits, 'raw', steps)}"
                if code != grpc.StatusCode.OK:
                    failures.append(f"{where}: {code.name} {msg}")
                    continue
                o = resp.outputs[0]
                if (resp.model_name, o.name, o.datatype, list(o.shape)) != \
                        (steps[0].canonical, out_name, OIP_NAME[dt], list(bits.shape)):
                    failures.append(f"{where}: answered {resp.model_name} {o}")
                elif resp.raw_output_contents[0] != v1_as_oip_raw(v1):
                    failures.append(f"{where}: bytes differ from Execute's")
        # int64 and uint64 extremes keep every digit in both spellings of the JSON.
        bits = bits_of("INT32", list(range(12)), [3, 4])
        steps = [Step("Roll", "Roll", {}, [("INT64", bits_of("INT64", [2**63 - 1]), "raw"),
                                           ("INT64", bits_of("INT64", [1]), "raw")],
                      lambda x: ref_roll(x, [2**63 - 1], [1])),
                 Step("Roll", "Roll", {},
                      [("INT64", bits_of("INT64", [-2**63, 2**62 + 1]), "typed"),
                       ("INT64", bits_of("INT64", [0, 1]), "typed")],
                      lambda x: ref_roll(x, [-2**63, 2**62 + 1], [0, 1])),
                 Step("Reverse", "Reverse", {"mode": "index"},
                      [("UINT64", bits_of("UINT64", [1]), "typed")],
                      lambda x: ref_reverse_index(x, [1])),
                 Step("Roll", "Roll", {}, [("INT64", bits_of("INT64", [2**53 + 1]), "typed"),
                                           ("INT64", bits_of("INT64", [1]), "typed")],
                      lambda x: ref_roll(x, [2**53 + 1], [1]))]
        want = raw_oip("INT32", np.ascontiguousarray(apply_refs(bits, steps)))
        for style in ("camel", "numbers"):
            resp = self.oip.ModelInfer(self.oip_request("INT32", bits, steps, style))
            self.assertEqual(resp.raw_output_contents[0], want, style)
        # An empty array is the op alone.
        dt, bits, steps = self.oip_chains()[0]
        resp = self.oip.ModelInfer(self.oip_request(dt, bits, steps[:1], "empty"))
        self.assertEqual(resp.raw_output_contents[0],
                         raw_oip(dt, np.ascontiguousarray(steps[0].ref(bits))))
        self.assertEqual(failures, [], "\n".join(failures))

    def test_oip_model_stream_infer(self):
        chains = self.oip_chains()
        requests = [self.oip_request(dt, bits, steps, "camel") for dt, bits, steps in chains]
        for n, r in enumerate(requests):
            r.id = str(n)
        bad = self.roll_oip_request()
        bad.id = "bad"
        bad.parameters["then"].string_param = "[{"
        requests.insert(3, bad)
        responses = list(self.oip.ModelStreamInfer(iter(requests), timeout=60))
        self.assertEqual(len(responses), len(requests))
        self.assertIn("then", responses[3].error_message)
        del responses[3]
        for (dt, bits, steps), r in zip(chains, responses):
            self.assertEqual(r.error_message, "", describe(dt, bits, "raw", steps))
            self.assertEqual(r.infer_response.raw_output_contents[0],
                             raw_oip(dt, np.ascontiguousarray(apply_refs(bits, steps))),
                             describe(dt, bits, "raw", steps))

    def test_oip_grpc_typed_contents(self):
        a = np.arange(12, dtype=np.int32).reshape(3, 4)
        r = ipb.ModelInferRequest(model_name="Reverse")
        r.parameters["mode"].string_param = "index"
        r.parameters["then"].string_param = json.dumps([
            {"op": "Roll", "inputs": [{"dtype": "DATA_TYPE_INT64", "shape": [1], "int64_data": [1]},
                                      {"dtype": "DATA_TYPE_INT64", "shape": [1],
                                       "int64_data": [1]}]}])
        t = r.inputs.add(name="data", datatype="INT32", shape=[3, 4])
        t.contents.int_contents.extend(a.reshape(-1).tolist())
        t = r.inputs.add(name="axis", datatype="INT64", shape=[1])
        t.contents.int64_contents.append(0)
        resp = self.oip.ModelInfer(r)
        want = np.roll(np.flip(a, 0), 1, 1)
        o = resp.outputs[0]
        got = (np.frombuffer(resp.raw_output_contents[0], "<i4") if resp.raw_output_contents
               else np.array(o.contents.int_contents, np.int32))
        self.assertEqual(o.name, "output")
        self.assertEqual(got.tolist(), want.reshape(-1).tolist())

    def test_oip_shared_memory_chains(self):
        """Inputs and the output in system shared memory: the chain's passes write there."""
        from multiprocessing import shared_memory
        size = 1 << 20
        shm = shared_memory.SharedMemory(create=True, size=size)
        key = "/" + shm.name.lstrip("/")
        rng = np.random.default_rng(SEED + 11)
        failures = []
        try:
            self.oip.SystemSharedMemoryRegister(ipb.SystemSharedMemoryRegisterRequest(
                name="chain", key=key, offset=0, byte_size=size))
            for dt, shape in (("INT32", [3, 4, 5]), ("FLOAT32", [4, 3, 100]), ("UINT8", [6, 1000]),
                              ("FLOAT64", [2, 50, 7]), ("INT16", [0, 4])):
                for _ in range(3):
                    bits = random_bits(rng, dt, shape, False)
                    steps = [pick(rng, [gen_reverse_sequence, gen_roll])(rng, shape, oip=True)] + \
                        [gen_step(rng, shape) for _ in range(int(rng.integers(1, 6)))]
                    steps[0].op = steps[0].canonical
                    v1 = self.stub.Execute(chain_request(dt, bits, "raw", steps)).outputs[0]
                    req = self.oip_request(dt, bits, steps, "camel")
                    offset = 0
                    for t, raw in zip(req.inputs, req.raw_input_contents):
                        shm.buf[offset:offset + len(raw)] = raw
                        t.parameters["shared_memory_region"].string_param = "chain"
                        t.parameters["shared_memory_offset"].int64_param = offset
                        t.parameters["shared_memory_byte_size"].int64_param = len(raw)
                        offset += len(raw)
                    del req.raw_input_contents[:]
                    out_offset, out_size = 1 << 19, bits.size * WIDTH[dt]
                    shm.buf[out_offset:out_offset + out_size] = b"\xa5" * out_size
                    o = req.outputs.add(name=self.oip_names(steps[0].canonical)[1])
                    o.parameters["shared_memory_region"].string_param = "chain"
                    o.parameters["shared_memory_offset"].int64_param = out_offset
                    o.parameters["shared_memory_byte_size"].int64_param = out_size
                    code, msg, resp = status_of(self.oip.ModelInfer, req)
                    where = f"shared memory: {describe(dt, bits, 'raw', steps)}"
                    if code != grpc.StatusCode.OK:
                        failures.append(f"{where}: {code.name} {msg}")
                    elif bytes(shm.buf[out_offset:out_offset + out_size]) != bytes(v1.raw_data):
                        failures.append(f"{where}: the region's bytes differ from Execute's")
                    # A bad last step: refused before anything runs, the region untouched.
                    if len(bits.shape) and bits.size:
                        shm.buf[out_offset:out_offset + out_size] = b"\xa5" * out_size
                        req.parameters["then"].string_param = self.then_json(
                            steps[1:] + [Step("Roll", "Roll", {}, [
                                ("INT64", bits_of("INT64", [1]), "raw"),
                                ("INT64", bits_of("INT64", [len(shape)]), "raw")], None)], "camel")
                        code, msg, _ = status_of(self.oip.ModelInfer, req)
                        if code != INV or f"then[{len(steps) - 1}] (Roll): " not in msg:
                            failures.append(f"{where} + a bad step: {code.name} {msg}")
                        elif bytes(shm.buf[out_offset:out_offset + out_size]) != \
                                b"\xa5" * out_size:
                            failures.append(f"{where} + a bad step: the region was written")
            self.oip.SystemSharedMemoryUnregister(
                ipb.SystemSharedMemoryUnregisterRequest(name="chain"))
        finally:
            shm.close()
            shm.unlink()
        self.assertEqual(failures, [], "\n".join(failures))

    MALFORMED = ["[{", "{}", "[1]", '"Roll"', "", '[{"op":"Roll","bogus":1}]',
                 '[{"op":"Roll","inputs":[{"dtype":"DATA_TYPE_NOPE","shape":[1]}]}]',
                 '[{"op":"Roll","attrs":5}]', '[{"op":"Roll","inputs":{"dtype":7}}]',
                 '[],"then":[{"op":"Roll"}]', '[]}', '[] [{"op":"Roll"}]', '[{"op":"Roll"},]']

    def roll_oip_request(self):
        r = ipb.ModelInferRequest(model_name="Roll")
        for name, a in (("data", np.arange(6, dtype=np.int32)), ("shift", np.array([1], np.int64)),
                        ("axes", np.array([0], np.int64))):
            r.inputs.add(name=name, datatype=OIP_NAME["INT32" if name == "data" else "INT64"],
                         shape=[len(a)])
            r.raw_input_contents.append(a.tobytes())
        return r

    def test_oip_grpc_malformed_then(self):
        failures = []
        for text in self.MALFORMED + [3]:
            r = self.roll_oip_request()
            if isinstance(text, str):
                r.parameters["then"].string_param = text
            else:
                r.parameters["then"].int64_param = text
            code, msg, _ = status_of(self.oip.ModelInfer, r)
            if code != INV or "then" not in msg:
                failures.append(f"then={text!r}: {code.name} {msg!r}")
        # A well-formed step that its op refuses names the step.
        r = self.roll_oip_request()
        r.parameters["then"].string_param = json.dumps([
            {"op": "Roll", "inputs": [{"dtype": "DATA_TYPE_INT64", "shape": [1], "int64_data": [1]},
                                      {"dtype": "DATA_TYPE_INT64", "shape": [1],
                                       "int64_data": [3]}]}])
        code, msg, _ = status_of(self.oip.ModelInfer, r)
        if code != INV or "then[0] (Roll): " not in msg:
            failures.append(f"bad step: {code.name} {msg!r}")
        r.parameters["then"].string_param = '[{"op":"Transpose"}]'
        code, msg, _ = status_of(self.oip.ModelInfer, r)
        if code not in (UNIMPL, INV) or "then[0]" not in msg:
            failures.append(f"unknown step op: {code.name} {msg!r}")
        self.assertEqual(failures, [], "\n".join(failures))

    def rest(self, model, body, headers=None):
        conn = self.servers[0].conn()
        try:
            conn.request("POST", f"/v2/models/{model}/infer", body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
        finally:
            conn.close()

    def test_rest_then(self):
        failures = []
        for dt, bits, steps in self.oip_chains():
            v1 = self.stub.Execute(chain_request(dt, bits, "typed" if dt == "STRING" else "raw",
                                                 steps)).outputs[0]
            first = steps[0]
            names, out_name = self.oip_names(first.canonical)
            params = dict(first.attrs, binary_data_output=True,
                          then=self.then_json(steps[1:], "numbers"))
            head = {"inputs": [], "parameters": params}
            blocks = []
            for name, (d, b) in zip(names, [(dt, bits)] + [(d, b) for d, b, _ in first.inputs]):
                raw = raw_oip(d, b)
                head["inputs"].append({"name": name, "shape": [int(x) for x in b.shape],
                                       "datatype": OIP_NAME[d],
                                       "parameters": {"binary_data_size": len(raw)}})
                blocks.append(raw)
            h = json.dumps(head).encode()
            status, hdr, body = self.rest(first.canonical, h + b"".join(blocks),
                                          {"Inference-Header-Content-Length": str(len(h)),
                                           "Content-Type": "application/octet-stream"})
            where = f"REST {describe(dt, bits, 'raw', steps)}"
            if status != 200:
                failures.append(f"{where}: {status} {body[:300]!r}")
                continue
            n = int(hdr["inference-header-content-length"])
            answer, rest = json.loads(body[:n]), body[n:]
            o = answer["outputs"][0]
            if (o["name"], o["datatype"], o["shape"]) != (out_name, OIP_NAME[dt], list(bits.shape)):
                failures.append(f"{where}: answered {o}")
            elif rest != v1_as_oip_raw(v1):
                failures.append(f"{where}: bytes differ from Execute's")
        # JSON both ways, api.md's example.
        a = [[1, 2, 3], [4, 5, 6]]
        body = {"inputs": [{"name": "data", "shape": [2, 3], "datatype": "INT32", "data": a},
                           {"name": "axis", "shape": [1], "datatype": "INT64", "data": [0]}],
                "parameters": {"mode": "index", "then": json.dumps([
                    {"op": "Roll", "inputs": [
                        {"dtype": "DATA_TYPE_INT64", "shape": [1], "int64_data": [1]},
                        {"dtype": "DATA_TYPE_INT64", "shape": [1], "int64_data": [1]}]}])}}
        status, _, answer = self.rest("Reverse", json.dumps(body))
        self.assertEqual(status, 200, answer)
        out = json.loads(answer)["outputs"][0]
        self.assertEqual((out["name"], out["shape"]), ("output", [2, 3]))
        self.assertEqual(np.array(out["data"]).reshape(-1).tolist(), [6, 4, 5, 3, 1, 2])
        self.assertEqual(failures, [], "\n".join(failures))

    def test_rest_malformed_then(self):
        failures = []
        base = {"inputs": [{"name": "data", "shape": [3], "datatype": "INT32", "data": [1, 2, 3]},
                           {"name": "shift", "shape": [1], "datatype": "INT64", "data": [1]},
                           {"name": "axes", "shape": [1], "datatype": "INT64", "data": [0]}]}
        bad_step = json.dumps([{"op": "Roll", "inputs": [
            {"dtype": "DATA_TYPE_INT64", "shape": [1], "int64_data": [1]},
            {"dtype": "DATA_TYPE_INT64", "shape": [1], "int64_data": [3]}]}])
        for text in self.MALFORMED + [3, bad_step]:
            status, _, answer = self.rest("Roll", json.dumps(dict(base, parameters={"then": text})))
            try:
                err = json.loads(answer).get("error", "")
            except ValueError:
                err = ""
            need = "then[0] (Roll): " if text is bad_step else "then"
            if status != 400 or need not in err:
                failures.append(f"then={text!r}: {status} {answer[:300]!r}")
        # JSON objects may repeat a key; a second "then" is refused, not ignored.
        body = json.dumps(dict(base, parameters={"then": "[]"}))
        body = body.replace('"then": "[]"', '"then": "[]", "then": "[]"')
        status, _, answer = self.rest("Roll", body)
        if status != 400 or b"given twice" not in answer:
            failures.append(f"then twice: {status} {answer[:300]!r}")
        self.assertEqual(failures, [], "\n".join(failures))


if __name__ == "__main__":
    # The servers' stdout pipes stay open while their reader threads run (rest_server.py).
    warnings.simplefilter("ignore", ResourceWarning)
    unittest.main(argv=[sys.argv[0], "-v"], warnings="ignore")
