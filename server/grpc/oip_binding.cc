#include "server/grpc/oip_binding.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "kernels/field_path.h"
#include "kernels/huge_pages.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"

namespace tensorops {
namespace {

using google::protobuf::RepeatedField;
using inference::InferParameter;
using inference::InferTensorContents;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

InferParams ToParams(const google::protobuf::Map<std::string, InferParameter>& params) {
  InferParams out;
  out.reserve(params.size());
  for (const auto& [key, value] : params) {
    InferParam p;
    switch (value.parameter_choice_case()) {
      case InferParameter::kStringParam:
        p.kind = InferParam::Kind::kString;
        p.string_value = value.string_param();
        break;
      case InferParameter::kBoolParam:
        p.kind = InferParam::Kind::kBool;
        p.bool_value = value.bool_param();
        break;
      case InferParameter::kInt64Param:
        p.kind = InferParam::Kind::kInt64;
        p.int64_value = value.int64_param();
        break;
      case InferParameter::kUint64Param:
        p.kind = InferParam::Kind::kUint64;
        p.uint64_value = value.uint64_param();
        break;
      case InferParameter::kDoubleParam:
        p.kind = InferParam::Kind::kDouble;
        p.double_value = value.double_param();
        break;
      case InferParameter::PARAMETER_CHOICE_NOT_SET:
        break;
    }
    out.emplace_back(key, p);
  }
  return out;
}

bool HasContents(const InferTensorContents& c) {
  return c.bool_contents_size() + c.int_contents_size() + c.int64_contents_size() +
             c.uint_contents_size() + c.uint64_contents_size() + c.fp32_contents_size() +
             c.fp64_contents_size() + c.bytes_contents_size() >
         0;
}

// A byte-copy of the field's elements (proto repeated fields store T packed).
template <typename T>
void CopyOut(const RepeatedField<T>& field, char* dst) {
  if (!field.empty()) std::memcpy(dst, field.data(), field.size() * sizeof(T));
}

// InferTensorContents decoded straight into a kernel tensor (no v1::Tensor
// copy): the checks and messages of DecodeTensor, in this protocol's field names.
class ProtoContents final : public TypedContents {
 public:
  explicit ProtoContents(const InferTensorContents& c) : c_(c) {}

  absl::StatusOr<DecodedTensor> Decode(DType dtype, absl::Span<const int64_t> dims,
                                       absl::string_view what,
                                       const RequestLimits& limits) const override {
    int64_t chars = -1;
    if (dtype == DType::kString) {
      chars = 0;  // each element is below 2 GiB and there are below 2^31: no overflow
      for (const std::string& s : c_.bytes_contents()) chars += static_cast<int64_t>(s.size());
    }
    ASSIGN_OR_RETURN(const int64_t num_bytes, CheckShape(dtype, dims, what, limits, chars));
    const int64_t n = num_bytes / ElementWidth(dtype);

    RETURN_IF_ERROR(CheckField(dtype, dims, what, n));
    DecodedTensor out;
    out.view.dtype = dtype;
    out.view.shape.assign(dims.begin(), dims.end());
    out.encoding = Encoding::kTyped;
    out.storage.reset(new char[num_bytes > 0 ? num_bytes : 1]);
    char* dst = out.storage.get();
    RETURN_IF_ERROR(CopyValues(dtype, what, dst));
    out.view.data = dst;
    return out;
  }

