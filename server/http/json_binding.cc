#include "server/http/json_binding.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/dtype.h"
#include "kernels/float_formats.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "server/oip/oip_codec.h"
#include "wire/dtypes.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "json_binding.cc assumes a little-endian host (binary blocks are used in place)"
#endif

namespace tensorops {
namespace {

// Iterative parsing (no recursion: deep nesting cannot overflow the stack),
// numbers to the nearest double, NaN/Infinity tokens, UTF-8 checked.
constexpr unsigned kParseFlags =
    rapidjson::kParseIterativeFlag | rapidjson::kParseFullPrecisionFlag |
    rapidjson::kParseNanAndInfFlag | rapidjson::kParseValidateEncodingFlag;
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

// Elements of a shape CheckShape accepted (or an output's): no overflow.
int64_t Count(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

const char* JsonTypeName(const rapidjson::Value& v) {
  if (v.IsNull()) return "null";
  if (v.IsBool()) return "a boolean";
  if (v.IsNumber()) return "a number";
  if (v.IsString()) return "a string";
  if (v.IsArray()) return "an array";
  return "an object";
}

// A JSON number as a 64-bit integer, exactly (never through a double).
bool AsInt64(const rapidjson::Value& v, int64_t* out) {
  if (v.IsInt64()) {
    *out = v.GetInt64();
    return true;
  }
  return false;
}

// One parameters object -> InferParams (views of the document's strings).
absl::Status ToParams(const rapidjson::Value& obj, absl::string_view what, InferParams* out) {
  if (!obj.IsObject()) return Invalid(what, ".parameters must be an object");
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
      return Invalid(absl::StrCat(what, ".parameters.", key, " is ", JsonTypeName(v),
                                  "; parameters are booleans, numbers or strings"));
    }
    out->emplace_back(key, p);
  }
  return absl::OkStatus();
}

// The elements of `data` (an array, nested or flat, or one scalar), in
// row-major order; stops after `limit` + 1 of them (the count check follows).
absl::Status Flatten(const rapidjson::Value& data, absl::string_view what, int64_t limit,
                     std::vector<const rapidjson::Value*>* out) {
  if (!data.IsArray()) {
    out->push_back(&data);
    return absl::OkStatus();
  }
  struct Frame {
    const rapidjson::Value* array;
    rapidjson::SizeType next;
  };
  std::vector<Frame> stack{{&data, 0}};
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (top.next == top.array->Size()) {
      stack.pop_back();
      continue;
    }
    const rapidjson::Value& v = (*top.array)[top.next++];
    if (v.IsArray()) {
      stack.push_back({&v, 0});
    } else {
      if (static_cast<int64_t>(out->size()) > limit) return absl::OkStatus();
      out->push_back(&v);
    }
  }
  (void)what;
  return absl::OkStatus();
}

// Rounds `x` to nearest even with `bits` significant bits and subnormals
// below 2^`min_exp` (spacing 2^(min_exp - bits + 1)): exact in double.
double RoundToPrecision(double x, int bits, int min_exp) {
  if (!std::isfinite(x) || x == 0) return x;
  int e = 0;
  std::frexp(x, &e);  // x = m * 2^e, 0.5 <= |m| < 1
  const int exp = std::max(e - 1, min_exp);
  const int shift = bits - 1 - exp;
  return std::ldexp(std::nearbyint(std::ldexp(x, shift)), -shift);
}

