#include "server/oip/oip_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "kernels/field_path.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"
#include "server/oip/sigbus_guard.h"
#include "wire/chain_codec.h"

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

constexpr char kShmRegion[] = "shared_memory_region";
constexpr char kShmByteSize[] = "shared_memory_byte_size";
constexpr char kShmOffset[] = "shared_memory_offset";

// 2^53: the integers a double (the native attrs' number) holds exactly.
constexpr int64_t kMaxExactInt = int64_t{1} << 53;

// Caller-supplied text in single quotes, cut like BoundedQuote so a
// megabyte-long name never ends up in a status.
std::string Quote(absl::string_view s) {
  if (s.size() <= 64) return absl::StrCat("'", s, "'");
  return absl::StrCat("'", s.substr(0, 64), "...' (", s.size(), " bytes)");
}

}  // namespace

absl::StatusOr<int64_t> CheckShape(DType dtype, absl::Span<const int64_t> dims,
                                   absl::string_view what, const RequestLimits& limits,
                                   int64_t string_chars) {
  if (static_cast<int64_t>(dims.size()) > limits.max_rank) {
    return InvalidArgumentAt(".shape",
                             absl::StrCat(what, ".shape has rank ", dims.size(), "; the limit is ",
                                          limits.max_rank, " (--max_rank)"));
  }
  const int64_t width = ElementWidth(dtype);
  ASSIGN_OR_RETURN(int64_t bytes,
                   AtField(CheckedByteSize(dims, width, absl::StrCat(what, ".shape")), ".shape"));
  const int64_t n = bytes / width;
  if (n > limits.max_tensor_elements) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " has ", n, " elements (shape ", ShapeToString(dims), "); the limit is ",
                     limits.max_tensor_elements, " (--max_tensor_elements)"));
  }
  const bool with_chars = dtype == DType::kString && string_chars >= 0;
  int64_t counted = bytes;
  bool over = counted > limits.max_tensor_bytes;
  if (with_chars && !over) {
    if (string_chars > limits.max_tensor_bytes - counted) {
      over = true;
      counted = limits.max_tensor_bytes + 1;  // reported as "N+ bytes"
    } else {
      counted += string_chars;
    }
  }
  if (over) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " needs ", counted, with_chars ? "+" : "", " bytes (shape ",
                     ShapeToString(dims), " of ", DTypeName(dtype), "); the limit is ",
                     limits.max_tensor_bytes, " (--max_tensor_bytes)"));
  }
  return bytes;
}

namespace {

// Non-null and aligned for every element type: the data of an empty tensor.
alignas(16) const char kEmptyTensorData[16] = {};

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
      return InvalidArgumentAt(
          ".data", absl::StrCat(what, " ", source, " has ", bytes.size(), " bytes, too few for ", n,
                                " BYTES elements (shape ", ShapeToString(dims),
                                "; each needs a 4-byte length)"));
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
    return InvalidArgumentAt(".data", absl::StrCat(what, " ", source, " has ", bytes.size(),
                                                   " bytes but shape ", ShapeToString(dims), " of ",
                                                   OipDatatype(dtype), " needs ", num_bytes));
  }
  if (dtype == DType::kBool) {
    if (const int64_t i = FindInvalidBool(bytes); i >= 0) {
      return InvalidArgumentAt(
          absl::StrCat(".data[", i, "]"),
          absl::StrCat(what, " ", source, " byte ", i, " = ", int{static_cast<uint8_t>(bytes[i])},
                       " is not a valid BOOL (0 or 1)"));
    }
  }
  // In place: kernels read elements with memcpy, whatever the alignment.
  out.view.data = bytes.data();
  return out;
}

