// Hand-written .npy reader/writer; see npy.h for why and what is supported.
// Format: "\x93NUMPY", major, minor, header length (uint16 LE for 1.0, uint32
// LE for 2.0/3.0), a Python dict literal padded with spaces and ending in
// '\n' so that the data starts at a multiple of 64 bytes, then the data.
#include "client/cli/npy.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tensorops::cli {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

struct Descr {
  const char* code;  // without the byte-order character
  DataType dtype;
};
constexpr Descr kDescrs[] = {
    {"f4", DataType::kFloat32},   {"f8", DataType::kFloat64},     {"f2", DataType::kFloat16},
    {"i1", DataType::kInt8},      {"i2", DataType::kInt16},       {"i4", DataType::kInt32},
    {"i8", DataType::kInt64},     {"u1", DataType::kUInt8},       {"u2", DataType::kUInt16},
    {"u4", DataType::kUInt32},    {"u8", DataType::kUInt64},      {"b1", DataType::kBool},
    {"c8", DataType::kComplex64}, {"c16", DataType::kComplex128},
};

// The value text after 'key': in a header dict, up to the next top-level ','
// or '}' (tuples kept whole).
absl::StatusOr<std::string> DictValue(absl::string_view dict, absl::string_view key) {
  for (const char* quote : {"'", "\""}) {
    const std::string k = absl::StrCat(quote, key, quote);
    size_t at = dict.find(k);
    if (at == absl::string_view::npos) continue;
    at = dict.find(':', at + k.size());
    if (at == absl::string_view::npos) break;
    int depth = 0;
    size_t end = at + 1;
    for (; end < dict.size(); ++end) {
      const char c = dict[end];
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (depth == 0 && (c == ',' || c == '}')) break;
    }
    return std::string(absl::StripAsciiWhitespace(dict.substr(at + 1, end - at - 1)));
  }
  return absl::InvalidArgumentError(absl::StrCat("header has no '", key, "'"));
}

}  // namespace

namespace {

// Where the header's dict and the data start, from the magic and the
// version's length field (2 bytes in version 1, 4 in versions 2 and 3).
struct Preamble {
  size_t header_len = 0;
  size_t data_start = 0;
};

absl::StatusOr<Preamble> ReadPreamble(absl::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, kMagicLen) != absl::string_view(kMagic, kMagicLen)) {
    return absl::InvalidArgumentError("not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  Preamble p;
  if (major == 1) {
    p.header_len = static_cast<unsigned char>(bytes[8]) |
                   (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    p.data_start = 10 + p.header_len;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return absl::InvalidArgumentError("truncated header");
    for (int i = 0; i < 4; ++i) {
      p.header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    }
    p.data_start = 12 + p.header_len;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported .npy format version ", major, ".",
                     static_cast<int>(static_cast<unsigned char>(bytes[7]))));
  }
  if (p.data_start > bytes.size()) return absl::InvalidArgumentError("truncated header");
  return p;
}

// The element type of a descr such as '<f4' (little-endian, or one byte wide).
absl::StatusOr<DataType> ParseDescr(const std::string& descr, std::string* d) {
  *d = std::string(absl::StripSuffix(absl::StripPrefix(descr, "'"), "'"));
  if (d->size() < 2 || d->front() == '[' || d->front() == '{') {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported dtype ", descr, " (structured arrays are not supported)"));
  }
  const char order = (*d)[0];
  const std::string code = d->substr(1);
  DataType dtype = DataType::kInvalid;
  for (const Descr& e : kDescrs) {
    if (code == e.code) dtype = e.dtype;
  }
  if (dtype == DataType::kInvalid) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported dtype '", *d,
                     "'; supported: <f4 <f8 <f2 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1 <c8 <c16"));
  }
  if (order == '>' && DataTypeWidth(dtype) > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "big-endian dtype '", *d, "' is not supported; save it little-endian (<", code, ")"));
  }
  if (order != '<' && order != '|' && order != '=' && order != '>') {
    return absl::InvalidArgumentError(absl::StrCat("unsupported dtype '", *d, "'"));
  }
  return dtype;
}

// "(2, 3)", "(3,)" or "()".
absl::StatusOr<std::vector<int64_t>> ParseNpyShape(const std::string& text) {
  absl::string_view s = text;
  if (!absl::ConsumePrefix(&s, "(") || !absl::ConsumeSuffix(&s, ")")) {
    return absl::InvalidArgumentError(absl::StrCat("malformed shape ", text));
  }
  std::vector<int64_t> shape;
  for (absl::string_view part : absl::StrSplit(s, ',', absl::SkipWhitespace())) {
    int64_t dim;
    if (!absl::SimpleAtoi(part, &dim) || dim < 0) {
      return absl::InvalidArgumentError(absl::StrCat("malformed shape ", text));
    }
    shape.push_back(dim);
  }
  int64_t n = 1;
  for (int64_t dim : shape) {
    if (dim != 0 && n > (INT64_MAX / 16) / dim)
      return absl::InvalidArgumentError("shape too large");
    n *= dim;
  }
  return shape;
}

}  // namespace

