// Element type names and conversions.
#include "lib/engine/dtype.h"

#include <cmath>

namespace yoco {

std::optional<DType> DTypeFromName(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  return std::nullopt;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
  }
  return "?";
}

int DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

float F16ToFloat(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 31) {
    value = mantissa ? std::nanf("") : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return sign ? -value : value;
}

void ConvertToFloat(DType dtype, const void* src, int64_t count, float* dst) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(count) * 4);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t b;
        std::memcpy(&b, bytes + 2 * i, 2);
        dst[i] = Bf16ToFloat(b);
      }
      return;
    case DType::kF16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t b;
        std::memcpy(&b, bytes + 2 * i, 2);
        dst[i] = F16ToFloat(b);
      }
      return;
  }
}

void ConvertToBf16(DType dtype, const void* src, int64_t count, uint16_t* dst) {
  if (dtype == DType::kBF16) {
    std::memcpy(dst, src, static_cast<size_t>(count) * 2);
    return;
  }
  float buffer[1024];
  const int64_t elem = DTypeSize(dtype);
  for (int64_t i = 0; i < count; i += 1024) {
    const int64_t n = count - i < 1024 ? count - i : 1024;
    ConvertToFloat(dtype, static_cast<const uint8_t*>(src) + i * elem, n, buffer);
    for (int64_t j = 0; j < n; ++j) dst[i + j] = FloatToBf16(buffer[j]);
  }
}

int64_t FirstNonFinite(DType dtype, const void* data, int64_t n) {
  // All exponent bits set: infinity or NaN, in every one of these formats.
  auto scan = [n](const auto* p, auto mask) -> int64_t {
    for (int64_t i = 0; i < n; ++i) {
      if ((p[i] & mask) == mask) return i;
    }
    return -1;
  };
  switch (dtype) {
    case DType::kF32:
      return scan(static_cast<const uint32_t*>(data), uint32_t{0x7F800000});
    case DType::kBF16:
      return scan(static_cast<const uint16_t*>(data), uint16_t{0x7F80});
    case DType::kF16:
      return scan(static_cast<const uint16_t*>(data), uint16_t{0x7C00});
  }
  return -1;
}

}  // namespace yoco