// The shared-memory parameters of a tensor, if it names a region. Any other
// tensor parameter is INVALID_ARGUMENT (`what` names the tensor).
absl::StatusOr<bool> ParseTensorParameters(const InferParams& params, absl::string_view what,
                                           absl::string_view* region, uint64_t* offset,
                                           uint64_t* byte_size) {
  bool has_region = false, has_size = false, has_offset = false;
  for (const auto& [key, value] : params) {
    if (key == kShmRegion) {
      if (value.kind != InferParam::Kind::kString) {
        return InvalidArgumentAt(
            absl::StrCat(".parameters.", kShmRegion),
            absl::StrCat(what, ": parameter '", kShmRegion, "' must be a string_param"));
      }
      *region = value.string_value;
      has_region = true;
    } else if (key == kShmByteSize || key == kShmOffset) {
      int64_t v = 0;
      if (value.kind == InferParam::Kind::kInt64) {
        v = value.int64_value;
      } else if (value.kind == InferParam::Kind::kUint64 &&
                 value.uint64_value <= static_cast<uint64_t>(INT64_MAX)) {
        v = static_cast<int64_t>(value.uint64_value);
      } else {
        return InvalidArgumentAt(
            absl::StrCat(".parameters.", key),
            absl::StrCat(what, ": parameter '", key, "' must be an int64_param"));
      }
      if (v < 0) {
        return InvalidArgumentAt(
            absl::StrCat(".parameters.", key),
            absl::StrCat(what, ": parameter '", key, "' = ", v, " must not be negative"));
      }
      (key == kShmByteSize ? *byte_size : *offset) = static_cast<uint64_t>(v);
      (key == kShmByteSize ? has_size : has_offset) = true;
    } else {
      return InvalidArgumentAt(
          absl::StrCat(".parameters.", key),
          absl::StrCat(what, ": unknown parameter ", Quote(key), "; tensors take only '",
                       kShmRegion, "', '", kShmByteSize, "' and '", kShmOffset, "'"));
    }
  }
  if (!has_region && (has_size || has_offset)) {
    return InvalidArgumentAt(absl::StrCat(".parameters.", kShmRegion),
                             absl::StrCat(what, ": '", kShmByteSize, "' and '", kShmOffset,
                                          "' need '", kShmRegion, "'"));
  }
  if (has_region && !has_size) {
    return InvalidArgumentAt(absl::StrCat(".parameters.", kShmByteSize),
                             absl::StrCat(what, ": '", kShmRegion, "' needs '", kShmByteSize, "'"));
  }
  return has_region;
}

// The protocol's integer parameters (`priority`, `timeout`): an integer >= 0
// or absent (-1).
absl::StatusOr<int64_t> ProtocolInteger(const InferParams& params, absl::string_view name) {
  for (const auto& [key, value] : params) {
    if (key != name) continue;
    if (value.kind == InferParam::Kind::kInt64 && value.int64_value >= 0) {
      return value.int64_value;
    }
    if (value.kind == InferParam::Kind::kUint64 &&
        value.uint64_value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return static_cast<int64_t>(value.uint64_value);
    }
    return InvalidArgumentAt(absl::StrCat("parameters.", name),
                             absl::StrCat("parameter '", name, "' must be an integer >= 0"));
  }
  return -1;
}

// Request parameters -> op attributes, with the kinds Execute's Struct would
// give them; the op then checks them exactly as it checks Execute's attrs.
absl::StatusOr<Attrs> ParametersToAttrs(const InferParams& params) {
  Attrs attrs;
  for (const auto& [key, value] : params) {
    if (key == kChainParameter ||
        std::find_if(std::begin(kProtocolParameters), std::end(kProtocolParameters),
                     [&key = key](const char* p) { return key == p; }) !=
            std::end(kProtocolParameters)) {
      continue;
    }
    const std::string what = absl::StrCat("parameter ", Quote(key));
    const std::string name(key);
    switch (value.kind) {
      case InferParam::Kind::kString:
        attrs[name] = AttrValue::String(std::string(value.string_value));
        break;
      case InferParam::Kind::kBool:
        attrs[name] = AttrValue::Bool(value.bool_value);
        break;
      case InferParam::Kind::kInt64:
        if (value.int64_value > kMaxExactInt || value.int64_value < -kMaxExactInt) {
          return InvalidArgumentAt(
              absl::StrCat("parameters.", key),
              absl::StrCat(what, " = ", value.int64_value, " is out of range [-2^53, 2^53]"));
        }
        attrs[name] = AttrValue::Number(static_cast<double>(value.int64_value));
        break;
      case InferParam::Kind::kUint64:
        if (value.uint64_value > static_cast<uint64_t>(kMaxExactInt)) {
          return InvalidArgumentAt(
              absl::StrCat("parameters.", key),
              absl::StrCat(what, " = ", value.uint64_value, " is out of range [0, 2^53]"));
        }
        attrs[name] = AttrValue::Number(static_cast<double>(value.uint64_value));
        break;
      case InferParam::Kind::kDouble:
        attrs[name] = AttrValue::Number(value.double_value);
        break;
      case InferParam::Kind::kNone:
        return InvalidArgumentAt(absl::StrCat("parameters.", key),
                                 absl::StrCat(what, " has no value"));
    }
  }
  return attrs;
}

