#include "server/http/json_numbers.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/field_path.h"
#include "kernels/float_formats.h"
#include "kernels/shape.h"
#include "kernels/status_macros.h"
#include "rapidjson/error/en.h"
#include "rapidjson/memorystream.h"
#include "rapidjson/reader.h"
#include "server/oip/oip_codec.h"
#include "wire/dtypes.h"

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

absl::Status Invalid(absl::string_view a, absl::string_view b = "", absl::string_view c = "") {
  return absl::InvalidArgumentError(absl::StrCat(a, b, c));
}
// The same about the field at `path`, relative to the input (kernels/field_path.h).
absl::Status InvalidAt(absl::string_view path, absl::string_view a, absl::string_view b = "",
                       absl::string_view c = "") {
  return InvalidArgumentAt(path, absl::StrCat(a, b, c));
}
// Element i of an input's data, relative to the input.
std::string Elem(int64_t i) { return absl::StrCat(".data[", i, "]"); }

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
        return InvalidAt(Elem(i), absl::StrCat(what, ".data[", i, "] = ", x, " is out of range"));
      }
      const T t = static_cast<T>(x);
      std::memcpy(dst + i * sizeof(T), &t, sizeof(T));
      return absl::OkStatus();
    }
  }
  if (v.kind == JsonElem::Kind::kInt || v.kind == JsonElem::Kind::kUint ||
      v.kind == JsonElem::Kind::kDouble) {
    return InvalidAt(Elem(i), absl::StrCat(what, ".data[", i, "] is not an integer in range"));
  }
  return InvalidAt(Elem(i),
                   absl::StrCat(what, ".data[", i, "] is ", JsonTypeName(v), ", not an integer"));
}

// Element `i` of a non-BYTES `dtype` into the raw buffer `dst`.
absl::Status PutElement(DType dtype, const JsonElem& v, absl::string_view what, int64_t i,
                        char* dst) {
  switch (dtype) {
    case DType::kBool:
      if (v.kind != JsonElem::Kind::kBool) {
        return InvalidAt(Elem(i), absl::StrCat(what, ".data[", i, "] is ", JsonTypeName(v),
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
        return InvalidAt(
            Elem(i), absl::StrCat(what, ".data[", i, "] is ", JsonTypeName(v), ", not a number"));
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
      return InvalidAt(".datatype", what, ": this datatype has no JSON form");
  }
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
    c_->n = ElementCount(dims_);
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

}  // namespace

int64_t ElementCount(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string CountError(absl::string_view what, int64_t got, int64_t n,
                       absl::Span<const int64_t> dims) {
  return absl::StrCat(what, ".data has ", got > n ? "more than " : "", got > n ? n : got,
                      " elements but shape ", ShapeToString(dims), " needs ", n);
}

// JSON `data` elements -> the raw form of `dtype` (BYTES: 4-byte length +
// bytes; their text in `arena`).
absl::StatusOr<std::string> ConvertData(const CapturedData& data, const std::string& arena,
                                        DType dtype, absl::Span<const int64_t> dims,
                                        absl::string_view what, const RequestLimits& limits) {
  ASSIGN_OR_RETURN(const int64_t bytes,
                   CheckShape(dtype, dims, what, limits, dtype == DType::kString ? 0 : -1));
  const int64_t n = ElementCount(dims);
  const std::vector<JsonElem>& elems = data.elems;
  if (static_cast<int64_t>(elems.size()) != n) {
    return InvalidAt(".data", CountError(what, static_cast<int64_t>(elems.size()), n, dims));
  }
  std::string out;
  if (dtype == DType::kString) {
    int64_t total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const JsonElem& v = elems[i];
      if (v.kind != JsonElem::Kind::kString) {
        return InvalidAt(Elem(i), absl::StrCat(what, ".data[", i, "] is ", JsonTypeName(v),
                                               ", not a string (BYTES)"));
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

absl::Status ParseInferJson(absl::string_view json, const RequestLimits& limits,
                            rapidjson::Document* doc, std::vector<CapturedData>* captured,
                            std::string* arena) {
  // SAX into the Document, with inputs' data diverted (RequestHandler).
  rapidjson::Reader reader;
  std::string number_error;  // why RawNumber stopped the parse
  auto generate = [&](rapidjson::Document& d) {
    // The bytes themselves (no EncodedInputStream: FastNumbers moves the
    // stream's position), a UTF-8 byte order mark skipped as it skipped one.
    rapidjson::MemoryStream ms(json.data(), json.size());
    if (absl::StartsWith(json, "\xEF\xBB\xBF")) ms.src_ += 3;
    RequestHandler handler(&d, limits, captured, arena, &ms);
    const bool ok = !reader.Parse<kParseFlags>(ms, handler).IsError();
    number_error = handler.number_error();
    return ok;
  };
  doc->Populate(generate);
  if (reader.HasParseError()) {
    return Invalid(absl::StrCat(
        "malformed JSON at byte ", reader.GetErrorOffset(), ": ",
        number_error.empty()
            ? absl::string_view(rapidjson::GetParseError_En(reader.GetParseErrorCode()))
            : absl::string_view(number_error)));
  }
  return absl::OkStatus();
}

}  // namespace tensorops
