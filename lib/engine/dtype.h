// Element types a checkpoint may store, and their conversion to the engine's fp32.
#ifndef YOCO_LIB_ENGINE_DTYPE_H_
#define YOCO_LIB_ENGINE_DTYPE_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace yoco {

enum class DType { kF32, kBF16, kF16 };

// Safetensors' name for the type ("F32", "BF16", "F16"); nullopt for any other name.
std::optional<DType> DTypeFromName(std::string_view name);
std::string_view DTypeName(DType dtype);
int DTypeSize(DType dtype);

inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round-to-nearest-even, NaN kept quiet.
inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float F16ToFloat(uint16_t bits);

// Index of the first NaN or infinity among `n` elements of `dtype` at `data`; -1 when all are
// finite. Checks exponent bits only, so it costs one pass of integer compares.
int64_t FirstNonFinite(DType dtype, const void* data, int64_t n);

// Converts `count` elements of `dtype` at `src` (any alignment) to fp32 / to bf16 (rounded to
// nearest even).
void ConvertToFloat(DType dtype, const void* src, int64_t count, float* dst);
void ConvertToBf16(DType dtype, const void* src, int64_t count, uint16_t* dst);

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_DTYPE_H_
