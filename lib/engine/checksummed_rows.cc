#include "lib/engine/checksummed_rows.h"

#include <algorithm>
#include <cstring>

#include "lib/checksum/crc32c.h"

namespace yoco {
namespace {

constexpr int64_t kSliceBytes = 128 << 10;  // fits L2 with room to spare

int64_t RowBytes(const KvRows& rows) { return rows.width() * KvDtypeBytes(rows.dtype()); }

int64_t SliceRows(const KvRows& rows) { return std::max<int64_t>(1, kSliceBytes / RowBytes(rows)); }

}  // namespace

void CopyRowsOut(const KvRows& rows, int64_t row0, int64_t n, uint8_t* out, uint32_t* crc) {
  const int64_t row_bytes = RowBytes(rows);
  for (int64_t done = 0, m; (m = std::min(n - done, SliceRows(rows))) > 0; done += m) {
    rows.CopyRowBytes(row0 + done, m, out);
    *crc = Crc32cExtend(*crc, out, m * row_bytes);
    out += m * row_bytes;
  }
}

void AppendRowsIn(const uint8_t* in, int64_t n, KvRows* rows, uint32_t* crc) {
  const int64_t row_bytes = RowBytes(*rows);
  for (int64_t done = 0, m; (m = std::min(n - done, SliceRows(*rows))) > 0; done += m) {
    rows->AppendRowBytes(in, m);
    *crc = Crc32cExtend(*crc, in, m * row_bytes);
    in += m * row_bytes;
  }
}

// Chunks (32-64 KB in practice) are slices of their own: each is checksummed while in cache.
void CopyChunksOut(const KvRows& rows, int64_t chunk0, int64_t n, uint8_t* out, uint32_t* crc) {
  const int64_t bytes = rows.chunk_bytes();
  for (int64_t i = chunk0; i < chunk0 + n; ++i, out += bytes) {
    std::memcpy(out, rows.chunk_data(i), bytes);
    *crc = Crc32cExtend(*crc, out, bytes);
  }
}

void AppendChunksIn(const uint8_t* in, int64_t n, KvRows* rows, uint32_t* crc) {
  const int64_t bytes = rows->chunk_bytes();
  for (int64_t i = 0; i < n; ++i, in += bytes) {
    rows->AppendChunkBytes(in);
    *crc = Crc32cExtend(*crc, in, bytes);
  }
}

}  // namespace yoco
