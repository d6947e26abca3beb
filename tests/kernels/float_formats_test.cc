#include "kernels/float_formats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "tests/seed.h"

namespace tensorops {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// One narrow format as the tests see it.
struct Format {
  const char* name;
  int bits;  // 8 or 16
  uint32_t (*narrow)(float);
  float (*widen)(uint32_t);
  // Bit pattern of +max finite and its value.
  uint32_t max_bits;
  double max_value;
  bool has_inf;   // false: E4M3FN (overflow -> NaN)
  uint32_t inf;   // +inf encoding (has_inf) or +NaN encoding (E4M3FN)
  uint32_t sign;  // sign bit
  uint32_t abs_mask;
};

const Format kHalf = {"FLOAT16",
                      16,
                      [](float f) -> uint32_t { return FloatToHalf(f); },
                      [](uint32_t v) { return HalfToFloat(static_cast<uint16_t>(v)); },
                      0x7BFF,
                      65504.0,
                      true,
                      0x7C00,
                      0x8000,
                      0x7FFF};
const Format kBF16 = {"BFLOAT16",
                      16,
                      [](float f) -> uint32_t { return FloatToBFloat16(f); },
                      [](uint32_t v) { return BFloat16ToFloat(static_cast<uint16_t>(v)); },
                      0x7F7F,
                      static_cast<double>(FromBits(0x7F7F0000u)),
                      true,
                      0x7F80,
                      0x8000,
                      0x7FFF};
const Format kE4M3 = {"FLOAT8_E4M3",
                      8,
                      [](float f) -> uint32_t { return FloatToFloat8E4M3(f); },
                      [](uint32_t v) { return Float8E4M3ToFloat(static_cast<uint8_t>(v)); },
                      0x7E,
                      448.0,
                      false,
                      0x7F,
                      0x80,
                      0x7F};
const Format kE5M2 = {"FLOAT8_E5M2",
                      8,
                      [](float f) -> uint32_t { return FloatToFloat8E5M2(f); },
                      [](uint32_t v) { return Float8E5M2ToFloat(static_cast<uint8_t>(v)); },
                      0x7B,
                      57344.0,
                      true,
                      0x7C,
                      0x80,
                      0x7F};

const Format* const kFormats[] = {&kHalf, &kBF16, &kE4M3, &kE5M2};

bool IsNarrowNaN(const Format& f, uint32_t v) {
  const uint32_t a = v & f.abs_mask;
  return f.has_inf ? a > f.inf : a == f.inf;
}

// narrow -> float -> narrow is the identity for every bit pattern, NaNs included,
// and widening is exact: NaN stays NaN with the same sign, finite values keep
// their order.
TEST(FloatFormatsTest, ExhaustiveRoundTripIsIdentity) {
  for (const Format* f : kFormats) {
    SCOPED_TRACE(f->name);
    const uint32_t count = 1u << f->bits;
    int failures = 0;
    for (uint32_t v = 0; v < count && failures < 10; ++v) {
      const float wide = f->widen(v);
      const uint32_t back = f->narrow(wide);
      if (back != v) {
        ++failures;
        ADD_FAILURE() << absl::StrFormat("pattern 0x%x -> %a (0x%08x) -> 0x%x", v, wide, Bits(wide),
                                         back);
      }
      EXPECT_EQ(std::isnan(wide), IsNarrowNaN(*f, v)) << v;
      EXPECT_EQ(std::signbit(wide), (v & f->sign) != 0) << v;
    }
  }
}

// Reference rounding: the finite narrow values are enumerated and sorted, and
// each input is rounded by comparing exact distances in double.
class Reference {
 public:
  explicit Reference(const Format& f) : f_(f) {
    for (uint32_t v = 0; v <= f.max_bits; ++v) {
      values_.push_back(static_cast<double>(f.widen(v)));
      patterns_.push_back(v);
    }
    // Positive finite patterns widen to increasing values.
    for (size_t i = 1; i < values_.size(); ++i) EXPECT_LT(values_[i - 1], values_[i]);
    // The first magnitude that no longer rounds to max: one ulp above max.
    overflow_ = values_.back() + (values_.back() - values_[values_.size() - 2]);
  }

