#!/usr/bin/env python3
"""Writes the seed corpora (fuzz/corpus/<target>/) without any protobuf library.

fuzz_execute_bytes: serialized tensorops.v1.ExecuteRequest messages, the
README cookbook calls and the semantics.md edge cases (raw and typed data,
scalars, zero-size dims, negative and repeated axes, extreme shifts, string
and complex data, a few invalid ones).
fuzz_execute_structured: short byte strings (the target builds requests from
any bytes), a fixed pseudo-random set so the corpus is reproducible.
fuzz_execute_stream: ExecuteStreamRequest sequences (2-byte little-endian
length before each message): every op streamed whole, in small and
element-splitting chunks, interleaved, and broken (short, corrupt CRC,
chunk out of place, BOOL byte 2).
fuzz_model_infer: serialized inference.ModelInferRequest messages
(proto/inference/grpc_service.proto): every op typed and raw, BYTES both
ways, inputs out of order, attributes as parameters, requested outputs, and
broken ones (mixed raw and typed, short raw, malformed BYTES, shared memory
while it is off).
Run: python3 fuzz/make_corpus.py   (rewrites both directories)
"""
import hashlib
import os
import random
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def ld(field, payload):  # length-delimited
    return key(field, 2) + varint(len(payload)) + payload


def packed(field, values, enc):
    return ld(field, b"".join(enc(v) for v in values)) if values else b""


# DataType numbers (proto/tensorops/v1/tensorops.proto)
F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, BOOL, STR, C64, C128, E4M3, E5M2 = range(1, 19)
WIDTH = {F32: 4, F64: 8, F16: 2, BF16: 2, I8: 1, I16: 2, I32: 4, I64: 8, U8: 1, U16: 2, U32: 4,
         U64: 8, BOOL: 1, C64: 8, C128: 16, E4M3: 1, E5M2: 1}


def tensor(dtype, shape, raw=None, f=None, d=None, i32=None, i64=None, u32=None, u64=None,
           b=None, s=None):
    m = key(1, 0) + varint(dtype) if dtype else b""
    m += packed(2, shape, varint)
    if raw:
        m += ld(3, raw)
    m += packed(4, f or [], lambda x: struct.pack("<f", x))
    m += packed(5, d or [], lambda x: struct.pack("<d", x))
    m += packed(6, i32 or [], varint)
    m += packed(7, i64 or [], varint)
    m += packed(8, u32 or [], varint)
    m += packed(9, u64 or [], varint)
    m += packed(10, b or [], lambda x: varint(1 if x else 0))
    for x in s or []:
        m += ld(11, x)
    return m


def value(v):
    if isinstance(v, str):
        return ld(3, v.encode())
    return key(2, 1) + struct.pack("<d", float(v))


def request(op, inputs, attrs=None):
    m = ld(1, op.encode())
    if attrs:
        st = b"".join(ld(1, ld(1, k.encode()) + ld(2, value(v))) for k, v in attrs.items())
        m += ld(2, st)
    for t in inputs:
        m += ld(3, t)
    return m


def raw_of(dtype, n, seed=1):
    rnd = random.Random(seed)
    if dtype == BOOL:
        return bytes(rnd.randint(0, 1) for _ in range(n))
    return bytes(rnd.randrange(256) for _ in range(n * WIDTH[dtype]))


def axes(vals, dtype=I64):
    return tensor(dtype, [len(vals)], i64=vals) if dtype == I64 else tensor(dtype, [len(vals)], i32=vals)


