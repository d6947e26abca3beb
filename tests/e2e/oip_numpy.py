"""What the two independent Open Inference Protocol clients share
(oip_python_test.py over gRPC, rest_python_test.py over HTTP): the datatype
names of NumPy's types, raw tensor bytes back to arrays, and plain NumPy
references of the ops. Written from the public texts, not from the server.
"""
import struct

import numpy as np

DATATYPE = {np.bool_: "BOOL", np.uint8: "UINT8", np.uint16: "UINT16", np.uint32: "UINT32",
            np.uint64: "UINT64", np.int8: "INT8", np.int16: "INT16", np.int32: "INT32",
            np.int64: "INT64", np.float16: "FP16", np.float32: "FP32", np.float64: "FP64",
            np.object_: "BYTES"}
NUMPY = {v: k for k, v in DATATYPE.items()}
NUMPY["BF16"] = np.uint16  # bfloat16 travels as its bits (NumPy has no bfloat16)


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
