#include "client/cli/text_format.h"

#include <charconv>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tensorops::cli {
namespace {

struct NameEntry {
  const char* short_name;
  const char* long_name;
  DataType dtype;
};
constexpr NameEntry kNames[] = {
    {"f32", "float32", DataType::kFloat32},
    {"f64", "float64", DataType::kFloat64},
    {"f16", "float16", DataType::kFloat16},
    {"bf16", "bfloat16", DataType::kBFloat16},
    {"i8", "int8", DataType::kInt8},
    {"i16", "int16", DataType::kInt16},
    {"i32", "int32", DataType::kInt32},
    {"i64", "int64", DataType::kInt64},
    {"u8", "uint8", DataType::kUInt8},
    {"u16", "uint16", DataType::kUInt16},
    {"u32", "uint32", DataType::kUInt32},
    {"u64", "uint64", DataType::kUInt64},
    {"bool", "bool", DataType::kBool},
    {"str", "string", DataType::kString},
    {"c64", "complex64", DataType::kComplex64},
    {"c128", "complex128", DataType::kComplex128},
    {"f8e4m3", "float8_e4m3", DataType::kFloat8E4M3},
    {"f8e5m2", "float8_e5m2", DataType::kFloat8E5M2},
};

// One leaf of the nested text.
struct Leaf {
  std::string text;
  bool quoted = false;
};

class Parser {
 public:
  explicit Parser(absl::string_view text) : s_(text) {}

  absl::Status Parse(std::vector<int64_t>* shape, std::vector<Leaf>* leaves) {
    leaves_ = leaves;
    absl::Status st = Value(0, shape);
    if (!st.ok()) return st;
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected text after the value");
    return absl::OkStatus();
  }

 private:
  absl::Status Error(absl::string_view why) const {
    return absl::InvalidArgumentError(absl::StrCat(why, " at character ", pos_ + 1));
  }
  void SkipSpace() {
    while (pos_ < s_.size() && absl::ascii_isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }

  // Parses one value; `shape` receives its dims (empty for a leaf).
  absl::Status Value(int depth, std::vector<int64_t>* shape) {
    if (depth > 32) return Error("nesting deeper than 32");
    SkipSpace();
    if (pos_ >= s_.size()) return Error("unexpected end of input");
    if (s_[pos_] == '[') return List(depth, shape);
    shape->clear();
    Leaf leaf;
    absl::Status st = s_[pos_] == '"' ? QuotedLeaf(&leaf) : BareLeaf(&leaf);
    if (!st.ok()) return st;
    leaves_->push_back(std::move(leaf));
    return absl::OkStatus();
  }

  // A '[' list of values, all of one shape; `shape` gets [count, their dims].
  absl::Status List(int depth, std::vector<int64_t>* shape) {
    ++pos_;
    SkipSpace();
    std::vector<int64_t> first;
    int64_t count = 0;
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      *shape = {0};
      return absl::OkStatus();
    }
    while (true) {
      std::vector<int64_t> sub;
      absl::Status st = Value(depth + 1, &sub);
      if (!st.ok()) return st;
      if (count == 0) {
        first = sub;
      } else if (sub != first) {
        return Error("ragged nesting: rows differ in shape");
      }
      ++count;
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        break;
      }
      return Error("expected ',' or ']'");
    }
    shape->assign(1, count);
    shape->insert(shape->end(), first.begin(), first.end());
    return absl::OkStatus();
  }

  // A '"' string with \n \t \r \xHH escapes (any other escaped character
  // is itself).
  absl::Status QuotedLeaf(Leaf* leaf) {
    leaf->quoted = true;
    ++pos_;
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      char c = s_[pos_++];
      if (c == '"') break;
      if (c == '\\') {
        if (pos_ >= s_.size()) return Error("unterminated string");
        c = s_[pos_++];
        switch (c) {
          case 'n':
            c = '\n';
            break;
          case 't':
            c = '\t';
            break;
          case 'r':
            c = '\r';
            break;
          case 'x': {
            int v;
            if (pos_ + 2 > s_.size() || !absl::SimpleHexAtoi(s_.substr(pos_, 2), &v)) {
              return Error("bad \\x escape");
            }
            c = static_cast<char>(v);
            pos_ += 2;
            break;
          }
          default:
            break;  // \" \\ and anything else: the character itself
        }
      }
      leaf->text += c;
    }
    return absl::OkStatus();
  }

  // An unquoted word, up to a separator or space.
  absl::Status BareLeaf(Leaf* leaf) {
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != ']' && s_[pos_] != '[' &&
           !absl::ascii_isspace(static_cast<unsigned char>(s_[pos_]))) {
      ++pos_;
    }
    if (pos_ == start) return Error("expected a value");
    leaf->text = std::string(s_.substr(start, pos_ - start));
    return absl::OkStatus();
  }

  absl::string_view s_;
  size_t pos_ = 0;
  std::vector<Leaf>* leaves_ = nullptr;
};

