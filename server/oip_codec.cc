#include "server/oip_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "kernels/huge_pages.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"
#include "server/sigbus_guard.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "oip_codec.cc assumes a little-endian host (raw contents are used in place)"
#endif

namespace tensorops {

const char* const kProtocolParameters[7] = {"sequence_id",
                                            "sequence_start",
                                            "sequence_end",
                                            "priority",
                                            "timeout",
                                            "binary_data_output",
                                            "triton_enable_empty_final_response"};

namespace {

using inference::InferParameter;
using inference::InferTensorContents;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

constexpr char kShmRegion[] = "shared_memory_region";
constexpr char kShmByteSize[] = "shared_memory_byte_size";
constexpr char kShmOffset[] = "shared_memory_offset";

// 2^53: the integers a double (the native attrs' number) holds exactly.
constexpr int64_t kMaxExactInt = int64_t{1} << 53;

struct DatatypeName {
  DType dtype;
  const char* name;
};
constexpr DatatypeName kDatatypes[] = {
    {DType::kBool, "BOOL"},     {DType::kUInt8, "UINT8"},   {DType::kUInt16, "UINT16"},
    {DType::kUInt32, "UINT32"}, {DType::kUInt64, "UINT64"}, {DType::kInt8, "INT8"},
    {DType::kInt16, "INT16"},   {DType::kInt32, "INT32"},   {DType::kInt64, "INT64"},
    {DType::kFloat16, "FP16"},  {DType::kFloat32, "FP32"},  {DType::kFloat64, "FP64"},
    {DType::kString, "BYTES"},  {DType::kBFloat16, "BF16"},
};

// Caller-supplied text in single quotes, cut like BoundedQuote so a
// megabyte-long name never ends up in a status.
std::string Quote(absl::string_view s) {
  if (s.size() <= 64) return absl::StrCat("'", s, "'");
  return absl::StrCat("'", s.substr(0, 64), "...' (", s.size(), " bytes)");
}

// Names of the native codec's fields as this protocol calls them, so that
// messages from DecodeTensor (used for typed contents) name what the caller sent.
std::string InOipTerms(absl::string_view message) {
  return absl::StrReplaceAll(message, {{".float_data", ".contents.fp32_contents"},
                                       {".double_data", ".contents.fp64_contents"},
                                       {".int32_data", ".contents.int_contents"},
                                       {".int64_data", ".contents.int64_contents"},
                                       {".uint32_data", ".contents.uint_contents"},
                                       {".uint64_data", ".contents.uint64_contents"},
                                       {".bool_data", ".contents.bool_contents"},
                                       {".string_data", ".contents.bytes_contents"},
                                       {" float_data", " contents.fp32_contents"},
                                       {" double_data", " contents.fp64_contents"},
                                       {" int32_data", " contents.int_contents"},
                                       {" int64_data", " contents.int64_contents"},
                                       {" uint32_data", " contents.uint_contents"},
                                       {" uint64_data", " contents.uint64_contents"},
                                       {" bool_data", " contents.bool_contents"},
                                       {" string_data", " contents.bytes_contents"},
                                       {"raw_data", "raw_input_contents"}});
}

// Copies the one typed field of `c` that is set into the native message's
// matching field (the table of api-oip.md), so the native codec decodes and
// checks it. Several fields set: all are copied and the codec names the clash.
void CopyContents(const InferTensorContents& c, v1::Tensor* t) {
  *t->mutable_bool_data() = c.bool_contents();
  *t->mutable_int32_data() = c.int_contents();
  *t->mutable_int64_data() = c.int64_contents();
  *t->mutable_uint32_data() = c.uint_contents();
  *t->mutable_uint64_data() = c.uint64_contents();
  *t->mutable_float_data() = c.fp32_contents();
  *t->mutable_double_data() = c.fp64_contents();
  *t->mutable_string_data() = c.bytes_contents();
}

bool HasContents(const InferTensorContents& c) {
  return c.bool_contents_size() + c.int_contents_size() + c.int64_contents_size() +
             c.uint_contents_size() + c.uint64_contents_size() + c.fp32_contents_size() +
             c.fp64_contents_size() + c.bytes_contents_size() >
         0;
}

// Rank, element count and byte limits, before anything is read or allocated;
// returns the tensor's bytes (n x width). The same checks and messages as DecodeTensor.
absl::StatusOr<int64_t> CheckShape(DType dtype, absl::Span<const int64_t> dims,
                                   absl::string_view what, const RequestLimits& limits) {
  if (static_cast<int64_t>(dims.size()) > limits.max_rank) {
    return absl::InvalidArgumentError(absl::StrCat(what, ".shape has rank ", dims.size(),
                                                   "; the limit is ", limits.max_rank,
                                                   " (--max_rank)"));
  }
  const int64_t width = ElementWidth(dtype);
  ASSIGN_OR_RETURN(int64_t bytes, CheckedByteSize(dims, width, absl::StrCat(what, ".shape")));
  const int64_t n = bytes / width;
  if (n > limits.max_tensor_elements) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " has ", n, " elements (shape ", ShapeToString(dims), "); the limit is ",
                     limits.max_tensor_elements, " (--max_tensor_elements)"));
  }
  if (bytes > limits.max_tensor_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " needs ", bytes, " bytes (shape ", ShapeToString(dims), " of ", DTypeName(dtype),
        "); the limit is ", limits.max_tensor_bytes, " (--max_tensor_bytes)"));
  }
  return bytes;
}