  // Exact for every float, and for every double of the narrow range (the
  // distances below are exact there).
  uint32_t Round(double x) const {
    const uint32_t sign = std::signbit(x) ? f_.sign : 0;
    if (std::isnan(x)) return 0;  // not used for NaN
    const double a = std::fabs(x);
    auto it = std::upper_bound(values_.begin(), values_.end(), a);
    const size_t lo = static_cast<size_t>(it - values_.begin()) - 1;  // values_[0] = 0 <= a
    double lo_v = values_[lo];
    if (lo_v == a) return sign | patterns_[lo];
    const bool beyond = lo + 1 == values_.size();
    const double hi_v = beyond ? overflow_ : values_[lo + 1];
    const double dl = a - lo_v, dh = hi_v - a;
    bool up = dh < dl;
    if (dh == dl) up = (patterns_[lo] & 1) != 0;  // ties to the even pattern
    if (!up) return sign | patterns_[lo];
    if (beyond) return sign | f_.inf;  // inf, or NaN for E4M3FN
    return sign | patterns_[lo + 1];
  }

  const std::vector<double>& values() const { return values_; }

 private:
  const Format& f_;
  std::vector<double> values_;
  std::vector<uint32_t> patterns_;
  double overflow_;
};

void CheckAgainstReference(const Format& f, const Reference& ref, float x) {
  if (std::isnan(x) || std::isinf(x)) return;  // covered by the table tests
  const uint32_t got = f.narrow(x);
  const uint32_t want = ref.Round(x);
  ASSERT_EQ(got, want) << absl::StrFormat("%s: %a (0x%08x)", f.name, x, Bits(x));
}

// Every tie between neighbouring values (and the floats just beside it), for
// every narrow format, both signs.
TEST(FloatFormatsTest, AllMidpointsRoundToNearestEven) {
  for (const Format* f : kFormats) {
    SCOPED_TRACE(f->name);
    Reference ref(*f);
    std::vector<double> points = ref.values();
    const double last = points.back();
    points.push_back(last + (last - points[points.size() - 2]));  // overflow threshold
    for (size_t i = 0; i + 1 < points.size(); ++i) {
      const float mid = static_cast<float>((points[i] + points[i + 1]) / 2);
      ASSERT_EQ(static_cast<double>(mid), (points[i] + points[i + 1]) / 2) << "midpoint exact";
      for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY),
                      static_cast<float>(points[i])}) {
        CheckAgainstReference(*f, ref, x);
        CheckAgainstReference(*f, ref, -x);
      }
    }
  }
}

TEST(FloatFormatsTest, RandomFloatsMatchReference) {
  std::mt19937 rng(::tensorops::testing::TestSeed(12345));
  for (const Format* f : kFormats) {
    SCOPED_TRACE(f->name);
    Reference ref(*f);
    for (int i = 0; i < 200000; ++i) {
      const float x = FromBits(static_cast<uint32_t>(rng()));
      CheckAgainstReference(*f, ref, x);
    }
    // Concentrate on the narrow range too: exponents in [-30, 20].
    std::uniform_int_distribution<int> exp(127 - 30, 127 + 20);
    for (int i = 0; i < 200000; ++i) {
      const uint32_t bits =
          (static_cast<uint32_t>(rng()) & 0x807FFFFFu) | (static_cast<uint32_t>(exp(rng)) << 23);
      CheckAgainstReference(*f, ref, FromBits(bits));
    }
  }
}

