#include "server/http/json_binding.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/dtype.h"
#include "kernels/float_formats.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "rapidjson/memorystream.h"
#include "rapidjson/reader.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "server/oip/oip_codec.h"
#include "wire/dtypes.h"
#include "wire/status_details.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "json_binding.cc assumes a little-endian host (binary blocks are used in place)"
#endif

namespace tensorops {
namespace {

// Iterative parsing (no recursion: deep nesting cannot overflow the stack),
// NaN/Infinity tokens, UTF-8 checked. Numbers come as their checked text and
// RequestHandler::RawNumber converts them (std::from_chars: the nearest
// double): RapidJSON 1.1.0's own full-precision strtod reads out of bounds on
// some inputs ("NaNe1", a fraction of some hundred zeros; found by
// fuzz_rest_infer under ASan and UBSan).
constexpr unsigned kParseFlags =
    rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag |
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

// One element of an input's `data`, as the SAX parser delivered it (the
// DOM never holds `data`: a 16 MiB FP32 tensor would be 4 M DOM values).
struct JsonElem {
  enum class Kind : uint8_t { kNull, kBool, kInt, kUint, kDouble, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool b = false;
  uint32_t len = 0;  // kString: bytes at `off` of the string arena
  union {
    int64_t i = 0;  // kInt (every integer that fits int64)
    uint64_t u;     // kUint (above INT64_MAX)
    double d;       // kDouble
    uint64_t off;   // kString
  };
};

const char* JsonTypeName(const JsonElem& e) {
  switch (e.kind) {
    case JsonElem::Kind::kNull:
      return "null";
    case JsonElem::Kind::kBool:
      return "a boolean";
    case JsonElem::Kind::kInt:
    case JsonElem::Kind::kUint:
    case JsonElem::Kind::kDouble:
      return "a number";
    case JsonElem::Kind::kString:
      return "a string";
    case JsonElem::Kind::kArray:
      return "an array";
    case JsonElem::Kind::kObject:
      return "an object";
  }
  return "a value";
}

double AsDouble(const JsonElem& e) {
  if (e.kind == JsonElem::Kind::kInt) return static_cast<double>(e.i);
  if (e.kind == JsonElem::Kind::kUint) return static_cast<double>(e.u);
  return e.d;
}

template <typename T>
absl::Status PutInteger(const JsonElem& v, absl::string_view what, int64_t i, char* dst) {
  if constexpr (std::is_same_v<T, uint64_t>) {
    if ((v.kind == JsonElem::Kind::kInt && v.i >= 0) || v.kind == JsonElem::Kind::kUint) {
      const uint64_t x = v.kind == JsonElem::Kind::kInt ? static_cast<uint64_t>(v.i) : v.u;
      std::memcpy(dst + i * sizeof(T), &x, sizeof(T));
      return absl::OkStatus();
    }
  } else {
    if (v.kind == JsonElem::Kind::kInt) {
      const int64_t x = v.i;
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
  if (v.kind == JsonElem::Kind::kInt || v.kind == JsonElem::Kind::kUint ||
      v.kind == JsonElem::Kind::kDouble) {
    return Invalid(absl::StrCat(what, ".data[", i, "] is not an integer in range"));
  }
  return Invalid(absl::StrCat(what, ".data[", i, "] is ", JsonTypeName(v), ", not an integer"));
}

// Element `i` of a non-BYTES `dtype` into the raw buffer `dst`.
absl::Status PutElement(DType dtype, const JsonElem& v, absl::string_view what, int64_t i,
                        char* dst) {
  switch (dtype) {
    case DType::kBool:
      if (v.kind != JsonElem::Kind::kBool) {
        return Invalid(absl::StrCat(what, ".data[", i, "] is ", JsonTypeName(v),
                                    ", not true or false (BOOL)"));
      }
      dst[i] = v.b ? 1 : 0;
      return absl::OkStatus();
    case DType::kInt8:
      return PutInteger<int8_t>(v, what, i, dst);
    case DType::kInt16:
      return PutInteger<int16_t>(v, what, i, dst);
    case DType::kInt32:
      return PutInteger<int32_t>(v, what, i, dst);
    case DType::kInt64:
      return PutInteger<int64_t>(v, what, i, dst);
    case DType::kUInt8:
      return PutInteger<uint8_t>(v, what, i, dst);
    case DType::kUInt16:
      return PutInteger<uint16_t>(v, what, i, dst);
    case DType::kUInt32:
      return PutInteger<uint32_t>(v, what, i, dst);
    case DType::kUInt64:
      return PutInteger<uint64_t>(v, what, i, dst);
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
    case DType::kBFloat16: {
      if (v.kind != JsonElem::Kind::kInt && v.kind != JsonElem::Kind::kUint &&
          v.kind != JsonElem::Kind::kDouble) {
        return Invalid(absl::StrCat(what, ".data[", i, "] is ", JsonTypeName(v), ", not a number"));
      }
      const double d = AsDouble(v);
      if (dtype == DType::kFloat32) {
        const float f = DoubleToFloat(d);
        std::memcpy(dst + 4 * i, &f, 4);
      } else if (dtype == DType::kFloat64) {
        std::memcpy(dst + 8 * i, &d, 8);
      } else {
        const uint16_t h = dtype == DType::kFloat16 ? DoubleToHalf(d) : DoubleToBFloat16(d);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return absl::OkStatus();
    }
    default:
      return Invalid(what, ": this datatype has no JSON form");
  }
}

std::string CountError(absl::string_view what, int64_t got, int64_t n,
                       absl::Span<const int64_t> dims) {
  return absl::StrCat(what, ".data has ", got > n ? "more than " : "", got > n ? n : got,
                      " elements but shape ", ShapeToString(dims), " needs ", n);
}

// An input's `data` as the parser left it: converted on the fly into `raw`
// when the input's datatype and shape came before its data (`direct`), else
// the elements (`elems`, at most n + 1 kept) for ConvertData.
struct CapturedData {
  bool seen = false;
  bool duplicate = false;  // "data" twice in one input
  bool direct = false;
  DType dtype = DType::kInvalid;  // direct only
  int64_t count = 0;              // elements seen (direct: up to n + 1)
  int64_t n = 0;                  // direct: elements the shape needs
  std::vector<int64_t> dims;      // direct: the shape it was converted for
  absl::Status first_error;       // direct: the first bad element
  std::string raw;                // direct: the converted data
  std::vector<JsonElem> elems;    // otherwise
};

// JSON `data` elements -> the raw form of `dtype` (BYTES: 4-byte length +
// bytes; their text in `arena`).
absl::StatusOr<std::string> ConvertData(const CapturedData& data, const std::string& arena,
                                        DType dtype, absl::Span<const int64_t> dims,
                                        absl::string_view what, const RequestLimits& limits) {
  ASSIGN_OR_RETURN(const int64_t bytes,
                   CheckShape(dtype, dims, what, limits, dtype == DType::kString ? 0 : -1));
  const int64_t n = Count(dims);
  const std::vector<JsonElem>& elems = data.elems;
  if (static_cast<int64_t>(elems.size()) != n) {
    return Invalid(CountError(what, static_cast<int64_t>(elems.size()), n, dims));
  }
  std::string out;
  if (dtype == DType::kString) {
    int64_t total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const JsonElem& v = elems[i];
      if (v.kind != JsonElem::Kind::kString) {
        return Invalid(
            absl::StrCat(what, ".data[", i, "] is ", JsonTypeName(v), ", not a string (BYTES)"));
      }
      total += 4 + v.len;
    }
    if (total - 4 * n > limits.max_tensor_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          what, " has more than ", limits.max_tensor_bytes, " bytes (--max_tensor_bytes)"));
    }
    out.reserve(total);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t len = elems[i].len;
      char prefix[4];
      std::memcpy(prefix, &len, 4);
      out.append(prefix, 4);
      out.append(arena, elems[i].off, len);
    }
    return out;
  }
  out.resize(static_cast<size_t>(bytes));
  for (int64_t i = 0; i < n; ++i) {
    RETURN_IF_ERROR(PutElement(dtype, elems[i], what, i, out.data()));
  }
  return out;
}

// Forwards the SAX events of a request body to a Document, except the value
// of each inputs[i].data: the Document gets null there, and the elements go
// to captured[i] (see CapturedData) instead. Everything else (ids,
// parameters, shapes, outputs) is checked on the Document afterwards.
class RequestHandler {
 public:
  // `stream` is the one the reader parses: StartArray of captured data reads
  // plain numbers from it directly (FastNumbers).
  RequestHandler(rapidjson::Document* doc, const RequestLimits& limits,
                 std::vector<CapturedData>* captured, std::string* arena,
                 rapidjson::MemoryStream* stream)
      : doc_(doc), limits_(limits), captured_(captured), arena_(arena), stream_(stream) {}