// A tensor from bytes laid out as raw contents (`bytes` must outlive it).
absl::StatusOr<DecodedTensor> DecodeRaw(DType dtype, absl::Span<const int64_t> dims,
                                        absl::string_view bytes, absl::string_view what,
                                        absl::string_view source, const RequestLimits& limits) {
  ASSIGN_OR_RETURN(const int64_t num_bytes, CheckShape(dtype, dims, what, limits));
  DecodedTensor out;
  out.encoding = Encoding::kRaw;
  out.view.dtype = dtype;
  out.view.shape.assign(dims.begin(), dims.end());
  const int64_t n = num_bytes / ElementWidth(dtype);
  if (dtype == DType::kString) {
    // Every element takes at least its 4-byte length: refuse before the
    // references (16 bytes each) are allocated, so a few bytes cannot claim
    // a huge shape.
    if (static_cast<int64_t>(bytes.size()) / 4 < n) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", source, " has ", bytes.size(), " bytes, too few for ", n,
          " BYTES elements (shape ", ShapeToString(dims), "; each needs a 4-byte length)"));
    }
    out.storage.reset(new char[std::max<int64_t>(num_bytes, 1)]);
    RETURN_IF_ERROR(ParseRawBytes(bytes, n, absl::StrCat(what, " ", source),
                                  reinterpret_cast<StringRef*>(out.storage.get())));
    out.view.data = out.storage.get();
    // Characters count against the limit as in Execute (16 bytes per element plus them).
    if (DecodedBytes(out.view) > limits.max_tensor_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          what, " needs ", DecodedBytes(out.view), " bytes (", n, " BYTES elements); the limit is ",
          limits.max_tensor_bytes, " (--max_tensor_bytes)"));
    }
    return out;
  }
  if (static_cast<int64_t>(bytes.size()) != num_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", source, " has ", bytes.size(),
                                                   " bytes but shape ", ShapeToString(dims), " of ",
                                                   OipDatatype(dtype), " needs ", num_bytes));
  }
  if (dtype == DType::kBool) {
    if (const int64_t i = FindInvalidBool(bytes); i >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", source, " byte ", i, " = ",
                                                     int{static_cast<uint8_t>(bytes[i])},
                                                     " is not a valid BOOL (0 or 1)"));
    }
  }
  // In place: kernels read elements with memcpy, whatever the alignment.
  out.view.data = bytes.data();
  return out;
}