def bytes_seeds():
    seeds = []
    data23 = tensor(I32, [2, 3], i32=[1, 2, 3, 4, 5, 6])
    seeds.append(request("Reverse", [data23, axes([-1])], {"mode": "index"}))
    seeds.append(request("Reverse", [data23, tensor(BOOL, [2], b=[True, False])], {"mode": "mask"}))
    seeds.append(request("Reverse-1", [tensor(F32, [2, 3], raw=raw_of(F32, 6)), axes([0, 1, -1, 0])],
                         {"mode": "index"}))
    seeds.append(request("Reverse", [tensor(I8, [], raw=b"\x07"), axes([])], {"mode": "index"}))
    seeds.append(request("Reverse", [tensor(U8, [0, 3]), axes([1])], {"mode": "index"}))
    seeds.append(request("Reverse", [tensor(STR, [3], s=[b"a", b"", b"xyz"]), axes([0])],
                         {"mode": "index"}))
    seeds.append(request("Reverse", [tensor(C64, [2], f=[1, 2, 3, 4]), axes([0])], {"mode": "index"}))
    seeds.append(request("Reverse", [tensor(BF16, [2, 2], f=[1.5, -0.0, float("nan"), 3]),
                                     tensor(BOOL, [2], raw=b"\x01\x01")], {"mode": "mask"}))
    for dt in (F16, F64, I16, I64, U16, U32, U64, C128, E4M3, E5M2, BOOL):
        seeds.append(request("Reverse", [tensor(dt, [2, 2, 2], raw=raw_of(dt, 8, dt)),
                                         tensor(U8, [2], raw=b"\x00\x02")], {"mode": "index"}))
    roll_data = tensor(I64, [3, 4], i64=list(range(12)))
    seeds.append(request("Roll", [roll_data, axes([1]), axes([0])]))
    seeds.append(request("Roll-7", [roll_data, tensor(I64, [], i64=[-7]), axes([0, 1])]))
    seeds.append(request("Roll", [roll_data, axes([2**63 - 1, -2**63]), axes([1, 1])]))
    seeds.append(request("Roll", [tensor(F32, [2, 0, 2]), tensor(I32, [], i32=[3]),
                                  tensor(I32, [], i32=[1])]))
    seeds.append(request("Roll", [tensor(I8, []), axes([]), axes([])]))
    seq = tensor(I32, [3, 4], raw=raw_of(I32, 12))
    seeds.append(request("ReverseSequence", [seq, axes([4, 0, 1])], {"batch_axis": 0, "seq_axis": 1}))
    seeds.append(request("ReverseSequence-1", [tensor(F64, [4, 3], d=[float(i) for i in range(12)]),
                                               tensor(F32, [3], f=[3, 2, 1])],
                         {"batch_axis": 1, "seq_axis": 0}))
    seeds.append(request("ReverseSequence", [tensor(STR, [2, 2], s=[b"p", b"q", b"r", b"s"]),
                                             tensor(U8, [2], raw=b"\x02\x01")],
                         {"batch_axis": -2, "seq_axis": -1}))
    seeds.append(request("onnx.ReverseSequence", [tensor(F32, [4, 2], raw=raw_of(F32, 8)),
                                                  axes([4, 3])]))
    seeds.append(request("onnx.ReverseSequence", [tensor(C128, [2, 2], raw=raw_of(C128, 4)),
                                                  tensor(I32, [2], i32=[1, 2])],
                         {"batch_axis": 0, "time_axis": 1}))
    # Invalid ones: wrong counts, overflowing shapes, bad fields.
    seeds.append(request("Reverse", [tensor(I8, [2**32, 2**32]), axes([0])], {"mode": "index"}))
    seeds.append(request("Reverse", [tensor(I32, [2], raw=b"\x00" * 7), axes([0])], {"mode": "index"}))
    seeds.append(request("Roll", [roll_data, axes([1, 2]), axes([0, 1, 1])]))
    seeds.append(request("NoSuchOp", [roll_data]))
    seeds.append(request("Reverse", [tensor(I8, [2], i32=[300, 1]), axes([0])], {"mode": "index"}))
    return seeds


def structured_seeds():
    rnd = random.Random(6)
    seeds = [b"", b"\x00" * 16, b"\xff" * 16]
    for n in (8, 16, 24, 32, 48, 64, 96, 128):
        for _ in range(3):
            seeds.append(bytes(rnd.randrange(256) for _ in range(n)))
    return seeds


def stream_header(op, inputs, attrs=None):
    """inputs: (dtype, shape, data bytes); the CRC-32 is the data's."""
    import zlib
    m = ld(1, op.encode())
    if attrs:
        st = b"".join(ld(1, ld(1, k.encode()) + ld(2, value(v))) for k, v in attrs.items())
        m += ld(2, st)
    for dtype, shape, data in inputs:
        th = key(1, 0) + varint(dtype) + packed(2, shape, varint)
        crc = zlib.crc32(data)
        if crc:
            th += key(3, 0) + varint(crc)
        m += ld(3, th)
    return ld(1, m)