  bool Null() {
    return Scalar(JsonElem{}, [&] { return doc_->Null(); });
  }
  bool Bool(bool b) {
    JsonElem e;
    e.kind = JsonElem::Kind::kBool;
    e.b = b;
    return Scalar(e, [&] { return doc_->Bool(b); });
  }
  bool Int(int i) {
    return Integer(i, [&] { return doc_->Int(i); });
  }
  bool Uint(unsigned u) {
    return Integer(u, [&] { return doc_->Uint(u); });
  }
  bool Int64(int64_t i) {
    return Integer(i, [&] { return doc_->Int64(i); });
  }
  bool Uint64(uint64_t u) {
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Integer(static_cast<int64_t>(u), [&] { return doc_->Uint64(u); });
    }
    JsonElem e;
    e.kind = JsonElem::Kind::kUint;
    e.u = u;
    return Scalar(e, [&] { return doc_->Uint64(u); });
  }
  bool Double(double d) {
    JsonElem e;
    e.kind = JsonElem::Kind::kDouble;
    e.d = d;
    return Scalar(e, [&] { return doc_->Double(d); });
  }
  // A number's text, its grammar checked by RapidJSON, turned into the
  // event RapidJSON itself would send: integers as Uint (< 2^32), Int
  // (>= -2^31), Uint64 or Int64, past 64 bits a double; any fraction or
  // exponent a double; NaN, Inf and Infinity (signed) a double. False (the
  // parse stops; number_error() says why) for a value past a double's range
  // or a NaN/Infinity with a fraction or exponent.
  bool RawNumber(const char* str, rapidjson::SizeType len, bool) {
    const absl::string_view text(str, len);
    const bool minus = !text.empty() && text[0] == '-';
    const absl::string_view digits = text.substr(minus ? 1 : 0);
    if (!digits.empty() && (digits[0] == 'N' || digits[0] == 'I')) {
      if (digits == "NaN") return Double(std::numeric_limits<double>::quiet_NaN());
      if (digits == "Inf" || digits == "Infinity") {
        return Double(minus ? -std::numeric_limits<double>::infinity()
                            : std::numeric_limits<double>::infinity());
      }
      number_error_ = "NaN and Infinity take no fraction or exponent";
      return false;
    }
    const bool real = std::any_of(digits.begin(), digits.end(),
                                  [](char c) { return c == '.' || c == 'e' || c == 'E'; });
    return Number(str, len, minus, real);
  }
  // Why RawNumber stopped the parse; empty when it did not.
  const std::string& number_error() const { return number_error_; }

