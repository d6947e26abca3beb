#include "server/http/json_binding.h"

#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/dtype.h"
#include "kernels/field_path.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "server/http/json_numbers.h"
#include "server/oip/oip_codec.h"
#include "wire/dtypes.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "json_binding.cc assumes a little-endian host (binary blocks are used in place)"
#endif

namespace tensorops {
namespace {

using JsonWriter =
    rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>,
                      rapidjson::CrtAllocator,
                      rapidjson::kWriteValidateEncodingFlag | rapidjson::kWriteNanAndInfFlag>;

constexpr char kBinaryDataSize[] = "binary_data_size";
constexpr char kBinaryData[] = "binary_data";
constexpr char kBinaryDataOutput[] = "binary_data_output";
constexpr char kShmRegion[] = "shared_memory_region";

absl::Status Invalid(absl::string_view a, absl::string_view b = "", absl::string_view c = "") {
  return absl::InvalidArgumentError(absl::StrCat(a, b, c));
}
// The same about the request field at `path` (kernels/field_path.h).
absl::Status InvalidAt(absl::string_view path, absl::string_view a, absl::string_view b = "",
                       absl::string_view c = "") {
  return InvalidArgumentAt(path, absl::StrCat(a, b, c));
}

const char* JsonTypeName(const rapidjson::Value& v) {
  if (v.IsNull()) return "null";
  if (v.IsBool()) return "a boolean";
  if (v.IsNumber()) return "a number";
  if (v.IsString()) return "a string";
  if (v.IsArray()) return "an array";
  return "an object";
}

// One parameters object -> InferParams (views of the document's strings).
// `path`: the parameters object's field path.
absl::Status ToParams(const rapidjson::Value& obj, absl::string_view what, absl::string_view path,
                      InferParams* out) {
  if (!obj.IsObject()) return InvalidAt(path, what, ".parameters must be an object");
  for (auto it = obj.MemberBegin(); it != obj.MemberEnd(); ++it) {
    const absl::string_view key(it->name.GetString(), it->name.GetStringLength());
    const rapidjson::Value& v = it->value;
    InferParam p;
    if (v.IsBool()) {
      p.kind = InferParam::Kind::kBool;
      p.bool_value = v.GetBool();
    } else if (v.IsInt64()) {
      p.kind = InferParam::Kind::kInt64;
      p.int64_value = v.GetInt64();
    } else if (v.IsUint64()) {
      p.kind = InferParam::Kind::kUint64;
      p.uint64_value = v.GetUint64();
    } else if (v.IsNumber()) {
      p.kind = InferParam::Kind::kDouble;
      p.double_value = v.GetDouble();
    } else if (v.IsString()) {
      p.kind = InferParam::Kind::kString;
      p.string_value = absl::string_view(v.GetString(), v.GetStringLength());
    } else {
      return InvalidAt(absl::StrCat(path, ".", key),
                       absl::StrCat(what, ".parameters.", key, " is ", JsonTypeName(v),
                                    "; parameters are booleans, numbers or strings"));
    }
    out->emplace_back(key, p);
  }
  return absl::OkStatus();
}

// A BYTES output as a JSON array of strings. False: an element that is not
// UTF-8 (the writer validates).
bool WriteStrings(JsonWriter& w, const char* p, int64_t n) {
  w.StartArray();
  size_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t len = 0;
    std::memcpy(&len, p + at, 4);
    if (!w.String(p + at + 4, len)) return false;
    at += 4 + len;
  }
  w.EndArray();
  return true;
}

}  // namespace

struct JsonInferRequest::Impl {
  rapidjson::Document doc;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::string> converted;  // JSON data in raw form
  std::vector<CapturedData> captured;  // each input's data, as parsed
  std::string arena;                   // text of captured BYTES elements
  bool has_id = false;
  bool binary_output_default = false;
  std::vector<std::pair<std::string, bool>> output_binary;  // requested outputs' binary_data
  std::vector<std::string> output_shm;                      // outputs in shared memory
  std::vector<rapidjson::SizeType> binary_inputs;           // inputs sent as binary blocks