// The shared-memory parameters of a tensor, if it names a region. Any other
// tensor parameter is INVALID_ARGUMENT (`what` names the tensor).
absl::StatusOr<bool> ParseTensorParameters(
    const google::protobuf::Map<std::string, InferParameter>& params, absl::string_view what,
    std::string* region, uint64_t* offset, uint64_t* byte_size) {
  bool has_region = false, has_size = false, has_offset = false;
  for (const auto& [key, value] : params) {
    if (key == kShmRegion) {
      if (value.parameter_choice_case() != InferParameter::kStringParam) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": parameter '", kShmRegion, "' must be a string_param"));
      }
      *region = value.string_param();
      has_region = true;
    } else if (key == kShmByteSize || key == kShmOffset) {
      int64_t v = 0;
      if (value.parameter_choice_case() == InferParameter::kInt64Param) {
        v = value.int64_param();
      } else if (value.parameter_choice_case() == InferParameter::kUint64Param &&
                 value.uint64_param() <= static_cast<uint64_t>(INT64_MAX)) {
        v = static_cast<int64_t>(value.uint64_param());
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": parameter '", key, "' must be an int64_param"));
      }
      if (v < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": parameter '", key, "' = ", v, " must not be negative"));
      }
      (key == kShmByteSize ? *byte_size : *offset) = static_cast<uint64_t>(v);
      (key == kShmByteSize ? has_size : has_offset) = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(what, ": unknown parameter ", Quote(key),
                                                     "; tensors take only '", kShmRegion, "', '",
                                                     kShmByteSize, "' and '", kShmOffset, "'"));
    }
  }
  if (!has_region && (has_size || has_offset)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", kShmByteSize, "' and '", kShmOffset,
                                                   "' need '", kShmRegion, "'"));
  }
  if (has_region && !has_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", kShmRegion, "' needs '", kShmByteSize, "'"));
  }
  return has_region;
}

// Request parameters -> op attributes, with the kinds Execute's Struct would
// give them; the op then checks them exactly as it checks Execute's attrs.
absl::StatusOr<Attrs> ParametersToAttrs(
    const google::protobuf::Map<std::string, InferParameter>& params) {
  Attrs attrs;
  for (const auto& [key, value] : params) {
    if (std::find_if(std::begin(kProtocolParameters), std::end(kProtocolParameters),
                     [&key = key](const char* p) { return key == p; }) !=
        std::end(kProtocolParameters)) {
      continue;
    }
    const std::string what = absl::StrCat("parameter ", Quote(key));
    switch (value.parameter_choice_case()) {
      case InferParameter::kStringParam:
        attrs[key] = AttrValue::String(value.string_param());
        break;
      case InferParameter::kBoolParam:
        attrs[key] = AttrValue::Bool(value.bool_param());
        break;
      case InferParameter::kInt64Param:
        if (value.int64_param() > kMaxExactInt || value.int64_param() < -kMaxExactInt) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, " = ", value.int64_param(), " is out of range [-2^53, 2^53]"));
        }
        attrs[key] = AttrValue::Number(static_cast<double>(value.int64_param()));
        break;
      case InferParameter::kUint64Param:
        if (value.uint64_param() > static_cast<uint64_t>(kMaxExactInt)) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, " = ", value.uint64_param(), " is out of range [0, 2^53]"));
        }
        attrs[key] = AttrValue::Number(static_cast<double>(value.uint64_param()));
        break;
      case InferParameter::kDoubleParam:
        attrs[key] = AttrValue::Number(value.double_param());
        break;
      case InferParameter::PARAMETER_CHOICE_NOT_SET:
        return absl::InvalidArgumentError(absl::StrCat(what, " has no value"));
    }
  }
  return attrs;
}

std::string InputNames(const OpSpec& spec) {
  std::vector<std::string> names;
  for (const InputSpec& in : spec.inputs) names.push_back(absl::StrCat("'", in.name, "'"));
  return absl::StrJoin(names, ", ");
}

const char* RepresentativeDatatype(const std::vector<DType>& types) {
  for (DType preferred : {DType::kFloat32, DType::kInt64}) {
    if (std::find(types.begin(), types.end(), preferred) != types.end()) {
      return OipDatatype(preferred);
    }
  }
  for (DType t : types) {
    if (OipDatatype(t) != nullptr) return OipDatatype(t);
  }
  return "BYTES";
}

}  // namespace

const char* OipDatatype(DType dtype) {
  for (const DatatypeName& d : kDatatypes) {
    if (d.dtype == dtype) return d.name;
  }
  return nullptr;
}

DType DTypeFromOip(absl::string_view datatype) {
  for (const DatatypeName& d : kDatatypes) {
    if (datatype == d.name) return d.dtype;
  }
  return DType::kInvalid;
}

