#include "tests/kernels/test_util.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"

namespace tensorops {
namespace test {
namespace {

// A binary floating format with `e_bits` exponent and `m_bits` mantissa bits.
// `fn` ("finite"): no infinities, only S.1..1.1..1 is NaN (OCP E4M3FN).
// Deliberately generic and slow: this is the oracle, not the codec.
struct NarrowFormat {
  int e_bits;
  int m_bits;
  bool fn;

  uint32_t emax() const { return (1u << e_bits) - 1; }
  uint32_t mmask() const { return (1u << m_bits) - 1; }
  int bias() const { return (1 << (e_bits - 1)) - 1; }
  uint32_t sign_bit() const { return 1u << (e_bits + m_bits); }
  uint32_t max_finite_code() const {
    return fn ? ((emax() << m_bits) | (mmask() - 1)) : (((emax() - 1) << m_bits) | mmask());
  }
  uint32_t nan_code() const {
    return fn ? ((emax() << m_bits) | mmask()) : ((emax() << m_bits) | (1u << (m_bits - 1)));
  }

  double Decode(uint32_t code) const {
    const bool neg = (code & sign_bit()) != 0;
    const uint32_t e = (code >> m_bits) & emax();
    const uint32_t m = code & mmask();
    double mag;
    if (fn && e == emax() && m == mmask()) {
      return std::numeric_limits<double>::quiet_NaN();
    } else if (!fn && e == emax()) {
      if (m != 0) return std::numeric_limits<double>::quiet_NaN();
      mag = std::numeric_limits<double>::infinity();
    } else if (e == 0) {
      mag = std::ldexp(static_cast<double>(m), 1 - bias() - m_bits);
    } else {
      mag = std::ldexp(static_cast<double>(m | (1u << m_bits)),
                       static_cast<int>(e) - bias() - m_bits);
    }
    return neg ? -mag : mag;
  }