bool IsBoolWord(absl::string_view t) { return t == "true" || t == "false"; }

absl::Status BadValue(const Leaf& leaf, size_t index, DataType dtype, absl::string_view why = "") {
  return absl::InvalidArgumentError(absl::StrCat(
      "value ", index, " (", leaf.text, ") is not a valid ", ShortDataTypeName(dtype), why));
}

template <typename T>
absl::Status ParseInts(const std::vector<Leaf>& leaves, DataType dtype, std::vector<T>* out) {
  for (size_t i = 0; i < leaves.size(); ++i) {
    if constexpr (std::is_signed_v<T>) {
      int64_t v;
      if (!absl::SimpleAtoi(leaves[i].text, &v)) return BadValue(leaves[i], i, dtype);
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
        return BadValue(leaves[i], i, dtype,
                        absl::StrCat(" (range [", std::numeric_limits<T>::min(), ", ",
                                     std::numeric_limits<T>::max(), "])"));
      }
      out->push_back(static_cast<T>(v));
    } else {
      uint64_t v;
      if (absl::StartsWith(leaves[i].text, "-") || !absl::SimpleAtoi(leaves[i].text, &v)) {
        return BadValue(leaves[i], i, dtype);
      }
      if (v > std::numeric_limits<T>::max()) {
        return BadValue(leaves[i], i, dtype,
                        absl::StrCat(" (range [0, ", std::numeric_limits<T>::max(), "])"));
      }
      out->push_back(static_cast<T>(v));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseDoubles(const std::vector<Leaf>& leaves, DataType dtype,
                          std::vector<double>* out) {
  for (size_t i = 0; i < leaves.size(); ++i) {
    double v;
    if (leaves[i].quoted || !absl::SimpleAtod(leaves[i].text, &v)) {
      return BadValue(leaves[i], i, dtype);
    }
    out->push_back(v);
  }
  return absl::OkStatus();
}

template <typename T>
Tensor Make(const std::vector<T>& v, std::vector<int64_t> shape) {
  return Tensor(v, std::move(shape));
}

template <typename T>
void AppendNumber(std::string* out, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) {
      *out += "nan";
      return;
    }
    if (std::isinf(v)) {
      *out += v < 0 ? "-inf" : "inf";
      return;
    }
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out->append(buf, r.ptr);
  } else {
    absl::StrAppend(out, v);
  }
}

void AppendQuoted(std::string* out, const std::string& s) {
  *out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += static_cast<char>(c);
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c < 0x20 || c >= 0x7f) {
      absl::StrAppend(out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      *out += static_cast<char>(c);
    }
  }
  *out += '"';
}

}  // namespace

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const NameEntry& e : kNames) {
    if (lower == e.short_name || lower == e.long_name ||
        lower == absl::AsciiStrToLower(DataTypeName(e.dtype))) {
      return e.dtype;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name,
                                                 "'; use one of f32 f64 f16 bf16 f8e4m3 f8e5m2 i8 "
                                                 "i16 i32 i64 u8 u16 u32 u64 bool str c64 c128"));
}

std::string ShortDataTypeName(DataType dtype) {
  for (const NameEntry& e : kNames) {
    if (e.dtype == dtype) return e.short_name;
  }
  return "invalid";
}

absl::StatusOr<std::vector<int64_t>> ParseShape(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (absl::ConsumePrefix(&s, "[") && !absl::ConsumeSuffix(&s, "]")) {
    return absl::InvalidArgumentError(absl::StrCat("malformed shape '", text, "'"));
  }
  std::vector<int64_t> shape;
  for (absl::string_view part : absl::StrSplit(s, ',', absl::SkipWhitespace())) {
    int64_t d;
    if (!absl::SimpleAtoi(part, &d) || d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed shape '", text, "': dims are integers >= 0, e.g. 2,3"));
    }
    shape.push_back(d);
  }
  return shape;
}