absl::StatusOr<const OpDef*> FindModel(const OpRegistry& registry, absl::string_view name,
                                       absl::string_view version) {
  const OpDef* def = registry.Find(name);
  if (def == nullptr) {
    std::vector<std::string> names;
    for (const auto& d : registry.ops()) names.push_back(d->spec.name);
    return absl::NotFoundError(absl::StrCat("unknown model ", Quote(name),
                                            "; the models are ops: ", absl::StrJoin(names, ", ")));
  }
  if (!version.empty() && version != kModelVersion) {
    return absl::NotFoundError(absl::StrCat("model ", Quote(name), " has no version ",
                                            Quote(version), "; its only version is '",
                                            kModelVersion, "' (or empty)"));
  }
  return def;
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
      t->add_shape(-1);  // any rank (documented in the proto and README)
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

absl::Status ParseRawBytes(absl::string_view raw, int64_t n, absl::string_view what,
                           StringRef* out) {
  size_t pos = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (raw.size() - pos < 4) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": BYTES element ", i, " of ", n,
                                                     ": its 4-byte length is cut off at byte ", pos,
                                                     " of ", raw.size()));
    }
    uint32_t len = 0;
    std::memcpy(&len, raw.data() + pos, 4);  // little-endian host (checked above)
    pos += 4;
    if (len > raw.size() - pos) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": BYTES element ", i, " claims ", len,
                                                     " bytes but only ", raw.size() - pos,
                                                     " remain"));
    }
    out[i] = StringRef{raw.data() + pos, len};
    pos += len;
  }
  if (pos != raw.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", raw.size() - pos, " bytes after its ", n, " BYTES elements"));
  }
  return absl::OkStatus();
}

int64_t RawBytesSize(const TensorView& t) {
  const StringRef* refs = t.data_as<StringRef>();
  int64_t size = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) size += 4 + static_cast<int64_t>(refs[i].size);
  return size;
}

void WriteRawBytes(const TensorView& t, char* out) {
  const StringRef* refs = t.data_as<StringRef>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    // Inputs are bounded by the limits (far below 4 GiB per element).
    const uint32_t len = static_cast<uint32_t>(refs[i].size);
    std::memcpy(out, &len, 4);
    if (len > 0) std::memcpy(out + 4, refs[i].data, len);
    out += 4 + len;
  }
}