absl::StatusOr<NpyLayout> ParseNpyHeader(absl::string_view bytes, absl::string_view what) {
  auto fail = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
  };
  absl::StatusOr<Preamble> preamble = ReadPreamble(bytes);
  if (!preamble.ok()) return fail(preamble.status().message());
  const absl::string_view dict =
      bytes.substr(preamble->data_start - preamble->header_len, preamble->header_len);

  absl::StatusOr<std::string> descr = DictValue(dict, "descr");
  absl::StatusOr<std::string> fortran = DictValue(dict, "fortran_order");
  absl::StatusOr<std::string> shape_text = DictValue(dict, "shape");
  if (!descr.ok()) return fail(descr.status().message());
  if (!fortran.ok()) return fail(fortran.status().message());
  if (!shape_text.ok()) return fail(shape_text.status().message());
  if (*fortran != "False") return fail("Fortran-order arrays are not supported (save in C order)");

  NpyLayout layout;
  absl::StatusOr<DataType> dtype = ParseDescr(*descr, &layout.descr);
  if (!dtype.ok()) return fail(dtype.status().message());
  absl::StatusOr<std::vector<int64_t>> shape = ParseNpyShape(*shape_text);
  if (!shape.ok()) return fail(shape.status().message());
  int64_t n = 1;
  for (int64_t dim : *shape) n *= dim;
  layout.dtype = *dtype;
  layout.shape = *std::move(shape);
  layout.data_offset = static_cast<int64_t>(preamble->data_start);
  layout.data_bytes = n * DataTypeWidth(*dtype);
  return layout;
}

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, absl::string_view what) {
  absl::StatusOr<NpyLayout> layout = ParseNpyHeader(bytes, what);
  if (!layout.ok()) return layout.status();
  const int64_t have = static_cast<int64_t>(bytes.size()) - layout->data_offset;
  if (have != layout->data_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": data has ", have, " bytes, shape (",
                                                   absl::StrJoin(layout->shape, ", "), ") of ",
                                                   layout->descr, " needs ", layout->data_bytes));
  }
  const char* data = bytes.data() + layout->data_offset;
  return Tensor::Copy(layout->dtype, std::move(layout->shape), data);
}

namespace {

absl::StatusOr<std::string> NpyHeader(const Tensor& tensor) {
  return NpyHeaderFor(tensor.dtype(), tensor.shape());
}

}  // namespace

absl::StatusOr<std::string> NpyHeaderFor(DataType dtype, const std::vector<int64_t>& dims) {
  const char* code = nullptr;
  for (const Descr& e : kDescrs) {
    if (e.dtype == dtype) code = e.code;
  }
  if (code == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", DataTypeName(dtype),
                     " to .npy: NumPy has no such dtype (print it instead, without --output)"));
  }
  const char order = DataTypeWidth(dtype) == 1 ? '|' : '<';
  std::string shape = absl::StrJoin(dims, ", ");
  if (dims.size() == 1) shape += ",";
  std::string dict = absl::StrCat("{'descr': '", std::string(1, order), code,
                                  "', 'fortran_order': False, 'shape': (", shape, "), }");
  // Version 1.0 holds headers up to 65535 bytes; pad so data starts on 64.
  const bool v1 = dict.size() + 1 + 10 <= 65535;
  const size_t prefix = v1 ? 10 : 12;
  const size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(v1 ? 1 : 2);
  out += '\0';
  const size_t len = dict.size();
  for (size_t i = 0; i < (v1 ? 2u : 4u); ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  out += dict;
  return out;
}

absl::StatusOr<std::string> SerializeNpy(const Tensor& tensor) {
  absl::StatusOr<std::string> out = NpyHeader(tensor);
  if (!out.ok()) return out;
  out->append(tensor.bytes().data(), tensor.bytes().size());
  return out;
}

absl::StatusOr<Tensor> ReadNpyFile(const std::string& path) {
  // One read into a buffer of the file's size: a multi-GiB file is copied
  // once here and once into the Tensor, nothing more.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  const std::streamoff size = in.tellg();
  if (size < 0) return absl::DataLossError(absl::StrCat("cannot read ", path));
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), size)) {
    return absl::DataLossError(absl::StrCat("cannot read ", path));
  }
  return ParseNpy(bytes, path);
}

absl::StatusOr<NpyLayout> ReadNpyLayout(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  const std::streamoff size = in.tellg();
  // The header only: magic, version, its length, then the dict.
  std::string head(static_cast<size_t>(std::min<std::streamoff>(size, 12)), '\0');
  in.seekg(0);
  if (!in.read(head.data(), static_cast<std::streamsize>(head.size()))) {
    return absl::DataLossError(absl::StrCat("cannot read ", path));
  }
  size_t header_end = head.size();
  if (head.size() >= 10 && head[6] == 1) {
    header_end = 10 + (static_cast<unsigned char>(head[8]) |
                       (static_cast<size_t>(static_cast<unsigned char>(head[9])) << 8));
  } else if (head.size() >= 12 && (head[6] == 2 || head[6] == 3)) {
    size_t len = 0;
    for (int i = 0; i < 4; ++i)
      len |= static_cast<size_t>(static_cast<unsigned char>(head[8 + i])) << (8 * i);
    header_end = 12 + len;
  }
  header_end = std::min<size_t>(header_end, static_cast<size_t>(size));
  head.resize(header_end);
  in.seekg(0);
  if (!in.read(head.data(), static_cast<std::streamsize>(head.size()))) {
    return absl::DataLossError(absl::StrCat("cannot read ", path));
  }
  absl::StatusOr<NpyLayout> layout = ParseNpyHeader(head, path);
  if (!layout.ok()) return layout;
  if (size - layout->data_offset != layout->data_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": data has ", size - layout->data_offset, " bytes, shape (",
        absl::StrJoin(layout->shape, ", "), ") of ", layout->descr, " needs ", layout->data_bytes));
  }
  return layout;
}

absl::Status WriteNpyFile(const std::string& path, const Tensor& tensor) {
  absl::StatusOr<std::string> header = NpyHeader(tensor);
  if (!header.ok()) return header.status();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  out.write(header->data(), static_cast<std::streamsize>(header->size()));
  out.write(tensor.bytes().data(), static_cast<std::streamsize>(tensor.bytes().size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace tensorops::cli