std::string InputNames(const OpSpec& spec) {
  std::vector<std::string> names;
  for (const InputSpec& in : spec.inputs) names.push_back(absl::StrCat("'", in.name, "'"));
  return absl::StrJoin(names, ", ");
}

}  // namespace

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

absl::Status ParseRawBytes(absl::string_view raw, int64_t n, absl::string_view what,
                           StringRef* out) {
  size_t pos = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (raw.size() - pos < 4) {
      return InvalidArgumentAt(
          absl::StrCat(".data[", i, "]"),
          absl::StrCat(what, ": BYTES element ", i, " of ", n,
                       ": its 4-byte length is cut off at byte ", pos, " of ", raw.size()));
    }
    uint32_t len = 0;
    std::memcpy(&len, raw.data() + pos, 4);  // little-endian host (checked above)
    pos += 4;
    if (len > raw.size() - pos) {
      return InvalidArgumentAt(absl::StrCat(".data[", i, "]"),
                               absl::StrCat(what, ": BYTES element ", i, " claims ", len,
                                            " bytes but only ", raw.size() - pos, " remain"));
    }
    out[i] = StringRef{raw.data() + pos, len};
    pos += len;
  }
  if (pos != raw.size()) {
    return InvalidArgumentAt(".data", absl::StrCat(what, " has ", raw.size() - pos,
                                                   " bytes after its ", n, " BYTES elements"));
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
                                                                   const InferRequest& request,
                                                                   const RequestLimits& limits,
                                                                   const ShmRegistry* shm,
                                                                   const std::string& owner) {
  std::unique_ptr<PreparedInfer> p(new PreparedInfer());
  ASSIGN_OR_RETURN(p->def_, FindModel(registry, request.model_name, request.model_version));
  const OpSpec& spec = p->def_->spec;
  p->id_ = std::string(request.id);
  ASSIGN_OR_RETURN(Attrs attrs, ParametersToAttrs(request.parameters));
  RETURN_IF_ERROR(ProtocolInteger(request.parameters, "priority").status());
  ASSIGN_OR_RETURN(const int64_t timeout_us, ProtocolInteger(request.parameters, "timeout"));
  // Triton's meaning: microseconds, 0 = none.
  if (timeout_us > 0) p->timeout_ = absl::Microseconds(timeout_us);

  ASSIGN_OR_RETURN(const std::vector<int> slot, MatchInputs(spec, request));
  std::vector<InputSource> sources;
  RETURN_IF_ERROR(LocateInputs(request, shm, owner, &sources));
  // Decode in the spec's order, counting decoded bytes against the request limit.
  // The kernels' op vocabulary onto the request's fields (RequestFieldPath).
  auto to_request = [&](absl::string_view path) {
    return p->RequestFieldPath(slot, sources, path);
  };
  std::vector<TensorView> views;
  views.reserve(slot.size());
  p->inputs_.reserve(slot.size());
  for (size_t s = 0; s < slot.size(); ++s) {
    // Its errors' paths are relative to it: as the op's input s, to the request's.
    const absl::Status st = p->DecodeInput(request, slot[s], s == 0, sources[slot[s]], limits);
    RETURN_IF_ERROR(
        MapErrorFieldPath(PrefixErrorFieldPath(st, absl::StrCat("inputs[", s, "]")), to_request));
    views.push_back(p->inputs_.back().view);
  }
  ASSIGN_OR_RETURN(const std::vector<ChainStep> steps, p->DecodeChainParameter(request, limits));
  absl::StatusOr<PreparedOp> op = registry.PrepareChain(spec.name, views, attrs, steps);
  if (!op.ok()) return MapErrorFieldPath(op.status(), to_request);
  p->op_ = *std::move(op);
  const int64_t run_bytes = p->output_bytes() + p->scratch_bytes();
  if (run_bytes > limits.max_request_bytes - p->input_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("request needs ", p->input_bytes_, " bytes of decoded inputs plus ", run_bytes,
                     " bytes of output", p->scratch_bytes() > 0 ? " and scratch" : "",
                     "; the limit is ", limits.max_request_bytes, " (--max_request_bytes)"));
  }
  RETURN_IF_ERROR(p->SelectOutputs(request, shm, owner));
  return p;
}