 private:
  // Exactly one contents field is set, the dtype's, with `n` values.
  absl::Status CheckField(DType dtype, absl::Span<const int64_t> dims, absl::string_view what,
                          int64_t n) const {
    // Exactly one field, in the order of the native codec's checks.
    const struct {
      const char* name;
      int size;
    } fields[] = {
        {"fp32_contents", c_.fp32_contents_size()}, {"fp64_contents", c_.fp64_contents_size()},
        {"int_contents", c_.int_contents_size()},   {"int64_contents", c_.int64_contents_size()},
        {"uint_contents", c_.uint_contents_size()}, {"uint64_contents", c_.uint64_contents_size()},
        {"bool_contents", c_.bool_contents_size()}, {"bytes_contents", c_.bytes_contents_size()},
    };
    const char* set = nullptr;
    int64_t have = 0;
    for (const auto& f : fields) {
      if (f.size == 0) continue;
      if (set != nullptr) {
        return InvalidArgumentAt(absl::StrCat(".contents.", f.name),
                                 absl::StrCat(what, " sets both contents.", set, " and contents.",
                                              f.name, "; set exactly one data field"));
      }
      set = f.name;
      have = f.size;
    }
    const char* typed = TypedContentsField(dtype);
    if (set == nullptr || typed == nullptr || std::strcmp(set, typed) != 0) {
      if (set == nullptr) {
        return InvalidArgumentAt(
            ".contents", absl::StrCat(what, " has no data: set ",
                                      dtype == DType::kString ? "" : "raw_input_contents or ",
                                      "contents.", typed));
      }
      return InvalidArgumentAt(
          absl::StrCat(".contents.", set),
          absl::StrCat(what, ".contents.", set, " cannot carry ", DTypeName(dtype),
                       " values; use contents.", typed,
                       dtype == DType::kString ? "" : " or raw_input_contents"));
    }
    if (have != n) {
      return InvalidArgumentAt(
          absl::StrCat(".contents.", set),
          absl::StrCat(what, ".contents.", set, " has ", have, " values but shape ",
                       ShapeToString(dims), " needs ", n));
    }
    return absl::OkStatus();
  }

  // The set field's values into `dst`, as the dtype's elements (CheckField first).
  absl::Status CopyValues(DType dtype, absl::string_view what, char* dst) const {
    switch (dtype) {
      case DType::kFloat32:
        CopyOut(c_.fp32_contents(), dst);  // bits, so NaN payloads and -0.0 survive
        break;
      case DType::kFloat64:
        CopyOut(c_.fp64_contents(), dst);
        break;
      case DType::kInt8:
        RETURN_IF_ERROR(
            NarrowIntegers<int8_t>(c_.int_contents(), dtype, what, "contents.int_contents", dst));
        break;
      case DType::kInt16:
        RETURN_IF_ERROR(
            NarrowIntegers<int16_t>(c_.int_contents(), dtype, what, "contents.int_contents", dst));
        break;
      case DType::kInt32:
        CopyOut(c_.int_contents(), dst);
        break;
      case DType::kInt64:
        CopyOut(c_.int64_contents(), dst);
        break;
      case DType::kUInt8:
        RETURN_IF_ERROR(NarrowIntegers<uint8_t>(c_.uint_contents(), dtype, what,
                                                "contents.uint_contents", dst));
        break;
      case DType::kUInt16:
        RETURN_IF_ERROR(NarrowIntegers<uint16_t>(c_.uint_contents(), dtype, what,
                                                 "contents.uint_contents", dst));
        break;
      case DType::kUInt32:
        CopyOut(c_.uint_contents(), dst);
        break;
      case DType::kUInt64:
        CopyOut(c_.uint64_contents(), dst);
        break;
      case DType::kBool: {
        uint8_t* b = reinterpret_cast<uint8_t*>(dst);
        for (int i = 0; i < c_.bool_contents_size(); ++i) b[i] = c_.bool_contents(i) ? 1 : 0;
        break;
      }
      case DType::kString: {
        StringRef* refs = reinterpret_cast<StringRef*>(dst);
        for (int i = 0; i < c_.bytes_contents_size(); ++i) {
          const std::string& s = c_.bytes_contents(i);
          refs[i] = StringRef{s.data(), s.size()};
        }
        break;
      }
      default:
        return absl::InternalError("ProtoContents: a datatype without typed contents");
    }
    return absl::OkStatus();
  }

