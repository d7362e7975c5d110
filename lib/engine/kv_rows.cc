// KvRows storage and conversions.
#include "lib/engine/kv_rows.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/decode_attention.h"
#include "lib/engine/dtype.h"
#include "lib/engine/kv_chunk_arena.h"

namespace yoco {

int64_t KvRows::Index(int64_t r, int64_t c) const {
  r %= kChunkRows;
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
      f(Index(r, 0), 1, 0, width_);
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

static_assert(KvRows::kChunkRows % cpu::kKeyLaneRows == 0 &&
                  KvRows::kChunkRows % cpu::kValueStripRows == 0,
              "a chunk holds whole blocks of every layout");

KvRows::KvRows(const KvRows& other)
    : dtype_(other.dtype_),
      layout_(other.layout_),
      width_(other.width_),
      rows_(other.rows_),
      chunks_(other.chunks_) {
  if (rows_ % kChunkRows != 0) chunks_.back() = CopyOf(chunks_.back());
  RebuildTable();
}

KvRows& KvRows::operator=(const KvRows& other) {
  if (this != &other) *this = KvRows(other);
  return *this;
}

KvRows::KvRows(KvRows&& other) noexcept
    : dtype_(other.dtype_),
      layout_(other.layout_),
      width_(other.width_),
      rows_(std::exchange(other.rows_, 0)),
      chunks_(std::move(other.chunks_)),
      table_(std::move(other.table_)) {
  other.chunks_.clear();
  other.table_.clear();
}

KvRows& KvRows::operator=(KvRows&& other) noexcept {
  if (this != &other) {
    dtype_ = other.dtype_;
    layout_ = other.layout_;
    width_ = other.width_;
    rows_ = std::exchange(other.rows_, 0);
    chunks_ = std::move(other.chunks_);
    table_ = std::move(other.table_);
    other.chunks_.clear();
    other.table_.clear();
  }
  return *this;
}

KvRows::Chunk KvRows::CopyOf(const Chunk& chunk) const {
  Chunk copy = KvChunkArena::Global().Allocate(chunk_bytes());
  std::memcpy(copy.get(), chunk.get(), chunk_bytes());
  return copy;
}

void KvRows::PushChunk(Chunk chunk) {
  table_.push_back(chunk.get());
  chunks_.push_back(std::move(chunk));
}

void KvRows::RebuildTable() {
  table_.clear();
  for (const auto& chunk : chunks_) table_.push_back(chunk.get());
}

template <typename T>
T* KvRows::WritableChunk(int64_t r) {
  if (r % kChunkRows == 0) PushChunk(KvChunkArena::Global().Allocate(chunk_bytes()));  // zeroed
  return reinterpret_cast<T*>(chunks_[r / kChunkRows].get());
}

uint8_t* KvRows::mutable_chunk_data(int64_t i) {
  chunks_[i] = CopyOf(chunks_[i]);
  table_[i] = chunks_[i].get();
  return chunks_[i].get();
}

void KvRows::CopyRowBytes(int64_t row0, int64_t n, uint8_t* out) const {
  auto copy = [&](auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    for (int64_t r = 0; r < n; ++r, o += width_) {
      const T* chunk = ChunkValues<T>(row0 + r);
      ForEachRun(row0 + r, [&](int64_t at, int64_t stride, int64_t c, int64_t count) {
        if (stride == 1) {
          std::memcpy(o + c, chunk + at, count * sizeof(T));
        } else {
          for (int64_t i = 0; i < count; ++i) o[c + i] = chunk[at + i * stride];
        }
      });
    }
  };
  if (dtype_ == KvDtype::kF32) {
    copy(reinterpret_cast<float*>(out));
  } else {
    copy(reinterpret_cast<uint16_t*>(out));
  }
}

void KvRows::AppendRowBytes(const uint8_t* in, int64_t n) {
  auto append = [&](const auto* src) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(src)>>;
    for (int64_t r = 0; r < n; ++r, src += width_) {
      T* chunk = WritableChunk<T>(rows_);
      ForEachRun(rows_, [&](int64_t at, int64_t stride, int64_t c, int64_t count) {
        if (stride == 1) {
          std::memcpy(chunk + at, src + c, count * sizeof(T));
        } else {
          for (int64_t i = 0; i < count; ++i) chunk[at + i * stride] = src[c + i];
        }
      });
      ++rows_;
    }
  };
  if (dtype_ == KvDtype::kF32) {
    append(reinterpret_cast<const float*>(in));
  } else {
    append(reinterpret_cast<const uint16_t*>(in));
  }
}

void KvRows::AppendChunkBytes(const uint8_t* in) {
  Chunk chunk = KvChunkArena::Global().AllocateUninitialized(chunk_bytes());
  std::memcpy(chunk.get(), in, chunk_bytes());
  AppendChunk(std::move(chunk));
}

void KvRows::AppendChunk(std::shared_ptr<uint8_t> chunk) {
  assert(rows_ % kChunkRows == 0);
  PushChunk(std::move(chunk));
  rows_ += kChunkRows;
}

void KvRows::Append(const float* rows, int64_t n) {
  if (dtype_ == KvDtype::kF32) {  // fp32 rows are already the row bytes
    AppendRowBytes(reinterpret_cast<const uint8_t*>(rows), n);
    return;
  }
  for (int64_t r = 0; r < n; ++r) {
    const float* src = rows + r * width_;
    uint16_t* chunk = WritableChunk<uint16_t>(rows_);
    ForEachRun(rows_, [&](int64_t at, int64_t stride, int64_t c, int64_t count) {
      for (int64_t i = 0; i < count; ++i) chunk[at + i * stride] = FloatToBf16(src[c + i]);
    });
    ++rows_;
  }
}

void KvRows::AppendRows(const KvRows& from, int64_t row0, int64_t n) {
  // Whole chunks at chunk boundaries: the same storage, shared.
  if (layout_ == from.layout_) {
    while (n >= kChunkRows && rows_ % kChunkRows == 0 && row0 % kChunkRows == 0) {
      PushChunk(from.chunks_[row0 / kChunkRows]);
      rows_ += kChunkRows;
      row0 += kChunkRows;
      n -= kChunkRows;
    }
  }
  auto append = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const int64_t B = BlockRows();
    for (int64_t r = 0; r < n;) {
      T* to = WritableChunk<T>(rows_);
      const T* src = from.ChunkValues<T>(row0 + r);
      // A whole block of the layout in both is contiguous in both.
      if (layout_ == from.layout_ && rows_ % B == 0 && (row0 + r) % B == 0 && n - r >= B) {
        std::memcpy(to + Index(rows_, 0), src + from.Index(row0 + r, 0), B * width_ * sizeof(T));
        rows_ += B;
        r += B;
        continue;
      }
      for (int64_t c = 0; c < width_; ++c) to[Index(rows_, c)] = src[from.Index(row0 + r, c)];
      ++rows_;
      ++r;
    }
  };
  if (dtype_ == KvDtype::kF32) {
    append(static_cast<float*>(nullptr));
  } else {
    append(static_cast<uint16_t*>(nullptr));
  }
}