  bool String(const char* str, rapidjson::SizeType len, bool copy) {
    if (skip_depth_ > 0) return true;
    if (capture_depth_ > 0 || pending_data_) {
      JsonElem e;
      e.kind = JsonElem::Kind::kString;
      e.len = len;
      e.off = arena_->size();
      return Scalar(
          e, [] { return true; }, absl::string_view(str, len));
    }
    if (level_ == 3 && in_inputs_) {
      if (key_ == "datatype" && !dtype_seen_) {
        dtype_seen_ = true;
        dtype_ = DTypeFromOip(absl::string_view(str, len));
      } else if (key_ == "name" && !name_seen_) {
        name_seen_ = true;
        name_.assign(str, len);
      }
    }
    if (shape_open_) shape_ok_ = false;
    OnValue();
    return doc_->String(str, len, copy);
  }
  bool StartObject() {
    if (skip_depth_ > 0) {
      ++skip_depth_;
      return true;
    }
    if (capture_depth_ > 0 || pending_data_) {
      // An object where an element belongs: one (bad) element; its
      // contents are skipped.
      JsonElem e;
      e.kind = JsonElem::Kind::kObject;
      if (pending_data_) Begin();
      Add(e);
      skip_depth_ = 1;
      return true;
    }
    if (shape_open_) shape_ok_ = false;
    OnValue();
    ++level_;
    return doc_->StartObject();
  }
  bool Key(const char* str, rapidjson::SizeType len, bool copy) {
    if (skip_depth_ > 0) return true;
    const absl::string_view key(str, len);
    if (level_ == 1) root_key_.assign(str, len);
    if (level_ == 3 && in_inputs_) {
      key_.assign(str, len);
      pending_data_ = key == "data";
    }
    return doc_->Key(str, len, copy);
  }
  bool EndObject(rapidjson::SizeType members) {
    if (skip_depth_ > 0) {
      if (--skip_depth_ == 0 && capture_depth_ == 0) End();
      return true;
    }
    --level_;
    return doc_->EndObject(members);
  }
  bool StartArray() {
    if (skip_depth_ > 0) return true;
    if (capture_depth_ > 0) {
      ++capture_depth_;  // nested data: flattened in row-major order
      FastNumbers();
      return true;
    }
    if (pending_data_) {
      Begin();
      capture_depth_ = 1;
      FastNumbers();
      return true;
    }
    if (shape_open_) shape_ok_ = false;
    OnValue();
    if (level_ == 1 && root_key_ == "inputs") in_inputs_ = true;
    if (level_ == 3 && in_inputs_ && key_ == "shape" && !shape_seen_) {
      shape_open_ = true;
      shape_ok_ = true;
    }
    ++level_;
    return doc_->StartArray();
  }
  bool EndArray(rapidjson::SizeType elements) {
    if (skip_depth_ > 0) return true;
    if (capture_depth_ > 0) {
      if (--capture_depth_ == 0) End();
      return true;
    }
    --level_;
    if (level_ == 1) in_inputs_ = false;
    if (level_ == 3 && shape_open_) {
      shape_open_ = false;
      shape_seen_ = true;
    }
    return doc_->EndArray(elements);
  }