  const InferTensorContents& c_;
};

// The OIP core names an input's elements inputs[i].data[k] (kernels' checks,
// raw bytes); here they are in raw_input_contents[r] (one entry per input
// not in shared memory, in order) or in the input's one contents field.
std::string DataFieldPath(const ModelInferRequest& m, absl::string_view path) {
  int64_t i = 0;
  absl::string_view rest;
  if (!SplitIndexedPath(path, "inputs", &i, &rest) || i >= m.inputs_size() ||
      !ConsumeDataPath(&rest)) {
    return std::string(path);
  }
  if (m.raw_input_contents_size() > 0) {
    int r = 0;
    for (int j = 0; j < i; ++j) r += m.inputs(j).parameters().count("shared_memory_region") == 0;
    return absl::StrCat("raw_input_contents[", r, "]");
  }
  const inference::InferTensorContents& c = m.inputs(static_cast<int>(i)).contents();
  const google::protobuf::Reflection* reflection = c.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> set;
  reflection->ListFields(c, &set);
  if (set.empty()) return absl::StrCat("inputs[", i, "].contents");
  return absl::StrCat("inputs[", i, "].contents.", set.front()->name(), rest);
}

// What both renderings of a reply write the same way: the model's names and
// an output's metadata (its bytes go where each rendering puts them).
void SetModelNames(absl::string_view name, absl::string_view version, absl::string_view id,
                   inference::ModelInferResponse* response) {
  response->set_model_name(std::string(name));
  response->set_model_version(std::string(version));
  response->set_id(std::string(id));
}

void AddOutputTensor(absl::string_view name, absl::string_view datatype,
                     absl::Span<const int64_t> shape, inference::ModelInferResponse* response) {
  auto* t = response->add_outputs();
  t->set_name(std::string(name));
  t->set_datatype(std::string(datatype));
  for (int64_t d : shape) t->add_shape(d);
}

}  // namespace

ProtoInferRequest::ProtoInferRequest(const ModelInferRequest& m) {
  request_.model_name = m.model_name();
  request_.model_version = m.model_version();
  request_.id = m.id();
  request_.parameters = ToParams(m.parameters());
  request_.inputs.reserve(m.inputs_size());
  for (const auto& in : m.inputs()) {
    InferInput input;
    input.name = in.name();
    input.datatype = in.datatype();
    input.shape =
        absl::Span<const int64_t>(in.shape().data(), static_cast<size_t>(in.shape_size()));
    input.parameters = ToParams(in.parameters());
    if (HasContents(in.contents())) {
      typed_.push_back(std::make_unique<ProtoContents>(in.contents()));
      input.typed = typed_.back().get();
    }
    request_.inputs.push_back(std::move(input));
  }
  request_.outputs.reserve(m.outputs_size());
  for (const auto& out : m.outputs()) {
    request_.outputs.push_back(InferRequestedOutput{out.name(), ToParams(out.parameters())});
  }
  request_.raw_inputs.assign(m.raw_input_contents().begin(), m.raw_input_contents().end());
}

void ProtoInferResponse::SetModel(absl::string_view name, absl::string_view version,
                                  absl::string_view id) {
  SetModelNames(name, version, id, response_);
}

char* ProtoInferResponse::AddOutput(absl::string_view name, absl::string_view datatype,
                                    absl::Span<const int64_t> shape, int64_t bytes) {
  AddOutputTensor(name, datatype, shape, response_);
  std::string* raw = response_->add_raw_output_contents();
  if (bytes == 0) return raw->data();
  raw->reserve(static_cast<size_t>(bytes));
  AdviseHugePages(raw->data(), bytes);  // before resize() first touches it
  raw->resize(static_cast<size_t>(bytes));
  return &(*raw)[0];
}

void SliceInferResponse::SetModel(absl::string_view name, absl::string_view version,
                                  absl::string_view id) {
  SetModelNames(name, version, id, header_);
}

char* SliceInferResponse::AddOutput(absl::string_view name, absl::string_view datatype,
                                    absl::Span<const int64_t> shape, int64_t bytes) {
  AddOutputTensor(name, datatype, shape, header_);
  outputs_.emplace_back(bytes);
  return outputs_.back().data();
}

void SliceInferResponse::Encode(grpc::ByteBuffer* reply) {
  std::string head = header_->SerializeAsString();
  std::vector<grpc::Slice> parts;
  parts.reserve(2 * outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const auto bytes = static_cast<uint64_t>(outputs_[i].size());
    if (i == 0) {
      AppendLengthDelimited(6, bytes, &head);
    } else {
      std::string key;
      AppendLengthDelimited(6, bytes, &key);
      parts.emplace_back(key);
    }
    parts.push_back(outputs_[i].Release());
  }
  outputs_.clear();
  SetReply(head, std::move(parts), reply);
}

absl::StatusOr<std::unique_ptr<PreparedInfer>> PrepareModelInfer(const OpRegistry& registry,
                                                                 const ModelInferRequest& request,
                                                                 const RequestLimits& limits,
                                                                 const ShmRegistry* shm,
                                                                 const std::string& owner) {
  const ProtoInferRequest view(request);
  absl::StatusOr<std::unique_ptr<PreparedInfer>> prepared =
      PreparedInfer::Make(registry, view.request(), limits, shm, owner);
  if (prepared.ok()) return prepared;
  return MapErrorFieldPath(prepared.status(), [&request](absl::string_view path) {
    return DataFieldPath(request, path);
  });
}

absl::Status RunModelInfer(PreparedInfer& prepared, ModelInferResponse* response, ThreadPool* pool,
                           int64_t min_parallel_bytes) {
  ProtoInferResponse writer(response);
  return prepared.Run(&writer, pool, min_parallel_bytes);
}

std::unique_ptr<PreparedCall> ModelInferCall(std::unique_ptr<PreparedInfer> prepared,
                                             ModelInferResponse* response) {
  class Bound final : public PreparedCall {
   public:
    Bound(std::unique_ptr<PreparedInfer> p, ModelInferResponse* r)
        : prepared_(std::move(p)), response_(r) {}
    int64_t output_bytes() const override { return prepared_->output_bytes(); }
    int64_t scratch_bytes() const override { return prepared_->scratch_bytes(); }
    absl::Span<const OpDef* const> chain() const override { return prepared_->chain(); }
    absl::Duration timeout() const override { return prepared_->timeout(); }
    absl::Status Run(ThreadPool* pool, int64_t min_parallel_bytes) override {
      return RunModelInfer(*prepared_, response_, pool, min_parallel_bytes);
    }

   private:
    std::unique_ptr<PreparedInfer> prepared_;
    ModelInferResponse* const response_;
  };
  return std::make_unique<Bound>(std::move(prepared), response);
}

std::unique_ptr<PreparedCall> ModelInferReplyCall(std::unique_ptr<PreparedInfer> prepared,
                                                  ModelInferResponse* response,
                                                  grpc::ByteBuffer* reply) {
  class Bound final : public PreparedCall {
   public:
    Bound(std::unique_ptr<PreparedInfer> p, ModelInferResponse* r, grpc::ByteBuffer* b)
        : prepared_(std::move(p)), response_(r), reply_(b) {}
    int64_t output_bytes() const override { return prepared_->output_bytes(); }
    int64_t scratch_bytes() const override { return prepared_->scratch_bytes(); }
    absl::Span<const OpDef* const> chain() const override { return prepared_->chain(); }
    absl::Duration timeout() const override { return prepared_->timeout(); }
    absl::Status Run(ThreadPool* pool, int64_t min_parallel_bytes) override {
      if (prepared_->output_bytes() < kSliceReplyMinBytes) {
        RETURN_IF_ERROR(RunModelInfer(*prepared_, response_, pool, min_parallel_bytes));
        return SerializeReply(*response_, reply_);
      }
      SliceInferResponse writer(response_);
      RETURN_IF_ERROR(prepared_->Run(&writer, pool, min_parallel_bytes));
      writer.Encode(reply_);
      return absl::OkStatus();
    }

   private:
    std::unique_ptr<PreparedInfer> prepared_;
    ModelInferResponse* const response_;
    grpc::ByteBuffer* const reply_;
  };
  return std::make_unique<Bound>(std::move(prepared), response, reply);
}

void DescribeModel(const OpDef& def, inference::ModelMetadataResponse* response) {
  response->set_name(def.spec.name);
  response->add_versions(kModelVersion);
  response->set_platform("tensorops");
  for (const InputSpec& in : def.spec.inputs) {
    auto* t = response->add_inputs();
    t->set_name(in.name);
    t->set_datatype(RepresentativeDatatype(in.types));
    if (in.max_rank >= 0 && in.max_rank == in.min_rank) {
      for (int64_t i = 0; i < in.max_rank; ++i) t->add_shape(-1);
    } else {
      t->add_shape(-1);  // any rank (documented in the proto and docs/cookbook.md)
    }
  }
  // Every op's output has the data input's type and shape.
  const InputSpec& data = def.spec.inputs.front();
  for (const OutputSpec& out : def.spec.outputs) {
    auto* t = response->add_outputs();
    t->set_name(out.name);
    t->set_datatype(RepresentativeDatatype(data.types));
    t->add_shape(-1);
  }
}

}  // namespace tensorops