std::string PreparedInfer::RequestFieldPath(const std::vector<int>& slot,
                                            const std::vector<InputSource>& sources,
                                            absl::string_view op_path) const {
  int64_t s = 0;
  absl::string_view rest;
  if (SplitIndexedPath(op_path, "inputs", &s, &rest) && s < static_cast<int64_t>(slot.size())) {
    const int i = slot[s];
    if (absl::ConsumePrefix(&rest, ".dtype")) return absl::StrCat("inputs[", i, "].datatype", rest);
    const bool in_shm = sources[i].shm.region != nullptr && ConsumeDataPath(&rest);
    return absl::StrCat("inputs[", i, "]", in_shm ? ".parameters.shared_memory_region" : rest);
  }
  if (absl::ConsumePrefix(&op_path, "attrs.")) return absl::StrCat("parameters.", op_path);
  if (chain_ != nullptr && absl::StartsWith(op_path, "then")) {  // steps' paths: the chain's
    return absl::StrCat("parameters.", ExecuteFieldPath({}, *chain_, op_path));
  }
  return std::string(op_path);
}

absl::StatusOr<std::vector<int>> PreparedInfer::MatchInputs(const OpSpec& spec,
                                                            const InferRequest& request) {
  // Inputs by name: slot[spec index] = request index.
  const int num_spec = static_cast<int>(spec.inputs.size());
  const int num_inputs = static_cast<int>(request.inputs.size());
  std::vector<int> slot(num_spec, -1);
  for (int i = 0; i < num_inputs; ++i) {
    const absl::string_view name = request.inputs[i].name;
    int s = 0;
    while (s < num_spec && spec.inputs[s].name != name) ++s;
    if (s == num_spec) {
      return InvalidArgumentAt(absl::StrCat("inputs[", i, "].name"),
                               absl::StrCat("unknown input ", Quote(name), " for model ", spec.name,
                                            "; its inputs are ", InputNames(spec)));
    }
    if (slot[s] >= 0) {
      return InvalidArgumentAt(absl::StrCat("inputs[", i, "].name"),
                               absl::StrCat("input ", Quote(name), " appears twice"));
    }
    slot[s] = i;
  }
  for (int s = 0; s < num_spec; ++s) {
    if (slot[s] < 0) {
      return InvalidArgumentAt(
          "inputs", absl::StrCat("missing input '", spec.inputs[s].name, "' of model ", spec.name,
                                 "; its inputs are ", InputNames(spec)));
    }
  }

  return slot;
}

