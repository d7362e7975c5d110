// KvRows: the rows of a sequence's shared K (or V), each kv_dim values, held in fp32 or in bf16.
// bf16 halves what every cross-decoder layer reads per decode step (the reference itself keeps
// its cache in bf16); values are rounded to nearest even once, when a row is appended, and
// every reader (prefill and decode attention, bundles, snapshots) sees the same rounded values.
#ifndef YOCO_LIB_ENGINE_KV_ROWS_H_
#define YOCO_LIB_ENGINE_KV_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/cache_line_allocator.h"

namespace yoco {

enum class KvDtype : uint32_t { kF32 = 0, kBF16 = 1 };  // values as stored in bundles

// "f32", "bf16" (flags and reports).
std::string KvDtypeName(KvDtype dtype);
absl::StatusOr<KvDtype> ParseKvDtype(absl::string_view name);
inline int64_t KvDtypeBytes(KvDtype dtype) { return dtype == KvDtype::kF32 ? 4 : 2; }

class KvRows {
 public:
  KvRows() = default;
  KvRows(KvDtype dtype, int64_t width) : dtype_(dtype), width_(width) {}

  KvDtype dtype() const { return dtype_; }
  int64_t width() const { return width_; }
  int64_t rows() const { return width_ == 0 ? 0 : values() / width_; }
  int64_t values() const {
    return static_cast<int64_t>(dtype_ == KvDtype::kF32 ? f32_.size() : bf16_.size());
  }
  int64_t bytes() const { return values() * KvDtypeBytes(dtype_); }

  // REQUIRES: the matching dtype.
  const float* f32() const { return f32_.data(); }
  float* mutable_f32() { return f32_.data(); }
  const uint16_t* bf16() const { return bf16_.data(); }

  // The stored bytes (little-endian values), for serialisation.
  const uint8_t* data() const;
  uint8_t* mutable_data();

  // Appends n rows of width() fp32 values, rounding them for bf16.
  void Append(const float* rows, int64_t n);
  // Appends rows [row0, row0 + n) of `from`. REQUIRES: same dtype and width.
  void AppendRows(const KvRows& from, int64_t row0, int64_t n);
  // Keeps the first n rows, or adds zero rows up to n.
  void Resize(int64_t n);
  void Reserve(int64_t n);
  // Rows [row0, row0 + n) widened to fp32 into `out` (n × width floats).
  void CopyToF32(int64_t row0, int64_t n, float* out) const;
  std::vector<float> ToF32() const;

  bool operator==(const KvRows&) const = default;

 private:
  KvDtype dtype_ = KvDtype::kF32;
  int64_t width_ = 0;
  // Cache-line aligned: decode attention reads the rows with 64-byte loads.
  cpu::CacheLineVector<float> f32_;      // dtype kF32
  cpu::CacheLineVector<uint16_t> bf16_;  // dtype kBF16
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_KV_ROWS_H_
