// KvRows: the rows of a sequence's shared K (or V), each kv_dim values, held in fp32 or in bf16.
// bf16 halves what every cross-decoder layer reads per decode step (the reference itself keeps
// its cache in bf16); values are rounded to nearest even once, when a row is appended, and
// every reader (prefill and decode attention, bundles, snapshots) sees the same rounded values.
//
// Rows are stored in chunks of kChunkRows (the prefix cache's block): a full chunk is never
// written again, so it is shared, not copied, between every KvRows that holds those rows (the
// snapshots of a document, each sequence restored from them): a cache hit on a long document
// references its K/V instead of copying it. Only the last, partly filled chunk belongs to one
// KvRows (copies copy it). Attention reads the chunks through chunk_table().
#ifndef YOCO_LIB_ENGINE_KV_ROWS_H_
#define YOCO_LIB_ENGINE_KV_ROWS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/model/kv_dtype.h"

namespace yoco {

// How a KvRows holds its rows in memory. A layout is a storage detail: every reader that is not
// an attention kernel (bundles, snapshots, CopyToF32, equality) sees rows.
enum class KvLayout : uint32_t {
  kRows = 0,         // row after row
  kKeyLanes = 1,     // blocks of cpu::kKeyLaneRows rows, each [width][kKeyLaneRows]: shared K
  kValueStrips = 2,  // blocks of cpu::kValueStripRows rows cut into column strips: shared V
};

class KvRows {
 public:
  // Rows per chunk: the prefix cache's block (kCacheBlockTokens), a whole number of the
  // layouts' blocks and of the decode kernel's key ranges' blocks.
  static constexpr int64_t kChunkRows = 128;

  KvRows() = default;
  KvRows(KvDtype dtype, int64_t width, KvLayout layout = KvLayout::kRows)
      : dtype_(dtype), layout_(layout), width_(width) {}
  // Shares the full chunks, copies the partly filled one.
  KvRows(const KvRows& other);
  KvRows& operator=(const KvRows& other);
  KvRows(KvRows&& other) noexcept;
  KvRows& operator=(KvRows&& other) noexcept;

  // The rows of a shared K, in lanes: what the decode kernel reads fastest. Every maker of a
  // shared K (engines, bundles, snapshots, the baseline) goes through here, since a K left in
  // rows decodes correctly but to other last bits (its scores are summed in another order).
  static KvRows SharedKeys(KvDtype dtype, int64_t width) {
    return KvRows(dtype, width, KvLayout::kKeyLanes);
  }
  // The rows of a shared V, in strips: one address-ordered stream for the decode kernel's V
  // pass. Any layout of V decodes to the same bits; this one is the fastest.
  static KvRows SharedValues(KvDtype dtype, int64_t width) {
    return KvRows(dtype, width, KvLayout::kValueStrips);
  }

  KvDtype dtype() const { return dtype_; }
  KvLayout layout() const { return layout_; }
  int64_t width() const { return width_; }
  int64_t rows() const { return rows_; }
  int64_t values() const { return rows_ * width_; }
  // Bytes of the rows' values (what a bundle carries; storage pads chunks to kChunkRows).
  int64_t bytes() const { return values() * KvDtypeBytes(dtype_); }

  // The storage: chunk i holds rows [i·kChunkRows, (i+1)·kChunkRows) in layout(), as if they
  // were rows 0..kChunkRows-1 of their own; unused rows are zero.
  int64_t chunks() const { return static_cast<int64_t>(chunks_.size()); }
  int64_t chunk_bytes() const { return ChunkBytes(dtype_, width_); }
  static int64_t ChunkBytes(KvDtype dtype, int64_t width) {
    return kChunkRows * width * KvDtypeBytes(dtype);
  }
  const void* const* chunk_table() const { return table_.data(); }
  const uint8_t* chunk_data(int64_t i) const { return chunks_[i].get(); }
  // How many KvRows (and other holders) share chunk i: 1 when only this one reads it.
  int64_t chunk_holders(int64_t i) const { return chunks_[i].use_count(); }
  // Chunk i's bytes, for tests that corrupt them; the chunk is copied first, since others may
  // share it.
  uint8_t* mutable_chunk_data(int64_t i);

  // Rows [row0, row0 + n) as row-major little-endian values of dtype() (n × width × bytes).
  void CopyRowBytes(int64_t row0, int64_t n, uint8_t* out) const;
  // Appends n rows given as CopyRowBytes writes them.
  void AppendRowBytes(const uint8_t* in, int64_t n);
  // Appends one whole chunk given as its storage in layout() (chunk_bytes() bytes, as
  // chunk_data() holds them): a bundle part's chunks travel as stored. REQUIRES: rows() a
  // multiple of kChunkRows.
  void AppendChunkBytes(const uint8_t* in);
  // Appends `chunk` (chunk_bytes() of storage in layout(), written before this and never after)
  // as a whole chunk, shared. REQUIRES: rows() a multiple of kChunkRows.
  void AppendChunk(std::shared_ptr<uint8_t> chunk);
  // Appends n rows of width() fp32 values, rounding them for bf16.
  void Append(const float* rows, int64_t n);
  // Appends rows [row0, row0 + n) of `from`. REQUIRES: same dtype and width. Whole chunks in
  // the same layout at chunk boundaries are shared, not copied.
  void AppendRows(const KvRows& from, int64_t row0, int64_t n);
  // Keeps the first n rows, or adds zero rows up to n.
  void Resize(int64_t n);
  void Reserve(int64_t n);
  // Rows [row0, row0 + n) widened to fp32 into `out` (n × width floats, row-major).
  void CopyToF32(int64_t row0, int64_t n, float* out) const;
  std::vector<float> ToF32() const;

  // The same dtype, width and row values, whatever the layouts.
  bool operator==(const KvRows& other) const;

 private:
  // chunk_bytes() from KvChunkArena.
  using Chunk = std::shared_ptr<uint8_t>;

  // Where, in its chunk, value c of row r is stored (in values).
  int64_t Index(int64_t r, int64_t c) const;
  // Calls f(offset, stride, c, count) for the runs of row r's storage in its chunk: its values
  // c .. c+count-1 are stored at offset + i·stride (one run in rows and in lanes, one per
  // strip), so copies between rows and storage walk pointers instead of computing Index per
  // value.
  template <typename F>
  void ForEachRun(int64_t r, F f) const;
  // Rows per block of the layout (1 for rows).
  int64_t BlockRows() const;
  template <typename T>
  const T* ChunkValues(int64_t r) const {
    return reinterpret_cast<const T*>(chunks_[r / kChunkRows].get());
  }
  // The chunk row r is written to, added when r starts one. REQUIRES: r == rows_.
  template <typename T>
  T* WritableChunk(int64_t r);
  void PushChunk(Chunk chunk);
  // A new chunk holding a copy of `chunk`.
  Chunk CopyOf(const Chunk& chunk) const;
  void RebuildTable();

  KvDtype dtype_ = KvDtype::kF32;
  KvLayout layout_ = KvLayout::kRows;
  int64_t width_ = 0;
  int64_t rows_ = 0;
  // Every chunk but a partly filled last one is full, immutable and may be shared. Chunks are
  // cache-line aligned: decode attention reads them with 64-byte loads.
  std::vector<Chunk> chunks_;
  std::vector<const void*> table_;  // chunks_[i].get()
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_KV_ROWS_H_