 private:
  // RawNumber's conversion of a checked number `str` (with a fraction or an
  // exponent when `real`), also FastNumbers', which knows `real` already.
  bool Number(const char* str, size_t len, bool minus, bool real) {
    const absl::string_view text(str, len);
    if (!real) {
      const char* const digits = str + (minus ? 1 : 0);
      uint64_t u = 0;
      const auto [at, ec] = std::from_chars(digits, str + len, u);
      if (ec == std::errc() && at == str + len) {
        if (!minus) {
          if (u <= std::numeric_limits<uint32_t>::max()) return Uint(static_cast<unsigned>(u));
          return Uint64(u);
        }
        if (u <= uint64_t{1} << 31) return Int(static_cast<int>(-static_cast<int64_t>(u)));
        if (u <= uint64_t{1} << 63) return Int64(static_cast<int64_t>(~u + 1));
      }
      // Past 64 bits: a double, as RapidJSON reads it.
    }
    double d = 0;
    const auto [at, ec] = std::from_chars(str, str + len, d);
    if (ec == std::errc::result_out_of_range) {
      // Past a double's range: an error; under its smallest value: zero.
      const size_t e = text.find_first_of("eE");
      const bool tiny = e != absl::string_view::npos && e + 1 < text.size() && text[e + 1] == '-';
      if (!tiny) {
        number_error_ = absl::StrCat("the number ", text.substr(0, 40), " is too big for a double");
        return false;
      }
      d = minus ? -0.0 : 0.0;
    } else if (ec != std::errc() || at != str + len) {
      number_error_ = absl::StrCat("cannot read the number ", text.substr(0, 40));
      return false;
    }
    return Double(d);
  }

  template <typename Forward>
  bool Integer(int64_t i, Forward forward) {
    JsonElem e;
    e.kind = JsonElem::Kind::kInt;
    e.i = i;
    if (shape_open_ && skip_depth_ == 0 && capture_depth_ == 0 && !pending_data_) {
      if (level_ == 4 && i >= 0) {
        dims_.push_back(i);
      } else {
        shape_ok_ = false;
      }
    }
    return Scalar(e, forward);
  }

