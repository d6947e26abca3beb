#include "kernels/float_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tensorops {
namespace {

// Plain bit manipulation throughout: no F16C, no float arithmetic on values
// that may be NaN (so signalling-NaN payloads are never quieted by the FPU).

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

constexpr uint32_t kF32SignMask = 0x80000000u;
constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32ExpMask = 0x7F800000u;  // also +inf
constexpr uint32_t kF32MantMask = 0x007FFFFFu;
constexpr int kF32MantBits = 23;
constexpr int kF32Bias = 127;

// A narrow binary format with `kExpBits` exponent bits and `kMantBits`
// mantissa bits (sign in the bit above them). `kIeee`: the all-ones exponent
// holds infinities and NaNs (FLOAT16, E5M2); otherwise it is the E4M3FN
// layout, where only S.1111.111 is NaN and everything else is finite.
template <int kExpBits, int kMantBits, bool kIeee>
struct NarrowFormat {
  static constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  static constexpr uint32_t kExpAllOnes = (1u << kExpBits) - 1;
  static constexpr uint32_t kAbsMask = (1u << (kExpBits + kMantBits)) - 1;
  static constexpr uint32_t kSignBit = 1u << (kExpBits + kMantBits);
  static constexpr uint32_t kMantMask = (1u << kMantBits) - 1;
  static constexpr int kShift = kF32MantBits - kMantBits;     // mantissa bits dropped
  static constexpr uint32_t kInf = kExpAllOnes << kMantBits;  // kIeee only
  static constexpr uint32_t kNaN = kAbsMask;                  // E4M3FN's only NaN
  // Largest finite magnitude's encoding.
  static constexpr uint32_t kMaxFinite = kIeee ? kInf - 1 : kAbsMask - 1;

  static uint32_t FromFloat(float f) {
    const uint32_t bits = FloatBits(f);
    const uint32_t sign = (bits & kF32SignMask) ? kSignBit : 0;
    const uint32_t abs = bits & kF32AbsMask;

    if (abs > kF32ExpMask) {  // NaN
      if (!kIeee) return sign | kNaN;
      uint32_t payload = (abs & kF32MantMask) >> kShift;
      // The payload's top bits may all be zero; set the quiet bit so it stays NaN.
      if (payload == 0) payload = 1u << (kMantBits - 1);
      return sign | kInf | payload;
    }
    if (abs == kF32ExpMask) return sign | (kIeee ? kInf : kNaN);  // +-inf

    const int exp = static_cast<int>(abs >> kF32MantBits) - kF32Bias;  // unbiased
    uint32_t r;
    if (exp >= 1 - kBias) {
      // Normal in the narrow format (before rounding): rebias, then round the
      // dropped bits to nearest even. A carry out of the mantissa correctly
      // bumps the exponent (and may reach the overflow encoding).
      r = abs - (static_cast<uint32_t>(kF32Bias - kBias) << kF32MantBits);
      r += ((1u << (kShift - 1)) - 1) + ((r >> kShift) & 1);
      r >>= kShift;
    } else {
      // Subnormal (or zero) in the narrow format: m * 2^(1 - bias - mbits).
      // Float subnormals are far below half the smallest narrow subnormal.
      if (abs < 0x00800000u) return sign;
      const uint32_t sig = (abs & kF32MantMask) | 0x00800000u;  // 24 bits
      const int shift = (1 - kBias - exp) + kShift;             // >= kShift + 1
      if (shift > 24) return sign;                              // below half the smallest subnormal
      r = sig >> shift;
      const uint32_t rem = sig & ((1u << shift) - 1);
      const uint32_t half = 1u << (shift - 1);
      if (rem > half || (rem == half && (r & 1))) ++r;  // may become the min normal
    }
    if (r > kMaxFinite) return sign | (kIeee ? kInf : kNaN);
    return sign | r;
  }