  // Parse's steps, in order, each with its own messages.
  // The JSON text into doc, inputs' data diverted into `captured`.
  absl::Status ParseDocument(absl::string_view json, const RequestLimits& limits);
  // The request's own fields: only id, parameters, inputs and outputs; id
  // (echoed, so it must be writable back as UTF-8); parameters.
  absl::Status ReadRequestFields(InferRequest* req);
  // inputs[i]: its name, datatype and shape, then its data (binary block at
  // *binary_at, JSON data, or a shared-memory region).
  absl::Status ReadInput(rapidjson::SizeType i, const rapidjson::Value& t, absl::string_view binary,
                         size_t* binary_at, const RequestLimits& limits, InferRequest* req);
  absl::Status ReadInputData(rapidjson::SizeType i, const rapidjson::Value& t, DType dtype,
                             const std::string& what, absl::string_view binary, size_t* binary_at,
                             const RequestLimits& limits, InferInput* in, InferRequest* req);
  // outputs[i]: its name and parameters (binary_data, shared memory).
  absl::Status ReadOutput(rapidjson::SizeType i, const rapidjson::Value& o, InferRequest* req);
};

JsonInferRequest::JsonInferRequest() : impl_(std::make_unique<Impl>()) {}
JsonInferRequest::~JsonInferRequest() = default;

absl::StatusOr<std::unique_ptr<JsonInferRequest>> JsonInferRequest::Parse(
    absl::string_view body, std::optional<int64_t> header_length, absl::string_view model,
    absl::string_view version, const RequestLimits& limits) {
  absl::string_view json = body;
  absl::string_view binary;
  if (header_length.has_value()) {
    const int64_t l = *header_length;
    if (l < 1 || l > static_cast<int64_t>(body.size())) {
      return Invalid(absl::StrCat("Inference-Header-Content-Length is ", l,
                                  " but it must be in 1..", body.size(),
                                  " (the body's length; the JSON comes first)"));
    }
    json = body.substr(0, static_cast<size_t>(l));
    binary = body.substr(static_cast<size_t>(l));
  }
  std::unique_ptr<JsonInferRequest> r(new JsonInferRequest());
  Impl& impl = *r->impl_;
  RETURN_IF_ERROR(impl.ParseDocument(json, limits));
  InferRequest& req = r->request_;
  req.model_name = model;
  req.model_version = version;
  RETURN_IF_ERROR(impl.ReadRequestFields(&req));
  rapidjson::Document& doc = impl.doc;
  auto inputs = doc.FindMember("inputs");
  if (inputs == doc.MemberEnd() || !inputs->value.IsArray()) {
    return InvalidAt("inputs", "inputs must be an array of tensors");
  }
  const rapidjson::Value& ins = inputs->value;
  impl.shapes.resize(ins.Size());
  impl.converted.reserve(ins.Size());
  req.inputs.reserve(ins.Size());
  size_t binary_at = 0;
  for (rapidjson::SizeType i = 0; i < ins.Size(); ++i) {
    RETURN_IF_ERROR(impl.ReadInput(i, ins[i], binary, &binary_at, limits, &req));
  }
  if (binary_at != binary.size()) {
    return Invalid(absl::StrCat("the body has ", binary.size() - binary_at,
                                " bytes after the JSON and the inputs' binary_data_size; "
                                "Inference-Header-Content-Length or a binary_data_size is wrong"));
  }
  if (auto outputs = doc.FindMember("outputs"); outputs != doc.MemberEnd()) {
    if (!outputs->value.IsArray()) return InvalidAt("outputs", "outputs must be an array");
    for (rapidjson::SizeType i = 0; i < outputs->value.Size(); ++i) {
      RETURN_IF_ERROR(impl.ReadOutput(i, outputs->value[i], &req));
    }
  }
  return r;
}