  // A scalar: an element of captured data (string text in `text`), or
  // forwarded to the Document.
  template <typename Forward>
  bool Scalar(const JsonElem& e, Forward forward, absl::string_view text = {}) {
    if (skip_depth_ > 0) return true;
    if (capture_depth_ > 0 || pending_data_) {
      const bool single = pending_data_;  // data given as one scalar
      if (single) Begin();
      if (Add(e) && e.kind == JsonElem::Kind::kString) arena_->append(text.data(), text.size());
      if (single) End();
      return true;
    }
    if (shape_open_ && e.kind != JsonElem::Kind::kInt) shape_ok_ = false;
    OnValue();
    return forward();
  }

  // A value starts at the current level: at level 2 of the inputs array it
  // is the next input.
  void OnValue() {
    if (level_ == 2 && in_inputs_) {
      ++input_;
      name_seen_ = dtype_seen_ = shape_seen_ = shape_open_ = false;
      shape_ok_ = false;
      dims_.clear();
      name_.clear();
      key_.clear();
      dtype_ = DType::kInvalid;
    }
  }

  // inputs[input_].data begins: converted directly when its datatype and
  // shape came first and pass the limits, else kept as elements.
  void Begin() {
    pending_data_ = false;
    doc_->Null();  // the member's value in the Document
    if (static_cast<int64_t>(captured_->size()) <= input_) captured_->resize(input_ + 1);
    c_ = &(*captured_)[input_];
    if (c_->seen) {
      c_->duplicate = true;
      return;
    }
    c_->seen = true;
    if (!dtype_seen_ || dtype_ == DType::kInvalid || dtype_ == DType::kString || !shape_seen_ ||
        !shape_ok_) {
      return;
    }
    what_ = name_seen_ ? absl::StrCat("input '", name_, "'") : absl::StrCat("inputs[", input_, "]");
    absl::StatusOr<int64_t> bytes = CheckShape(dtype_, dims_, what_, limits_);
    if (!bytes.ok()) return;  // reported in order by the checks on the Document
    c_->direct = true;
    c_->dtype = dtype_;
    c_->dims = dims_;
    c_->n = Count(dims_);
    c_->raw.resize(static_cast<size_t>(*bytes));
  }

  // One element; false when it is not kept (past the count that matters).
  bool Add(const JsonElem& e) {
    if (c_->duplicate) return false;
    if (c_->direct) {
      if (c_->count < c_->n) {
        if (c_->first_error.ok()) {
          absl::Status s = PutElement(c_->dtype, e, what_, c_->count, c_->raw.data());
          if (!s.ok()) c_->first_error = std::move(s);
        }
      } else if (c_->count > c_->n) {
        return false;
      }
      ++c_->count;
      return true;
    }
    // Kept for ConvertData, which needs the shape's count + 1 at most.
    if (static_cast<int64_t>(c_->elems.size()) > limits_.max_tensor_elements) return false;
    c_->elems.push_back(e);
    return true;
  }

  void End() { c_ = nullptr; }