def stream_chunk(tensor_index, offset, data):
    m = b""
    if tensor_index:
        m += key(1, 0) + varint(tensor_index)
    if offset:
        m += key(2, 0) + varint(offset)
    m += ld(3, data)
    return ld(2, m)


def framed(messages):
    return b"".join(struct.pack("<H", len(m)) + m for m in messages)


def stream_seeds():
    seeds = []
    calls = [
        ("Roll", [(I32, [4, 3], raw_of(I32, 12)), (I64, [2], struct.pack("<2q", -1, 2)),
                  (I64, [2], struct.pack("<2q", 0, 1))], None),
        ("Reverse", [(U8, [2, 5], raw_of(U8, 10)), (I64, [1], struct.pack("<q", 1))],
         {"mode": "index"}),
        ("Reverse", [(F32, [2, 3], raw_of(F32, 6)), (BOOL, [2], b"\x01\x00")], {"mode": "mask"}),
        ("ReverseSequence", [(F16, [4, 3], raw_of(F16, 12)), (I32, [4], struct.pack("<4i", 3, 2, 1, 0))],
         {"batch_axis": 0, "seq_axis": 1}),
        ("onnx.ReverseSequence", [(F64, [4, 4], raw_of(F64, 16)), (I64, [4], struct.pack("<4q", 4, 3, 2, 1))],
         None),
        ("Roll", [(C64, [0, 3], b""), (I64, [1], struct.pack("<q", 5)), (I64, [1], struct.pack("<q", 1))], None),
    ]
    for op, inputs, attrs in calls:
        header = stream_header(op, inputs, attrs)
        for size in (4096, 7, 1):
            msgs = [header]
            for t, (_, _, data) in enumerate(inputs):
                msgs += [stream_chunk(t, o, data[o:o + size]) for o in range(0, len(data), size)]
            seeds.append(framed(msgs))
        # Interleaved: the last input first.
        msgs = [header]
        for t in reversed(range(len(inputs))):
            data = inputs[t][2]
            msgs += [stream_chunk(t, o, data[o:o + 5]) for o in range(0, len(data), 5)]
        seeds.append(framed(msgs))
        # Broken: short, corrupt, out of place.
        full = [header] + [stream_chunk(t, 0, d) for t, (_, _, d) in enumerate(inputs) if d]
        seeds.append(framed(full[:-1]))
        if len(full) > 1 and inputs[0][2]:
            data0 = inputs[0][2]
            seeds.append(framed([header, stream_chunk(0, 0, bytes([data0[0] ^ 1]) + data0[1:])] + full[2:]))
            seeds.append(framed([header, stream_chunk(0, 3, data0)] + full[2:]))
    seeds.append(framed([stream_header("Reverse", [(F32, [2, 3], raw_of(F32, 6)), (BOOL, [2], b"\x01\x02")],
                                       {"mode": "mask"}),
                         stream_chunk(0, 0, raw_of(F32, 6)), stream_chunk(1, 0, b"\x01\x02")]))
    return seeds


# inference.ModelInferRequest (proto/inference/grpc_service.proto).
def oip_param(v):
    if isinstance(v, str):
        return ld(3, v.encode())
    if isinstance(v, bool):
        return key(1, 0) + varint(int(v))
    return key(2, 0) + varint(v)


def oip_map(field, params):
    return b"".join(ld(field, ld(1, k.encode()) + ld(2, oip_param(v))) for k, v in params.items())


def oip_input(name, datatype, shape, contents=None, params=None):
    m = ld(1, name.encode()) + ld(2, datatype.encode()) + packed(3, shape, varint)
    m += oip_map(4, params or {})
    if contents is not None:
        m += ld(5, contents)
    return m


def oip_contents(i32=None, i64=None, u32=None, f=None, b=None, by=None):
    m = packed(2, i32 or [], varint) + packed(3, i64 or [], varint) + packed(4, u32 or [], varint)
    m += packed(6, f or [], lambda x: struct.pack("<f", x))
    m += packed(1, b or [], lambda x: varint(1 if x else 0))
    for x in by or []:
        m += ld(8, x)
    return m


