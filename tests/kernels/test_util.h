// Helpers for kernel tests: owned test tensors of any of the 18 element types,
// built from int64 / double values, raw bytes, strings or random bits, and a
// bitwise comparison of tensors (STRING compares the referenced bytes).
//
// Thread-safety: TestTensor is a plain value; share read-only or not at all.
#ifndef TENSOROPS_TESTS_KERNELS_TEST_UTIL_H_
#define TENSOROPS_TESTS_KERNELS_TEST_UTIL_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "kernels/attrs.h"
#include "kernels/dtype.h"
#include "kernels/op_registry.h"
#include "kernels/tensor.h"

namespace tensorops {
namespace test {

// An owned tensor: packed element bytes plus, for STRING, the storage the
// StringRef elements point at. Copies share the (immutable) string storage,
// so a copy's StringRefs stay valid as long as any copy lives.
struct TestTensor {
  DType dtype = DType::kInvalid;
  Shape shape;
  // NumElements(shape) * ElementWidth(dtype) bytes, plus one spare byte so
  // that data() is never null, even for an empty tensor.
  std::vector<unsigned char> bytes;
  std::shared_ptr<const std::vector<std::string>> strings;

  int64_t num_elements() const { return NumElements(shape); }
  int64_t num_bytes() const { return num_elements() * ElementWidth(dtype); }
  // A view of this tensor; valid while this object lives and is unmodified.
  TensorView view() const { return TensorView{dtype, shape, bytes.data()}; }
};

// Zero-filled tensor of (dtype, shape); STRING elements are empty strings.
TestTensor Zeros(DType dtype, Shape shape);

// Element i = values[i] converted to `dtype`: integers are cast (wrapping, so
// pass in-range values), floating formats are rounded to nearest even,
// BOOL is v != 0, COMPLEX is (v, 0), STRING is the decimal text of v.
TestTensor FromInt64(DType dtype, Shape shape, const std::vector<int64_t>& values);
TestTensor FromUInt64(DType dtype, Shape shape, const std::vector<uint64_t>& values);
// As FromInt64; integer types take the value truncated toward zero (use only
// in-range whole values for them), STRING gets the shortest round-trip text.
TestTensor FromDouble(DType dtype, Shape shape, const std::vector<double>& values);
// The packed bytes as given; their size must match (dtype, shape). Not for STRING.
TestTensor FromBytes(DType dtype, Shape shape, std::vector<unsigned char> bytes);
// Element-wise bit patterns for 1/2/4/8-byte types (low bytes of each value).
TestTensor FromBits(DType dtype, Shape shape, const std::vector<uint64_t>& bits);
TestTensor FromStrings(Shape shape, const std::vector<std::string>& values);

// 1-D helpers for index-like inputs.
inline TestTensor Vec(DType dtype, const std::vector<int64_t>& values) {
  return FromInt64(dtype, Shape{static_cast<int64_t>(values.size())}, values);
}
inline TestTensor ScalarOf(DType dtype, int64_t value) {
  return FromInt64(dtype, Shape{}, {value});
}

// Random contents: random bits for numeric types (NaN payloads, -0.0 and
// denormals included), 0/1 for BOOL, random strings (empty, embedded NUL,
// long) for STRING.
TestTensor RandomTensor(DType dtype, Shape shape, std::mt19937_64* rng);

// Element i as int64: integers and BOOL exactly, floating formats and the real
// part of COMPLEX truncated, STRING parsed. For checking small exact examples.
std::vector<int64_t> ToInt64(const TensorView& t);

// Bit patterns of the narrow floating formats (round to nearest even; E4M3FN
// overflow and NaN give 0x7F with the sign; the others follow IEEE).
uint16_t EncodeHalf(double v);
uint16_t EncodeBFloat16(double v);
uint8_t EncodeFloat8E4M3(double v);
uint8_t EncodeFloat8E5M2(double v);
double DecodeHalf(uint16_t bits);
double DecodeBFloat16(uint16_t bits);
double DecodeFloat8E4M3(uint8_t bits);
double DecodeFloat8E5M2(uint8_t bits);
// True if `v` converts to `dtype` and back unchanged (integers: in range;
// floating formats: exactly representable; BOOL: 0 or 1).
bool ExactlyRepresentable(DType dtype, double v);

// Dtype, shape and element bits equal; STRING elements compare their bytes.
// On mismatch, names the first differing element and its coordinates.
::testing::AssertionResult BitwiseEqual(const TensorView& expected, const TensorView& actual);

// `got` is OK and bitwise equal to `expected`.
::testing::AssertionResult Matches(const TestTensor& expected, const absl::StatusOr<Tensor>& got);

// The built-in ops, registered once (RegisterBuiltinOps) on first use.
const OpRegistry& Builtins();
// ExecuteOp on Builtins() with views of `inputs`. For STRING data the result
// references the string storage that `inputs` share with their copies.
absl::StatusOr<Tensor> RunOp(absl::string_view op, const std::vector<TestTensor>& inputs,
                             const Attrs& attrs = {});
absl::StatusOr<PreparedOp> PrepareOnly(absl::string_view op, const std::vector<TestTensor>& inputs,
                                       const Attrs& attrs = {});

// Attribute shorthands.
inline AttrValue Int(int64_t v) { return AttrValue::Number(static_cast<double>(v)); }
inline AttrValue Str(std::string v) { return AttrValue::String(std::move(v)); }

// "FLOAT32[2,3]"
std::string Describe(const TensorView& t);
std::string VecToString(const std::vector<int64_t>& v);

// Checks code, that the message contains each of `parts`, and that it stays
// well under 1 KiB (semantics.md "Wire behaviour").
void ExpectStatus(const absl::Status& status, absl::StatusCode code,
                  std::initializer_list<std::string> parts);
template <typename T>
void ExpectStatus(const absl::StatusOr<T>& result, absl::StatusCode code,
                  std::initializer_list<std::string> parts) {
  ExpectStatus(result.status(), code, parts);
}

}  // namespace test
}  // namespace tensorops

// EXPECT_INVALID(ExecuteOp(...), "Roll", "axes", "7"): INVALID_ARGUMENT whose
// message contains every string. The trace points at the caller's line.
#define EXPECT_INVALID(expr, ...)                                                                 \
  do {                                                                                            \
    SCOPED_TRACE(#expr);                                                                          \
    ::tensorops::test::ExpectStatus((expr), ::absl::StatusCode::kInvalidArgument, {__VA_ARGS__}); \
  } while (0)

#define EXPECT_STATUS_CODE(expr, code, ...)                         \
  do {                                                              \
    SCOPED_TRACE(#expr);                                            \
    ::tensorops::test::ExpectStatus((expr), (code), {__VA_ARGS__}); \
  } while (0)

#endif  // TENSOROPS_TESTS_KERNELS_TEST_UTIL_H_
