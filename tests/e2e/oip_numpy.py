"""What the two independent Open Inference Protocol clients share
(oip_python_test.py over gRPC, rest_python_test.py over HTTP): the datatype
names of NumPy's types, raw tensor bytes both ways, plain NumPy references
of the ops and the table of op cases built from them. Written from the
public texts, not from the server.
"""
import os
import struct
import sys

import numpy as np

DATATYPE = {np.bool_: "BOOL", np.uint8: "UINT8", np.uint16: "UINT16", np.uint32: "UINT32",
            np.uint64: "UINT64", np.int8: "INT8", np.int16: "INT16", np.int32: "INT32",
            np.int64: "INT64", np.float16: "FP16", np.float32: "FP32", np.float64: "FP64",
            np.object_: "BYTES"}
NUMPY = {v: k for k, v in DATATYPE.items()}
NUMPY["BF16"] = np.uint16  # bfloat16 travels as its bits (NumPy has no bfloat16)


# TENSOROPS_TEST_SEED=<n> (as tests/seed.h for the C++ tests): mixed into
# every generator of test_rng, so the tests can be swept over many seeds;
# unset, the fixed seeds written in the tests.
# The first generator prints the variable's value, so a log says how to replay.
TEST_SEED = os.environ.get("TENSOROPS_TEST_SEED") or None
_seed_said = False


def test_rng(fixed):
    """NumPy's generator of a test: `fixed`, or `fixed` and TENSOROPS_TEST_SEED."""
    global _seed_said
    if not _seed_said:
        print(f"random seeds: TENSOROPS_TEST_SEED={TEST_SEED or 'unset'}", file=sys.stderr,
              flush=True)
        _seed_said = True
    return np.random.default_rng(fixed if TEST_SEED is None else [fixed, int(TEST_SEED, 0)])


class BF16(np.ndarray):
    """A uint16 array of bfloat16 bits (NumPy has no bfloat16)."""


def datatype(a):
    return "BF16" if isinstance(a, BF16) else DATATYPE[a.dtype.type]


def raw_of(a):
    """An array's raw tensor bytes: little-endian, row-major; BYTES as 4-byte lengths + bytes."""
    if a.dtype == np.object_:
        return b"".join(struct.pack("<I", len(x)) + x for x in a.reshape(-1))
    return np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()


def op_cases(sample, dtypes):
    """(model, inputs, params, reference) for every op, for each of `dtypes`;
    sample(dt, shape) makes the data tensors."""
    out = []
    for dt in dtypes:
        data = sample(dt, (3, 4, 2))
        shift, axes = np.array([5, -1], np.int64), np.array([1, -1], np.int64)
        out.append(("Roll", [("data", data), ("shift", shift), ("axes", axes)], {},
                    np.roll(data, (5, -1), axis=(1, 2))))
        out.append(("Reverse", [("axis", np.array([0, 2], np.int64)), ("data", data)],
                    {"mode": "index"}, ref_reverse_index(data, [0, 2])))
        mask = np.array([False, True, True])
        out.append(("Reverse", [("data", data), ("axis", mask)], {"mode": "mask"},
                    ref_reverse_mask(data, mask)))
        lengths = np.array([4, 0, 2], np.int64)
        out.append(("ReverseSequence", [("data", data), ("seq_lengths", lengths)],
                    {"batch_axis": 0, "seq_axis": 1}, ref_reverse_sequence(data, lengths, 0, 1)))
        data2 = sample(dt, (3, 2))
        lens = np.array([3, 1], np.int64)
        out.append(("onnx.ReverseSequence", [("input", data2), ("sequence_lens", lens)],
                    {"batch_axis": 1, "time_axis": 0}, ref_reverse_sequence(data2, lens, 1, 0)))
    return out


def from_raw(raw, dt, shape):
    if dt == "BYTES":
        out, pos = [], 0
        while pos < len(raw):
            (n,) = struct.unpack_from("<I", raw, pos)
            out.append(raw[pos + 4:pos + 4 + n])
            pos += 4 + n
        return np.array(out, dtype=object).reshape(shape)
    return np.frombuffer(raw, dtype=np.dtype(NUMPY[dt]).newbyteorder("<")).reshape(shape)


def ref_reverse_index(data, axes):
    return np.flip(data, axis=tuple(int(a) for a in axes)) if len(axes) else data


def ref_reverse_mask(data, mask):
    return np.flip(data, axis=tuple(i for i, m in enumerate(mask) if m)) if mask.any() else data


def ref_reverse_sequence(data, lengths, batch_axis, seq_axis):
    out = data.copy()
    moved = np.moveaxis(out, (batch_axis, seq_axis), (0, 1))
    src = np.moveaxis(data, (batch_axis, seq_axis), (0, 1))
    for b, n in enumerate(lengths):
        n = int(n)
        moved[b, :n] = src[b, :n][::-1]
    return out