absl::StatusOr<std::unique_ptr<PreparedInfer>> PreparedInfer::Make(const OpRegistry& registry,
                                                                   const ModelInferRequest& request,
                                                                   const RequestLimits& limits,
                                                                   const ShmRegistry* shm,
                                                                   const std::string& owner) {
  std::unique_ptr<PreparedInfer> p(new PreparedInfer());
  ASSIGN_OR_RETURN(p->def_, FindModel(registry, request.model_name(), request.model_version()));
  const OpSpec& spec = p->def_->spec;
  p->id_ = request.id();
  ASSIGN_OR_RETURN(Attrs attrs, ParametersToAttrs(request.parameters()));

  // Inputs by name: slot[spec index] = request index.
  const int num_spec = static_cast<int>(spec.inputs.size());
  std::vector<int> slot(num_spec, -1);
  for (int i = 0; i < request.inputs_size(); ++i) {
    const std::string& name = request.inputs(i).name();
    int s = 0;
    while (s < num_spec && spec.inputs[s].name != name) ++s;
    if (s == num_spec) {
      return absl::InvalidArgumentError(absl::StrCat("unknown input ", Quote(name), " for model ",
                                                     spec.name, "; its inputs are ",
                                                     InputNames(spec)));
    }
    if (slot[s] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("input ", Quote(name), " appears twice"));
    }
    slot[s] = i;
  }
  for (int s = 0; s < num_spec; ++s) {
    if (slot[s] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("missing input '", spec.inputs[s].name,
                                                     "' of model ", spec.name, "; its inputs are ",
                                                     InputNames(spec)));
    }
  }

  // Where each input's data is: shared memory, raw (in request order, skipping
  // shared-memory inputs, as Triton does) or typed.
  std::vector<ShmUse> shm_use(request.inputs_size());
  std::vector<int> raw_index(request.inputs_size(), -1);
  int num_raw = 0;
  const bool raw_mode = request.raw_input_contents_size() > 0;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& in = request.inputs(i);
    const std::string what = absl::StrCat("input ", Quote(in.name()));
    std::string region;
    ASSIGN_OR_RETURN(const bool in_shm,
                     ParseTensorParameters(in.parameters(), what, &region, &shm_use[i].offset,
                                           &shm_use[i].byte_size));
    if (in_shm) {
      if (shm == nullptr || !shm->enabled()) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " names shared memory region ", Quote(region),
            " but system shared memory is off on this server (--shared_memory=system)"));
      }
      if (HasContents(in.contents())) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " has both contents and a shared memory region; use one"));
      }
      absl::StatusOr<std::shared_ptr<const ShmRegion>> r = shm->Find(owner, region);
      if (!r.ok()) return absl::NotFoundError(absl::StrCat(what, ": ", r.status().message()));
      shm_use[i].region = *std::move(r);
      continue;
    }
    if (raw_mode) {
      if (HasContents(in.contents())) {
        return absl::InvalidArgumentError(absl::StrCat(
            what,
            " has typed contents but the request also has raw_input_contents; either every "
            "input (not in shared memory) is raw or none is"));
      }
      raw_index[i] = num_raw++;
    }
  }
  if (raw_mode && num_raw != request.raw_input_contents_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "raw_input_contents has ", request.raw_input_contents_size(), " entries but ", num_raw,
        " inputs are not in shared memory; give one entry per such input, in the order of inputs"));
  }

  // Decode in the spec's order, counting decoded bytes against the request limit.
  std::vector<TensorView> views;
  views.reserve(num_spec);
  p->inputs_.reserve(num_spec);
  for (int s = 0; s < num_spec; ++s) {
    const int i = slot[s];
    const auto& in = request.inputs(i);
    const std::string what = absl::StrCat("input ", Quote(in.name()));
    const DType dtype = DTypeFromOip(in.datatype());
    if (dtype == DType::kInvalid) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": datatype ", Quote(in.datatype()),
          " is not one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, "
          "FP32, FP64, BYTES, BF16 (COMPLEX and FLOAT8 tensors are served by "
          "tensorops.v1.TensorOps only)"));
    }
    const absl::Span<const int64_t> dims(in.shape().data(), static_cast<size_t>(in.shape_size()));
    DecodedTensor t;
    if (shm_use[i].region != nullptr) {
      ShmUse& use = shm_use[i];
      ASSIGN_OR_RETURN(const int64_t num_bytes, CheckShape(dtype, dims, what, limits));
      ASSIGN_OR_RETURN(char* bytes, use.region->Bytes(use.offset, use.byte_size, what));
      if (dtype == DType::kString &&
          use.byte_size > static_cast<uint64_t>(limits.max_tensor_bytes)) {
        return absl::ResourceExhaustedError(
            absl::StrCat(what, ": shared_memory_byte_size ", use.byte_size, " is more than ",
                         limits.max_tensor_bytes, " bytes (--max_tensor_bytes)"));
      }
      if (dtype != DType::kString && static_cast<uint64_t>(num_bytes) != use.byte_size) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": shared memory region ", Quote(use.region->name()),
                         ": shared_memory_byte_size is ", use.byte_size, " but shape ",
                         ShapeToString(dims), " of ", in.datatype(), " needs ", num_bytes));
      }
      if (s == 0 && dtype != DType::kString && dtype != DType::kBool) {
        // The data input is read in place by the kernel only (under the SIGBUS guard).
        ASSIGN_OR_RETURN(t, DecodeRaw(dtype, dims, absl::string_view(bytes, use.byte_size), what,
                                      "(shared memory)", limits));
        p->data_in_shm_ = true;
      } else {
        // Everything else is read by validation (or is parsed, or checked
        // byte by byte): copy it out first, so only guarded code touches the region.
        auto copy = std::make_unique<v1::Tensor>();
        std::string* buffer = copy->mutable_raw_data();
        buffer->resize(use.byte_size);
        if (!RunCatchingSigbus([&] { std::memcpy(&(*buffer)[0], bytes, use.byte_size); })) {
          return absl::InvalidArgumentError(absl::StrCat(what, ": shared memory region ",
                                                         Quote(use.region->name()),
                                                         " was truncated while it was read"));
        }
        ASSIGN_OR_RETURN(t, DecodeRaw(dtype, dims, *buffer, what, "(shared memory)", limits));
        p->typed_copies_.push_back(std::move(copy));
      }
      p->shm_inputs_.push_back(use);
    } else if (raw_index[i] >= 0) {
      ASSIGN_OR_RETURN(t,
                       DecodeRaw(dtype, dims, request.raw_input_contents(raw_index[i]), what,
                                 absl::StrCat("(raw_input_contents[", raw_index[i], "])"), limits));
    } else {
      if ((dtype == DType::kFloat16 || dtype == DType::kBFloat16) && HasContents(in.contents())) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": ", in.datatype(),
                         " has no typed contents field; send it in raw_input_contents"));
      }
      auto copy = std::make_unique<v1::Tensor>();
      copy->set_dtype(ToProtoDataType(dtype));
      *copy->mutable_shape() = in.shape();
      CopyContents(in.contents(), copy.get());
      absl::StatusOr<DecodedTensor> decoded = DecodeTensor(*copy, what, &limits);
      if (!decoded.ok()) {
        return absl::Status(decoded.status().code(), InOipTerms(decoded.status().message()));
      }
      t = *std::move(decoded);
      p->typed_copies_.push_back(std::move(copy));
    }
    const int64_t bytes = DecodedBytes(t.view);
    if (bytes > limits.max_request_bytes - p->input_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the request's inputs need more than ", limits.max_request_bytes,
          " bytes decoded; the limit is ", limits.max_request_bytes, " (--max_request_bytes)"));
    }
    p->input_bytes_ += bytes;
    views.push_back(t.view);
    p->inputs_.push_back(std::move(t));
  }

  ASSIGN_OR_RETURN(p->op_, registry.Prepare(spec.name, views, attrs));
  if (p->output_bytes() > limits.max_request_bytes - p->input_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request needs ", p->input_bytes_, " bytes of decoded inputs plus ", p->output_bytes(),
        " bytes of output; the limit is ", limits.max_request_bytes, " (--max_request_bytes)"));
  }

  // Outputs: all of them in spec order, or those requested, in request order.
  const int num_out = static_cast<int>(spec.outputs.size());
  if (request.outputs_size() == 0) {
    for (int o = 0; o < num_out; ++o) {
      Output out;
      out.spec_index = o;
      p->outputs_.push_back(std::move(out));
    }
  }
  for (const auto& req : request.outputs()) {
    const std::string what = absl::StrCat("output ", Quote(req.name()));
    int o = 0;
    while (o < num_out && spec.outputs[o].name != req.name()) ++o;
    if (o == num_out) {
      std::vector<std::string> names;
      for (const OutputSpec& out : spec.outputs) names.push_back(absl::StrCat("'", out.name, "'"));
      return absl::InvalidArgumentError(absl::StrCat("unknown ", what, " for model ", spec.name,
                                                     "; its outputs are ",
                                                     absl::StrJoin(names, ", ")));
    }
    for (const Output& seen : p->outputs_) {
      if (seen.spec_index == o) {
        return absl::InvalidArgumentError(absl::StrCat(what, " is requested twice"));
      }
    }
    Output out;
    out.spec_index = o;
    std::string region;
    ASSIGN_OR_RETURN(out.in_shm, ParseTensorParameters(req.parameters(), what, &region,
                                                       &out.shm.offset, &out.shm.byte_size));
    if (out.in_shm) {
      if (shm == nullptr || !shm->enabled()) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " names shared memory region ", Quote(region),
            " but system shared memory is off on this server (--shared_memory=system)"));
      }
      absl::StatusOr<std::shared_ptr<const ShmRegion>> r = shm->Find(owner, region);
      if (!r.ok()) return absl::NotFoundError(absl::StrCat(what, ": ", r.status().message()));
      out.shm.region = *std::move(r);
      RETURN_IF_ERROR(out.shm.region->Bytes(out.shm.offset, out.shm.byte_size, what).status());
      // BYTES outputs are sized when they are written.
      if (p->op_.dtype != DType::kString &&
          static_cast<uint64_t>(p->output_bytes()) > out.shm.byte_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": shared memory region ", Quote(region), ": shared_memory_byte_size is ",
            out.shm.byte_size, " but the output (shape ", ShapeToString(p->op_.shape), " of ",
            OipDatatype(p->op_.dtype), ") needs ", p->output_bytes()));
      }
      // Kernels never read what they write: the data input (read in place)
      // and this output must not share bytes.
      // (shm_inputs_ is in spec order: the data input, when in place, is first.)
      if (p->data_in_shm_) {
        const ShmUse& in = p->shm_inputs_.front();
        if (out.shm.region->Overlaps(out.shm.offset, out.shm.byte_size, *in.region, in.offset,
                                     in.byte_size)) {
          return absl::InvalidArgumentError(absl::StrCat(
              what, ": its shared memory range overlaps input '", spec.inputs[0].name, "' (region ",
              Quote(in.region->name()), "); give the output its own bytes"));
        }
      }
    }
    p->outputs_.push_back(std::move(out));
  }
  return p;
}