  uint32_t Encode(double v) const {
    const uint32_t sign = std::signbit(v) ? sign_bit() : 0;
    if (std::isnan(v)) return sign | nan_code();
    const double a = std::fabs(v);
    const uint32_t max_code = max_finite_code();
    const uint32_t overflow = fn ? nan_code() : (emax() << m_bits);
    if (std::isinf(a)) return sign | overflow;
    // Positive finite codes are ordered like their values: find the largest
    // code whose value is <= a.
    uint32_t lo = 0, hi = max_code;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo + 1) / 2;
      if (Decode(mid) <= a) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const double below = Decode(lo);
    if (below == a) return sign | lo;
    double above;
    uint32_t above_code;
    if (lo == max_code) {
      above = below + (below - Decode(lo - 1));  // one more ulp
      above_code = overflow;
    } else {
      above = Decode(lo + 1);
      above_code = lo + 1;
    }
    if (a - below < above - a) return sign | lo;
    if (a - below > above - a) return sign | above_code;
    // Tie: the even mantissa.
    return sign | ((lo & 1u) == 0 ? lo : above_code);
  }
};

constexpr NarrowFormat kHalf{5, 10, false};
constexpr NarrowFormat kBFloat16{8, 7, false};
constexpr NarrowFormat kE4M3{4, 3, true};
constexpr NarrowFormat kE5M2{5, 2, false};

template <typename T>
void Store(T v, unsigned char* dst) {
  std::memcpy(dst, &v, sizeof(T));
}
template <typename T>
T Load(const unsigned char* src) {
  T v;
  std::memcpy(&v, src, sizeof(T));
  return v;
}

void StoreDouble(DType dtype, double v, unsigned char* dst);

void StoreUInt64Bits(DType dtype, uint64_t v, unsigned char* dst) {
  // Integer types: the low bytes (little-endian host, as everywhere here).
  const int64_t w = ElementWidth(dtype);
  std::memcpy(dst, &v, static_cast<size_t>(w));
}

void StoreInt64(DType dtype, int64_t v, unsigned char* dst) {
  if (IsIntegerDType(dtype)) {
    StoreUInt64Bits(dtype, static_cast<uint64_t>(v), dst);
  } else if (dtype == DType::kBool) {
    dst[0] = v != 0 ? 1 : 0;
  } else {
    StoreDouble(dtype, static_cast<double>(v), dst);
  }
}

void StoreDouble(DType dtype, double v, unsigned char* dst) {
  switch (dtype) {
    case DType::kFloat32:
      Store(static_cast<float>(v), dst);
      return;
    case DType::kFloat64:
      Store(v, dst);
      return;
    case DType::kFloat16:
      Store(EncodeHalf(v), dst);
      return;
    case DType::kBFloat16:
      Store(EncodeBFloat16(v), dst);
      return;
    case DType::kFloat8E4M3:
      dst[0] = EncodeFloat8E4M3(v);
      return;
    case DType::kFloat8E5M2:
      dst[0] = EncodeFloat8E5M2(v);
      return;
    case DType::kComplex64:
      Store(static_cast<float>(v), dst);
      Store(0.0f, dst + 4);
      return;
    case DType::kComplex128:
      Store(v, dst);
      Store(0.0, dst + 8);
      return;
    case DType::kBool:
      dst[0] = v != 0 ? 1 : 0;
      return;
    default:
      break;
  }
  if (IsIntegerDType(dtype)) {
    if (v >= 9223372036854775808.0) {
      StoreUInt64Bits(dtype, static_cast<uint64_t>(v), dst);
    } else {
      StoreUInt64Bits(dtype, static_cast<uint64_t>(static_cast<int64_t>(v)), dst);
    }
  }
}

TestTensor Allocate(DType dtype, Shape shape) {
  TestTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.assign(static_cast<size_t>(t.num_bytes()) + 1, 0);
  return t;
}

// STRING tensor whose elements reference `values` (stored in the tensor).
TestTensor MakeStrings(Shape shape, std::vector<std::string> values) {
  TestTensor t = Allocate(DType::kString, std::move(shape));
  auto storage = std::make_shared<std::vector<std::string>>(std::move(values));
  for (size_t i = 0; i < storage->size(); ++i) {
    const StringRef ref{(*storage)[i].data(), (*storage)[i].size()};
    std::memcpy(t.bytes.data() + i * sizeof(StringRef), &ref, sizeof(StringRef));
  }
  t.strings = std::move(storage);
  return t;
}

void CheckCount(const TestTensor& t, size_t n) {
  if (static_cast<int64_t>(n) != t.num_elements()) {
    ADD_FAILURE() << "test bug: " << n << " values for shape " << Describe(t.view());
  }
}

uint64_t RandomBits(std::mt19937_64* rng) { return (*rng)(); }

std::string ElementHex(const TensorView& t, int64_t i) {
  const int64_t w = ElementWidth(t.dtype);
  const char* p = static_cast<const char*>(t.data) + i * w;
  if (t.dtype == DType::kString) {
    StringRef ref;
    std::memcpy(&ref, p, sizeof(ref));
    return absl::StrCat("\"", absl::CHexEscape(absl::string_view(ref.data, ref.size)), "\"");
  }
  return absl::StrCat("0x", absl::BytesToHexString(absl::string_view(p, static_cast<size_t>(w))),
                      " (bytes, little-endian)");
}

std::string Coords(const Shape& shape, int64_t flat) {
  std::vector<int64_t> c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = flat % shape[d];
    flat /= shape[d];
  }
  return VecToString(c);
}

}  // namespace

uint16_t EncodeHalf(double v) { return static_cast<uint16_t>(kHalf.Encode(v)); }
uint16_t EncodeBFloat16(double v) { return static_cast<uint16_t>(kBFloat16.Encode(v)); }
uint8_t EncodeFloat8E4M3(double v) { return static_cast<uint8_t>(kE4M3.Encode(v)); }
uint8_t EncodeFloat8E5M2(double v) { return static_cast<uint8_t>(kE5M2.Encode(v)); }
double DecodeHalf(uint16_t bits) { return kHalf.Decode(bits); }
double DecodeBFloat16(uint16_t bits) { return kBFloat16.Decode(bits); }
double DecodeFloat8E4M3(uint8_t bits) { return kE4M3.Decode(bits); }
double DecodeFloat8E5M2(uint8_t bits) { return kE5M2.Decode(bits); }

