// KvRows storage and conversions.
#include "lib/engine/kv_rows.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/engine/dtype.h"

namespace yoco {

std::string KvDtypeName(KvDtype dtype) { return dtype == KvDtype::kF32 ? "f32" : "bf16"; }

absl::StatusOr<KvDtype> ParseKvDtype(absl::string_view name) {
  if (name == "f32") return KvDtype::kF32;
  if (name == "bf16") return KvDtype::kBF16;
  return absl::InvalidArgumentError(absl::StrCat("unknown K/V dtype \"", name, "\" (f32 or bf16)"));
}

const uint8_t* KvRows::data() const {
  return dtype_ == KvDtype::kF32 ? reinterpret_cast<const uint8_t*>(f32_.data())
                                 : reinterpret_cast<const uint8_t*>(bf16_.data());
}

uint8_t* KvRows::mutable_data() {
  return dtype_ == KvDtype::kF32 ? reinterpret_cast<uint8_t*>(f32_.data())
                                 : reinterpret_cast<uint8_t*>(bf16_.data());
}

void KvRows::Append(const float* rows, int64_t n) {
  const int64_t count = n * width_;
  if (dtype_ == KvDtype::kF32) {
    f32_.insert(f32_.end(), rows, rows + count);
    return;
  }
  const size_t at = bf16_.size();
  bf16_.resize(at + count);
  for (int64_t i = 0; i < count; ++i) bf16_[at + i] = FloatToBf16(rows[i]);
}

void KvRows::AppendRows(const KvRows& from, int64_t row0, int64_t n) {
  if (dtype_ == KvDtype::kF32) {
    const float* src = from.f32_.data() + row0 * width_;
    f32_.insert(f32_.end(), src, src + n * width_);
  } else {
    const uint16_t* src = from.bf16_.data() + row0 * width_;
    bf16_.insert(bf16_.end(), src, src + n * width_);
  }
}

void KvRows::Resize(int64_t n) {
  if (dtype_ == KvDtype::kF32) {
    f32_.resize(n * width_, 0.0f);
  } else {
    bf16_.resize(n * width_, 0);
  }
}

void KvRows::Reserve(int64_t n) {
  if (dtype_ == KvDtype::kF32) {
    f32_.reserve(n * width_);
  } else {
    bf16_.reserve(n * width_);
  }
}

void KvRows::CopyToF32(int64_t row0, int64_t n, float* out) const {
  const int64_t begin = row0 * width_, count = n * width_;
  if (dtype_ == KvDtype::kF32) {
    if (count > 0) std::memcpy(out, f32_.data() + begin, count * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < count; ++i) out[i] = Bf16ToFloat(bf16_[begin + i]);
}

std::vector<float> KvRows::ToF32() const {
  std::vector<float> out(values());
  CopyToF32(0, rows(), out.data());
  return out;
}

}  // namespace yoco