// From a double, rounded once: the doubles just beside each midpoint are
// where rounding through a float first would go wrong (the float would be
// the midpoint itself, and the tie then goes to even).
TEST(FloatFormatsTest, DoublesRoundOnceToNearestEven) {
  const struct {
    const Format* format;
    uint16_t (*narrow)(double);
  } formats[] = {{&kHalf, &DoubleToHalf}, {&kBF16, &DoubleToBFloat16}};
  for (const auto& f : formats) {
    SCOPED_TRACE(f.format->name);
    Reference ref(*f.format);
    std::vector<double> points = ref.values();
    const double last = points.back();
    points.push_back(last + (last - points[points.size() - 2]));
    int below_float_midpoint = 0;
    for (size_t i = 0; i + 1 < points.size(); ++i) {
      const double mid = (points[i] + points[i + 1]) / 2;
      for (double x : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY), points[i],
                       std::nextafter(mid, 0.0) - mid * 0x1p-40}) {
        for (double y : {x, -x}) {
          ASSERT_EQ(f.narrow(y), ref.Round(y)) << absl::StrFormat("%a", y);
        }
        // The hazard is real: this double narrows to the midpoint as a float.
        if (x != mid && static_cast<double>(static_cast<float>(x)) == mid) ++below_float_midpoint;
      }
    }
    EXPECT_GT(below_float_midpoint, 0);
  }
  EXPECT_EQ(DoubleToHalf(1e300), 0x7C00);
  EXPECT_EQ(DoubleToHalf(-1e300), 0xFC00);
  EXPECT_EQ(DoubleToBFloat16(1e300), 0x7F80);
  EXPECT_EQ(DoubleToHalf(-0.0), 0x8000);
  EXPECT_EQ(DoubleToHalf(std::numeric_limits<double>::infinity()), 0x7C00);
  EXPECT_TRUE(std::isnan(HalfToFloat(DoubleToHalf(std::nan("")))));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(DoubleToBFloat16(std::nan("")))));
}