bool ExactlyRepresentable(DType dtype, double v) {
  if (std::isnan(v)) return false;
  switch (dtype) {
    case DType::kFloat32:
    case DType::kComplex64:
      return static_cast<double>(static_cast<float>(v)) == v;
    case DType::kFloat64:
    case DType::kComplex128:
    case DType::kString:
      return true;
    case DType::kFloat16:
      return DecodeHalf(EncodeHalf(v)) == v;
    case DType::kBFloat16:
      return DecodeBFloat16(EncodeBFloat16(v)) == v;
    case DType::kFloat8E4M3:
      return DecodeFloat8E4M3(EncodeFloat8E4M3(v)) == v;
    case DType::kFloat8E5M2:
      return DecodeFloat8E5M2(EncodeFloat8E5M2(v)) == v;
    case DType::kBool:
      return v == 0 || v == 1;
    default:
      break;
  }
  if (!IsIntegerDType(dtype) || std::trunc(v) != v) return false;
  const int bits = static_cast<int>(ElementWidth(dtype)) * 8;
  if (GetDTypeInfo(dtype).cls == DTypeClass::kSignedInt) {
    return v >= -std::ldexp(1.0, bits - 1) && v < std::ldexp(1.0, bits - 1);
  }
  return v >= 0 && v < std::ldexp(1.0, bits);
}

TestTensor Zeros(DType dtype, Shape shape) {
  if (dtype == DType::kString) {
    const int64_t n = NumElements(shape);
    return MakeStrings(std::move(shape), std::vector<std::string>(static_cast<size_t>(n)));
  }
  return Allocate(dtype, std::move(shape));
}

TestTensor FromInt64(DType dtype, Shape shape, const std::vector<int64_t>& values) {
  if (dtype == DType::kString) {
    std::vector<std::string> s;
    for (int64_t v : values) s.push_back(absl::StrCat(v));
    TestTensor t = MakeStrings(std::move(shape), std::move(s));
    CheckCount(t, values.size());
    return t;
  }
  TestTensor t = Allocate(dtype, std::move(shape));
  CheckCount(t, values.size());
  if (static_cast<int64_t>(values.size()) != t.num_elements()) return t;
  const int64_t w = ElementWidth(dtype);
  for (size_t i = 0; i < values.size(); ++i) StoreInt64(dtype, values[i], t.bytes.data() + i * w);
  return t;
}

TestTensor FromUInt64(DType dtype, Shape shape, const std::vector<uint64_t>& values) {
  if (dtype == DType::kString) {
    std::vector<std::string> s;
    for (uint64_t v : values) s.push_back(absl::StrCat(v));
    TestTensor t = MakeStrings(std::move(shape), std::move(s));
    CheckCount(t, values.size());
    return t;
  }
  TestTensor t = Allocate(dtype, std::move(shape));
  CheckCount(t, values.size());
  if (static_cast<int64_t>(values.size()) != t.num_elements()) return t;
  const int64_t w = ElementWidth(dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    unsigned char* dst = t.bytes.data() + i * w;
    if (IsIntegerDType(dtype)) {
      StoreUInt64Bits(dtype, values[i], dst);
    } else if (dtype == DType::kBool) {
      dst[0] = values[i] != 0 ? 1 : 0;
    } else {
      StoreDouble(dtype, static_cast<double>(values[i]), dst);
    }
  }
  return t;
}

TestTensor FromDouble(DType dtype, Shape shape, const std::vector<double>& values) {
  if (dtype == DType::kString) {
    std::vector<std::string> s;
    for (double v : values) s.push_back(absl::StrCat(v));
    TestTensor t = MakeStrings(std::move(shape), std::move(s));
    CheckCount(t, values.size());
    return t;
  }
  TestTensor t = Allocate(dtype, std::move(shape));
  CheckCount(t, values.size());
  if (static_cast<int64_t>(values.size()) != t.num_elements()) return t;
  const int64_t w = ElementWidth(dtype);
  for (size_t i = 0; i < values.size(); ++i) StoreDouble(dtype, values[i], t.bytes.data() + i * w);
  return t;
}

TestTensor FromBytes(DType dtype, Shape shape, std::vector<unsigned char> bytes) {
  TestTensor t = Allocate(dtype, std::move(shape));
  if (static_cast<int64_t>(bytes.size()) != t.num_bytes()) {
    ADD_FAILURE() << "test bug: " << bytes.size() << " bytes for " << Describe(t.view());
    return t;
  }
  std::memcpy(t.bytes.data(), bytes.data(), bytes.size());
  return t;
}