absl::Status PreparedInfer::LocateInputs(const InferRequest& request, const ShmRegistry* shm,
                                         const std::string& owner,
                                         std::vector<InputSource>* sources) {
  const int num_inputs = static_cast<int>(request.inputs.size());
  sources->assign(num_inputs, InputSource());
  // Where each input's data is: shared memory, raw (in request order, skipping
  // shared-memory inputs, as Triton does) or typed.
  int num_raw = 0;
  const int num_raw_inputs = static_cast<int>(request.raw_inputs.size());
  const bool raw_mode = num_raw_inputs > 0;
  for (int i = 0; i < num_inputs; ++i) {
    const InferInput& in = request.inputs[i];
    const std::string what = absl::StrCat("input ", Quote(in.name));
    absl::string_view region;
    const std::string path = absl::StrCat("inputs[", i, "]");
    ASSIGN_OR_RETURN(const bool in_shm, AtField(ParseTensorParameters(in.parameters, what, &region,
                                                                      &(*sources)[i].shm.offset,
                                                                      &(*sources)[i].shm.byte_size),
                                                path));
    if (in_shm) {
      if (shm == nullptr || !shm->enabled()) {
        return InvalidArgumentAt(
            absl::StrCat(path, ".parameters.", kShmRegion),
            absl::StrCat(
                what, " names shared memory region ", Quote(region),
                " but system shared memory is off on this server (--shared_memory=system)"));
      }
      if (in.typed != nullptr) {
        return InvalidArgumentAt(
            absl::StrCat(path, ".contents"),
            absl::StrCat(what, " has both contents and a shared memory region; use one"));
      }
      absl::StatusOr<std::shared_ptr<const ShmRegion>> r = shm->Find(owner, region);
      if (!r.ok()) return absl::NotFoundError(absl::StrCat(what, ": ", r.status().message()));
      (*sources)[i].shm.region = *std::move(r);
      continue;
    }
    if (raw_mode) {
      if (in.typed != nullptr) {
        return InvalidArgumentAt(
            absl::StrCat(path, ".contents"),
            absl::StrCat(
                what,
                " has typed contents but the request also has raw_input_contents; either every "
                "input (not in shared memory) is raw or none is"));
      }
      (*sources)[i].raw_index = num_raw++;
    }
  }
  if (raw_mode && num_raw != num_raw_inputs) {
    return InvalidArgumentAt(
        "raw_input_contents",
        absl::StrCat("raw_input_contents has ", num_raw_inputs, " entries but ", num_raw,
                     " inputs are not in shared memory; give one entry per such input, in the "
                     "order of inputs"));
  }

  return absl::OkStatus();
}

absl::Status PreparedInfer::DecodeInput(const InferRequest& request, int i, bool is_data,
                                        const InputSource& source, const RequestLimits& limits) {
  const InferInput& in = request.inputs[i];
  const std::string what = absl::StrCat("input ", Quote(in.name));
  const DType dtype = DTypeFromOip(in.datatype);
  if (dtype == DType::kInvalid) {
    return InvalidArgumentAt(
        ".datatype",
        absl::StrCat(what, ": datatype ", Quote(in.datatype), " is not one of ", OipDatatypeList(),
                     " (COMPLEX and FLOAT8 tensors are served by tensorops.v1.TensorOps only)"));
  }
  const absl::Span<const int64_t> dims = in.shape;
  DecodedTensor t;
  if (source.shm.region != nullptr) {
    ASSIGN_OR_RETURN(t, DecodeShmInput(in, dtype, is_data, source.shm, what, limits));
  } else if (source.raw_index >= 0) {
    ASSIGN_OR_RETURN(
        t, DecodeRaw(dtype, dims, request.raw_inputs[source.raw_index], what,
                     absl::StrCat("(raw_input_contents[", source.raw_index, "])"), limits));
  } else {
    ASSIGN_OR_RETURN(t, DecodeContents(in, dtype, what, limits));
  }
  const int64_t bytes = DecodedBytes(t.view);
  if (bytes > limits.max_request_bytes - input_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the request's inputs need more than ", limits.max_request_bytes,
        " bytes decoded; the limit is ", limits.max_request_bytes, " (--max_request_bytes)"));
  }
  input_bytes_ += bytes;
  inputs_.push_back(std::move(t));
  return absl::OkStatus();
}