  // At a captured array's '[': takes the run of plain numbers that
  // follows straight from the stream, each converted as RapidJSON would (the
  // same events, so the same elements and errors) but without its
  // character-at-a-time tokenizer and its full-precision strtod (std::from_chars
  // is libstdc++'s fast_float): the data of a big tensor is nearly all of a
  // JSON body. Stops, leaving the stream where RapidJSON takes over, at the
  // first element that is not a plain number (a nested array, a string,
  // NaN/Infinity, anything malformed, a number past a double's range) and
  // before a number that a ']' or a ',' and another value do not follow (so
  // "[1 2]" and "[1,]" still fail as RapidJSON fails them).
  void FastNumbers() {
    if (c_ == nullptr || c_->duplicate || stream_ == nullptr) return;
    // RapidJSON's iterative parser calls StartArray before it takes the '['.
    if (stream_->src_ >= stream_->end_ || *stream_->src_ != '[') return;
    const char* const end = stream_->end_;
    auto skip_ws = [end](const char* p) {
      while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
      return p;
    };
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    const char* pos = stream_->src_ + 1;  // where RapidJSON resumes
    while (true) {
      const char* q = skip_ws(pos);
      const char* const start = q;
      // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
      const bool minus = q < end && *q == '-';
      if (minus) ++q;
      if (q >= end || !digit(*q)) break;
      if (*q == '0') {
        ++q;
      } else {
        while (q < end && digit(*q)) ++q;
      }
      bool real = false;
      if (q < end && *q == '.') {
        ++q;
        if (q >= end || !digit(*q)) break;
        while (q < end && digit(*q)) ++q;
        real = true;
      }
      if (q < end && (*q == 'e' || *q == 'E')) {
        ++q;
        if (q < end && (*q == '+' || *q == '-')) ++q;
        if (q >= end || !digit(*q)) break;
        while (q < end && digit(*q)) ++q;
        real = true;
      }
      // What follows: ']' ends the run; ',' and another value continue it.
      const char* const after = skip_ws(q);
      if (after >= end || (*after != ']' && *after != ',')) break;
      if (*after == ',') {
        const char* const next = skip_ws(after + 1);
        if (next >= end || *next == ']') break;  // "[1,]": RapidJSON's error
      }
      // Converted as the numbers RapidJSON tokenizes itself are; one it
      // refuses (past a double's range) is left to it to report.
      if (!Number(start, static_cast<size_t>(q - start), minus, real)) break;
      if (*after == ']') {
        pos = after;
        break;
      }
      pos = after + 1;
    }
    stream_->src_ = pos - 1;  // RapidJSON's Take() of "the '['" lands on pos
  }

  rapidjson::Document* const doc_;
  const RequestLimits& limits_;
  std::vector<CapturedData>* const captured_;
  std::string* const arena_;

  int level_ = 0;         // open containers the Document sees
  std::string root_key_;  // the last key of the root object
  bool in_inputs_ = false;
  int64_t input_ = -1;  // the current input's index
  std::string key_;     // its last key
  bool name_seen_ = false, dtype_seen_ = false, shape_seen_ = false;
  bool shape_open_ = false, shape_ok_ = false;
  std::string name_;
  DType dtype_ = DType::kInvalid;
  std::vector<int64_t> dims_;
  std::string what_;