// A double already rounded to float precision (or fewer bits), as a float:
// beyond FLT_MAX is infinity (a plain cast would be undefined behaviour).
float NarrowToFloat(double r) {
  if (std::isfinite(r) && std::fabs(r) > std::numeric_limits<float>::max()) {
    return std::signbit(r) ? -std::numeric_limits<float>::infinity()
                           : std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(r);
}

// binary32: the hardware's conversion rounds to nearest even within the
// float range; beyond it (where a cast is undefined) round by hand: just
// above FLT_MAX may still round down to it.
float DoubleToFloat(double x) {
  if (!(std::fabs(x) > std::numeric_limits<float>::max())) return static_cast<float>(x);
  return NarrowToFloat(RoundToPrecision(x, 24, -126));
}

uint16_t DoubleToHalf(double x) {
  // binary16: 11 significant bits, min normal 2^-14; beyond 65504 after
  // rounding is infinity (FloatToHalf of the exact float does that).
  return FloatToHalf(NarrowToFloat(RoundToPrecision(x, 11, -14)));
}
uint16_t DoubleToBFloat16(double x) {
  // bfloat16: 8 significant bits, min normal 2^-126. The rounded value is a
  // float (or beyond FLT_MAX: infinity).
  return FloatToBFloat16(NarrowToFloat(RoundToPrecision(x, 8, -126)));
}

template <typename T>
absl::Status PutInteger(const rapidjson::Value& v, absl::string_view what, int64_t i, char* dst) {
  if constexpr (std::is_same_v<T, uint64_t>) {
    if (v.IsUint64()) {
      const uint64_t x = v.GetUint64();
      std::memcpy(dst + i * sizeof(T), &x, sizeof(T));
      return absl::OkStatus();
    }
  } else {
    int64_t x = 0;
    if (AsInt64(v, &x)) {
      if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          (x > 0 &&
           static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
        return Invalid(absl::StrCat(what, ".data[", i, "] = ", x, " is out of range"));
      }
      const T t = static_cast<T>(x);
      std::memcpy(dst + i * sizeof(T), &t, sizeof(T));
      return absl::OkStatus();
    }
  }
  if (v.IsNumber()) {
    return Invalid(absl::StrCat(what, ".data[", i, "] is not an integer in range"));
  }
  return Invalid(absl::StrCat(what, ".data[", i, "] is ", JsonTypeName(v), ", not an integer"));
}

// JSON `data` -> the raw form of `dtype` (BYTES: 4-byte length + bytes).
absl::StatusOr<std::string> ConvertData(const rapidjson::Value& data, DType dtype,
                                        absl::Span<const int64_t> dims, absl::string_view what,
                                        const RequestLimits& limits) {
  ASSIGN_OR_RETURN(const int64_t bytes,
                   CheckShape(dtype, dims, what, limits, dtype == DType::kString ? 0 : -1));
  const int64_t n = Count(dims);
  std::vector<const rapidjson::Value*> elems;
  RETURN_IF_ERROR(Flatten(data, what, n, &elems));
  if (static_cast<int64_t>(elems.size()) != n) {
    return Invalid(
        absl::StrCat(what, ".data has ", elems.size() > static_cast<size_t>(n) ? "more than " : "",
                     elems.size(), " elements but shape ", ShapeToString(dims), " needs ", n));
  }
  std::string out;
  if (dtype == DType::kString) {
    int64_t total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const rapidjson::Value& v = *elems[i];
      if (!v.IsString()) {
        return Invalid(
            absl::StrCat(what, ".data[", i, "] is ", JsonTypeName(v), ", not a string (BYTES)"));
      }
      total += 4 + v.GetStringLength();
    }
    if (total - 4 * n > limits.max_tensor_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          what, " has more than ", limits.max_tensor_bytes, " bytes (--max_tensor_bytes)"));
    }
    out.reserve(total);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t len = elems[i]->GetStringLength();
      char prefix[4];
      std::memcpy(prefix, &len, 4);
      out.append(prefix, 4);
      out.append(elems[i]->GetString(), len);
    }
    return out;
  }
  out.resize(static_cast<size_t>(bytes));
  char* dst = out.data();
  for (int64_t i = 0; i < n; ++i) {
    const rapidjson::Value& v = *elems[i];
    switch (dtype) {
      case DType::kBool: {
        if (!v.IsBool()) {
          return Invalid(absl::StrCat(what, ".data[", i, "] is ", JsonTypeName(v),
                                      ", not true or false (BOOL)"));
        }
        dst[i] = v.GetBool() ? 1 : 0;
        break;
      }
      case DType::kInt8:
        RETURN_IF_ERROR(PutInteger<int8_t>(v, what, i, dst));
        break;
      case DType::kInt16:
        RETURN_IF_ERROR(PutInteger<int16_t>(v, what, i, dst));
        break;
      case DType::kInt32:
        RETURN_IF_ERROR(PutInteger<int32_t>(v, what, i, dst));
        break;
      case DType::kInt64:
        RETURN_IF_ERROR(PutInteger<int64_t>(v, what, i, dst));
        break;
      case DType::kUInt8:
        RETURN_IF_ERROR(PutInteger<uint8_t>(v, what, i, dst));
        break;
      case DType::kUInt16:
        RETURN_IF_ERROR(PutInteger<uint16_t>(v, what, i, dst));
        break;
      case DType::kUInt32:
        RETURN_IF_ERROR(PutInteger<uint32_t>(v, what, i, dst));
        break;
      case DType::kUInt64:
        RETURN_IF_ERROR(PutInteger<uint64_t>(v, what, i, dst));
        break;
      case DType::kFloat32:
      case DType::kFloat64:
      case DType::kFloat16:
      case DType::kBFloat16: {
        if (!v.IsNumber()) {
          return Invalid(
              absl::StrCat(what, ".data[", i, "] is ", JsonTypeName(v), ", not a number"));
        }
        const double d = v.GetDouble();
        if (dtype == DType::kFloat32) {
          const float f = DoubleToFloat(d);
          std::memcpy(dst + 4 * i, &f, 4);
        } else if (dtype == DType::kFloat64) {
          std::memcpy(dst + 8 * i, &d, 8);
        } else {
          const uint16_t h = dtype == DType::kFloat16 ? DoubleToHalf(d) : DoubleToBFloat16(d);
          std::memcpy(dst + 2 * i, &h, 2);
        }
        break;
      }
      default:
        return Invalid(what, ": this datatype has no JSON form");
    }
  }
  return out;
}

