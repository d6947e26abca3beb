// The one table of element types: for each of the 18, every name a layer
// gives it and which front door accepts it. The kernels' own description
// (kernels/dtype.h: name "FLOAT32", buffer width, class) is its first
// columns; this adds the wire's: the tensorops.v1.DataType value, the Open
// Inference Protocol's datatype string and typed contents field. Used by the
// tensorops.v1 codec, the OIP core and its bindings, and the client SDK.
//
// Thread-safety: immutable; safe from any thread.
#ifndef TENSOROPS_WIRE_DTYPES_H_
#define TENSOROPS_WIRE_DTYPES_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/dtype.h"
#include "tensorops/v1/tensorops.pb.h"

namespace tensorops {

struct DTypeRow {
  DType dtype;
  v1::DataType proto;  // tensorops.v1.DataType (the same number)
  // The Open Inference Protocol's datatype ("FP32"); nullptr when it has none
  // (COMPLEX64/128, FLOAT8_*): such tensors are served by tensorops.v1 only.
  const char* oip;
  // The OIP's typed contents field ("fp32_contents"); nullptr when the type
  // travels raw only (FP16, BF16) or has no OIP datatype.
  const char* oip_contents;
  // The SDK's bytes per element of a flat buffer: the kernels' width, but 0
  // for STRING (variable length; the kernels hold 16-byte references).
  int64_t sdk_width;
};

// The row of a valid dtype; for anything else a row of kInvalid
// (DATA_TYPE_UNSPECIFIED, no OIP names, width 0).
const DTypeRow& GetDTypeRow(DType dtype);
// All 18 rows in enum order.
absl::Span<const DTypeRow> DTypeRows();

// What each front door accepts: tensorops.v1 (Execute, ExecuteStream) every
// valid type; the Open Inference Protocol the 14 it can name.
inline bool AcceptedByTensorOps(DType dtype) { return IsValidDType(dtype); }
inline bool AcceptedByOip(DType dtype) { return GetDTypeRow(dtype).oip != nullptr; }

// The OIP's datatype string of `dtype` (nullptr when none), and back
// (kInvalid when the string is not one of the 14; case matters).
inline const char* OipDatatype(DType dtype) { return GetDTypeRow(dtype).oip; }
DType DTypeFromOip(absl::string_view datatype);
// The 14 OIP datatype strings, comma-separated in the table's order, for
// error messages ("FP32, FP64, FP16, BF16, INT8, ...").
const std::string& OipDatatypeList();
// The OIP's typed contents field of `dtype`; nullptr when none.
inline const char* TypedContentsField(DType dtype) { return GetDTypeRow(dtype).oip_contents; }

}  // namespace tensorops

#endif  // TENSOROPS_WIRE_DTYPES_H_