  bool pending_data_ = false;  // the next value is inputs[input_].data
  int capture_depth_ = 0;      // open arrays of captured data
  int skip_depth_ = 0;         // open objects inside captured data
  CapturedData* c_ = nullptr;
  rapidjson::MemoryStream* const stream_;
  std::string number_error_;
};

// A float's shortest round-trip text at [p, end) (24 bytes are enough); NaN and
// the infinities as the bare tokens, "-0.0" keeping its sign through
// parsers that read "-0" as the integer 0. Returns the end.
template <typename F>
char* FloatText(F x, char* p, char* end) {
  auto put = [p](const char* text, size_t n) {
    std::memcpy(p, text, n);
    return p + n;
  };
  if (std::isnan(x)) return put("NaN", 3);
  if (std::isinf(x)) return x > 0 ? put("Infinity", 8) : put("-Infinity", 9);
  if (x == 0 && std::signbit(x)) return put("-0.0", 4);
  return std::to_chars(p, end, x).ptr;
}

template <typename T>
T Load(const char* p, int64_t i) {
  T t;
  std::memcpy(&t, p + i * sizeof(T), sizeof(T));
  return t;
}

// The most text one element takes, its ',' included (a double's shortest
// form is at most 24 characters).
constexpr int64_t kMaxNumberText = 26;

// One output's elements (not BYTES) as a flat JSON array, written straight
// into `out`, which has room for 2 + n * kMaxNumberText bytes (a 16 MiB FP32
// output is ~45 MB of text: no writer call and no append per value).
// Returns the length.
int64_t WriteNumbers(DType dtype, const char* p, int64_t n, char* out) {
  char* e = out;
  *e++ = '[';
  for (int64_t i = 0; i < n; ++i) {
    char* const buf = e;  // to_chars' end: room for this element
    if (i > 0) *e++ = ',';
    switch (dtype) {
      case DType::kBool:
        e = p[i] != 0 ? (std::memcpy(e, "true", 4), e + 4) : (std::memcpy(e, "false", 5), e + 5);
        break;
      case DType::kInt8:
        e = std::to_chars(e, buf + kMaxNumberText, Load<int8_t>(p, i)).ptr;
        break;
      case DType::kInt16:
        e = std::to_chars(e, buf + kMaxNumberText, Load<int16_t>(p, i)).ptr;
        break;
      case DType::kInt32:
        e = std::to_chars(e, buf + kMaxNumberText, Load<int32_t>(p, i)).ptr;
        break;
      case DType::kInt64:
        e = std::to_chars(e, buf + kMaxNumberText, Load<int64_t>(p, i)).ptr;
        break;
      case DType::kUInt8:
        e = std::to_chars(e, buf + kMaxNumberText, Load<uint8_t>(p, i)).ptr;
        break;
      case DType::kUInt16:
        e = std::to_chars(e, buf + kMaxNumberText, Load<uint16_t>(p, i)).ptr;
        break;
      case DType::kUInt32:
        e = std::to_chars(e, buf + kMaxNumberText, Load<uint32_t>(p, i)).ptr;
        break;
      case DType::kUInt64:
        e = std::to_chars(e, buf + kMaxNumberText, Load<uint64_t>(p, i)).ptr;
        break;
      case DType::kFloat32:
        e = FloatText(Load<float>(p, i), e, buf + kMaxNumberText);
        break;
      case DType::kFloat64:
        e = FloatText(Load<double>(p, i), e, buf + kMaxNumberText);
        break;
      case DType::kFloat16:
        e = FloatText(HalfToFloat(Load<uint16_t>(p, i)), e, buf + kMaxNumberText);
        break;
      case DType::kBFloat16:
        e = FloatText(BFloat16ToFloat(Load<uint16_t>(p, i)), e, buf + kMaxNumberText);
        break;
      default:
        std::memcpy(e, "null", 4);
        e += 4;
        break;
    }
  }
  *e++ = ']';
  return e - out;
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
    return Invalid("inputs must be an array of tensors");
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
    if (!outputs->value.IsArray()) return Invalid("outputs must be an array");
    for (rapidjson::SizeType i = 0; i < outputs->value.Size(); ++i) {
      RETURN_IF_ERROR(impl.ReadOutput(i, outputs->value[i], &req));
    }
  }
  return r;
}

absl::Status JsonInferRequest::Impl::ParseDocument(absl::string_view json,
                                                   const RequestLimits& limits) {
  // SAX into the Document, with inputs' data diverted (RequestHandler).
  rapidjson::Reader reader;
  std::string number_error;  // why RawNumber stopped the parse
  auto generate = [&](rapidjson::Document& d) {
    // The bytes themselves (no EncodedInputStream: FastNumbers moves the
    // stream's position), a UTF-8 byte order mark skipped as it skipped one.
    rapidjson::MemoryStream ms(json.data(), json.size());
    if (absl::StartsWith(json, "\xEF\xBB\xBF")) ms.src_ += 3;
    RequestHandler handler(&d, limits, &captured, &arena, &ms);
    const bool ok = !reader.Parse<kParseFlags>(ms, handler).IsError();
    number_error = handler.number_error();
    return ok;
  };
  doc.Populate(generate);
  if (reader.HasParseError()) {
    return Invalid(absl::StrCat(
        "malformed JSON at byte ", reader.GetErrorOffset(), ": ",
        number_error.empty()
            ? absl::string_view(rapidjson::GetParseError_En(reader.GetParseErrorCode()))
            : absl::string_view(number_error)));
  }
  if (!doc.IsObject()) return Invalid("the request must be a JSON object");
  return absl::OkStatus();
}