TestTensor FromBits(DType dtype, Shape shape, const std::vector<uint64_t>& bits) {
  TestTensor t = Allocate(dtype, std::move(shape));
  CheckCount(t, bits.size());
  const int64_t w = ElementWidth(dtype);
  if (static_cast<int64_t>(bits.size()) != t.num_elements() || w > 8) {
    ADD_FAILURE() << "test bug: FromBits on " << Describe(t.view());
    return t;
  }
  for (size_t i = 0; i < bits.size(); ++i) {
    std::memcpy(t.bytes.data() + i * w, &bits[i], static_cast<size_t>(w));
  }
  return t;
}

TestTensor FromStrings(Shape shape, const std::vector<std::string>& values) {
  TestTensor t = MakeStrings(std::move(shape), values);
  CheckCount(t, values.size());
  return t;
}

TestTensor RandomTensor(DType dtype, Shape shape, std::mt19937_64* rng) {
  const int64_t n = NumElements(shape);
  if (dtype == DType::kString) {
    std::vector<std::string> s(static_cast<size_t>(n));
    for (auto& str : s) {
      const uint64_t kind = RandomBits(rng) % 16;
      const size_t len = kind == 0   ? 0
                         : kind == 1 ? 40 + RandomBits(rng) % 60
                                     : RandomBits(rng) % 12;
      str.resize(len);
      // Bytes 0..255, so embedded NULs and invalid UTF-8 appear.
      for (auto& c : str) c = static_cast<char>(RandomBits(rng) & 0xFF);
    }
    return MakeStrings(std::move(shape), std::move(s));
  }
  TestTensor t = Allocate(dtype, std::move(shape));
  if (dtype == DType::kBool) {
    for (int64_t i = 0; i < n; ++i) t.bytes[i] = static_cast<unsigned char>(RandomBits(rng) & 1);
    return t;
  }
  const int64_t nb = t.num_bytes();
  for (int64_t i = 0; i < nb; i += 8) {
    const uint64_t r = RandomBits(rng);
    std::memcpy(t.bytes.data() + i, &r, static_cast<size_t>(std::min<int64_t>(8, nb - i)));
  }
  return t;
}

std::vector<int64_t> ToInt64(const TensorView& t) {
  const int64_t n = t.num_elements();
  const int64_t w = ElementWidth(t.dtype);
  const auto* p = static_cast<const unsigned char*>(t.data);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char* e = p + i * w;
    int64_t v = 0;
    switch (t.dtype) {
      case DType::kInt8:
        v = Load<int8_t>(e);
        break;
      case DType::kInt16:
        v = Load<int16_t>(e);
        break;
      case DType::kInt32:
        v = Load<int32_t>(e);
        break;
      case DType::kInt64:
        v = Load<int64_t>(e);
        break;
      case DType::kUInt8:
        v = Load<uint8_t>(e);
        break;
      case DType::kUInt16:
        v = Load<uint16_t>(e);
        break;
      case DType::kUInt32:
        v = Load<uint32_t>(e);
        break;
      case DType::kUInt64:
        v = static_cast<int64_t>(Load<uint64_t>(e));
        break;
      case DType::kBool:
        v = e[0];
        break;
      case DType::kFloat32:
        v = static_cast<int64_t>(Load<float>(e));
        break;
      case DType::kFloat64:
        v = static_cast<int64_t>(Load<double>(e));
        break;
      case DType::kFloat16:
        v = static_cast<int64_t>(DecodeHalf(Load<uint16_t>(e)));
        break;
      case DType::kBFloat16:
        v = static_cast<int64_t>(DecodeBFloat16(Load<uint16_t>(e)));
        break;
      case DType::kFloat8E4M3:
        v = static_cast<int64_t>(DecodeFloat8E4M3(e[0]));
        break;
      case DType::kFloat8E5M2:
        v = static_cast<int64_t>(DecodeFloat8E5M2(e[0]));
        break;
      case DType::kComplex64:
        v = static_cast<int64_t>(Load<float>(e));
        break;
      case DType::kComplex128:
        v = static_cast<int64_t>(Load<double>(e));
        break;
      case DType::kString: {
        const StringRef ref = Load<StringRef>(e);
        v = std::strtoll(std::string(ref.data, ref.size).c_str(), nullptr, 10);
        break;
      }
      default:
        break;
    }
    out.push_back(v);
  }
  return out;
}

