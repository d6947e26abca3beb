// Conversions between float and the narrow floating formats, used where values
// travel as floats (the proto's float_data) but are stored narrow.
// Narrowing rounds to nearest, ties to even. NaN payload bits that fit the
// narrow format are kept (so narrow -> float -> narrow is the identity for
// every bit pattern, NaNs included), and the sign of zero is kept.
#ifndef TENSOROPS_KERNELS_FLOAT_FORMATS_H_
#define TENSOROPS_KERNELS_FLOAT_FORMATS_H_

#include <cstdint>

namespace tensorops {

// IEEE 754 binary16.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

// bfloat16: the top half of a binary32.
uint16_t FloatToBFloat16(float f);
float BFloat16ToFloat(uint16_t b);

// FLOAT8 E4M3FN (OCP / ONNX): bias 7, no infinities, S.1111.111 is NaN, max 448.
// Values beyond the largest finite magnitude after rounding, and infinities, become NaN.
uint8_t FloatToFloat8E4M3(float f);
float Float8E4M3ToFloat(uint8_t v);

// FLOAT8 E5M2: bias 15, IEEE-like (infinities and NaNs), max 57344.
uint8_t FloatToFloat8E5M2(float f);
float Float8E5M2ToFloat(uint8_t v);

// From a double (a JSON number), rounded once, to nearest even, straight to
// the narrow format: through a float first would round twice (a double just
// above a half-way point of binary16 can land on it as a float and then go
// to even). Beyond the format's largest finite value after rounding:
// infinity. NaN stays NaN; the sign of zero is kept.
float DoubleToFloat(double x);
uint16_t DoubleToHalf(double x);
uint16_t DoubleToBFloat16(double x);

}  // namespace tensorops

#endif  // TENSOROPS_KERNELS_FLOAT_FORMATS_H_