absl::Status JsonInferRequest::Impl::ReadRequestFields(InferRequest* req_ptr) {
  InferRequest& req = *req_ptr;
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
    // The answer echoes it: a \u escape of a lone surrogate (which RapidJSON
    // reads into bytes that are not UTF-8) could not be written back.
    rapidjson::StringBuffer check;
    JsonWriter w(check);
    if (!w.String(req.id.data(), static_cast<rapidjson::SizeType>(req.id.size()))) {
      return Invalid("id is not valid UTF-8 (a \\u escape of a lone surrogate?)");
    }
    has_id = true;
  }
  if (auto it = doc.FindMember("parameters"); it != doc.MemberEnd()) {
    RETURN_IF_ERROR(ToParams(it->value, "request", &req.parameters));
    for (const auto& [key, p] : req.parameters) {
      if (key == kBinaryDataOutput) {
        if (p.kind != InferParam::Kind::kBool) {
          return Invalid("request.parameters.binary_data_output must be true or false");
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
    return Invalid(
        absl::StrCat(what, ": datatype '", in.datatype, "' is not one of ", OipDatatypeList(),
                     " (COMPLEX and FLOAT8 tensors are served by tensorops.v1.TensorOps only)"));
  }
  auto shape = t.FindMember("shape");
  if (shape == t.MemberEnd() || !shape->value.IsArray()) {
    return Invalid(what, ".shape must be an array of integers");
  }
  std::vector<int64_t>& dims = shapes[i];
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
  const std::vector<int64_t>& dims = shapes[i];
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
    if (static_cast<uint64_t>(*binary_size) > binary.size() - (*binary_at)) {
      return Invalid(absl::StrCat(what, ": binary_data_size ", *binary_size, " but only ",
                                  binary.size() - (*binary_at),
                                  " bytes of binary data are left after the JSON"));
    }
    const absl::string_view block = binary.substr((*binary_at), static_cast<size_t>(*binary_size));
    (*binary_at) += block.size();
    if (dtype != DType::kString) {
      ASSIGN_OR_RETURN(const int64_t need, CheckShape(dtype, dims, what, limits));
      if (need != *binary_size) {
        return Invalid(absl::StrCat(what, ": binary_data_size is ", *binary_size, " but shape ",
                                    ShapeToString(dims), " of ", in.datatype, " needs ", need));
      }
    }
    req->raw_inputs.push_back(block);
  } else if (data != t.MemberEnd()) {
    if (i >= captured.size()) {  // RequestHandler captures every inputs[i].data
      return absl::InternalError(absl::StrCat(what, ": its data was not captured"));
    }
    CapturedData& c = captured[i];
    if (c.duplicate) return Invalid(what, " has data twice");
    std::string raw;
    if (c.direct && c.dtype == dtype && c.dims == dims) {
      RETURN_IF_ERROR(CheckShape(dtype, dims, what, limits).status());
      if (c.count != c.n) return Invalid(CountError(what, c.count, c.n, dims));
      RETURN_IF_ERROR(c.first_error);
      raw = std::move(c.raw);
    } else {
      ASSIGN_OR_RETURN(raw, ConvertData(c, arena, dtype, dims, what, limits));
    }
    converted.push_back(std::move(raw));
    req->raw_inputs.push_back(converted.back());
  } else if (!in_shm) {
    return Invalid(what, " has no data: give data, binary_data_size or shared_memory_region");
  }
  return absl::OkStatus();
}

absl::Status JsonInferRequest::Impl::ReadOutput(rapidjson::SizeType i, const rapidjson::Value& o,
                                                InferRequest* req) {
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
      splices.push_back({buffer.GetSize() - 1, dtype, out.data.data_as<char>(), Count(out.shape)});
    } else {
      w.Key("data");
      if (!WriteStrings(w, out.data.data_as<char>(), Count(out.shape))) {
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
    case absl::StatusCode::kAlreadyExists:  // a shared memory region's name
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      // A tensor over a size limit names its flag, and a request larger than
      // the whole in-flight budget can never fit: 413, no Retry-After. The
      // rest is admission (overloaded): 503.
      if (ErrorReason(status) == "REQUEST_OVER_INFLIGHT_BUDGET") return 413;
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

std::string ErrorJson(const absl::Status& status) {
  std::string json = ErrorJson(status.message());
  const std::string details = StatusDetailsJson(WithDerivedBadRequest(status));
  if (details.empty()) return json;
  json.pop_back();  // the closing '}'
  absl::StrAppend(&json, ",\"details\":", details, "}");
  return json;
}

}  // namespace tensorops
