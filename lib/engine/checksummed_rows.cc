#include "lib/engine/checksummed_rows.h"

#include <algorithm>

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

}  // namespace yoco