TEST(FloatFormatsTest, DoublesToFloatBeyondItsRange) {
  const double max = std::numeric_limits<float>::max();
  const double ulp = max - std::nextafter(std::numeric_limits<float>::max(), 0.0f);
  EXPECT_EQ(DoubleToFloat(max), std::numeric_limits<float>::max());
  EXPECT_EQ(DoubleToFloat(max + ulp / 2 - ulp * 0x1p-20), std::numeric_limits<float>::max());
  EXPECT_EQ(DoubleToFloat(max + ulp / 2), std::numeric_limits<float>::infinity());  // tie: even
  EXPECT_EQ(DoubleToFloat(-1e39), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(DoubleToFloat(0.1), 0.1f);
  EXPECT_EQ(DoubleToFloat(1 + 0x1p-24), 1.0f);  // tie, even
  EXPECT_EQ(DoubleToFloat(1 + 0x1p-24 + 0x1p-50), std::nextafter(1.0f, 2.0f));
  EXPECT_TRUE(std::isnan(DoubleToFloat(std::nan(""))));
}

struct NarrowCase {
  const Format* format;
  float in;
  uint32_t want;
};

TEST(FloatFormatsTest, NarrowingTable) {
  const float kInf = std::numeric_limits<float>::infinity();
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  const NarrowCase cases[] = {
      // FLOAT16
      {&kHalf, 0.0f, 0x0000},
      {&kHalf, -0.0f, 0x8000},
      {&kHalf, 1.0f, 0x3C00},
      {&kHalf, 1.0f + 0x1p-11f, 0x3C00},      // tie, even stays down
      {&kHalf, 1.0f + 3 * 0x1p-11f, 0x3C02},  // tie, odd goes up
      {&kHalf, 1.0f + 0x1p-11f + 0x1p-20f, 0x3C01},
      {&kHalf, 65504.0f, 0x7BFF},  // max finite
      {&kHalf, 65519.99f, 0x7BFF},
      {&kHalf, 65520.0f, 0x7C00},  // tie at the top: to inf
      {&kHalf, -1e6f, 0xFC00},
      {&kHalf, kInf, 0x7C00},
      {&kHalf, -kInf, 0xFC00},
      {&kHalf, kNaN, 0x7E00},
      {&kHalf, 0x1p-14f, 0x0400},  // min normal
      {&kHalf, 0x1p-24f, 0x0001},  // min subnormal
      {&kHalf, 0x1p-25f, 0x0000},  // tie to even zero
      {&kHalf, -0x1p-25f, 0x8000},
      {&kHalf, 0x1.000002p-25f, 0x0001},
      {&kHalf, 3 * 0x1p-25f, 0x0002},  // tie between 1 and 2 -> 2
      {&kHalf, 5 * 0x1p-25f, 0x0002},  // tie between 2 and 3 -> 2
      {&kHalf, 0x1.ffcp-15f, 0x0400},  // max subnormal + half ulp: tie, up into min normal
      {&kHalf, 0x1.ff8p-15f, 0x03FF},  // max subnormal
      {&kHalf, 1e-30f, 0x0000},
      {&kHalf, std::numeric_limits<float>::denorm_min(), 0x0000},
      // BFLOAT16
      {&kBF16, 1.0f, 0x3F80},
      {&kBF16, -0.0f, 0x8000},
      {&kBF16, 1.0f + 0x1p-8f, 0x3F80},                     // tie, even
      {&kBF16, 1.0f + 3 * 0x1p-8f, 0x3F82},                 // tie, odd goes up
      {&kBF16, std::numeric_limits<float>::max(), 0x7F80},  // overflow -> inf
      {&kBF16, FromBits(0x7F7F7FFFu), 0x7F7F},
      {&kBF16, FromBits(0x7F7F8000u), 0x7F80},  // tie at the top: to inf
      {&kBF16, kInf, 0x7F80},
      {&kBF16, -kInf, 0xFF80},
      {&kBF16, FromBits(0x00008000u), 0x0000},  // subnormal tie to even
      {&kBF16, FromBits(0x00018000u), 0x0002},  // subnormal tie, odd goes up
      {&kBF16, FromBits(0x00008001u), 0x0001},
      // FLOAT8 E4M3FN
      {&kE4M3, 448.0f, 0x7E},
      {&kE4M3, -448.0f, 0xFE},
      {&kE4M3, 463.99f, 0x7E},
      {&kE4M3, 464.0f, 0x7E},   // tie between 448 and (NaN) 480: even 448
      {&kE4M3, 464.01f, 0x7F},  // rounds above 448 -> NaN
      {&kE4M3, -500.0f, 0xFF},
      {&kE4M3, 1e10f, 0x7F},
      {&kE4M3, kInf, 0x7F},
      {&kE4M3, -kInf, 0xFF},
      {&kE4M3, kNaN, 0x7F},
      {&kE4M3, -kNaN, 0xFF},
      {&kE4M3, 256.0f, 0x78},  // S.1111.000 is finite in E4M3FN
      {&kE4M3, 1.0f, 0x38},
      {&kE4M3, 1.0625f, 0x38},   // tie, even
      {&kE4M3, 1.1875f, 0x3A},   // tie, odd goes up
      {&kE4M3, 0x1p-6f, 0x08},   // min normal
      {&kE4M3, 0x1p-9f, 0x01},   // min subnormal
      {&kE4M3, 0x1p-10f, 0x00},  // tie to zero
      {&kE4M3, -0x1p-10f, 0x80},
      {&kE4M3, 3 * 0x1p-10f, 0x02},  // tie between 1 and 2 -> 2
      {&kE4M3, -0.0f, 0x80},
      // FLOAT8 E5M2
      {&kE5M2, 57344.0f, 0x7B},
      {&kE5M2, 61439.0f, 0x7B},
      {&kE5M2, 61440.0f, 0x7C},  // tie at the top: to inf
      {&kE5M2, -1e9f, 0xFC},
      {&kE5M2, kInf, 0x7C},
      {&kE5M2, -kInf, 0xFC},
      {&kE5M2, kNaN, 0x7E},
      {&kE5M2, 1.0f, 0x3C},
      {&kE5M2, 1.125f, 0x3C},    // tie, even
      {&kE5M2, 1.375f, 0x3E},    // tie, odd goes up
      {&kE5M2, 0x1p-14f, 0x04},  // min normal
      {&kE5M2, 0x1p-16f, 0x01},  // min subnormal
      {&kE5M2, 0x1p-17f, 0x00},  // tie to zero
      {&kE5M2, 3 * 0x1p-17f, 0x02},
      {&kE5M2, -0.0f, 0x80},
  };
  for (const NarrowCase& c : cases) {
    SCOPED_TRACE(absl::StrFormat("%s(%a)", c.format->name, c.in));
    EXPECT_EQ(c.format->narrow(c.in), c.want);
  }
}

struct NaNCase {
  const Format* format;
  uint32_t in;  // float bits
  uint32_t want;
};

// NaN payload: top mantissa bits kept, quiet bit forced when they are all zero,
// sign kept. E4M3FN has a single NaN per sign.
TEST(FloatFormatsTest, NaNPayloadsAndSigns) {
  const NaNCase cases[] = {
      {&kHalf, 0x7FC00000u, 0x7E00}, {&kHalf, 0xFFC00000u, 0xFE00},
      {&kHalf, 0x7F802000u, 0x7C01},  // signalling, payload in the kept bits
      {&kHalf, 0x7F800001u, 0x7E00},  // payload only in dropped bits -> quiet bit
      {&kHalf, 0xFF800001u, 0xFE00}, {&kHalf, 0x7FFFFFFFu, 0x7FFF},
      {&kBF16, 0x7FC00000u, 0x7FC0}, {&kBF16, 0x7F810000u, 0x7F81},
      {&kBF16, 0x7F800001u, 0x7FC0}, {&kBF16, 0xFF80FFFFu, 0xFFC0},
      {&kBF16, 0xFFFFFFFFu, 0xFFFF}, {&kE4M3, 0x7FC00000u, 0x7F},
      {&kE4M3, 0xFF800001u, 0xFF},   {&kE5M2, 0x7FC00000u, 0x7E},
      {&kE5M2, 0x7FA00000u, 0x7D},   {&kE5M2, 0x7F800001u, 0x7E},
      {&kE5M2, 0xFF800001u, 0xFE},
  };
  for (const NaNCase& c : cases) {
    SCOPED_TRACE(absl::StrFormat("%s(0x%08x)", c.format->name, c.in));
    EXPECT_EQ(c.format->narrow(FromBits(c.in)), c.want);
  }
}

struct WidenCase {
  const Format* format;
  uint32_t in;
  float want;
};

TEST(FloatFormatsTest, WideningTable) {
  const float kInf = std::numeric_limits<float>::infinity();
  const WidenCase cases[] = {
      {&kHalf, 0x7BFF, 65504.0f},     {&kHalf, 0x0001, 0x1p-24f},
      {&kHalf, 0x03FF, 0x1.ff8p-15f}, {&kHalf, 0x0400, 0x1p-14f},
      {&kHalf, 0x7C00, kInf},         {&kHalf, 0xFC00, -kInf},
      {&kHalf, 0xBC00, -1.0f},        {&kBF16, 0x3F80, 1.0f},
      {&kBF16, 0x7F80, kInf},         {&kBF16, 0x0001, FromBits(0x00010000u)},
      {&kE4M3, 0x7E, 448.0f},         {&kE4M3, 0x78, 256.0f},
      {&kE4M3, 0x01, 0x1p-9f},        {&kE4M3, 0x07, 7 * 0x1p-9f},
      {&kE4M3, 0x08, 0x1p-6f},        {&kE4M3, 0xB8, -1.0f},
      {&kE5M2, 0x7B, 57344.0f},       {&kE5M2, 0x7C, kInf},
      {&kE5M2, 0xFC, -kInf},          {&kE5M2, 0x01, 0x1p-16f},
      {&kE5M2, 0x04, 0x1p-14f},
  };
  for (const WidenCase& c : cases) {
    SCOPED_TRACE(absl::StrFormat("%s(0x%x)", c.format->name, c.in));
    EXPECT_EQ(Bits(c.format->widen(c.in)), Bits(c.want));
  }
  // Zeros keep their sign.
  for (const Format* f : kFormats) {
    SCOPED_TRACE(f->name);
    EXPECT_EQ(Bits(f->widen(0)), 0u);
    EXPECT_EQ(Bits(f->widen(f->sign)), 0x80000000u);
    EXPECT_TRUE(std::isnan(f->widen(f->has_inf ? (f->inf | 1) : f->inf)));
  }
  // E4M3FN: only S.1111.111 is NaN.
  EXPECT_TRUE(std::isnan(Float8E4M3ToFloat(0x7F)));
  EXPECT_TRUE(std::isnan(Float8E4M3ToFloat(0xFF)));
  EXPECT_TRUE(std::signbit(Float8E4M3ToFloat(0xFF)));
  EXPECT_EQ(Float8E4M3ToFloat(0x7E), 448.0f);
}

}  // namespace
}  // namespace tensorops
