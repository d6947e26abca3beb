// Hand-written .npy reader/writer; see npy.h for why and what is supported.
// Format: "\x93NUMPY", major, minor, header length (uint16 LE for 1.0, uint32
// LE for 2.0/3.0), a Python dict literal padded with spaces and ending in
// '\n' so that the data starts at a multiple of 64 bytes, then the data.
#include "client/cli/npy.h"

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

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, absl::string_view what) {
  auto fail = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
  };
  if (bytes.size() < 10 || bytes.substr(0, kMagicLen) != absl::string_view(kMagic, kMagicLen)) {
    return fail("not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, data_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    data_start = 10 + header_len;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return fail("truncated header");
    for (int i = 0; i < 4; ++i) {
      header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    }
    data_start = 12 + header_len;
  } else {
    return fail(absl::StrCat("unsupported .npy format version ", major, ".",
                             static_cast<int>(static_cast<unsigned char>(bytes[7]))));
  }
  if (data_start > bytes.size()) return fail("truncated header");
  const absl::string_view dict = bytes.substr(data_start - header_len, header_len);

  absl::StatusOr<std::string> descr = DictValue(dict, "descr");
  absl::StatusOr<std::string> fortran = DictValue(dict, "fortran_order");
  absl::StatusOr<std::string> shape_text = DictValue(dict, "shape");
  if (!descr.ok()) return fail(descr.status().message());
  if (!fortran.ok()) return fail(fortran.status().message());
  if (!shape_text.ok()) return fail(shape_text.status().message());
  if (*fortran != "False") return fail("Fortran-order arrays are not supported (save in C order)");

  std::string d = std::string(absl::StripSuffix(absl::StripPrefix(*descr, "'"), "'"));
  if (d.size() < 2 || d.front() == '[' || d.front() == '{') {
    return fail(
        absl::StrCat("unsupported dtype ", *descr, " (structured arrays are not supported)"));
  }
  const char order = d[0];
  const std::string code = d.substr(1);
  DataType dtype = DataType::kInvalid;
  for (const Descr& e : kDescrs) {
    if (code == e.code) dtype = e.dtype;
  }
  if (dtype == DataType::kInvalid) {
    return fail(
        absl::StrCat("unsupported dtype '", d,
                     "'; supported: <f4 <f8 <f2 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1 <c8 <c16"));
  }
  if (order == '>' && DataTypeWidth(dtype) > 1) {
    return fail(absl::StrCat("big-endian dtype '", d,
                             "' is not supported; save it little-endian (<", code, ")"));
  }
  if (order != '<' && order != '|' && order != '=' && order != '>') {
    return fail(absl::StrCat("unsupported dtype '", d, "'"));
  }

  // "(2, 3)", "(3,)" or "()".
  absl::string_view s = *shape_text;
  if (!absl::ConsumePrefix(&s, "(") || !absl::ConsumeSuffix(&s, ")")) {
    return fail(absl::StrCat("malformed shape ", *shape_text));
  }
  std::vector<int64_t> shape;
  for (absl::string_view part : absl::StrSplit(s, ',', absl::SkipWhitespace())) {
    int64_t dim;
    if (!absl::SimpleAtoi(part, &dim) || dim < 0) {
      return fail(absl::StrCat("malformed shape ", *shape_text));
    }
    shape.push_back(dim);
  }
  int64_t n = 1;
  for (int64_t dim : shape) {
    if (dim != 0 && n > (INT64_MAX / 16) / dim) return fail("shape too large");
    n *= dim;
  }
  const int64_t need = n * DataTypeWidth(dtype);
  const int64_t have = static_cast<int64_t>(bytes.size() - data_start);
  if (have != need) {
    return fail(absl::StrCat("data has ", have, " bytes, shape (", absl::StrJoin(shape, ", "),
                             ") of ", d, " needs ", need));
  }
  return Tensor::Copy(dtype, std::move(shape), bytes.data() + data_start);
}

namespace {

// The .npy header (magic, version, length, dict, padding) for `tensor`.
absl::StatusOr<std::string> NpyHeader(const Tensor& tensor) {
  const char* code = nullptr;
  for (const Descr& e : kDescrs) {
    if (e.dtype == tensor.dtype()) code = e.code;
  }
  if (code == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", DataTypeName(tensor.dtype()),
                     " to .npy: NumPy has no such dtype (print it instead, without --output)"));
  }
  const char order = DataTypeWidth(tensor.dtype()) == 1 ? '|' : '<';
  std::string shape = absl::StrJoin(tensor.shape(), ", ");
  if (tensor.shape().size() == 1) shape += ",";
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

}  // namespace

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