absl::StatusOr<DecodedTensor> PreparedInfer::DecodeShmInput(const InferInput& in, DType dtype,
                                                            bool is_data, const ShmUse& use,
                                                            const std::string& what,
                                                            const RequestLimits& limits) {
  const absl::Span<const int64_t> dims = in.shape;
  DecodedTensor t;
  ASSIGN_OR_RETURN(const int64_t num_bytes, CheckShape(dtype, dims, what, limits));
  ASSIGN_OR_RETURN(char* bytes, AtField(use.region->Bytes(use.offset, use.byte_size, what),
                                        absl::StrCat(".parameters.", kShmByteSize)));
  if (dtype == DType::kString && use.byte_size > static_cast<uint64_t>(limits.max_tensor_bytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": shared_memory_byte_size ", use.byte_size, " is more than ",
                     limits.max_tensor_bytes, " bytes (--max_tensor_bytes)"));
  }
  if (dtype != DType::kString && static_cast<uint64_t>(num_bytes) != use.byte_size) {
    return InvalidArgumentAt(
        absl::StrCat(".parameters.", kShmByteSize),
        absl::StrCat(what, ": shared memory region ", Quote(use.region->name()),
                     ": shared_memory_byte_size is ", use.byte_size, " but shape ",
                     ShapeToString(dims), " of ", in.datatype, " needs ", num_bytes));
  }
  if (is_data && dtype != DType::kString && dtype != DType::kBool) {
    // The data input is read in place by the kernel only (under the SIGBUS guard).
    ASSIGN_OR_RETURN(t, DecodeRaw(dtype, dims, absl::string_view(bytes, use.byte_size), what,
                                  "(shared memory)", limits));
    data_in_shm_ = true;
  } else {
    // Everything else is read by validation (or is parsed, or checked
    // byte by byte): copy it out first, so only guarded code touches the region.
    auto copy = std::make_unique<std::string>();
    std::string* buffer = copy.get();
    buffer->resize(use.byte_size);
    if (!RunCatchingSigbus([&] { std::memcpy(&(*buffer)[0], bytes, use.byte_size); })) {
      return InvalidArgumentAt(
          absl::StrCat(".parameters.", kShmRegion),
          absl::StrCat(what, ": shared memory region ", Quote(use.region->name()),
                       " was truncated while it was read"));
    }
    ASSIGN_OR_RETURN(t, DecodeRaw(dtype, dims, *buffer, what, "(shared memory)", limits));
    shm_copies_.push_back(std::move(copy));
  }
  shm_inputs_.push_back(use);
  return t;
}

absl::StatusOr<DecodedTensor> PreparedInfer::DecodeContents(const InferInput& in, DType dtype,
                                                            const std::string& what,
                                                            const RequestLimits& limits) {
  const absl::Span<const int64_t> dims = in.shape;
  DecodedTensor t;
  if ((dtype == DType::kFloat16 || dtype == DType::kBFloat16) && in.typed != nullptr) {
    return InvalidArgumentAt(
        ".contents", absl::StrCat(what, ": ", in.datatype,
                                  " has no typed contents field; send it in raw_input_contents"));
  }
  if (in.typed != nullptr) {
    ASSIGN_OR_RETURN(t, in.typed->Decode(dtype, dims, what, limits));
  } else {
    // No elements at all: only a tensor of none is complete.
    ASSIGN_OR_RETURN(const int64_t num_bytes,
                     CheckShape(dtype, dims, what, limits, /*string_chars=*/0));
    if (num_bytes != 0) {
      return InvalidArgumentAt(".contents",
                               absl::StrCat(what, " has no data: set ",
                                            dtype == DType::kString ? "" : "raw_input_contents or ",
                                            "contents.", TypedContentsField(dtype)));
    }
    t.encoding = Encoding::kRaw;
    t.view.dtype = dtype;
    t.view.shape.assign(dims.begin(), dims.end());
    t.view.data = kEmptyTensorData;
  }
  return t;
}