void KvRows::Resize(int64_t n) {
  if (n >= rows_) {
    auto grow = [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      while (rows_ < n) {
        WritableChunk<T>(rows_);  // new chunks are zero; a partial chunk's unused rows too
        rows_ = std::min(n, (rows_ / kChunkRows + 1) * kChunkRows);
      }
    };
    if (dtype_ == KvDtype::kF32) {
      grow(static_cast<float*>(nullptr));
    } else {
      grow(static_cast<uint16_t*>(nullptr));
    }
    return;
  }
  const int64_t kept = (n + kChunkRows - 1) / kChunkRows;
  const int64_t old_rows = rows_;
  chunks_.resize(kept);
  table_.resize(kept);
  rows_ = n;
  if (n % kChunkRows == 0) return;
  // The new last chunk is partly filled, so it becomes this KvRows' own (it may be shared),
  // and the dropped rows in it go back to zero: equal rows mean equal storage.
  uint8_t* chunk = mutable_chunk_data(kept - 1);
  const int64_t bytes = KvDtypeBytes(dtype_);
  const int64_t end = std::min(old_rows, kept * kChunkRows);
  for (int64_t r = n; r < end; ++r) {
    ForEachRun(r, [&](int64_t at, int64_t stride, int64_t, int64_t count) {
      for (int64_t i = 0; i < count; ++i) std::memset(chunk + (at + i * stride) * bytes, 0, bytes);
    });
  }
}

void KvRows::Reserve(int64_t n) {
  const int64_t chunks = (n + kChunkRows - 1) / kChunkRows;
  chunks_.reserve(chunks);
  table_.reserve(chunks);
}

void KvRows::CopyToF32(int64_t row0, int64_t n, float* out) const {
  if (dtype_ == KvDtype::kF32) {
    CopyRowBytes(row0, n, reinterpret_cast<uint8_t*>(out));
    return;
  }
  for (int64_t r = 0; r < n; ++r) {
    float* o = out + r * width_;
    const uint16_t* chunk = ChunkValues<uint16_t>(row0 + r);
    ForEachRun(row0 + r, [&](int64_t at, int64_t stride, int64_t c, int64_t count) {
      for (int64_t i = 0; i < count; ++i) o[c + i] = Bf16ToFloat(chunk[at + i * stride]);
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
  if (layout_ == other.layout_) {
    for (int64_t i = 0; i < chunks(); ++i) {
      if (chunks_[i] != other.chunks_[i] &&
          std::memcmp(chunks_[i].get(), other.chunks_[i].get(), chunk_bytes()) != 0) {
        return false;
      }
    }
    return true;
  }
  auto same = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    for (int64_t r = 0; r < rows_; ++r) {
      const T* a = ChunkValues<T>(r);
      const T* b = other.ChunkValues<T>(r);
      for (int64_t c = 0; c < width_; ++c) {
        if (a[Index(r, c)] != b[other.Index(r, c)]) return false;
      }
    }
    return true;
  };
  return dtype_ == KvDtype::kF32 ? same(static_cast<float*>(nullptr))
                                 : same(static_cast<uint16_t*>(nullptr));
}

}  // namespace yoco