// Writes a float in its shortest round-trip form ("-0.0" keeps its sign
// through parsers that read "-0" as the integer 0).
template <typename F>
void WriteFloat(JsonWriter& w, F x) {
  if (std::isnan(x)) {
    w.RawValue("NaN", 3, rapidjson::kNumberType);
  } else if (std::isinf(x)) {
    if (x > 0) {
      w.RawValue("Infinity", 8, rapidjson::kNumberType);
    } else {
      w.RawValue("-Infinity", 9, rapidjson::kNumberType);
    }
  } else if (x == 0 && std::signbit(x)) {
    w.RawValue("-0.0", 4, rapidjson::kNumberType);
  } else {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof(buf), x);
    w.RawValue(buf, r.ptr - buf, rapidjson::kNumberType);
  }
}

template <typename T>
T Load(const char* p, int64_t i) {
  T t;
  std::memcpy(&t, p + i * sizeof(T), sizeof(T));
  return t;
}

// One output's raw data as a JSON array (flat). False: a BYTES element that
// is not UTF-8.
bool WriteData(JsonWriter& w, DType dtype, const std::string& raw, int64_t n) {
  const char* p = raw.data();
  w.StartArray();
  if (dtype == DType::kString) {
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
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::kBool:
        w.Bool(p[i] != 0);
        break;
      case DType::kInt8:
        w.Int(Load<int8_t>(p, i));
        break;
      case DType::kInt16:
        w.Int(Load<int16_t>(p, i));
        break;
      case DType::kInt32:
        w.Int(Load<int32_t>(p, i));
        break;
      case DType::kInt64:
        w.Int64(Load<int64_t>(p, i));
        break;
      case DType::kUInt8:
        w.Uint(Load<uint8_t>(p, i));
        break;
      case DType::kUInt16:
        w.Uint(Load<uint16_t>(p, i));
        break;
      case DType::kUInt32:
        w.Uint(Load<uint32_t>(p, i));
        break;
      case DType::kUInt64:
        w.Uint64(Load<uint64_t>(p, i));
        break;
      case DType::kFloat32:
        WriteFloat(w, Load<float>(p, i));
        break;
      case DType::kFloat64:
        WriteFloat(w, Load<double>(p, i));
        break;
      case DType::kFloat16:
        WriteFloat(w, HalfToFloat(Load<uint16_t>(p, i)));
        break;
      case DType::kBFloat16:
        WriteFloat(w, BFloat16ToFloat(Load<uint16_t>(p, i)));
        break;
      default:
        w.Null();
        break;
    }
  }
  w.EndArray();
  return true;
}

}  // namespace