namespace {

// The dtype a literal's values say when --dtype does not: strings if quoted,
// bool if true/false, int64 if every value is an integer, float32 otherwise.
DataType DtypeOf(const std::vector<Leaf>& leaves, std::optional<DataType> dtype) {
  if (dtype.has_value()) return *dtype;
  if (!leaves.empty() && leaves[0].quoted) return DataType::kString;
  if (!leaves.empty() && IsBoolWord(leaves[0].text)) return DataType::kBool;
  for (const Leaf& l : leaves) {
    int64_t unused;
    if (!absl::SimpleAtoi(l.text, &unused)) return DataType::kFloat32;
  }
  return DataType::kInt64;
}

// The tensor's shape: the literal's nesting (less the [re, im] pairs'
// dimension of a complex type), or --shape when given.
absl::Status ResolveShape(DataType dtype, size_t leaf_count,
                          const std::optional<std::vector<int64_t>>& shape_override,
                          std::vector<int64_t>* shape) {
  const bool complex = dtype == DataType::kComplex64 || dtype == DataType::kComplex128;
  if (complex) {
    // [re, im] pairs: the innermost dimension of the text is 2 and goes away.
    if (shape->empty() || shape->back() != 2) {
      return absl::InvalidArgumentError(
          "complex values are written as [re, im] pairs (innermost dimension 2)");
    }
    shape->pop_back();
  }
  if (shape_override.has_value()) {
    int64_t want = 1, have = static_cast<int64_t>(leaf_count) / (complex ? 2 : 1);
    for (int64_t d : *shape_override) want *= d;
    if (want != have) {
      return absl::InvalidArgumentError(absl::StrCat("--shape [",
                                                     absl::StrJoin(*shape_override, ","),
                                                     "] needs ", want, " values, got ", have));
    }
    *shape = *shape_override;
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> FloatingTensor(DataType dtype, const std::vector<Leaf>& leaves,
                                      const std::vector<int64_t>& shape) {
  std::vector<double> d;
  if (absl::Status s = ParseDoubles(leaves, dtype, &d); !s.ok()) return s;
  switch (dtype) {
    case DataType::kFloat64:
      return Make(d, shape);
    case DataType::kComplex64: {
      std::vector<std::complex<float>> c(d.size() / 2);
      for (size_t i = 0; i < c.size(); ++i) c[i] = {float(d[2 * i]), float(d[2 * i + 1])};
      return Make(c, shape);
    }
    case DataType::kComplex128: {
      std::vector<std::complex<double>> c(d.size() / 2);
      for (size_t i = 0; i < c.size(); ++i) c[i] = {d[2 * i], d[2 * i + 1]};
      return Make(c, shape);
    }
    default:  // float32 and the narrow floats, rounded from float
      return Tensor::FromFloats(dtype, std::vector<float>(d.begin(), d.end()), shape);
  }
}

absl::StatusOr<Tensor> BoolTensor(const std::vector<Leaf>& leaves,
                                  const std::vector<int64_t>& shape) {
  std::vector<bool> v;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const std::string& t = leaves[i].text;
    if (t == "true" || t == "1") {
      v.push_back(true);
    } else if (t == "false" || t == "0") {
      v.push_back(false);
    } else {
      return BadValue(leaves[i], i, DataType::kBool, " (true, false, 1 or 0)");
    }
  }
  return Tensor(v, shape);
}

}  // namespace

absl::StatusOr<Tensor> ParseTensor(absl::string_view text, std::optional<DataType> dtype_opt,
                                   std::optional<std::vector<int64_t>> shape_override) {
  std::vector<int64_t> shape;
  std::vector<Leaf> leaves;
  absl::Status st = Parser(text).Parse(&shape, &leaves);
  if (!st.ok()) return st;
  const DataType dtype = DtypeOf(leaves, dtype_opt);
  st = ResolveShape(dtype, leaves.size(), shape_override, &shape);
  if (!st.ok()) return st;

  switch (dtype) {
    case DataType::kFloat32:
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat8E4M3:
    case DataType::kFloat8E5M2:
    case DataType::kFloat64:
    case DataType::kComplex64:
    case DataType::kComplex128:
      return FloatingTensor(dtype, leaves, shape);
#define TENSOROPS_INT_CASE_(D, T)                                            \
  case DataType::D: {                                                        \
    std::vector<T> v;                                                        \
    if (absl::Status s = ParseInts<T>(leaves, dtype, &v); !s.ok()) return s; \
    return Make(v, shape);                                                   \
  }
      TENSOROPS_INT_CASE_(kInt8, int8_t)
      TENSOROPS_INT_CASE_(kInt16, int16_t)
      TENSOROPS_INT_CASE_(kInt32, int32_t)
      TENSOROPS_INT_CASE_(kInt64, int64_t)
      TENSOROPS_INT_CASE_(kUInt8, uint8_t)
      TENSOROPS_INT_CASE_(kUInt16, uint16_t)
      TENSOROPS_INT_CASE_(kUInt32, uint32_t)
      TENSOROPS_INT_CASE_(kUInt64, uint64_t)
#undef TENSOROPS_INT_CASE_
    case DataType::kBool:
      return BoolTensor(leaves, shape);
    case DataType::kString: {
      std::vector<std::string> v;
      for (Leaf& l : leaves) v.push_back(std::move(l.text));
      return Tensor(std::move(v), shape);
    }
    default:
      return absl::InvalidArgumentError("invalid dtype");
  }
}

namespace {

template <typename T>
void AppendComplex(std::string* out, const char* p) {
  T v[2];
  std::memcpy(v, p, sizeof(v));
  *out += '[';
  AppendNumber(out, v[0]);
  *out += ", ";
  AppendNumber(out, v[1]);
  *out += ']';
}

// Element i of t as text; `narrow` holds the narrow float types' values
// widened to float (empty for the other types).
void AppendElement(const Tensor& t, const std::vector<float>& narrow, int64_t i, std::string* out) {
  const char* p = t.bytes().data();
  switch (t.dtype()) {
#define TENSOROPS_FMT_(D, T)                       \
  case DataType::D: {                              \
    T v;                                           \
    std::memcpy(&v, p + i * sizeof(T), sizeof(T)); \
    AppendNumber(out, v);                          \
    break;                                         \
  }
    TENSOROPS_FMT_(kFloat32, float)
    TENSOROPS_FMT_(kFloat64, double)
    TENSOROPS_FMT_(kInt8, int8_t)
    TENSOROPS_FMT_(kInt16, int16_t)
    TENSOROPS_FMT_(kInt32, int32_t)
    TENSOROPS_FMT_(kInt64, int64_t)
    TENSOROPS_FMT_(kUInt8, uint8_t)
    TENSOROPS_FMT_(kUInt16, uint16_t)
    TENSOROPS_FMT_(kUInt32, uint32_t)
    TENSOROPS_FMT_(kUInt64, uint64_t)
#undef TENSOROPS_FMT_
    case DataType::kBool:
      *out += p[i] ? "true" : "false";
      break;
    case DataType::kString:
      AppendQuoted(out, t.strings()[i]);
      break;
    case DataType::kComplex64:
      AppendComplex<float>(out, p + i * 8);
      break;
    case DataType::kComplex128:
      AppendComplex<double>(out, p + i * 16);
      break;
    default:
      AppendNumber(out, narrow[i]);
      break;
  }
}

}  // namespace

std::string FormatTensor(const Tensor& t) {
  const std::vector<int64_t>& shape = t.shape();
  const int64_t n = t.num_elements();
  std::vector<float> narrow;
  const bool is_narrow = t.dtype() == DataType::kFloat16 || t.dtype() == DataType::kBFloat16 ||
                         t.dtype() == DataType::kFloat8E4M3 || t.dtype() == DataType::kFloat8E5M2;
  if (is_narrow) narrow = t.ToFloats().value_or(std::vector<float>());
  auto element = [&](std::string* out, int64_t i) { AppendElement(t, narrow, i, out); };
  std::string out;
  if (shape.empty()) {
    element(&out, 0);
    return out;
  }
  // Walk the nesting; a row break after each ',' above the innermost level.
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> idx(rank, 0);
  if (n == 0) {
    for (int64_t d = 0; d < rank; ++d) out += '[';
    for (int64_t d = 0; d < rank; ++d) out += ']';
    return out;
  }
  for (int64_t d = 0; d < rank; ++d) out += '[';
  for (int64_t i = 0; i < n; ++i) {
    element(&out, i);
    // Advance the index; count how many levels close.
    int64_t closed = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
      ++closed;
    }
    out.append(closed, ']');
    if (i + 1 == n) break;
    if (closed == 0) {
      out += ", ";
    } else {
      out += ",\n";
      out.append(rank - closed, ' ');
      out.append(closed, '[');
    }
  }
  return out;
}

}  // namespace tensorops::cli
