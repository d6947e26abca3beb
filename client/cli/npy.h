// NumPy .npy files (format versions 1.0, 2.0 and 3.0 read; 1.0 or 2.0
// written), little-endian, C order. Written by hand: Debian 12 packages no
// C++ library for the format. Element types: <f4 <f8 <f2 |i1 <i2 <i4 <i8 |u1
// <u2 <u4 <u8 |b1 <c8 <c16; anything else (big-endian, Fortran order,
// strings, objects, BFLOAT16/FLOAT8 which NumPy lacks) is rejected with a
// message saying why.
//
// Thread-safety: stateless functions.
#ifndef TENSOROPS_CLIENT_CLI_NPY_H_
#define TENSOROPS_CLIENT_CLI_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensorops/tensor.h"

namespace tensorops::cli {

// Where a .npy file's data lies and what it is.
struct NpyLayout {
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;
  int64_t data_offset = 0;  // bytes of the header before the data
  int64_t data_bytes = 0;
  std::string descr;  // e.g. "<f4"
};

// The header of a .npy file (`bytes` holds at least all of it).
absl::StatusOr<NpyLayout> ParseNpyHeader(absl::string_view bytes, absl::string_view what);
// The header of the .npy file at `path`, read without its data (a tensor
// streamed from the file in constant memory), the file's size checked.
absl::StatusOr<NpyLayout> ReadNpyLayout(const std::string& path);
// The .npy header (magic, version, length, dict, padding to 64 bytes) of a
// tensor of `dtype` and `shape`: what precedes its data in the file.
absl::StatusOr<std::string> NpyHeaderFor(DataType dtype, const std::vector<int64_t>& shape);

// Parses the bytes of a .npy file; `what` (e.g. the path) prefixes errors.
absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, absl::string_view what);
// The bytes of a .npy file for `tensor`.
absl::StatusOr<std::string> SerializeNpy(const Tensor& tensor);

absl::StatusOr<Tensor> ReadNpyFile(const std::string& path);
absl::Status WriteNpyFile(const std::string& path, const Tensor& tensor);

}  // namespace tensorops::cli

#endif  // TENSOROPS_CLIENT_CLI_NPY_H_
