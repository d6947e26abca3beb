// The numbers of the REST door's JSON infer binding (json_binding.h): the
// request body's SAX parse, which diverts each inputs[i].data away from the
// Document and converts its elements straight into the raw little-endian
// form of the input's datatype (std::from_chars; a run of plain numbers read
// without RapidJSON's tokenizer), and an answer's numeric data written as
// JSON text (std::to_chars, shortest round trip). The data of a big tensor is
// nearly all of a JSON body, so these are the binding's hot loops.
//
// Thread-safety: stateless functions; CapturedData is used by one thread.
#ifndef TENSOROPS_SERVER_HTTP_JSON_NUMBERS_H_
#define TENSOROPS_SERVER_HTTP_JSON_NUMBERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/dtype.h"
#include "rapidjson/document.h"
#include "wire/limits.h"

namespace tensorops {

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

// The JSON text `json` into `doc` by SAX, except the value of each
// inputs[i].data: `doc` gets null there and the elements go to (*captured)[i]
// (BYTES text into `arena`). Everything else (ids, parameters, shapes,
// outputs) is for the caller to check on `doc`. INVALID_ARGUMENT "malformed
// JSON at byte N: why" when the text is not JSON.
absl::Status ParseInferJson(absl::string_view json, const RequestLimits& limits,
                            rapidjson::Document* doc, std::vector<CapturedData>* captured,
                            std::string* arena);

// Elements of a shape CheckShape accepted (or an output's): no overflow.
int64_t ElementCount(absl::Span<const int64_t> dims);

// "<what>.data has N elements but shape [..] needs M" (N past M: "more than M").
std::string CountError(absl::string_view what, int64_t got, int64_t n,
                       absl::Span<const int64_t> dims);

// Captured `data` elements (not converted directly) -> the raw form of
// `dtype` (BYTES: 4-byte length + bytes, their text in `arena`), the shape
// checked against `limits` first. INVALID_ARGUMENT naming `what`.data[i].
absl::StatusOr<std::string> ConvertData(const CapturedData& data, const std::string& arena,
                                        DType dtype, absl::Span<const int64_t> dims,
                                        absl::string_view what, const RequestLimits& limits);

// The most text one element takes, its ',' included (a double's shortest
// form is at most 24 characters).
inline constexpr int64_t kMaxNumberText = 26;

// One output's elements (not BYTES) as a flat JSON array, written straight
// into `out`, which has room for 2 + n * kMaxNumberText bytes (a 16 MiB FP32
// output is ~45 MB of text: no writer call and no append per value).
// Returns the length.
int64_t WriteNumbers(DType dtype, const char* p, int64_t n, char* out);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_HTTP_JSON_NUMBERS_H_