absl::StatusOr<std::vector<ChainStep>> PreparedInfer::DecodeChainParameter(
    const InferRequest& request, const RequestLimits& limits) {
  // A chain: the `then` parameter's steps after this model's op.
  std::vector<ChainStep> steps;
  for (const auto& [key, value] : request.parameters) {
    if (key != kChainParameter) continue;
    const std::string what = absl::StrCat("parameter '", kChainParameter, "'");
    const std::string path = absl::StrCat("parameters.", kChainParameter);
    if (chain_ != nullptr) {
      return InvalidArgumentAt(path, absl::StrCat(what, " is given twice"));
    }
    if (value.kind != InferParam::Kind::kString) {
      return InvalidArgumentAt(
          path, absl::StrCat(what, " must be a string: a JSON array of tensorops.v1.Step objects"));
    }
    auto chain = std::make_unique<google::protobuf::RepeatedPtrField<v1::Step>>();
    ASSIGN_OR_RETURN(*chain, AtField(ParseChainJson(value.string_value, what), path));
    // Its steps' paths ("then[0].inputs[1].int64_data") are inside the parameter.
    ASSIGN_OR_RETURN(
        steps, AtField(DecodeChain(*chain, limits, &input_bytes_, &chain_inputs_), "parameters."));
    chain_ = std::move(chain);
  }
  return steps;
}

absl::Status PreparedInfer::SelectOutputs(const InferRequest& request, const ShmRegistry* shm,
                                          const std::string& owner) {
  const OpSpec& spec = def_->spec;
  // Outputs: all of them in spec order, or those requested, in request order.
  const int num_out = static_cast<int>(spec.outputs.size());
  if (request.outputs.empty()) {
    for (int o = 0; o < num_out; ++o) {
      Output out;
      out.spec_index = o;
      outputs_.push_back(std::move(out));
    }
  }
  for (size_t q = 0; q < request.outputs.size(); ++q) {
    const InferRequestedOutput& req = request.outputs[q];
    const std::string what = absl::StrCat("output ", Quote(req.name));
    const std::string path = absl::StrCat("outputs[", q, "]");
    const std::string shm_path = absl::StrCat(path, ".parameters.", kShmRegion);
    const std::string size_path = absl::StrCat(path, ".parameters.", kShmByteSize);
    int o = 0;
    while (o < num_out && spec.outputs[o].name != req.name) ++o;
    if (o == num_out) {
      std::vector<std::string> names;
      for (const OutputSpec& out : spec.outputs) names.push_back(absl::StrCat("'", out.name, "'"));
      return InvalidArgumentAt(absl::StrCat(path, ".name"),
                               absl::StrCat("unknown ", what, " for model ", spec.name,
                                            "; its outputs are ", absl::StrJoin(names, ", ")));
    }
    for (const Output& seen : outputs_) {
      if (seen.spec_index == o) {
        return InvalidArgumentAt(absl::StrCat(path, ".name"),
                                 absl::StrCat(what, " is requested twice"));
      }
    }
    Output out;
    out.spec_index = o;
    out.request_index = static_cast<int>(q);
    absl::string_view region;
    ASSIGN_OR_RETURN(out.in_shm, AtField(ParseTensorParameters(req.parameters, what, &region,
                                                               &out.shm.offset, &out.shm.byte_size),
                                         path));
    if (out.in_shm) {
      if (shm == nullptr || !shm->enabled()) {
        return InvalidArgumentAt(
            shm_path,
            absl::StrCat(
                what, " names shared memory region ", Quote(region),
                " but system shared memory is off on this server (--shared_memory=system)"));
      }
      absl::StatusOr<std::shared_ptr<const ShmRegion>> r = shm->Find(owner, region);
      if (!r.ok()) return absl::NotFoundError(absl::StrCat(what, ": ", r.status().message()));
      out.shm.region = *std::move(r);
      RETURN_IF_ERROR(PrefixErrorFieldPath(
          out.shm.region->Bytes(out.shm.offset, out.shm.byte_size, what).status(), size_path));
      // BYTES outputs are sized when they are written.
      if (op_.dtype != DType::kString &&
          static_cast<uint64_t>(output_bytes()) > out.shm.byte_size) {
        return InvalidArgumentAt(
            size_path, absl::StrCat(what, ": shared memory region ", Quote(region),
                                    ": shared_memory_byte_size is ", out.shm.byte_size,
                                    " but the output (shape ", ShapeToString(op_.shape), " of ",
                                    OipDatatype(op_.dtype), ") needs ", output_bytes()));
      }
      // Kernels never read what they write: the data input (read in place)
      // and this output must not share bytes.
      // (shm_inputs_ is in spec order: the data input, when in place, is first.)
      if (data_in_shm_) {
        const ShmUse& in = shm_inputs_.front();
        if (out.shm.region->Overlaps(out.shm.offset, out.shm.byte_size, *in.region, in.offset,
                                     in.byte_size)) {
          return InvalidArgumentAt(
              shm_path, absl::StrCat(what, ": its shared memory range overlaps input '",
                                     spec.inputs[0].name, "' (region ", Quote(in.region->name()),
                                     "); give the output its own bytes"));
        }
      }
    }
    outputs_.push_back(std::move(out));
  }
  return absl::OkStatus();
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
  // A chain run in passes: every pass may write a shared-memory output.
  for (PreparedOp::Pass& pass : guarded.then) {
    pass.run_range = [inner = pass.run_range, faulted](const void* i, void* o, int64_t b,
                                                       int64_t e) {
      if (!RunCatchingSigbus([&] { inner(i, o, b, e); })) faulted->store(true);
    };
  }
  RunPrepared(guarded, out, pool, min_parallel_bytes);
  if (faulted->load()) {
    return absl::InvalidArgumentError(
        "a shared memory region of this request was truncated by its owner while the op ran; "
        "the result is incomplete");
  }
  return absl::OkStatus();
}