  static float ToFloat(uint32_t v) {
    const uint32_t sign = (v & kSignBit) ? kF32SignMask : 0;
    const uint32_t e = (v >> kMantBits) & kExpAllOnes;
    uint32_t m = v & kMantMask;
    if (kIeee ? e == kExpAllOnes : (v & kAbsMask) == kNaN) {
      // Infinity (m == 0) or NaN with its payload in the top mantissa bits.
      return BitsToFloat(sign | kF32ExpMask | (m << kShift));
    }
    if (e == 0) {
      if (m == 0) return BitsToFloat(sign);
      // Subnormal: normalise so the leading 1 becomes the implicit bit.
      int exp = 1 - kBias;
      while ((m & (1u << kMantBits)) == 0) {
        m <<= 1;
        --exp;
      }
      m &= kMantMask;
      return BitsToFloat(sign | (static_cast<uint32_t>(exp + kF32Bias) << kF32MantBits) |
                         (m << kShift));
    }
    const uint32_t fe = e - kBias + kF32Bias;
    return BitsToFloat(sign | (fe << kF32MantBits) | (m << kShift));
  }
};

using Half = NarrowFormat<5, 10, true>;
using E4M3FN = NarrowFormat<4, 3, false>;
using E5M2 = NarrowFormat<5, 2, true>;

static_assert(Half::kMaxFinite == 0x7BFF, "65504");
static_assert(E4M3FN::kMaxFinite == 0x7E, "448");
static_assert(E5M2::kMaxFinite == 0x7B, "57344");

// Rounds `x` to nearest even with `bits` significant bits and subnormals
// below 2^`min_exp` (spacing 2^(min_exp - bits + 1)): exact in double.
double RoundToPrecision(double x, int bits, int min_exp) {
  if (!std::isfinite(x) || x == 0) return x;
  int e = 0;
  std::frexp(x, &e);  // x = m * 2^e, 0.5 <= |m| < 1
  const int exp = std::max(e - 1, min_exp);
  const int shift = bits - 1 - exp;
  return std::ldexp(std::nearbyint(std::ldexp(x, shift)), -shift);
}

// A double already rounded to float precision (or fewer bits), as a float:
// beyond FLT_MAX is infinity (a plain cast would be undefined behaviour).
float NarrowToFloat(double r) {
  if (std::isfinite(r) && std::fabs(r) > std::numeric_limits<float>::max()) {
    return std::signbit(r) ? -std::numeric_limits<float>::infinity()
                           : std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(r);
}

}  // namespace

uint16_t FloatToHalf(float f) { return static_cast<uint16_t>(Half::FromFloat(f)); }
float HalfToFloat(uint16_t h) { return Half::ToFloat(h); }

uint16_t FloatToBFloat16(float f) {
  const uint32_t bits = FloatBits(f);
  if ((bits & kF32AbsMask) > kF32ExpMask) {  // NaN: keep the top payload bits
    uint32_t out = bits >> 16;
    if ((out & 0x7F) == 0) out |= 0x40;  // payload lived only in the low half
    return static_cast<uint16_t>(out);
  }
  // bfloat16 shares binary32's exponent: rounding the low 16 bits to nearest
  // even handles subnormals, and overflow carries into the infinity encoding.
  const uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1);
  return static_cast<uint16_t>(rounded >> 16);
}

float BFloat16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

uint8_t FloatToFloat8E4M3(float f) { return static_cast<uint8_t>(E4M3FN::FromFloat(f)); }
float Float8E4M3ToFloat(uint8_t v) { return E4M3FN::ToFloat(v); }

uint8_t FloatToFloat8E5M2(float f) { return static_cast<uint8_t>(E5M2::FromFloat(f)); }
float Float8E5M2ToFloat(uint8_t v) { return E5M2::ToFloat(v); }

// binary32: the hardware's conversion rounds to nearest even within the
// float range; beyond it (where a cast is undefined) round by hand: just
// above FLT_MAX may still round down to it.
float DoubleToFloat(double x) {
  if (!(std::fabs(x) > std::numeric_limits<float>::max())) return static_cast<float>(x);
  return NarrowToFloat(RoundToPrecision(x, 24, -126));
}

uint16_t DoubleToHalf(double x) {
  // binary16: 11 significant bits, min normal 2^-14; beyond 65504 after
  // rounding is infinity (FloatToHalf of the exact float does that).
  return FloatToHalf(NarrowToFloat(RoundToPrecision(x, 11, -14)));
}
uint16_t DoubleToBFloat16(double x) {
  // bfloat16: 8 significant bits, min normal 2^-126. The rounded value is a
  // float (or beyond FLT_MAX: infinity).
  return FloatToBFloat16(NarrowToFloat(RoundToPrecision(x, 8, -126)));
}

}  // namespace tensorops
