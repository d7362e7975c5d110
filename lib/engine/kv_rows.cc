// KvRows storage and conversions.
#include "lib/engine/kv_rows.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/decode_attention.h"
#include "lib/engine/dtype.h"

namespace yoco {

std::string KvDtypeName(KvDtype dtype) { return dtype == KvDtype::kF32 ? "f32" : "bf16"; }

absl::StatusOr<KvDtype> ParseKvDtype(absl::string_view name) {
  if (name == "f32") return KvDtype::kF32;
  if (name == "bf16") return KvDtype::kBF16;
  return absl::InvalidArgumentError(absl::StrCat("unknown K/V dtype \"", name, "\" (f32 or bf16)"));
}

namespace {

// Calls f(storage) with the vector of the rows' dtype.
template <typename F>
void WithStorage(KvDtype dtype, cpu::CacheLineVector<float>& f32,
                 cpu::CacheLineVector<uint16_t>& bf16, F f) {
  if (dtype == KvDtype::kF32) {
    f(f32);
  } else {
    f(bf16);
  }
}

}  // namespace

int64_t KvRows::Index(int64_t r, int64_t c) const {
  switch (layout_) {
    case KvLayout::kKeyLanes:
      return cpu::KeyLaneIndex(r, c, width_);
    case KvLayout::kValueStrips:
      return cpu::ValueStripIndex(r, c, width_);
    default:
      return r * width_ + c;
  }
}

template <typename F>
void KvRows::ForEachRun(int64_t r, F f) const {
  switch (layout_) {
    case KvLayout::kKeyLanes:
      f(Index(r, 0), cpu::kKeyLaneRows, 0, width_);
      return;
    case KvLayout::kValueStrips:
      for (int64_t c = 0; c < width_; c += cpu::kValueStripWidth)
        f(Index(r, c), 1, c, std::min(cpu::kValueStripWidth, width_ - c));
      return;
    default:
      f(r * width_, 1, 0, width_);
  }
}

int64_t KvRows::BlockRows() const {
  switch (layout_) {
    case KvLayout::kKeyLanes:
      return cpu::kKeyLaneRows;
    case KvLayout::kValueStrips:
      return cpu::kValueStripRows;
    default:
      return 1;
  }
}

int64_t KvRows::StorageValues(int64_t n) const {
  return (n + BlockRows() - 1) / BlockRows() * BlockRows() * width_;
}

// Grows or shrinks the storage to hold n rows; values past row n in a kept block are zeroed, so
// padding stays zero and equal rows mean equal storage.
template <typename T>
void KvRows::ResizeStorage(cpu::CacheLineVector<T>* v, int64_t n) {
  if (n < rows_ && layout_ != KvLayout::kRows) {
    const int64_t block_end = (n + BlockRows() - 1) / BlockRows() * BlockRows();
    for (int64_t r = n; r < std::min(rows_, block_end); ++r)
      for (int64_t c = 0; c < width_; ++c) (*v)[Index(r, c)] = T{};
  }
  v->resize(StorageValues(n), T{});
  rows_ = n;
}

uint8_t* KvRows::mutable_data() {
  return dtype_ == KvDtype::kF32 ? reinterpret_cast<uint8_t*>(f32_.data())
                                 : reinterpret_cast<uint8_t*>(bf16_.data());
}

void KvRows::CopyRowBytes(int64_t row0, int64_t n, uint8_t* out) const {
  auto copy = [&](const auto& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    if (layout_ == KvLayout::kRows) {
      if (n > 0) std::memcpy(out, v.data() + row0 * width_, n * width_ * sizeof(T));
      return;
    }
    for (int64_t r = 0; r < n; ++r) {
      T* o = reinterpret_cast<T*>(out) + r * width_;
      ForEachRun(row0 + r, [&](int64_t at, int64_t stride, int64_t c, int64_t count) {
        for (int64_t i = 0; i < count; ++i) o[c + i] = v[at + i * stride];
      });
    }
  };
  if (dtype_ == KvDtype::kF32) {
    copy(f32_);
  } else {
    copy(bf16_);
  }
}

void KvRows::AppendRowBytes(const uint8_t* in, int64_t n) {
  const int64_t r0 = rows_;
  WithStorage(dtype_, f32_, bf16_, [&](auto& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    ResizeStorage(&v, r0 + n);
    if (layout_ == KvLayout::kRows) {
      if (n > 0) std::memcpy(v.data() + r0 * width_, in, n * width_ * sizeof(T));
      return;
    }
    for (int64_t r = 0; r < n; ++r) {
      const T* src = reinterpret_cast<const T*>(in) + r * width_;
      ForEachRun(r0 + r, [&](int64_t at, int64_t stride, int64_t c, int64_t count) {
        for (int64_t i = 0; i < count; ++i) v[at + i * stride] = src[c + i];
      });
    }
  });
}

void KvRows::Append(const float* rows, int64_t n) {
  if (dtype_ == KvDtype::kF32) {  // fp32 rows are already the row bytes
    AppendRowBytes(reinterpret_cast<const uint8_t*>(rows), n);
    return;
  }
  const int64_t r0 = rows_;
  ResizeStorage(&bf16_, r0 + n);
  for (int64_t r = 0; r < n; ++r) {
    const float* src = rows + r * width_;
    ForEachRun(r0 + r, [&](int64_t at, int64_t stride, int64_t c, int64_t count) {
      for (int64_t i = 0; i < count; ++i) bf16_[at + i * stride] = FloatToBf16(src[c + i]);
    });
  }
}

void KvRows::AppendRows(const KvRows& from, int64_t row0, int64_t n) {
  const int64_t r0 = rows_;
  const int64_t B = BlockRows();
  auto append = [&](auto& to, const auto& src) {
    ResizeStorage(&to, r0 + n);
    int64_t done = 0;
    // Whole blocks (or rows) in the same layout are contiguous in both.
    if (layout_ == from.layout_ && r0 % B == 0 && row0 % B == 0) {
      done = n / B * B;
      std::copy(src.begin() + from.Index(row0, 0),
                src.begin() + from.Index(row0, 0) + done * width_, to.begin() + Index(r0, 0));
    }
    for (int64_t r = done; r < n; ++r)
      for (int64_t c = 0; c < width_; ++c) to[Index(r0 + r, c)] = src[from.Index(row0 + r, c)];
  };
  if (dtype_ == KvDtype::kF32) {
    append(f32_, from.f32_);
  } else {
    append(bf16_, from.bf16_);
  }
}

void KvRows::Resize(int64_t n) {
  WithStorage(dtype_, f32_, bf16_, [&](auto& v) { ResizeStorage(&v, n); });
}

void KvRows::Reserve(int64_t n) {
  WithStorage(dtype_, f32_, bf16_, [&](auto& v) { v.reserve(StorageValues(n)); });
}

void KvRows::CopyToF32(int64_t row0, int64_t n, float* out) const {
  if (dtype_ == KvDtype::kF32) {
    CopyRowBytes(row0, n, reinterpret_cast<uint8_t*>(out));
    return;
  }
  for (int64_t r = 0; r < n; ++r) {
    float* o = out + r * width_;
    ForEachRun(row0 + r, [&](int64_t at, int64_t stride, int64_t c, int64_t count) {
      for (int64_t i = 0; i < count; ++i) o[c + i] = Bf16ToFloat(bf16_[at + i * stride]);
    });
  }
}

std::vector<float> KvRows::ToF32() const {
  std::vector<float> out(values());
  CopyToF32(0, rows(), out.data());
  return out;
}

bool KvRows::operator==(const KvRows& other) const {
  if (dtype_ != other.dtype_ || width_ != other.width_ || rows_ != other.rows_) return false;
  if (layout_ == other.layout_) return f32_ == other.f32_ && bf16_ == other.bf16_;
  for (int64_t r = 0; r < rows_; ++r) {
    for (int64_t c = 0; c < width_; ++c) {
      const bool same = dtype_ == KvDtype::kF32
                            ? f32_[Index(r, c)] == other.f32_[other.Index(r, c)]
                            : bf16_[Index(r, c)] == other.bf16_[other.Index(r, c)];
      if (!same) return false;
    }
  }
  return true;
}

}  // namespace yoco