absl::Status PreparedInfer::Run(InferResponseWriter* response, ThreadPool* pool,
                                int64_t min_parallel_bytes) {
  response->SetModel(def_->spec.name, kModelVersion, id_);
  const DType dtype = op_.dtype;
  const char* datatype = OipDatatype(dtype);
  const absl::Span<const int64_t> shape(op_.shape.data(), op_.shape.size());
  // Every op has one output; the loop keeps the protocol's shape.
  for (const Output& o : outputs_) {
    const std::string& name = def_->spec.outputs[o.spec_index].name;
    if (dtype == DType::kString) {
      // References first, then the length-prefixed bytes.
      Tensor result(dtype, op_.shape);
      RETURN_IF_ERROR(RunKernel(result.mutable_data(), pool, min_parallel_bytes));
      const int64_t size = RawBytesSize(result.view());
      if (!o.in_shm) {
        WriteRawBytes(result.view(), response->AddOutput(name, datatype, shape, size));
        continue;
      }
      response->AddOutput(name, datatype, shape, 0);
      const std::string what = absl::StrCat("output ", Quote(name));
      const std::string path = absl::StrCat("outputs[", o.request_index, "].parameters.");
      if (static_cast<uint64_t>(size) > o.shm.byte_size) {
        return InvalidArgumentAt(
            absl::StrCat(path, kShmByteSize),
            absl::StrCat(what, ": shared memory region ", Quote(o.shm.region->name()),
                         ": shared_memory_byte_size is ", o.shm.byte_size,
                         " but the BYTES output needs ", size));
      }
      ASSIGN_OR_RETURN(char* dst, AtField(o.shm.region->Bytes(o.shm.offset, o.shm.byte_size, what),
                                          absl::StrCat(path, kShmByteSize)));
      if (!RunCatchingSigbus([&] { WriteRawBytes(result.view(), dst); })) {
        return InvalidArgumentAt(
            absl::StrCat(path, kShmRegion),
            absl::StrCat(what, ": shared memory region ", Quote(o.shm.region->name()),
                         " was truncated while it was written"));
      }
      continue;
    }
    if (o.in_shm) {
      // Straight into the caller's memory; the response carries no data.
      response->AddOutput(name, datatype, shape, 0);
      const std::string what = absl::StrCat("output ", Quote(name));
      ASSIGN_OR_RETURN(char* dst, o.shm.region->Bytes(o.shm.offset, output_bytes(), what));
      RETURN_IF_ERROR(RunKernel(dst, pool, min_parallel_bytes));
      continue;
    }
    RETURN_IF_ERROR(RunKernel(response->AddOutput(name, datatype, shape, output_bytes()), pool,
                              min_parallel_bytes));
  }
  return absl::OkStatus();
}

}  // namespace tensorops