struct JsonInferRequest::Impl {
  rapidjson::Document doc;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::string> converted;  // JSON data in raw form
  bool has_id = false;
  bool binary_output_default = false;
  std::vector<std::pair<std::string, bool>> output_binary;  // requested outputs' binary_data
  std::vector<std::string> output_shm;                      // outputs in shared memory
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
  rapidjson::Document& doc = impl.doc;
  doc.Parse<kParseFlags>(json.data(), json.size());
  if (doc.HasParseError()) {
    return Invalid(absl::StrCat("malformed JSON at byte ", doc.GetErrorOffset(), ": ",
                                rapidjson::GetParseError_En(doc.GetParseError())));
  }
  if (!doc.IsObject()) return Invalid("the request must be a JSON object");
  InferRequest& req = r->request_;
  req.model_name = model;
  req.model_version = version;
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    const absl::string_view key(it->name.GetString(), it->name.GetStringLength());
    if (key != "id" && key != "parameters" && key != "inputs" && key != "outputs") {
      return Invalid(absl::StrCat("unknown field '", key,
                                  "'; a request has id, parameters, inputs and outputs"));
    }
  }
  if (auto it = doc.FindMember("id"); it != doc.MemberEnd()) {
    if (!it->value.IsString()) return Invalid("id must be a string");
    req.id = absl::string_view(it->value.GetString(), it->value.GetStringLength());
    impl.has_id = true;
  }
  if (auto it = doc.FindMember("parameters"); it != doc.MemberEnd()) {
    RETURN_IF_ERROR(ToParams(it->value, "request", &req.parameters));
    for (const auto& [key, p] : req.parameters) {
      if (key == kBinaryDataOutput) {
        if (p.kind != InferParam::Kind::kBool) {
          return Invalid("request.parameters.binary_data_output must be true or false");
        }
        impl.binary_output_default = p.bool_value;
      }
    }
  }
  auto inputs = doc.FindMember("inputs");
  if (inputs == doc.MemberEnd() || !inputs->value.IsArray()) {
    return Invalid("inputs must be an array of tensors");
  }
  const rapidjson::Value& ins = inputs->value;
  impl.shapes.resize(ins.Size());
  impl.converted.reserve(ins.Size());
  req.inputs.reserve(ins.Size());
  size_t binary_at = 0;
  for (rapidjson::SizeType i = 0; i < ins.Size(); ++i) {
    const rapidjson::Value& t = ins[i];
    std::string what = absl::StrCat("inputs[", i, "]");
    if (!t.IsObject()) return Invalid(what, " must be an object");
    InferInput in;
    auto name = t.FindMember("name");
    if (name == t.MemberEnd() || !name->value.IsString()) {
      return Invalid(what, ".name must be a string");
    }
    in.name = absl::string_view(name->value.GetString(), name->value.GetStringLength());
    what = absl::StrCat("input '", in.name, "'");
    auto datatype = t.FindMember("datatype");
    if (datatype == t.MemberEnd() || !datatype->value.IsString()) {
      return Invalid(what, ".datatype must be a string");
    }
    in.datatype = absl::string_view(datatype->value.GetString(), datatype->value.GetStringLength());
    const DType dtype = DTypeFromOip(in.datatype);
    if (dtype == DType::kInvalid) {
      return Invalid(absl::StrCat(
          what, ": datatype '", in.datatype,
          "' is not one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, "
          "FP16, FP32, FP64, BYTES, BF16"));
    }
    auto shape = t.FindMember("shape");
    if (shape == t.MemberEnd() || !shape->value.IsArray()) {
      return Invalid(what, ".shape must be an array of integers");
    }
    std::vector<int64_t>& dims = impl.shapes[i];
    for (rapidjson::SizeType d = 0; d < shape->value.Size(); ++d) {
      const rapidjson::Value& v = shape->value[d];
      if (!v.IsInt64() || v.GetInt64() < 0) {
        return Invalid(absl::StrCat(what, ".shape[", d, "] must be an integer >= 0"));
      }
      dims.push_back(v.GetInt64());
    }
    in.shape = dims;
    for (auto m = t.MemberBegin(); m != t.MemberEnd(); ++m) {
      const absl::string_view key(m->name.GetString(), m->name.GetStringLength());
      if (key != "name" && key != "datatype" && key != "shape" && key != "parameters" &&
          key != "data") {
        return Invalid(absl::StrCat(what, ": unknown field '", key, "'"));
      }
    }
    std::optional<int64_t> binary_size;
    bool in_shm = false;
    if (auto params = t.FindMember("parameters"); params != t.MemberEnd()) {
      InferParams all;
      RETURN_IF_ERROR(ToParams(params->value, what, &all));
      for (auto& [key, p] : all) {
        if (key == kBinaryDataSize) {
          if (p.kind != InferParam::Kind::kInt64 || p.int64_value < 0) {
            return Invalid(what, ".parameters.binary_data_size must be an integer >= 0");
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
      return Invalid(what,
                     " has more than one of data, binary_data_size and "
                     "shared_memory_region; give exactly one");
    }
    if (binary_size.has_value()) {
      if (static_cast<uint64_t>(*binary_size) > binary.size() - binary_at) {
        return Invalid(absl::StrCat(what, ": binary_data_size ", *binary_size, " but only ",
                                    binary.size() - binary_at,
                                    " bytes of binary data are left after the JSON"));
      }
      const absl::string_view block = binary.substr(binary_at, static_cast<size_t>(*binary_size));
      binary_at += block.size();
      if (dtype != DType::kString) {
        ASSIGN_OR_RETURN(const int64_t need, CheckShape(dtype, dims, what, limits));
        if (need != *binary_size) {
          return Invalid(absl::StrCat(what, ": binary_data_size is ", *binary_size, " but shape ",
                                      ShapeToString(dims), " of ", in.datatype, " needs ", need));
        }
      }
      req.raw_inputs.push_back(block);
    } else if (data != t.MemberEnd()) {
      ASSIGN_OR_RETURN(std::string raw, ConvertData(data->value, dtype, dims, what, limits));
      impl.converted.push_back(std::move(raw));
      req.raw_inputs.push_back(impl.converted.back());
    } else if (!in_shm) {
      return Invalid(what, " has no data: give data, binary_data_size or shared_memory_region");
    }
    req.inputs.push_back(std::move(in));
  }
  if (binary_at != binary.size()) {
    return Invalid(absl::StrCat("the body has ", binary.size() - binary_at,
                                " bytes after the JSON and the inputs' binary_data_size; "
                                "Inference-Header-Content-Length or a binary_data_size is wrong"));
  }
  if (auto outputs = doc.FindMember("outputs"); outputs != doc.MemberEnd()) {
    if (!outputs->value.IsArray()) return Invalid("outputs must be an array");
    for (rapidjson::SizeType i = 0; i < outputs->value.Size(); ++i) {
      const rapidjson::Value& o = outputs->value[i];
      const std::string what = absl::StrCat("outputs[", i, "]");
      if (!o.IsObject()) return Invalid(what, " must be an object");
      auto name = o.FindMember("name");
      if (name == o.MemberEnd() || !name->value.IsString()) {
        return Invalid(what, ".name must be a string");
      }
      InferRequestedOutput out;
      out.name = absl::string_view(name->value.GetString(), name->value.GetStringLength());
      for (auto m = o.MemberBegin(); m != o.MemberEnd(); ++m) {
        const absl::string_view key(m->name.GetString(), m->name.GetStringLength());
        if (key != "name" && key != "parameters") {
          return Invalid(absl::StrCat(what, ": unknown field '", key, "'"));
        }
      }
      const std::string owhat = absl::StrCat("output '", out.name, "'");
      bool in_shm = false;
      std::optional<bool> binary_data;
      if (auto params = o.FindMember("parameters"); params != o.MemberEnd()) {
        InferParams all;
        RETURN_IF_ERROR(ToParams(params->value, owhat, &all));
        for (auto& [key, p] : all) {
          if (key == kBinaryData) {
            if (p.kind != InferParam::Kind::kBool) {
              return Invalid(owhat, ".parameters.binary_data must be true or false");
            }
            binary_data = p.bool_value;
          } else {
            if (key == kShmRegion) in_shm = true;
            out.parameters.emplace_back(key, p);
          }
        }
      }
      if (in_shm && binary_data.value_or(false)) {
        return Invalid(owhat, " has both shared_memory_region and binary_data; use one");
      }
      if (binary_data.has_value()) impl.output_binary.emplace_back(out.name, *binary_data);
      if (in_shm) impl.output_shm.emplace_back(out.name);
      req.outputs.push_back(std::move(out));
    }
  }
  return r;
}

bool JsonInferRequest::OutputBinary(absl::string_view name) const {
  for (const auto& [n, b] : impl_->output_binary) {
    if (n == name) return b;
  }
  return impl_->binary_output_default;
}

bool JsonInferRequest::has_id() const { return impl_->has_id; }

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
  out.data.resize(static_cast<size_t>(bytes));
  outputs_.push_back(std::move(out));
  return outputs_.back().data.data();
}

absl::Status JsonInferResponse::Encode(const JsonInferRequest& request, std::string* json,
                                       std::vector<std::string>* binary) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
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
      w.Int64(static_cast<int64_t>(out.data.size()));
      w.EndObject();
      binary->push_back(std::move(out.data));
    } else {
      w.Key("data");
      if (!WriteData(w, DTypeFromOip(out.datatype), out.data, Count(out.shape))) {
        return Invalid(absl::StrCat("output '", out.name,
                                    "' has BYTES that are not UTF-8 and cannot be a JSON string; "
                                    "ask for it with \"parameters\": {\"binary_data\": true}"));
      }
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  json->assign(buffer.GetString(), buffer.GetSize());
  return absl::OkStatus();
}

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      // A tensor over a size limit names its flag; the rest is admission (overloaded).
      return status.message().find("(--max_") != absl::string_view::npos ? 413 : 503;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kCancelled:
      return 499;
    default:
      return 500;
  }
}

std::string ErrorJson(absl::string_view message) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("error");
  // Messages may quote what a client sent: keep the JSON valid whatever it is.
  std::string text(message);
  for (char& c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  w.String(text.data(), text.size());
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace tensorops