def oip_request(model, inputs, raw=None, params=None, outputs=None, rid="seed"):
    m = ld(1, model.encode()) + ld(3, rid.encode()) + oip_map(4, params or {})
    for t in inputs:
        m += ld(5, t)
    for o in outputs or []:
        m += ld(6, ld(1, o.encode()))
    for r in raw or []:
        m += ld(7, r)
    return m


def raw_strings(values):
    return b"".join(struct.pack("<I", len(v)) + v for v in values)


def model_infer_seeds():
    seeds = []
    i64 = lambda v: struct.pack("<%dq" % len(v), *v)
    roll_in = [oip_input("data", "INT32", [2, 3]), oip_input("shift", "INT64", [1]),
               oip_input("axes", "INT64", [1])]
    seeds.append(oip_request("Roll", roll_in, raw=[raw_of(I32, 6), i64([1]), i64([1])]))
    seeds.append(oip_request("Roll", [
        oip_input("axes", "INT64", [2], oip_contents(i64=[0, 1])),
        oip_input("data", "INT8", [2, 2], oip_contents(i32=[1, -2, 3, 127])),
        oip_input("shift", "INT32", [], oip_contents(i32=[-7]))], outputs=["output"]))
    for dt, width in (("FP16", 2), ("BF16", 2), ("FP64", 8), ("UINT64", 8), ("BOOL", 1)):
        data = bytes([1, 0] * 4 * width)[:4 * width] if dt != "BOOL" else b"\x01\x00\x01\x01"
        seeds.append(oip_request("Reverse", [oip_input("data", dt, [2, 2]),
                                             oip_input("axis", "INT64", [1])],
                                 raw=[data, i64([1])], params={"mode": "index"}))
    seeds.append(oip_request("Reverse", [
        oip_input("data", "BYTES", [3], oip_contents(by=[b"a", b"", b"xyz"])),
        oip_input("axis", "BOOL", [1], oip_contents(b=[True]))], params={"mode": "mask"}))
    seeds.append(oip_request("Reverse", [oip_input("data", "BYTES", [2]),
                                         oip_input("axis", "INT64", [1])],
                             raw=[raw_strings([b"ab", b"c"]), i64([0])], params={"mode": "index"}))
    seeds.append(oip_request("ReverseSequence", [
        oip_input("data", "FP32", [2, 3], oip_contents(f=[1, 2, 3, 4, 5, 6])),
        oip_input("seq_lengths", "INT64", [2], oip_contents(i64=[3, 1]))],
        params={"batch_axis": 0, "seq_axis": 1, "sequence_id": 4}))
    seeds.append(oip_request("onnx.ReverseSequence", [
        oip_input("input", "UINT8", [2, 2], oip_contents(u32=[1, 2, 3, 4])),
        oip_input("sequence_lens", "INT64", [2], oip_contents(i64=[2, 1]))],
        params={"batch_axis": 1, "time_axis": 0}))
    # Broken on purpose.
    seeds.append(oip_request("Roll", roll_in[:2] + [oip_input("axes", "INT64", [1], oip_contents(i64=[0]))],
                             raw=[raw_of(I32, 6), i64([1])]))
    seeds.append(oip_request("Roll", roll_in, raw=[raw_of(I32, 5), i64([1]), i64([1])]))
    seeds.append(oip_request("Reverse", [oip_input("data", "BYTES", [2]),
                                         oip_input("axis", "INT64", [1])],
                             raw=[struct.pack("<I", 99) + b"x", i64([0])], params={"mode": "index"}))
    seeds.append(oip_request("Roll", [oip_input("data", "INT32", [2, 3], params={
        "shared_memory_region": "r", "shared_memory_byte_size": 24})] + roll_in[1:],
        raw=[i64([1]), i64([1])]))
    return seeds


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for s in seeds:
        with open(os.path.join(d, hashlib.sha1(s).hexdigest()[:16]), "wb") as f:
            f.write(s)
    print(f"{d}: {len(seeds)} files, {sum(map(len, seeds))} bytes")


if __name__ == "__main__":
    write("fuzz_execute_bytes", bytes_seeds())
    write("fuzz_execute_structured", structured_seeds())
    write("fuzz_execute_stream", stream_seeds())
    write("fuzz_model_infer", model_infer_seeds())