absl::Status JsonInferRequest::Impl::ParseDocument(absl::string_view json,
                                                   const RequestLimits& limits) {
  RETURN_IF_ERROR(ParseInferJson(json, limits, &doc, &captured, &arena));
  if (!doc.IsObject()) return Invalid("the request must be a JSON object");
  return absl::OkStatus();
}

absl::Status JsonInferRequest::Impl::ReadRequestFields(InferRequest* req_ptr) {
  InferRequest& req = *req_ptr;
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    const absl::string_view key(it->name.GetString(), it->name.GetStringLength());
    if (key != "id" && key != "parameters" && key != "inputs" && key != "outputs") {
      return InvalidAt(key, absl::StrCat("unknown field '", key,
                                         "'; a request has id, parameters, inputs and outputs"));
    }
  }
  if (auto it = doc.FindMember("id"); it != doc.MemberEnd()) {
    if (!it->value.IsString()) return InvalidAt("id", "id must be a string");
    req.id = absl::string_view(it->value.GetString(), it->value.GetStringLength());
    // The answer echoes it: a \u escape of a lone surrogate (which RapidJSON
    // reads into bytes that are not UTF-8) could not be written back.
    rapidjson::StringBuffer check;
    JsonWriter w(check);
    if (!w.String(req.id.data(), static_cast<rapidjson::SizeType>(req.id.size()))) {
      return InvalidAt("id", "id is not valid UTF-8 (a \\u escape of a lone surrogate?)");
    }
    has_id = true;
  }
  if (auto it = doc.FindMember("parameters"); it != doc.MemberEnd()) {
    RETURN_IF_ERROR(ToParams(it->value, "request", "parameters", &req.parameters));
    for (const auto& [key, p] : req.parameters) {
      if (key == kBinaryDataOutput) {
        if (p.kind != InferParam::Kind::kBool) {
          return InvalidAt("parameters.binary_data_output",
                           "request.parameters.binary_data_output must be true or false");
        }
        binary_output_default = p.bool_value;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status JsonInferRequest::Impl::ReadInput(rapidjson::SizeType i, const rapidjson::Value& t,
                                               absl::string_view binary, size_t* binary_at,
                                               const RequestLimits& limits, InferRequest* req) {
  std::string what = absl::StrCat("inputs[", i, "]");
  const std::string path = what;
  if (!t.IsObject()) return InvalidAt(path, what, " must be an object");
  InferInput in;
  auto name = t.FindMember("name");
  if (name == t.MemberEnd() || !name->value.IsString()) {
    return InvalidAt(absl::StrCat(path, ".name"), what, ".name must be a string");
  }
  in.name = absl::string_view(name->value.GetString(), name->value.GetStringLength());
  what = absl::StrCat("input '", in.name, "'");
  auto datatype = t.FindMember("datatype");
  if (datatype == t.MemberEnd() || !datatype->value.IsString()) {
    return InvalidAt(absl::StrCat(path, ".datatype"), what, ".datatype must be a string");
  }
  in.datatype = absl::string_view(datatype->value.GetString(), datatype->value.GetStringLength());
  const DType dtype = DTypeFromOip(in.datatype);
  if (dtype == DType::kInvalid) {
    return InvalidAt(
        absl::StrCat(path, ".datatype"),
        absl::StrCat(what, ": datatype '", in.datatype, "' is not one of ", OipDatatypeList(),
                     " (COMPLEX and FLOAT8 tensors are served by tensorops.v1.TensorOps only)"));
  }
  auto shape = t.FindMember("shape");
  if (shape == t.MemberEnd() || !shape->value.IsArray()) {
    return InvalidAt(absl::StrCat(path, ".shape"), what, ".shape must be an array of integers");
  }
  std::vector<int64_t>& dims = shapes[i];
  for (rapidjson::SizeType d = 0; d < shape->value.Size(); ++d) {
    const rapidjson::Value& v = shape->value[d];
    if (!v.IsInt64() || v.GetInt64() < 0) {
      return InvalidAt(absl::StrCat(path, ".shape[", d, "]"),
                       absl::StrCat(what, ".shape[", d, "] must be an integer >= 0"));
    }
    dims.push_back(v.GetInt64());
  }
  in.shape = dims;
  for (auto m = t.MemberBegin(); m != t.MemberEnd(); ++m) {
    const absl::string_view key(m->name.GetString(), m->name.GetStringLength());
    if (key != "name" && key != "datatype" && key != "shape" && key != "parameters" &&
        key != "data") {
      return InvalidAt(absl::StrCat(path, ".", key),
                       absl::StrCat(what, ": unknown field '", key, "'"));
    }
  }
  RETURN_IF_ERROR(ReadInputData(i, t, dtype, what, binary, binary_at, limits, &in, req));
  req->inputs.push_back(std::move(in));
  return absl::OkStatus();
}

absl::Status JsonInferRequest::Impl::ReadInputData(rapidjson::SizeType i, const rapidjson::Value& t,
                                                   DType dtype, const std::string& what,
                                                   absl::string_view binary, size_t* binary_at,
                                                   const RequestLimits& limits, InferInput* in_ptr,
                                                   InferRequest* req) {
  InferInput& in = *in_ptr;
  const std::string path = absl::StrCat("inputs[", i, "]");
  const std::vector<int64_t>& dims = shapes[i];
  std::optional<int64_t> binary_size;
  bool in_shm = false;
  if (auto params = t.FindMember("parameters"); params != t.MemberEnd()) {
    InferParams all;
    RETURN_IF_ERROR(ToParams(params->value, what, absl::StrCat(path, ".parameters"), &all));
    for (auto& [key, p] : all) {
      if (key == kBinaryDataSize) {
        if (p.kind != InferParam::Kind::kInt64 || p.int64_value < 0) {
          return InvalidAt(absl::StrCat(path, ".parameters.binary_data_size"), what,
                           ".parameters.binary_data_size must be an integer >= 0");
        }
        binary_size = p.int64_value;
      } else {
        if (key == kShmRegion) in_shm = true;
        in.parameters.emplace_back(key, p);
      }
    }
  }
  auto data = t.FindMember("data");
  const int sources = (data != t.MemberEnd()) + binary_size.has_value() + in_shm;
  if (sources > 1) {
    return InvalidAt(path, what,
                     " has more than one of data, binary_data_size and "
                     "shared_memory_region; give exactly one");
  }
  if (binary_size.has_value()) {
    if (static_cast<uint64_t>(*binary_size) > binary.size() - (*binary_at)) {
      return InvalidAt(absl::StrCat(path, ".parameters.binary_data_size"),
                       absl::StrCat(what, ": binary_data_size ", *binary_size, " but only ",
                                    binary.size() - (*binary_at),
                                    " bytes of binary data are left after the JSON"));
    }
    const absl::string_view block = binary.substr((*binary_at), static_cast<size_t>(*binary_size));
    (*binary_at) += block.size();
    if (dtype != DType::kString) {
      ASSIGN_OR_RETURN(const int64_t need, AtField(CheckShape(dtype, dims, what, limits), path));
      if (need != *binary_size) {
        return InvalidAt(absl::StrCat(path, ".parameters.binary_data_size"),
                         absl::StrCat(what, ": binary_data_size is ", *binary_size, " but shape ",
                                      ShapeToString(dims), " of ", in.datatype, " needs ", need));
      }
    }
    req->raw_inputs.push_back(block);
    binary_inputs.push_back(i);
  } else if (data != t.MemberEnd()) {
    if (i >= captured.size()) {  // RequestHandler captures every inputs[i].data
      return absl::InternalError(absl::StrCat(what, ": its data was not captured"));
    }
    CapturedData& c = captured[i];
    if (c.duplicate) return InvalidAt(absl::StrCat(path, ".data"), what, " has data twice");
    std::string raw;
    if (c.direct && c.dtype == dtype && c.dims == dims) {
      RETURN_IF_ERROR(AtField(CheckShape(dtype, dims, what, limits), path).status());
      if (c.count != c.n)
        return InvalidAt(absl::StrCat(path, ".data"), CountError(what, c.count, c.n, dims));
      RETURN_IF_ERROR(PrefixErrorFieldPath(c.first_error, path));
      raw = std::move(c.raw);
    } else {
      ASSIGN_OR_RETURN(raw, AtField(ConvertData(c, arena, dtype, dims, what, limits), path));
    }
    converted.push_back(std::move(raw));
    req->raw_inputs.push_back(converted.back());
  } else if (!in_shm) {
    return InvalidAt(path, what,
                     " has no data: give data, binary_data_size or shared_memory_region");
  }
  return absl::OkStatus();
}

absl::Status JsonInferRequest::Impl::ReadOutput(rapidjson::SizeType i, const rapidjson::Value& o,
                                                InferRequest* req) {
  const std::string what = absl::StrCat("outputs[", i, "]");
  const std::string& path = what;
  if (!o.IsObject()) return InvalidAt(path, what, " must be an object");
  auto name = o.FindMember("name");
  if (name == o.MemberEnd() || !name->value.IsString()) {
    return InvalidAt(absl::StrCat(path, ".name"), what, ".name must be a string");
  }
  InferRequestedOutput out;
  out.name = absl::string_view(name->value.GetString(), name->value.GetStringLength());
  for (auto m = o.MemberBegin(); m != o.MemberEnd(); ++m) {
    const absl::string_view key(m->name.GetString(), m->name.GetStringLength());
    if (key != "name" && key != "parameters") {
      return InvalidAt(absl::StrCat(path, ".", key),
                       absl::StrCat(what, ": unknown field '", key, "'"));
    }
  }
  const std::string owhat = absl::StrCat("output '", out.name, "'");
  bool in_shm = false;
  std::optional<bool> binary_data;
  if (auto params = o.FindMember("parameters"); params != o.MemberEnd()) {
    InferParams all;
    RETURN_IF_ERROR(ToParams(params->value, owhat, absl::StrCat(path, ".parameters"), &all));
    for (auto& [key, p] : all) {
      if (key == kBinaryData) {
        if (p.kind != InferParam::Kind::kBool) {
          return InvalidAt(absl::StrCat(path, ".parameters.binary_data"), owhat,
                           ".parameters.binary_data must be true or false");
        }
        binary_data = p.bool_value;
      } else {
        if (key == kShmRegion) in_shm = true;
        out.parameters.emplace_back(key, p);
      }
    }
  }
  if (in_shm && binary_data.value_or(false)) {
    return InvalidAt(absl::StrCat(path, ".parameters"), owhat,
                     " has both shared_memory_region and binary_data; use one");
  }
  if (binary_data.has_value()) output_binary.emplace_back(out.name, *binary_data);
  if (in_shm) output_shm.emplace_back(out.name);
  req->outputs.push_back(std::move(out));
  return absl::OkStatus();
}

bool JsonInferRequest::OutputBinary(absl::string_view name) const {
  for (const auto& [n, b] : impl_->output_binary) {
    if (n == name) return b;
  }
  return impl_->binary_output_default;
}

bool JsonInferRequest::has_id() const { return impl_->has_id; }

std::string JsonInferRequest::FieldPath(absl::string_view core_path) const {
  int64_t i = 0;
  absl::string_view rest;
  if (SplitIndexedPath(core_path, "inputs", &i, &rest) && ConsumeDataPath(&rest)) {
    for (rapidjson::SizeType b : impl_->binary_inputs) {
      if (b == i) return absl::StrCat("inputs[", i, "].parameters.", kBinaryDataSize);
    }
  }
  return std::string(core_path);
}

bool JsonInferRequest::OutputInSharedMemory(absl::string_view name) const {
  for (const std::string& n : impl_->output_shm) {
    if (n == name) return true;
  }
  return false;
}

void JsonInferResponse::SetModel(absl::string_view name, absl::string_view version,
                                 absl::string_view id) {
  model_ = std::string(name);
  version_ = std::string(version);
  id_ = std::string(id);
}

char* JsonInferResponse::AddOutput(absl::string_view name, absl::string_view datatype,
                                   absl::Span<const int64_t> shape, int64_t bytes) {
  Output out;
  out.name = std::string(name);
  out.datatype = std::string(datatype);
  out.shape.assign(shape.begin(), shape.end());
  out.data = Tensor(DType::kUInt8, {bytes});
  outputs_.push_back(std::move(out));
  return static_cast<char*>(outputs_.back().data.mutable_data());
}

absl::Status JsonInferResponse::Encode(const JsonInferRequest& request, JsonText* json,
                                       std::vector<Tensor>* binary) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  // Numeric data arrays: written straight into the answer's buffer in place
  // of a one-byte placeholder at `at` of the writer's text.
  struct Splice {
    size_t at;
    DType dtype;
    const char* data;
    int64_t n;
  };
  std::vector<Splice> splices;
  w.StartObject();
  w.Key("model_name");
  w.String(model_.data(), model_.size());
  w.Key("model_version");
  w.String(version_.data(), version_.size());
  if (request.has_id()) {
    w.Key("id");
    w.String(id_.data(), id_.size());
  }
  w.Key("outputs");
  w.StartArray();
  binary->clear();
  for (Output& out : outputs_) {
    w.StartObject();
    w.Key("name");
    w.String(out.name.data(), out.name.size());
    w.Key("datatype");
    w.String(out.datatype.data(), out.datatype.size());
    w.Key("shape");
    w.StartArray();
    for (int64_t d : out.shape) w.Int64(d);
    w.EndArray();
    if (request.OutputInSharedMemory(out.name)) {
      // Written to the region: neither data nor binary_data_size.
    } else if (request.OutputBinary(out.name)) {
      w.Key("parameters");
      w.StartObject();
      w.Key(kBinaryDataSize);
      w.Int64(out.data.num_bytes());
      w.EndObject();
      binary->push_back(std::move(out.data));
    } else if (const DType dtype = DTypeFromOip(out.datatype); dtype != DType::kString) {
      // Numbers: a placeholder value now, the array spliced in below.
      w.Key("data");
      w.RawValue("0", 1, rapidjson::kNumberType);
      splices.push_back(
          {buffer.GetSize() - 1, dtype, out.data.data_as<char>(), ElementCount(out.shape)});
    } else {
      w.Key("data");
      if (!WriteStrings(w, out.data.data_as<char>(), ElementCount(out.shape))) {
        return Invalid(absl::StrCat("output '", out.name,
                                    "' has BYTES that are not UTF-8 and cannot be a JSON string; "
                                    "ask for it with \"parameters\": {\"binary_data\": true}"));
      }
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  const absl::string_view text(buffer.GetString(), buffer.GetSize());
  int64_t bound = static_cast<int64_t>(text.size());
  for (const Splice& sp : splices) bound += 2 + sp.n * kMaxNumberText;
  json->buffer_ = Tensor(DType::kUInt8, {bound});
  char* const start = json->buffer_.mutable_data_as<char>();
  char* e = start;
  size_t from = 0;
  for (const Splice& sp : splices) {
    std::memcpy(e, text.data() + from, sp.at - from);
    e += sp.at - from;
    e += WriteNumbers(sp.dtype, sp.data, sp.n, e);
    from = sp.at + 1;
  }
  std::memcpy(e, text.data() + from, text.size() - from);
  e += text.size() - from;
  json->size_ = e - start;
  return absl::OkStatus();
}

}  // namespace tensorops