absl::Status PreparedInfer::RunKernel(void* out, ThreadPool* pool, int64_t min_parallel_bytes) {
  bool uses_shm = data_in_shm_;
  for (const Output& o : outputs_) uses_shm |= o.in_shm;
  if (!uses_shm) {
    RunPrepared(op_, out, pool, min_parallel_bytes);
    return absl::OkStatus();
  }
  // Every part runs under the SIGBUS guard, on whichever thread runs it.
  auto faulted = std::make_shared<std::atomic<bool>>(false);
  PreparedOp guarded = op_;
  guarded.run_range = [inner = op_.run_range, faulted](void* o, int64_t b, int64_t e) {
    if (!RunCatchingSigbus([&] { inner(o, b, e); })) faulted->store(true);
  };
  RunPrepared(guarded, out, pool, min_parallel_bytes);
  if (faulted->load()) {
    return absl::InvalidArgumentError(
        "a shared memory region of this request was truncated by its owner while the op ran; "
        "the result is incomplete");
  }
  return absl::OkStatus();
}

absl::Status PreparedInfer::Run(ModelInferResponse* response, ThreadPool* pool,
                                int64_t min_parallel_bytes) {
  response->set_model_name(def_->spec.name);
  response->set_model_version(kModelVersion);
  response->set_id(id_);
  const DType dtype = op_.dtype;
  // Every op has one output; the loop keeps the protocol's shape.
  for (const Output& o : outputs_) {
    auto* t = response->add_outputs();
    t->set_name(def_->spec.outputs[o.spec_index].name);
    t->set_datatype(OipDatatype(dtype));
    for (int64_t d : op_.shape) t->add_shape(d);
    std::string* raw = response->add_raw_output_contents();
    if (dtype == DType::kString) {
      // References first, then the length-prefixed bytes.
      Tensor result(dtype, op_.shape);
      RETURN_IF_ERROR(RunKernel(result.mutable_data(), pool, min_parallel_bytes));
      const int64_t size = RawBytesSize(result.view());
      if (!o.in_shm) {
        raw->resize(static_cast<size_t>(size));
        WriteRawBytes(result.view(), &(*raw)[0]);
        continue;
      }
      const std::string what = absl::StrCat("output ", Quote(t->name()));
      if (static_cast<uint64_t>(size) > o.shm.byte_size) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": shared memory region ", Quote(o.shm.region->name()),
                         ": shared_memory_byte_size is ", o.shm.byte_size,
                         " but the BYTES output needs ", size));
      }
      ASSIGN_OR_RETURN(char* dst, o.shm.region->Bytes(o.shm.offset, o.shm.byte_size, what));
      if (!RunCatchingSigbus([&] { WriteRawBytes(result.view(), dst); })) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": shared memory region ",
                                                       Quote(o.shm.region->name()),
                                                       " was truncated while it was written"));
      }
      continue;
    }
    if (o.in_shm) {
      // Straight into the caller's memory; the response carries no data.
      const std::string what = absl::StrCat("output ", Quote(t->name()));
      ASSIGN_OR_RETURN(char* dst, o.shm.region->Bytes(o.shm.offset, output_bytes(), what));
      RETURN_IF_ERROR(RunKernel(dst, pool, min_parallel_bytes));
      continue;
    }
    const int64_t bytes = output_bytes();
    raw->reserve(static_cast<size_t>(bytes));
    AdviseHugePages(raw->data(), bytes);  // before resize() first touches it
    raw->resize(static_cast<size_t>(bytes));
    RETURN_IF_ERROR(RunKernel(&(*raw)[0], pool, min_parallel_bytes));
  }
  return absl::OkStatus();
}

}  // namespace tensorops