::testing::AssertionResult BitwiseEqual(const TensorView& expected, const TensorView& actual) {
  if (expected.dtype != actual.dtype) {
    return ::testing::AssertionFailure() << "dtype: expected " << DTypeName(expected.dtype)
                                         << ", got " << DTypeName(actual.dtype);
  }
  if (expected.shape != actual.shape) {
    return ::testing::AssertionFailure()
           << "shape: expected " << VecToString({expected.shape.begin(), expected.shape.end()})
           << ", got " << VecToString({actual.shape.begin(), actual.shape.end()});
  }
  const int64_t n = expected.num_elements();
  const int64_t w = ElementWidth(expected.dtype);
  if (n > 0 && actual.data == nullptr) {
    return ::testing::AssertionFailure() << "actual data is null for " << n << " elements";
  }
  const auto* e = static_cast<const char*>(expected.data);
  const auto* a = static_cast<const char*>(actual.data);
  int64_t mismatches = 0;
  int64_t first = -1;
  for (int64_t i = 0; i < n; ++i) {
    bool same;
    if (expected.dtype == DType::kString) {
      const StringRef re = Load<StringRef>(reinterpret_cast<const unsigned char*>(e + i * w));
      const StringRef ra = Load<StringRef>(reinterpret_cast<const unsigned char*>(a + i * w));
      same = re.size == ra.size && (re.size == 0 || std::memcmp(re.data, ra.data, re.size) == 0);
    } else {
      same = std::memcmp(e + i * w, a + i * w, static_cast<size_t>(w)) == 0;
    }
    if (!same) {
      if (first < 0) first = i;
      ++mismatches;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << mismatches << " of " << n << " elements of " << Describe(expected)
         << " differ; first at flat index " << first << " = " << Coords(expected.shape, first)
         << ": expected " << ElementHex(expected, first) << ", got " << ElementHex(actual, first);
}

::testing::AssertionResult Matches(const TestTensor& expected, const absl::StatusOr<Tensor>& got) {
  if (!got.ok()) return ::testing::AssertionFailure() << "op failed: " << got.status();
  return BitwiseEqual(expected.view(), got->view());
}

const OpRegistry& Builtins() {
  static const OpRegistry* const registry = [] {
    auto* r = new OpRegistry();
    RegisterBuiltinOps(r);
    return r;
  }();
  return *registry;
}

namespace {
std::vector<TensorView> Views(const std::vector<TestTensor>& inputs) {
  std::vector<TensorView> views;
  views.reserve(inputs.size());
  for (const TestTensor& t : inputs) views.push_back(t.view());
  return views;
}
}  // namespace

absl::StatusOr<Tensor> RunOp(absl::string_view op, const std::vector<TestTensor>& inputs,
                             const Attrs& attrs) {
  const std::vector<TensorView> views = Views(inputs);
  return ExecuteOp(Builtins(), op, views, attrs);
}

absl::StatusOr<PreparedOp> PrepareOnly(absl::string_view op, const std::vector<TestTensor>& inputs,
                                       const Attrs& attrs) {
  const std::vector<TensorView> views = Views(inputs);
  return Builtins().Prepare(op, views, attrs);
}

std::string Describe(const TensorView& t) {
  return absl::StrCat(DTypeName(t.dtype), "[", absl::StrJoin(t.shape, ","), "]");
}

std::string VecToString(const std::vector<int64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

void ExpectStatus(const absl::Status& status, absl::StatusCode code,
                  std::initializer_list<std::string> parts) {
  EXPECT_EQ(status.code(), code) << "status: " << status;
  const std::string message(status.message());
  for (const std::string& part : parts) {
    EXPECT_THAT(message, ::testing::HasSubstr(part));
  }
  EXPECT_LT(message.size(), 1024u) << "message too long: " << message.substr(0, 200) << "...";
}

}  // namespace test
}  // namespace tensorops
