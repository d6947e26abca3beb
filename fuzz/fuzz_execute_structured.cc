// libFuzzer target B (structure-aware): the input bytes drive the
// construction of a well-formed ExecuteRequest (valid dtypes, small shapes
// including zero dims, any op and alias, attributes, axes, shifts, sequence
// lengths, raw and typed encodings, plus the occasional invalid value), so
// most runs reach the kernels. On an OK reply it checks properties that do not
// reuse the kernels' logic:
//   * one output, same dtype, shape and encoding as the data input;
//   * Reverse, ReverseSequence and onnx.ReverseSequence applied twice give the
//     data back; Roll by s and then by -s gives the data back;
//   * the result split across a thread pool equals the single-threaded one.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "fuzz/fuzz_util.h"
#include "kernels/dtype.h"
#include "kernels/op_registry.h"
#include "kernels/thread_pool.h"
#include "server/v1/execution.h"
#include "tensorops/v1/tensorops.pb.h"
#include "wire/tensor_codec.h"

namespace tensorops {
namespace {

ThreadPool* Pool() {
  static ThreadPool* pool = new ThreadPool(2);
  return pool;
}

[[noreturn]] void Fail(const char* what) {
  tensorops::fuzz::PropertyViolated("fuzz_execute_structured", what);
}

using tensorops::fuzz::Registry;

const DType kIntTypes[] = {DType::kInt8,  DType::kInt16,  DType::kInt32,  DType::kInt64,
                           DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64};

// An integer tensor (scalar or 1-D) of `dtype` holding `values`, raw or typed.
// Values are truncated to the dtype's width, like a careless caller would.
v1::Tensor IntTensor(DType dtype, const std::vector<int64_t>& values, bool scalar, bool raw) {
  Tensor t(dtype, scalar ? Shape{} : Shape{static_cast<int64_t>(values.size())});
  const int64_t w = ElementWidth(dtype);
  char* dst = static_cast<char*>(t.mutable_data());
  std::memset(dst, 0, static_cast<size_t>(t.num_bytes()));
  for (size_t i = 0; i < values.size() && (!scalar || i == 0); ++i) {
    if (IsFloatingDType(dtype)) {
      if (dtype == DType::kFloat64) {
        const double d = static_cast<double>(values[i]);
        std::memcpy(dst + i * 8, &d, 8);
      } else {  // FLOAT32
        const float f = static_cast<float>(values[i]);
        std::memcpy(dst + i * 4, &f, 4);
      }
    } else {
      std::memcpy(dst + i * w, &values[i], static_cast<size_t>(w));  // little-endian
    }
  }
  v1::Tensor proto;
  EncodeTensor(t.view(), raw ? Encoding::kRaw : Encoding::kTyped, &proto);
  return proto;
}

int64_t PickAxis(FuzzedDataProvider& fdp, int64_t rank) {
  // Mostly valid, sometimes one past either end.
  return fdp.ConsumeIntegralInRange<int64_t>(-rank - 1, rank);
}

int64_t PickShift(FuzzedDataProvider& fdp) {
  switch (fdp.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return fdp.ConsumeIntegralInRange<int64_t>(-10, 10);
    case 1:
      return fdp.PickValueInArray(
          {INT64_MIN, INT64_MAX, INT64_MIN + 1, int64_t{INT32_MIN}, int64_t{INT32_MAX}});
    default:
      return fdp.ConsumeIntegral<int64_t>();
  }
}

// The data input: a small tensor of a random dtype, raw or typed.
v1::Tensor MakeData(FuzzedDataProvider& fdp, Shape* shape_out) {
  const auto dtypes = AllDTypes();
  const DType dtype = dtypes[fdp.ConsumeIntegralInRange<size_t>(0, dtypes.size() - 1)];
  const int rank = fdp.ConsumeIntegralInRange<int>(0, 5);
  Shape shape;
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    const int64_t d = fdp.ConsumeIntegralInRange<int64_t>(0, n > 64 ? 1 : 5);
    shape.push_back(d);
    n *= d;
  }
  *shape_out = shape;
  const bool raw = fdp.ConsumeBool();
  v1::Tensor proto;
  if (dtype == DType::kString) {
    proto.set_dtype(v1::DATA_TYPE_STRING);
    for (int64_t d : shape) proto.add_shape(d);
    for (int64_t i = 0; i < n; ++i) proto.add_string_data(fdp.ConsumeRandomLengthString(8));
    return proto;
  }
  Tensor t(dtype, shape);
  const int64_t bytes = t.num_bytes();
  std::vector<uint8_t> fill = fdp.ConsumeBytes<uint8_t>(static_cast<size_t>(bytes));
  fill.resize(static_cast<size_t>(bytes), 0x5a);
  if (dtype == DType::kBool) {
    for (auto& b : fill) b &= 1;
  }
  if (bytes > 0) std::memcpy(t.mutable_data(), fill.data(), fill.size());
  EncodeTensor(t.view(), raw ? Encoding::kRaw : Encoding::kTyped, &proto);
  return proto;
}

void SetIntAttr(v1::ExecuteRequest* r, const char* name, int64_t v) {
  (*r->mutable_attrs()->mutable_fields())[name].set_number_value(static_cast<double>(v));
}

// Element bytes of a decoded tensor (STRING: the characters, 0-separated).
std::string CanonicalBytes(const v1::Tensor& proto) {
  absl::StatusOr<DecodedTensor> d = DecodeTensor(proto, "t");
  if (!d.ok()) Fail("an output or input does not decode");
  const TensorView& v = d->view;
  if (v.dtype == DType::kString) {
    std::string s;
    const StringRef* refs = v.data_as<StringRef>();
    for (int64_t i = 0; i < v.num_elements(); ++i) {
      s.append(refs[i].data, refs[i].size);
      s.push_back('\0');
    }
    return s;
  }
  return std::string(static_cast<const char*>(v.data), static_cast<size_t>(v.num_bytes()));
}

void CheckSameTensor(const v1::Tensor& a, const v1::Tensor& b, const char* what) {
  if (a.dtype() != b.dtype() || a.shape_size() != b.shape_size()) Fail(what);
  for (int i = 0; i < a.shape_size(); ++i) {
    if (a.shape(i) != b.shape(i)) Fail(what);
  }
  if (CanonicalBytes(a) != CanonicalBytes(b)) Fail(what);
}

v1::Tensor RunOk(const v1::ExecuteRequest& r, const char* what) {
  v1::ExecuteResponse resp;
  const absl::Status st = Execute(Registry(), r, &resp);
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, std::string(st.message()).c_str());
    Fail(what);
  }
  if (resp.outputs_size() != 1) Fail("inverse request without one output");
  return resp.outputs(0);
}

}  // namespace
}  // namespace tensorops

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  using namespace tensorops;
  FuzzedDataProvider fdp(bytes, size);
  v1::ExecuteRequest r;
  Shape shape;
  const int op = fdp.ConsumeIntegralInRange<int>(0, 3);
  const bool alias = fdp.ConsumeBool();
  *r.add_inputs() = MakeData(fdp, &shape);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const bool index_raw = fdp.ConsumeBool();
  // For the Roll inverse: normalized axes, filled only when they are valid.
  std::vector<int64_t> roll_axes, roll_shifts;
  bool roll_broadcast = false;

  switch (op) {
    case 0: {  // Reverse
      r.set_op(alias ? "Reverse-1" : "Reverse");
      const bool mask = fdp.ConsumeBool();
      (*r.mutable_attrs()->mutable_fields())["mode"].set_string_value(
          fdp.ConsumeIntegralInRange<int>(0, 15) == 0 ? "bogus" : (mask ? "mask" : "index"));
      if (mask) {
        int64_t len = rank;
        if (fdp.ConsumeIntegralInRange<int>(0, 15) == 0)
          len = fdp.ConsumeIntegralInRange<int64_t>(0, 6);
        std::vector<int64_t> m;
        for (int64_t i = 0; i < len; ++i) m.push_back(fdp.ConsumeBool() ? 1 : 0);
        *r.add_inputs() = IntTensor(DType::kBool, m, false, index_raw);
      } else {
        const size_t n = fdp.ConsumeIntegralInRange<size_t>(0, 6);
        std::vector<int64_t> axes;
        for (size_t i = 0; i < n; ++i) axes.push_back(PickAxis(fdp, rank));
        const DType t = kIntTypes[fdp.ConsumeIntegralInRange<int>(0, 7)];
        *r.add_inputs() =
            IntTensor(t, axes, fdp.ConsumeIntegralInRange<int>(0, 15) == 0, index_raw);
      }
      break;
    }
    case 1: {  // Roll
      r.set_op(alias ? "Roll-7" : "Roll");
      const size_t n = fdp.ConsumeIntegralInRange<size_t>(0, 5);
      for (size_t i = 0; i < n; ++i) roll_axes.push_back(PickAxis(fdp, rank));
      roll_broadcast = fdp.ConsumeBool();
      const size_t ns = roll_broadcast ? 1
                                       : (fdp.ConsumeIntegralInRange<int>(0, 15) == 0
                                              ? fdp.ConsumeIntegralInRange<size_t>(0, 5)
                                              : n);
      for (size_t i = 0; i < ns; ++i) roll_shifts.push_back(PickShift(fdp));
      const DType st = fdp.ConsumeBool() ? DType::kInt64 : DType::kInt32;
      if (st == DType::kInt32) {
        for (auto& s : roll_shifts) s = static_cast<int32_t>(s);
      }
      const bool shift_scalar = roll_broadcast && fdp.ConsumeBool();
      *r.add_inputs() = IntTensor(st, roll_shifts, shift_scalar, index_raw);
      const DType at = fdp.ConsumeBool() ? DType::kInt64 : DType::kInt32;
      const bool axes_scalar = n == 1 && fdp.ConsumeBool();
      *r.add_inputs() = IntTensor(at, roll_axes, axes_scalar, index_raw);
      break;
    }
    case 2:    // ReverseSequence
    case 3: {  // onnx.ReverseSequence
      const bool onnx = op == 3;
      r.set_op(onnx ? "onnx.ReverseSequence" : (alias ? "ReverseSequence-1" : "ReverseSequence"));
      int64_t batch = onnx ? 1 : 0, seq = onnx ? 0 : 1;
      if (fdp.ConsumeBool()) {
        batch = onnx ? fdp.ConsumeIntegralInRange<int64_t>(0, 1) : PickAxis(fdp, rank);
        SetIntAttr(&r, "batch_axis", batch);
      }
      if (fdp.ConsumeBool()) {
        seq = onnx ? fdp.ConsumeIntegralInRange<int64_t>(0, 1) : PickAxis(fdp, rank);
        SetIntAttr(&r, onnx ? "time_axis" : "seq_axis", seq);
      }
      const int64_t b = batch < 0 ? batch + rank : batch;
      const int64_t s = seq < 0 ? seq + rank : seq;
      const int64_t batch_dim = b >= 0 && b < rank ? shape[b] : 1;
      const int64_t seq_dim = s >= 0 && s < rank ? shape[s] : 1;
      int64_t len = batch_dim;
      if (fdp.ConsumeIntegralInRange<int>(0, 15) == 0)
        len = fdp.ConsumeIntegralInRange<int64_t>(0, 6);
      std::vector<int64_t> lengths;
      for (int64_t i = 0; i < len; ++i) {
        lengths.push_back(fdp.ConsumeIntegralInRange<int>(0, 15) == 0
                              ? fdp.ConsumeIntegralInRange<int64_t>(-2, seq_dim + 2)
                              : fdp.ConsumeIntegralInRange<int64_t>(0, seq_dim));
      }
      DType lt;
      if (onnx) {
        lt = fdp.ConsumeBool() ? DType::kInt64 : DType::kInt32;
      } else {
        const DType choices[] = {DType::kInt8,   DType::kInt32,   DType::kInt64,  DType::kUInt8,
                                 DType::kUInt64, DType::kFloat32, DType::kFloat64};
        lt = fdp.PickValueInArray(choices);
      }
      *r.add_inputs() = IntTensor(lt, lengths, false, index_raw);
      break;
    }
  }

  v1::ExecuteResponse response;
  const absl::Status status = Execute(Registry(), r, &response);
  if (!status.ok()) {
    if (status.code() != absl::StatusCode::kInvalidArgument) Fail("unexpected error code");
    if (status.message().empty() || status.message().size() > 1024) Fail("bad error message");
    return 0;
  }
  if (response.outputs_size() != 1) Fail("OK reply without exactly one output");
  const v1::Tensor& in = r.inputs(0);
  const v1::Tensor& out = response.outputs(0);
  if (out.dtype() != in.dtype()) Fail("output dtype differs");
  if (out.shape_size() != in.shape_size()) Fail("output rank differs");
  for (int i = 0; i < in.shape_size(); ++i) {
    if (out.shape(i) != in.shape(i)) Fail("output shape differs");
  }
  if (in.dtype() != v1::DATA_TYPE_STRING && !in.raw_data().empty() && out.raw_data().empty()) {
    Fail("raw input answered in a typed field");
  }

  // Multi-threaded run over disjoint output ranges equals the single-threaded one.
  {
    auto exec = PreparedExecution::Make(Registry(), r);
    if (!exec.ok()) Fail("Make failed where Execute passed");
    v1::ExecuteResponse parallel;
    (*exec)->Run(&parallel, Pool(), /*min_parallel_bytes=*/1);
    if (parallel.outputs_size() != 1) Fail("parallel run without one output");
    CheckSameTensor(parallel.outputs(0), out, "parallel result differs from sequential");
  }

  // Involution / inverse: applying the op again gives the data back.
  v1::ExecuteRequest again = r;
  *again.mutable_inputs(0) = out;
  if (op == 1) {
    // Roll by -s on each (normalized) axis; -s is taken modulo the dimension
    // first so that INT64_MIN has an inverse.
    std::vector<int64_t> axes, inverse;
    for (size_t i = 0; i < roll_axes.size(); ++i) {
      const int64_t a = roll_axes[i] < 0 ? roll_axes[i] + rank : roll_axes[i];
      if (a < 0 || a >= rank) Fail("Roll accepted an out-of-range axis");
      const int64_t d = shape[a];
      const int64_t s = roll_shifts[roll_shifts.size() == 1 ? 0 : i];
      axes.push_back(a);
      inverse.push_back(d == 0 ? 0 : -(s % d));
    }
    *again.mutable_inputs(1) = IntTensor(DType::kInt64, inverse, false, true);
    *again.mutable_inputs(2) = IntTensor(DType::kInt64, axes, false, true);
  }
  const v1::Tensor back = RunOk(again, "the inverse request failed");
  CheckSameTensor(back, in, "applying the inverse did not give the data back");
  return 0;
}
