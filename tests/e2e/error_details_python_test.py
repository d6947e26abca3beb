#!/usr/bin/env python3
"""Errors a program can read (issue 40), from an independent Python client.

The google.rpc messages are generated at test time (grpc_tools.protoc) from
proto/google/rpc/, which declares them with googleapis' public field numbers,
as any client that vendors googleapis would; nothing of tensorops' C++ is
used. Cases:

- gRPC: an INVALID_ARGUMENT Execute carries grpc-status-details-bin, a
  google.rpc.Status of the same code and message whose one detail is a
  google.rpc.BadRequest: the request field at fault (made with the error) and, as its
  description, the message itself (a bad axis, a bad shape, a bad attribute,
  a chain step);
- REST: the same request's 400 answer is {"error": message, "details": [...]},
  the details in proto3's JSON form, which json_format parses into the same
  google.rpc.Status messages.

Usage: error_details_python_test.py TENSOROPS_SERVER PROTO_DIR
Exit status 0 when every check passed.
"""
import json
import os
import sys
import tempfile
import unittest

import grpc
from google.protobuf import json_format
from grpc_tools import protoc
from rest_server import RestServer

SERVER, PROTO_DIR = sys.argv[1], sys.argv[2]
STUBS = tempfile.mkdtemp(prefix="error-details-stubs-")
_WKT = os.path.join(os.path.dirname(protoc.__file__), "_proto")  # any, duration, struct
if protoc.main(["protoc", f"-I{PROTO_DIR}", f"-I{_WKT}", f"--python_out={STUBS}",
                f"--grpc_python_out={STUBS}",
                os.path.join(PROTO_DIR, "google", "rpc", "status.proto"),
                os.path.join(PROTO_DIR, "google", "rpc", "error_details.proto"),
                os.path.join(PROTO_DIR, "tensorops", "v1", "tensorops.proto")]) != 0:
    sys.exit("protoc failed on google/rpc or tensorops/v1")
sys.path.insert(0, STUBS)
from google.rpc import error_details_pb2  # noqa: E402
from google.rpc import status_pb2  # noqa: E402
from tensorops.v1 import tensorops_pb2 as pb  # noqa: E402
from tensorops.v1 import tensorops_pb2_grpc as pb_grpc  # noqa: E402

BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"


def int_tensor(dtype, shape, values):
    t = pb.Tensor(dtype=dtype, shape=shape)
    if dtype == pb.DATA_TYPE_INT64:
        t.int64_data.extend(values)
    else:
        t.int32_data.extend(values)
    return t


def roll(shape, data, shift, axes):
    return pb.ExecuteRequest(op="Roll", inputs=[
        int_tensor(pb.DATA_TYPE_INT32, shape, data),
        int_tensor(pb.DATA_TYPE_INT64, [len(shift)], shift),
        int_tensor(pb.DATA_TYPE_INT64, [len(axes)], axes)])


def bad_request_of(status):
    """The one BadRequest of a google.rpc.Status, checked to be its only detail."""
    assert len(status.details) == 1, status
    assert status.details[0].type_url == BAD_REQUEST, status.details[0].type_url
    bad = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad)
    return bad


class ErrorDetailsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = RestServer(SERVER)
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.server.grpc_port}")
        cls.stub = pb_grpc.TensorOpsStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        assert cls.server.stop() == 0

    def grpc_details(self, request):
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.Execute(request, timeout=30)
        err = caught.exception
        self.assertEqual(err.code(), grpc.StatusCode.INVALID_ARGUMENT)
        bins = [v for k, v in err.trailing_metadata() if k == "grpc-status-details-bin"]
        self.assertEqual(len(bins), 1)
        status = status_pb2.Status.FromString(bins[0])
        self.assertEqual(status.code, 3)
        self.assertEqual(status.message, err.details())
        return status

    def test_grpc_invalid_argument_carries_bad_request(self):
        step = pb.Step(op="ReverseSequence", inputs=[int_tensor(pb.DATA_TYPE_INT64, [2], [1, 1])])
        step.attrs["seq_axis"] = 7
        cases = [
            # (request, field)
            (roll([2, 2], [1, 2, 3, 4], [1], [5]), "inputs[2].int64_data[0]"),
            (roll([2, 3], [1, 2, 3, 4], [1], [0]), "inputs[0].int32_data"),
            (roll([2, -2], [1, 2, 3, 4], [1], [0]), "inputs[0].shape[1]"),
        ]
        chain = roll([2, 2], [1, 2, 3, 4], [1], [0])
        chain.then.append(step)
        cases.append((chain, "then[0].attrs.seq_axis"))
        for request, field in cases:
            with self.subTest(field=field):
                status = self.grpc_details(request)
                bad = bad_request_of(status)
                self.assertEqual(len(bad.field_violations), 1)
                self.assertEqual(bad.field_violations[0].field, field, status.message)
                self.assertEqual(bad.field_violations[0].description, status.message)

    def test_rest_invalid_argument_carries_bad_request(self):
        body = {"inputs": [
            {"name": "data", "shape": [2, 2], "datatype": "INT32", "data": [1, 2, 3, 4]},
            {"name": "shift", "shape": [1], "datatype": "INT64", "data": [1]},
            {"name": "axes", "shape": [1], "datatype": "INT64", "data": [5]}]}
        conn = self.server.conn()
        conn.request("POST", "/v2/models/Roll/infer", json.dumps(body),
                     {"Content-Type": "application/json"})
        res = conn.getresponse()
        answer = json.loads(res.read())
        self.assertEqual(res.status, 400)
        # The stock google.rpc.Status, from the answer's proto3 JSON.
        status = json_format.ParseDict(
            {"code": 3, "message": answer["error"], "details": answer["details"]},
            status_pb2.Status())
        bad = bad_request_of(status)
        self.assertEqual(bad.field_violations[0].field, "inputs[2].data[0]")
        self.assertEqual(bad.field_violations[0].description, answer["error"])
        # The same message as the gRPC door's for the same request; each
        # door's field in its own request's terms.
        grpc_status = self.grpc_details(roll([2, 2], [1, 2, 3, 4], [1], [5]))
        self.assertEqual(grpc_status.message, answer["error"])
        self.assertEqual(bad_request_of(grpc_status).field_violations[0].field,
                         "inputs[2].int64_data[0]")
        conn.close()


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
